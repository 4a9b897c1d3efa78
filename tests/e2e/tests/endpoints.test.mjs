// The endpoints after the token endpoint, through openid-client's own calls: userinfo
// (fetchUserInfo checks its sub against the ID token), introspection, revocation, RP-initiated
// logout followed in Chromium (buildEndSessionUrl), and token exchange (RFC 8693) through the
// generic grant call. Then a single-page app's fetch calls in Chromium, under its CORS rules.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { Latch, databases, unique } from '../lib/latch.mjs';
import { FormClient } from '../lib/forms.mjs';
import { launch, captureRequest, signIn } from '../lib/browser.mjs';
import { callbackServer } from '../lib/callback.mjs';
import { client, rpConfig, authRequest, exchange, jwtPart } from '../lib/oidc.mjs';

const PW = 'Wonder-land1';
const REDIRECT = 'http://127.0.0.1:9/cb'; // nothing listens: the form walk stops at the redirect
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const AT = 'urn:ietf:params:oauth:token-type:access_token';

/** Rejects with an OAuth error body `code` (a ResponseBodyError of openid-client). */
const oauthError = (code) => (e) => e instanceof client.ResponseBodyError && e.error === code;
/** Rejects with a 401 Bearer challenge carrying `error` (a WWWAuthenticateChallengeError). */
const bearerChallenge = (error) => (e) =>
  e instanceof client.WWWAuthenticateChallengeError && e.status === 401 &&
  e.cause.some((c) => c.scheme === 'bearer' && c.parameters.error === error);

for (const db of databases()) {
  describe(`userinfo, introspection, revocation, end session, token exchange (${db})`, () => {
    let latch;

    before(async () => { latch = await Latch.start({ database: db }); });
    after(async () => { await latch?.stop(); });

    /** An app, a user, and tokens from a code flow followed with a cookie jar. */
    async function signedIn({ scope = 'openid profile email offline_access', app: extra = {} } = {}) {
      const app = await latch.oidcApp({ redirectUris: [REDIRECT], ...extra });
      const login = unique('uma');
      const uid = await latch.human(login, PW, { firstName: 'Uma', lastName: 'Thurman' });
      const config = await rpConfig(latch, app.clientId, client.ClientSecretBasic(app.clientSecret));
      const a = await authRequest(config, REDIRECT, { scope });
      const { callback } = await new FormClient(latch.base).walk(a.url.href, REDIRECT, { loginname: login, password: PW });
      const tokens = await exchange(config, new URL(callback), a);
      return { app, login, uid, config, tokens };
    }

    it('fetchUserInfo, tokenIntrospection, tokenRevocation', async () => {
      const { app, login, uid, config, tokens } = await signedIn();
      const sub = tokens.claims().sub;
      assert.equal(sub, uid);

      // userinfo: openid-client checks its sub against the ID token's.
      const info = await client.fetchUserInfo(config, tokens.access_token, sub);
      assert.equal(info.sub, uid);
      assert.equal(info.email, `${login}@example.com`);
      assert.equal(info.email_verified, true);
      assert.equal(info.given_name, 'Uma');
      assert.equal(info.family_name, 'Thurman');
      await assert.rejects(client.fetchUserInfo(config, tokens.access_token, 'someone-else'),
        (e) => e.code === 'OAUTH_JSON_ATTRIBUTE_COMPARISON_FAILED', 'the library compares the sub');

      // Introspection (client_secret_basic, the app's method).
      const intro = await client.tokenIntrospection(config, tokens.access_token);
      assert.equal(intro.active, true);
      assert.equal(intro.sub, uid);
      assert.equal(intro.client_id, app.clientId);
      assert.equal(intro.iss, latch.base);
      assert.equal(intro.token_type, 'Bearer');
      assert.equal(intro.scope, 'openid profile email offline_access');
      assert.ok(intro.aud.includes(app.clientId) && intro.aud.includes(app.projectId), JSON.stringify(intro.aud));
      assert.match(intro.username, new RegExp(`^${login}@`));
      assert.equal(intro.email, `${login}@example.com`);
      assert.ok(intro.exp > intro.iat);
      assert.equal((await client.tokenIntrospection(config, 'not-a-token')).active, false);
      const wrong = await rpConfig(latch, app.clientId, client.ClientSecretBasic('wrong-secret'));
      await assert.rejects(client.tokenIntrospection(wrong, tokens.access_token),
        (e) => e.status === 401 && (e.error === 'invalid_client' || e.cause?.[0]?.scheme === 'basic'));

      // Another client of latch may not revoke these tokens (RFC 7009 2.1), and learns nothing
      // from introspecting them.
      const other = await latch.oidcApp({ redirectUris: [REDIRECT] });
      const otherConfig = await rpConfig(latch, other.clientId, client.ClientSecretBasic(other.clientSecret));
      assert.equal((await client.tokenIntrospection(otherConfig, tokens.access_token)).active, false);
      await assert.rejects(client.tokenRevocation(otherConfig, tokens.access_token), oauthError('unauthorized_client'));
      assert.equal((await client.tokenIntrospection(config, tokens.access_token)).active, true);

      // Revoking the access token ends it, and only it.
      await client.tokenRevocation(config, tokens.access_token);
      assert.equal((await client.tokenIntrospection(config, tokens.access_token)).active, false);
      await assert.rejects(client.fetchUserInfo(config, tokens.access_token, sub), bearerChallenge('invalid_token'));
      const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token);
      assert.equal((await client.tokenIntrospection(config, refreshed.access_token)).active, true);

      // Revoking the refresh token ends its chain and the access tokens issued from it.
      await client.tokenRevocation(config, refreshed.refresh_token, { token_type_hint: 'refresh_token' });
      assert.equal((await client.tokenIntrospection(config, refreshed.access_token)).active, false);
      await assert.rejects(client.refreshTokenGrant(config, refreshed.refresh_token), oauthError('invalid_grant'));
      // Unknown tokens are fine to revoke (RFC 7009 2.2).
      await client.tokenRevocation(config, 'never-issued');
    });

    it('token exchange (RFC 8693) through genericGrantRequest', async () => {
      await latch.api('PUT', '/v2/features/instance', { oidcTokenExchange: true });
      const grants = ['OIDC_GRANT_TYPE_AUTHORIZATION_CODE', 'OIDC_GRANT_TYPE_REFRESH_TOKEN', 'OIDC_GRANT_TYPE_TOKEN_EXCHANGE'];
      const { app, uid, config, tokens } = await signedIn({ app: { grantTypes: grants } });

      // The default: an opaque access token for the same subject and audience, with an ID token
      // (openid) that the library validates (signature, iss, aud, azp) and a refresh token.
      const opaque = await client.genericGrantRequest(config, TOKEN_EXCHANGE, {
        subject_token: tokens.access_token,
        subject_token_type: AT,
      });
      assert.equal(opaque.issued_token_type, AT);
      assert.equal(opaque.token_type.toLowerCase(), 'bearer');
      assert.ok(!opaque.access_token.includes('.'), 'opaque');
      assert.equal(opaque.claims().sub, uid);
      assert.ok(opaque.refresh_token, 'offline_access was in the subject token');
      const intro = await client.tokenIntrospection(config, opaque.access_token);
      assert.equal(intro.active, true);
      assert.equal(intro.sub, uid);

      // A JWT access token, narrower scope, only the project as audience (no openid: an ID token
      // whose aud lacks the client id would rightly be refused by the library).
      const jwt = await client.genericGrantRequest(config, TOKEN_EXCHANGE, {
        subject_token: tokens.access_token,
        subject_token_type: AT,
        requested_token_type: 'urn:ietf:params:oauth:token-type:jwt',
        scope: 'profile',
        audience: app.projectId,
      });
      assert.equal(jwt.issued_token_type, 'urn:ietf:params:oauth:token-type:jwt');
      assert.equal(jwt.scope, 'profile');
      const at = jwtPart(jwt.access_token, 1);
      assert.equal(at.sub, uid);
      assert.deepEqual([at.aud].flat(), [app.projectId]);
      assert.equal(jwt.id_token, undefined);
      assert.equal((await client.tokenIntrospection(config, jwt.access_token)).active, true, 'the project is the caller\'s');

      // An ID token as the result: token_type N_A, which openid-client accepts for this grant only.
      const idt = await client.genericGrantRequest(config, TOKEN_EXCHANGE, {
        subject_token: tokens.access_token,
        subject_token_type: AT,
        requested_token_type: 'urn:ietf:params:oauth:token-type:id_token',
      });
      assert.equal(idt.token_type, 'n_a', 'N_A, lower-cased by the library');
      assert.equal(idt.issued_token_type, 'urn:ietf:params:oauth:token-type:id_token');
      assert.equal(jwtPart(idt.access_token, 1).sub, uid);

      // An audience the subject does not have, and a resource: invalid_target.
      await assert.rejects(client.genericGrantRequest(config, TOKEN_EXCHANGE, {
        subject_token: tokens.access_token, subject_token_type: AT, audience: 'someone-else',
      }), oauthError('invalid_target'));
      await assert.rejects(client.genericGrantRequest(config, TOKEN_EXCHANGE, {
        subject_token: tokens.access_token, subject_token_type: AT, resource: 'https://api.example.com',
      }), oauthError('invalid_target'));
      // A revoked subject token cannot be exchanged: invalid_request (RFC 8693 2.2.2).
      await client.tokenRevocation(config, tokens.access_token);
      await assert.rejects(client.genericGrantRequest(config, TOKEN_EXCHANGE, {
        subject_token: tokens.access_token, subject_token_type: AT,
      }), oauthError('invalid_request'));
    });

    describe('in Chromium', () => {
      let browser;
      let cb;
      before(async () => { [browser, cb] = await Promise.all([launch(), callbackServer()]); });
      after(async () => { await browser?.close(); await cb?.close(); });

      it('a single-page app on another origin: CORS on discovery, token, userinfo, revocation; none on authorize', async () => {
        const app = await latch.oidcApp({
          redirectUris: [cb.redirectUri], authMethodType: 'OIDC_AUTH_METHOD_TYPE_NONE', appType: 'OIDC_APP_TYPE_USER_AGENT',
        });
        const config = await rpConfig(latch, app.clientId, client.None());
        const login = unique('spa');
        const uid = await latch.human(login, PW);
        const context = await browser.newContext();
        const page = await context.newPage();
        const a = await authRequest(config, cb.redirectUri);
        const arrived = captureRequest(page, cb.redirectUri);
        await page.goto(a.url.href);
        await signIn(page, login, PW);
        const code = new URL((await arrived).url()).searchParams.get('code');
        await page.waitForURL(`${cb.redirectUri}?**`);
        assert.notEqual(new URL(page.url()).origin, new URL(latch.base).origin, 'the app runs on another origin');

        // What the app's own script does with fetch, under Chromium's CORS rules.
        const out = await page.evaluate(async ({ base, clientId, redirectUri, code, verifier }) => {
          const form = (o) => ({ method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(o) });
          const res = {};
          const d = await (await fetch(`${base}/.well-known/openid-configuration`)).json();
          res.keys = (await (await fetch(d.jwks_uri)).json()).keys.length;
          const t = await fetch(d.token_endpoint, form({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, client_id: clientId, code_verifier: verifier }));
          const tokens = await t.json();
          res.token = { status: t.status, idToken: tokens.id_token };
          // A header that needs a preflight.
          const bearer = { headers: { authorization: `Bearer ${tokens.access_token}` } };
          const u = await fetch(d.userinfo_endpoint, bearer);
          res.userinfo = await u.json();
          res.revoke = (await fetch(d.revocation_endpoint, form({ token: tokens.access_token, client_id: clientId }))).status;
          const after = await fetch(d.userinfo_endpoint, bearer);
          res.after = { status: after.status, challenge: after.headers.get('www-authenticate') };
          try {
            await fetch(`${d.authorization_endpoint}?client_id=${clientId}`);
            res.authorize = 'readable';
          } catch (e) {
            res.authorize = e.name;
          }
          return res;
        }, { base: latch.base, clientId: app.clientId, redirectUri: cb.redirectUri, code, verifier: a.verifier });

        assert.ok(out.keys >= 1, 'the key set is readable');
        assert.equal(out.token.status, 200);
        assert.equal(jwtPart(out.token.idToken, 1).sub, uid);
        assert.equal(out.userinfo.sub, uid);
        assert.equal(out.revoke, 200);
        assert.equal(out.after.status, 401);
        assert.match(out.after.challenge ?? '', /invalid_token/, 'WWW-Authenticate is exposed to the app');
        assert.equal(out.authorize, 'TypeError', 'the authorization endpoint is not readable from another origin');
        await context.close();
      });

      it('buildEndSessionUrl: the session ends, state comes back, its tokens turn inactive', async () => {
        const bye = `${cb.base}/bye`;
        const app = await latch.oidcApp({ redirectUris: [cb.redirectUri], postLogoutRedirectUris: [bye] });
        const config = await rpConfig(latch, app.clientId, client.ClientSecretBasic(app.clientSecret));
        const login = unique('liv');
        const uid = await latch.human(login, PW);
        const context = await browser.newContext();
        const page = await context.newPage();

        const a = await authRequest(config, cb.redirectUri, { scope: 'openid email offline_access' });
        const arrived = captureRequest(page, cb.redirectUri);
        await page.goto(a.url.href);
        await signIn(page, login, PW);
        const tokens = await exchange(config, new URL((await arrived).url()), a);
        assert.equal(tokens.claims().sub, uid);
        assert.equal((await client.tokenIntrospection(config, tokens.access_token)).active, true);

        // Logout through the URL openid-client builds (it adds client_id), followed by the browser.
        const state = client.randomState();
        const url = client.buildEndSessionUrl(config, { id_token_hint: tokens.id_token, post_logout_redirect_uri: bye, state });
        assert.equal(url.origin + url.pathname, latch.discovery.end_session_endpoint);
        assert.equal(url.searchParams.get('client_id'), app.clientId);
        const back = captureRequest(page, bye);
        await page.goto(url.href);
        const landed = new URL((await back).url());
        assert.equal(landed.searchParams.get('state'), state, 'the post_logout_redirect_uri receives state');
        await page.waitForURL(`${bye}?**`);

        // The tokens of that session are inactive now (introspection sees it), refresh is refused,
        // and the browser has no session left (prompt=none).
        assert.equal((await client.tokenIntrospection(config, tokens.access_token)).active, false);
        await assert.rejects(client.fetchUserInfo(config, tokens.access_token, uid), bearerChallenge('invalid_token'));
        await assert.rejects(client.refreshTokenGrant(config, tokens.refresh_token), oauthError('invalid_grant'));
        const n = await authRequest(config, cb.redirectUri, { prompt: 'none' });
        const none = captureRequest(page, cb.redirectUri);
        await page.goto(n.url.href);
        assert.equal(new URL((await none).url()).searchParams.get('error'), 'login_required');

        // An unregistered post_logout_redirect_uri is an error page, no redirect.
        const badUrl = client.buildEndSessionUrl(config, { post_logout_redirect_uri: `${cb.base}/elsewhere`, state });
        const r = await page.goto(badUrl.href);
        assert.equal(r.status(), 400);
        assert.ok(page.url().startsWith(latch.base), page.url());
        await context.close();
      });
    });
  });
}
