// openid-client and oauth4webapi without a browser: the login forms are followed with a cookie
// jar, then every grant of the token endpoint is exercised through the libraries' own APIs.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createPrivateKey, randomUUID } from 'node:crypto';
import * as jose from 'jose';
import * as oauth from 'oauth4webapi';

import { Latch, databases, unique } from '../lib/latch.mjs';
import { FormClient } from '../lib/forms.mjs';
import { client, rpConfig, authRequest, exchange, jwtPart } from '../lib/oidc.mjs';

const PW = 'Wonder-land1';
const REDIRECT = 'http://127.0.0.1:9/cb'; // nothing listens: the walk stops at the redirect

/** The at_hash of an RS256 ID token for `accessToken` (OIDC Core 3.1.3.6). */
function atHash(accessToken) {
  return createHash('sha256').update(accessToken).digest().subarray(0, 16).toString('base64url');
}

/** A PEM private key (PKCS#1 or PKCS#8) as a WebCrypto RS256 key. */
async function rsaKey(pem) {
  const pkcs8 = createPrivateKey(pem).export({ type: 'pkcs8', format: 'pem' });
  return jose.importPKCS8(pkcs8, 'RS256');
}

for (const db of databases()) {
  describe(`openid-client and oauth4webapi without a browser (${db})`, () => {
    let latch;

    before(async () => { latch = await Latch.start({ database: db }); });
    after(async () => { await latch?.stop(); });

    /** Signs `login` in through the forms for `a` and returns the callback URL. */
    async function formLogin(a, login, password) {
      const browser = new FormClient(latch.base);
      const { callback, pages } = await browser.walk(a.url.href, REDIRECT, { loginname: login, password });
      assert.ok(pages.some((p) => p.url.includes('/ui/login/')), 'through the login pages');
      return new URL(callback);
    }

    it('code flow with PKCE (cookie jar), then refresh token rotation', async () => {
      const app = await latch.oidcApp({ redirectUris: [REDIRECT] });
      const login = unique('alice');
      const uid = await latch.human(login, PW);
      const config = await rpConfig(latch, app.clientId, client.ClientSecretBasic(app.clientSecret));
      const a = await authRequest(config, REDIRECT, { scope: 'openid email offline_access' });
      const cbUrl = await formLogin(a, login, PW);
      assert.equal(cbUrl.searchParams.get('iss'), latch.base);

      const t = await exchange(config, cbUrl, a);
      const c = t.claims();
      assert.equal(c.sub, uid);
      assert.equal(c.azp, app.clientId);
      assert.deepEqual(c.aud, [app.clientId, app.projectId]);
      assert.equal(c.at_hash, atHash(t.access_token), 'at_hash matches the access token');
      assert.equal(jwtPart(t.id_token, 0).alg, 'RS256');
      assert.ok(t.refresh_token, 'offline_access gives a refresh token');
      assert.equal(t.scope, 'openid email offline_access');
      assert.equal(t.expiresIn() > 0, true);

      const r = await client.refreshTokenGrant(config, t.refresh_token);
      assert.ok(r.access_token && r.access_token !== t.access_token);
      assert.ok(r.refresh_token && r.refresh_token !== t.refresh_token, 'rotated');
      const rc = r.claims();
      assert.equal(rc.sub, uid, 'the refreshed ID token is about the same user');
      assert.equal(rc.nonce, undefined);
      assert.equal(rc.at_hash, atHash(r.access_token));
      // The old refresh token is spent; reusing it revokes the chain (the new one too).
      await assert.rejects(client.refreshTokenGrant(config, t.refresh_token), (e) => e.error === 'invalid_grant');
      await assert.rejects(client.refreshTokenGrant(config, r.refresh_token), (e) => e.error === 'invalid_grant');
    });

    it('client_secret_post and none (public client) through openid-client', async () => {
      const post = await latch.oidcApp({ redirectUris: [REDIRECT], authMethodType: 'OIDC_AUTH_METHOD_TYPE_POST' });
      const pub = await latch.oidcApp({ redirectUris: [REDIRECT], authMethodType: 'OIDC_AUTH_METHOD_TYPE_NONE', appType: 'OIDC_APP_TYPE_USER_AGENT' });
      const login = unique('bea');
      const uid = await latch.human(login, PW);
      for (const [app, auth] of [[post, client.ClientSecretPost(post.clientSecret)], [pub, client.None()]]) {
        const config = await rpConfig(latch, app.clientId, auth);
        const a = await authRequest(config, REDIRECT);
        const t = await exchange(config, await formLogin(a, login, PW), a);
        assert.equal(t.claims().sub, uid);
      }
      // The wrong secret is refused.
      const bad = await rpConfig(latch, post.clientId, client.ClientSecretPost('not-the-secret'));
      const a = await authRequest(bad, REDIRECT);
      await assert.rejects(exchange(bad, await formLogin(a, login, PW), a), (e) => e.error === 'invalid_client');
    });

    it('client_credentials for a machine user', async () => {
      const name = unique('robot');
      const uid = await latch.machine(name);
      const secret = await latch.machineSecret(uid);
      const config = await rpConfig(latch, name, client.ClientSecretBasic(secret));
      const t = await client.clientCredentialsGrant(config, { scope: 'openid urn:service:iam:org:project:id:latch:aud' });
      assert.equal(t.token_type.toLowerCase(), 'bearer');
      assert.equal(t.scope, 'openid urn:service:iam:org:project:id:latch:aud');
      assert.ok(!t.access_token.includes('.'), 'opaque for an ACCESS_TOKEN_TYPE_BEARER machine user');
      assert.equal(t.refresh_token, undefined);
      const wrong = await rpConfig(latch, name, client.ClientSecretBasic('wrong'));
      // 401 with a Basic challenge (RFC 6749 5.2), which openid-client reports as such.
      await assert.rejects(client.clientCredentialsGrant(wrong), (e) =>
        e instanceof client.WWWAuthenticateChallengeError && e.status === 401 && e.cause[0].scheme === 'basic');
    });

    it('jwt-bearer grant with an assertion signed by jose from the key file', async () => {
      const name = unique('signer');
      const uid = await latch.machine(name);
      const file = await latch.machineKey(uid);
      assert.equal(file.type, 'serviceaccount');
      assert.equal(file.userId, uid);
      const key = await rsaKey(file.key);
      const assertion = await new jose.SignJWT({})
        .setProtectedHeader({ alg: 'RS256', kid: file.keyId })
        .setIssuer(uid)
        .setSubject(uid)
        .setAudience(latch.base)
        .setIssuedAt()
        .setExpirationTime('5m')
        .setJti(randomUUID())
        .sign(key);
      // The ID token of this grant is issued to the machine user itself.
      const config = await rpConfig(latch, uid, client.None());
      const grant = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
      const t = await client.genericGrantRequest(config, grant, { assertion, scope: 'openid profile' });
      const c = t.claims();
      assert.equal(c.sub, uid);
      assert.equal(c.iss, latch.base);
      assert.deepEqual(c.amr, ['private_key']);
      assert.equal(t.refresh_token, undefined);
      await assert.rejects(client.genericGrantRequest(config, grant, { assertion, scope: 'openid' }), (e) => e.error === 'invalid_grant', 'a replayed assertion');
      // Signed by another key: refused.
      const { privateKey } = await jose.generateKeyPair('RS256');
      const forged = await new jose.SignJWT({})
        .setProtectedHeader({ alg: 'RS256', kid: file.keyId })
        .setIssuer(uid).setSubject(uid).setAudience(latch.base).setIssuedAt().setExpirationTime('5m').setJti(randomUUID())
        .sign(privateKey);
      await assert.rejects(client.genericGrantRequest(config, grant, { assertion: forged }), (e) => e.error === 'invalid_grant');
    });

    it('private_key_jwt client authentication for a code exchange', async () => {
      const app = await latch.oidcApp({ redirectUris: [REDIRECT], authMethodType: 'OIDC_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT' });
      assert.equal(app.clientSecret, undefined, 'no secret for a private_key_jwt app');
      const file = await latch.appKey(app.projectId, app.appId);
      assert.equal(file.clientId, app.clientId);
      const login = unique('kim');
      const uid = await latch.human(login, PW);
      const config = await rpConfig(latch, app.clientId, client.PrivateKeyJwt({ key: await rsaKey(file.key), kid: file.keyId }));
      const a = await authRequest(config, REDIRECT);
      const t = await exchange(config, await formLogin(a, login, PW), a);
      assert.equal(t.claims().sub, uid);
      // A key the app does not have is refused.
      const { privateKey } = await jose.generateKeyPair('RS256');
      const other = await rpConfig(latch, app.clientId, client.PrivateKeyJwt({ key: privateKey, kid: file.keyId }));
      const b = await authRequest(other, REDIRECT);
      await assert.rejects(exchange(other, await formLogin(b, login, PW), b), (e) => e.error === 'invalid_client');
    });

    it('RFC 9068 JWT access token of a machine user, validated by oauth4webapi', async () => {
      const name = unique('jwtrobot');
      const uid = await latch.machine(name, { jwt: true });
      const secret = await latch.machineSecret(uid);
      const projectId = await latch.project();
      const config = await rpConfig(latch, name, client.ClientSecretBasic(secret));
      const t = await client.clientCredentialsGrant(config, { scope: `urn:service:iam:org:project:id:${projectId}:aud` });
      const as = config.serverMetadata();
      const request = () => new Request('http://127.0.0.1:9/api', { headers: { authorization: `Bearer ${t.access_token}` } });
      const claims = await oauth.validateJwtAccessToken(as, request(), projectId, { [oauth.allowInsecureRequests]: true });
      assert.equal(claims.iss, latch.base);
      assert.equal(claims.sub, uid);
      assert.equal(claims.client_id, name);
      assert.deepEqual(claims.aud, [name, projectId]);
      assert.equal(jwtPart(t.access_token, 0).typ, 'at+jwt');
      // Another audience is refused; so is a token with a broken signature.
      await assert.rejects(oauth.validateJwtAccessToken(as, request(), 'some-other-api', { [oauth.allowInsecureRequests]: true }), /aud/);
      const [h, p, s] = t.access_token.split('.');
      const sig = Buffer.from(s, 'base64url');
      sig[5] ^= 1;
      const broken = new Request('http://127.0.0.1:9/api', { headers: { authorization: `Bearer ${h}.${p}.${sig.toString('base64url')}` } });
      await assert.rejects(oauth.validateJwtAccessToken(as, broken, projectId, { [oauth.allowInsecureRequests]: true }), /signature/i);
    });
  });
}

