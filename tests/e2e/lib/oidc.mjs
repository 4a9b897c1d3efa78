// The relying party side: openid-client configured against a running latch, strict about the
// ID-token signature (enableNonRepudiationChecks checks it against /oauth/v2/keys), the
// RFC 9207 iss parameter, state and nonce.

import * as client from 'openid-client';

export { client };

/** An openid-client Configuration for `clientId` with the given client authentication. */
export async function rpConfig(latch, clientId, auth, metadata = {}) {
  return client.discovery(new URL(latch.base), clientId, metadata, auth, {
    execute: [client.allowInsecureRequests, client.enableNonRepudiationChecks],
  });
}

/** A fresh authorization request: {url, verifier, state, nonce}. */
export async function authRequest(config, redirectUri, { scope = 'openid profile email', ...extra } = {}) {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: redirectUri,
    scope,
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
    ...extra,
  });
  return { url, verifier, state, nonce };
}

/** Exchanges the code of a callback (a URL, or a Request for form_post) with every check on. */
export async function exchange(config, callback, a) {
  return client.authorizationCodeGrant(config, callback, {
    pkceCodeVerifier: a.verifier,
    expectedState: a.state,
    expectedNonce: a.nonce,
  });
}

/** The claims of a JWT, unverified (for assertions on what a verified token said). */
export function jwtPart(jwt, i) {
  return JSON.parse(Buffer.from(jwt.split('.')[i], 'base64url').toString('utf8'));
}
