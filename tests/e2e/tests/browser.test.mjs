// The login pages in a real Chromium, the code exchanged by openid-client with every check on.

import { describe, it, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

import { Latch, databases, unique, codeFromMail } from '../lib/latch.mjs';
import { launch, screenshot, captureRequest, signIn, submit } from '../lib/browser.mjs';
import { callbackServer } from '../lib/callback.mjs';
import { client, rpConfig, authRequest, exchange } from '../lib/oidc.mjs';
import { startSmtpSink } from '../lib/smtp.mjs';
import { totp } from '../lib/totp.mjs';

const PW = 'Wonder-land1';

/** Fills and submits the registration form, then waits for the verification page. */
async function register(page, { email, password }) {
  await page.waitForSelector('#first_name');
  await page.fill('#email', email);
  await page.fill('#first_name', 'Erin');
  await page.fill('#last_name', 'Register');
  await page.fill('#password', password);
  await page.fill('#password_repeat', password);
  await submit(page, 'form[action$="/register"] button[type=submit]');
  await page.waitForSelector('#code');
}

async function verifyCode(page, code) {
  await page.fill('#code', code);
  await submit(page, 'form[action$="/verify_email"] button[type=submit]');
}

async function userView(latch, id) {
  const r = await latch.api('GET', `/management/v1/users/${id}`);
  return r.user ?? r;
}

for (const db of databases()) {
  describe(`Chromium and openid-client (${db})`, () => {
    let latch;
    let browser;
    let cb;

    before(async () => {
      [latch, browser, cb] = await Promise.all([Latch.start({ database: db }), launch(), callbackServer()]);
    });
    after(async () => {
      await browser?.close();
      await cb?.close();
      await latch?.stop();
    });

    /** A code-flow app whose redirect URI is the callback listener, and its openid-client config. */
    async function webApp(extra = {}) {
      const app = await latch.oidcApp({ redirectUris: [cb.redirectUri], ...extra });
      const config = await rpConfig(latch, app.clientId, client.ClientSecretBasic(app.clientSecret));
      return { app, config };
    }

    // Every page a test opens is watched for Content-Security-Policy violations: latch's pages
    // allow no script (but the hashed form_post one) and forms only to latch and the client.
    let cspViolations = [];
    async function newPage(options = {}) {
      const context = await browser.newContext(options);
      const page = await context.newPage();
      page.on('console', (m) => {
        if (/Content Security Policy|Refused to/i.test(m.text())) cspViolations.push(`${page.url()}: ${m.text()}`);
      });
      return { context, page };
    }
    afterEach(() => {
      const v = cspViolations;
      cspViolations = [];
      assert.deepEqual(v, [], 'no Content-Security-Policy violation in Chromium');
    });

    it('code flow with PKCE through the login pages; ID token checked against the JWKS', async () => {
      const { app, config } = await webApp();
      const meta = config.serverMetadata();
      assert.equal(meta.issuer, latch.base);
      assert.equal(meta.authorization_response_iss_parameter_supported, true, 'so openid-client requires the iss parameter');
      const login = unique('alice');
      const uid = await latch.human(login, PW);
      const a = await authRequest(config, cb.redirectUri);
      const { context, page } = await newPage();
      const seen = [];
      page.on('request', (r) => seen.push(r.url()));
      const callback = captureRequest(page, cb.redirectUri);
      const first = await page.goto(a.url.href);
      assert.equal(first.status(), 200);
      assert.match(page.url(), /\/ui\/login\/[^/]+$/, 'sent to the login pages');
      assert.equal(await page.getAttribute('html', 'lang'), 'en');
      await screenshot(page, 'login-name');
      await page.fill('#loginname', login);
      await submit(page, 'form[action$="/loginname"] button[type=submit]');
      await page.waitForSelector('#password');
      assert.ok((await page.textContent('main')).includes(login), 'the password page names the user');
      await screenshot(page, 'password');
      await page.fill('#password', PW);
      await submit(page, 'form[action$="/password"] button[type=submit]');
      const req = await callback;
      assert.equal(req.method(), 'GET');
      const url = new URL(req.url());
      assert.equal(url.searchParams.get('iss'), latch.base, 'RFC 9207');
      assert.equal(url.searchParams.get('state'), a.state);
      await page.waitForURL(`${cb.redirectUri}?**`);
      assert.match(await page.textContent('body'), /back at the client/, 'the browser arrived at the client');

      const tokens = await exchange(config, url, a);
      const claims = tokens.claims();
      assert.equal(claims.sub, uid);
      assert.equal(claims.iss, latch.base);
      assert.ok([claims.aud].flat().includes(app.clientId));
      assert.equal(claims.azp, app.clientId);
      assert.equal(claims.nonce, a.nonce);
      assert.deepEqual(claims.amr, ['pwd']);
      assert.equal(typeof claims.auth_time, 'number');
      assert.equal(tokens.token_type.toLowerCase(), 'bearer');
      assert.equal(tokens.scope, 'openid profile email');
      assert.ok(tokens.access_token.length >= 32);
      assert.ok(seen.some((u) => u.startsWith(`${latch.base}/ui/login/`)));

      // The code is single use.
      await assert.rejects(exchange(config, url, a), (e) => e instanceof client.ResponseBodyError && e.error === 'invalid_grant');

      // Single sign-on: a second request gets a code at once; a tampered ID-token signature is refused
      // (proof that the signature really is checked against latch's key set).
      const b = await authRequest(config, cb.redirectUri);
      const again = captureRequest(page, cb.redirectUri);
      await page.goto(b.url.href);
      const url2 = new URL((await again).url());
      const tampering = await rpConfig(latch, app.clientId, client.ClientSecretBasic(app.clientSecret));
      tampering[client.customFetch] = async (...args) => {
        const r = await fetch(...args);
        if (!String(args[0]).endsWith('/oauth/v2/token')) return r;
        const body = await r.json();
        const [h, p, s] = body.id_token.split('.');
        const sig = Buffer.from(s, 'base64url');
        sig[10] ^= 0xff;
        body.id_token = [h, p, sig.toString('base64url')].join('.');
        return new Response(JSON.stringify(body), { status: r.status, headers: r.headers });
      };
      await assert.rejects(exchange(tampering, url2, b), (e) =>
        e instanceof client.ClientError && e.code === 'OAUTH_INVALID_RESPONSE' && /signature verification failed/.test(e.cause?.message));
      await context.close();
    });

    it('select account with two users in one browser', async () => {
      const { config } = await webApp();
      const alice = unique('alice');
      const bob = unique('bob');
      const aliceId = await latch.human(alice, PW);
      const bobId = await latch.human(bob, 'Builder-b0b!');
      const { context, page } = await newPage();
      for (const [login, pw, id] of [[alice, PW, aliceId], [bob, 'Builder-b0b!', bobId]]) {
        const a = await authRequest(config, cb.redirectUri, { prompt: 'login' });
        const callback = captureRequest(page, cb.redirectUri);
        await page.goto(a.url.href);
        await signIn(page, login, pw);
        const t = await exchange(config, new URL((await callback).url()), a);
        assert.equal(t.claims().sub, id);
      }
      // No prompt, two sessions: the person chooses.
      const a = await authRequest(config, cb.redirectUri);
      await page.goto(a.url.href);
      await page.waitForSelector('ul.accounts');
      const buttons = page.locator('ul.accounts button');
      assert.equal(await buttons.count(), 2);
      const text = await page.textContent('ul.accounts');
      assert.ok(text.includes(alice) && text.includes(bob), text);
      await screenshot(page, 'select-account');
      const callback = captureRequest(page, cb.redirectUri);
      await submit(page, page.locator('ul.accounts button', { hasText: bob }));
      const t = await exchange(config, new URL((await callback).url()), a);
      assert.equal(t.claims().sub, bobId, 'the chosen account');
      // "Use another account" leads to the login name page.
      const c = await authRequest(config, cb.redirectUri, { prompt: 'select_account' });
      await page.goto(c.url.href);
      await page.waitForSelector('ul.accounts');
      await submit(page, 'form[action$="/other"] button');
      await page.waitForSelector('#loginname');
      await context.close();
    });

    it('prompt=none: login_required without a session, a code at once with one', async () => {
      const { config } = await webApp();
      const login = unique('carol');
      const uid = await latch.human(login, PW);
      const { context, page } = await newPage();
      const pages = [];
      page.on('request', (r) => { if (r.url().includes('/ui/login/')) pages.push(r.url()); });

      const a = await authRequest(config, cb.redirectUri, { prompt: 'none' });
      let callback = captureRequest(page, cb.redirectUri);
      await page.goto(a.url.href);
      const url = new URL((await callback).url());
      assert.equal(url.searchParams.get('error'), 'login_required');
      assert.equal(url.searchParams.get('state'), a.state);
      assert.equal(url.searchParams.get('iss'), latch.base);
      assert.equal(url.searchParams.get('code'), null);
      await assert.rejects(exchange(config, url, a), (e) => e instanceof client.AuthorizationResponseError && e.error === 'login_required');
      assert.deepEqual(pages, [], 'no login page was shown');

      const b = await authRequest(config, cb.redirectUri);
      callback = captureRequest(page, cb.redirectUri);
      await page.goto(b.url.href);
      await signIn(page, login, PW);
      await exchange(config, new URL((await callback).url()), b);

      pages.length = 0;
      const c = await authRequest(config, cb.redirectUri, { prompt: 'none' });
      callback = captureRequest(page, cb.redirectUri);
      await page.goto(c.url.href);
      const t = await exchange(config, new URL((await callback).url()), c);
      assert.equal(t.claims().sub, uid);
      assert.deepEqual(pages, [], 'answered without a page');
      await context.close();
    });

    it('prompt=create: registration, code from the outbox, verified account', async () => {
      await latch.loginPolicy({ allowUsernamePassword: true, allowRegister: true });
      const { config } = await webApp();
      const email = `${unique('erin')}@example.com`;
      const a = await authRequest(config, cb.redirectUri, { prompt: 'create' });
      const { context, page } = await newPage();
      await page.goto(a.url.href);
      await page.waitForSelector('#first_name');
      await screenshot(page, 'register');
      await register(page, { email, password: 'Sign-up-Pw1' });
      assert.ok((await page.textContent('main')).includes(email));
      await screenshot(page, 'verify-email');
      const code = codeFromMail(await latch.outboxMessage(email));
      await verifyCode(page, 'WRONG000');
      await page.waitForSelector('#error');
      assert.match(await page.textContent('#error'), /The code is wrong/);
      const callback = captureRequest(page, cb.redirectUri);
      await verifyCode(page, code);
      const t = await exchange(config, new URL((await callback).url()), a);
      const u = await userView(latch, t.claims().sub);
      assert.equal(u.userName, email, 'the user name defaults to the e-mail address');
      assert.equal(u.human.email.email, email);
      assert.equal(u.human.email.isEmailVerified, true);
      await context.close();
    });

    // The SMTP settings once from a configuration file and once from LATCH_SMTP_* variables.
    const SMTP_WAYS = {
      'a configuration file': (port) => ({ configToml: `[smtp]\nhost = "127.0.0.1"\nport = ${port}\ntls = "none"\nfrom = "latch <noreply@example.com>"\n` }),
      'LATCH_SMTP_* environment variables': (port) => ({
        env: { LATCH_SMTP_HOST: '127.0.0.1', LATCH_SMTP_PORT: String(port), LATCH_SMTP_TLS: 'none', LATCH_SMTP_FROM: 'latch <noreply@example.com>' },
      }),
    };
    for (const [way, settings] of Object.entries(SMTP_WAYS)) {
      it(`prompt=create with a real SMTP server (aiosmtpd), configured by ${way}`, async () => {
        const sink = await startSmtpSink();
        let smtpLatch;
        try {
          smtpLatch = await Latch.start({ database: db, ...settings(sink.port) });
          assert.doesNotMatch(smtpLatch.log(), /unknown LATCH_ environment variable/, 'every LATCH_SMTP_* variable is known');
          await smtpLatch.loginPolicy({ allowUsernamePassword: true, allowRegister: true });
          const app = await smtpLatch.oidcApp({ redirectUris: [cb.redirectUri] });
          const config = await rpConfig(smtpLatch, app.clientId, client.ClientSecretBasic(app.clientSecret));
          const email = `${unique('sam')}@example.com`;
          const a = await authRequest(config, cb.redirectUri, { prompt: 'create', ui_locales: 'de' });
          const { context, page } = await newPage();
          await page.goto(a.url.href);
          await register(page, { email, password: 'Sign-up-Pw1' });
          const raw = await sink.waitFor(email);
          assert.match(raw, /^X-RcptTo: .*$/m, 'delivered through aiosmtpd');
          assert.match(raw, /^X-MailFrom: noreply@example\.com$/m);
          const code = codeFromMail(raw);
          const callback = captureRequest(page, cb.redirectUri);
          await verifyCode(page, code);
          const t = await exchange(config, new URL((await callback).url()), a);
          assert.equal((await userView(smtpLatch, t.claims().sub)).human.email.isEmailVerified, true);
          assert.equal(existsSync(join(smtpLatch.dataDir, 'outbox')), false, 'nothing went to the outbox');
          await context.close();
        } finally {
          await smtpLatch?.stop();
          await sink.stop();
        }
      });
    }

    it('wrong password, then lockout after the policy\'s attempts', async () => {
      await latch.lockoutPolicy(3);
      const { config } = await webApp();
      const login = unique('dave');
      const uid = await latch.human(login, PW);
      const { context, page } = await newPage();
      let arrived = false;
      page.on('request', (r) => { if (r.url().startsWith(cb.redirectUri)) arrived = true; });
      const a = await authRequest(config, cb.redirectUri);
      await page.goto(a.url.href);
      await page.waitForSelector('#loginname');
      await page.fill('#loginname', login);
      await submit(page, 'form[action$="/loginname"] button[type=submit]');
      for (let i = 1; i <= 3; i++) {
        await page.waitForSelector('#password');
        await page.fill('#password', `wrong-${i}`);
        await submit(page, 'form[action$="/password"] button[type=submit]');
        await page.waitForSelector('#error');
        assert.equal(await page.textContent('#error'), 'The login name or the password is wrong.');
        if (i === 1) await screenshot(page, 'password-wrong');
      }
      assert.equal((await userView(latch, uid)).state, 'USER_STATE_LOCKED');
      // Locked: the right password gets a wrong one's answer (the page tells neither that the
      // password is right nor that the account is locked).
      await page.fill('#password', PW);
      await submit(page, 'form[action$="/password"] button[type=submit]');
      await page.waitForSelector('#error');
      assert.equal(await page.textContent('#error'), 'The login name or the password is wrong.');
      assert.equal(arrived, false, 'nothing reached the client');
      // Unlocked by an administrator, the right password works.
      await latch.api('POST', `/management/v1/users/${uid}/_unlock`, {});
      const callback = captureRequest(page, cb.redirectUri);
      await page.fill('#password', PW);
      await submit(page, 'form[action$="/password"] button[type=submit]');
      const t = await exchange(config, new URL((await callback).url()), a);
      assert.equal(t.claims().sub, uid);
      await context.close();
    });

    it('response_mode=form_post: Chromium posts the response to the redirect URI', async () => {
      const { config } = await webApp();
      const login = unique('fay');
      const uid = await latch.human(login, PW);
      const a = await authRequest(config, cb.redirectUri, { response_mode: 'form_post' });
      const { context, page } = await newPage();
      const callback = captureRequest(page, cb.redirectUri);
      await page.goto(a.url.href);
      await signIn(page, login, PW);
      const req = await callback;
      assert.equal(req.method(), 'POST');
      assert.equal(new URL(req.url()).search, '', 'nothing in the query');
      const body = new URLSearchParams(req.postData());
      assert.equal(body.get('state'), a.state);
      assert.equal(body.get('iss'), latch.base);
      assert.ok(body.get('code'));
      await page.waitForURL(cb.redirectUri);
      const got = cb.received.find((r) => r.method === 'POST' && r.body.includes(encodeURIComponent(body.get('code'))));
      assert.ok(got, 'the callback listener received the POST');
      assert.equal(got.headers['content-type'], 'application/x-www-form-urlencoded');
      const request = new Request(req.url(), {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: req.postData(),
      });
      const t = await exchange(config, request, a);
      assert.equal(t.claims().sub, uid);
      await context.close();
    });

    it('without JavaScript: the login pages work and form_post offers a button', async () => {
      const { config } = await webApp();
      const login = unique('ida');
      const uid = await latch.human(login, PW);
      const a = await authRequest(config, cb.redirectUri, { response_mode: 'form_post' });
      const { context, page } = await newPage({ javaScriptEnabled: false });
      await page.goto(a.url.href);
      await signIn(page, login, PW);
      // The response page cannot post itself: the person presses the button of its <noscript>.
      const button = page.locator('form button[type=submit]');
      await button.waitFor();
      await screenshot(page, 'form-post-noscript');
      const callback = captureRequest(page, cb.redirectUri);
      await submit(page, button);
      const req = await callback;
      assert.equal(req.method(), 'POST');
      const request = new Request(req.url(), {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: req.postData(),
      });
      const t = await exchange(config, request, a);
      assert.equal(t.claims().sub, uid);
      await context.close();
    });

    it('German pages from ui_locales=de', async () => {
      const { config } = await webApp();
      const login = unique('greta');
      await latch.human(login, PW);
      const a = await authRequest(config, cb.redirectUri, { ui_locales: 'de' });
      const { context, page } = await newPage();
      await page.goto(a.url.href);
      await page.waitForSelector('#loginname');
      assert.equal(await page.getAttribute('html', 'lang'), 'de');
      assert.equal(await page.textContent('label[for=loginname]'), 'Anmeldename');
      assert.equal(await page.textContent('h1'), 'Anmelden');
      await screenshot(page, 'login-name-de');
      await page.fill('#loginname', login);
      await submit(page, 'form[action$="/loginname"] button[type=submit]');
      await page.waitForSelector('#password');
      await page.fill('#password', 'falsch');
      await submit(page, 'form[action$="/password"] button[type=submit]');
      await page.waitForSelector('#error');
      assert.equal(await page.textContent('#error'), 'Der Anmeldename oder das Passwort ist falsch.');
      await screenshot(page, 'password-de');
      await context.close();
      // Without ui_locales, the browser's language (Accept-Language from the Chromium locale) decides.
      const de = await newPage({ locale: 'de-DE' });
      const b = await authRequest(config, cb.redirectUri);
      await de.page.goto(b.url.href);
      await de.page.waitForSelector('#loginname');
      assert.equal(await de.page.getAttribute('html', 'lang'), 'de');
      assert.equal(await de.page.textContent('h1'), 'Anmelden');
      await de.context.close();
    });

    it('password change required by an administrator-set password', async () => {
      const { config } = await webApp();
      const login = unique('hugo');
      const r = await latch.api('POST', '/management/v1/users/human', {
        userName: login,
        profile: { firstName: 'Hugo', lastName: 'Change' },
        email: { email: `${login}@example.com`, isEmailVerified: true },
        initialPassword: 'Initial-Pw1',
      });
      const a = await authRequest(config, cb.redirectUri);
      const { context, page } = await newPage();
      await page.goto(a.url.href);
      await signIn(page, login, 'Initial-Pw1');
      await page.waitForSelector('#password_repeat');
      await screenshot(page, 'change-password');
      await page.fill('#password', 'New-Passw0rd');
      await page.fill('#password_repeat', 'New-Passw0rd');
      const callback = captureRequest(page, cb.redirectUri);
      await submit(page, 'form[action$="/change_password"] button[type=submit]');
      const t = await exchange(config, new URL((await callback).url()), a);
      assert.equal(t.claims().sub, r.userId);
      await context.close();
    });

    it('a forgotten password: a code from the outbox and a new password, then signed in', async () => {
      await latch.loginPolicy({ allowUsernamePassword: true });
      const { config } = await webApp();
      const login = unique('rita');
      const email = `${login}@example.com`;
      const r = await latch.api('POST', '/management/v1/users/human', {
        userName: login,
        profile: { firstName: 'Rita', lastName: 'Reset' },
        email: { email, isEmailVerified: true },
      });
      await latch.api('POST', `/management/v1/users/${r.userId}/password`, { password: 'Forgotten-Pw1', noChangeRequired: true });
      const a = await authRequest(config, cb.redirectUri);
      const { context, page } = await newPage();
      await page.goto(a.url.href);
      await page.waitForSelector('#loginname');
      await page.fill('#loginname', login);
      await submit(page, 'form[action$="/loginname"] button[type=submit]');
      await page.waitForSelector('#password');
      await submit(page, page.locator('form[action$="/init_password/request"] button', { hasText: 'Forgot your password' }));
      await page.waitForSelector('#code');
      await screenshot(page, 'reset-password');
      const code = codeFromMail(await latch.outboxMessage(email));
      await page.fill('#code', code);
      await page.fill('#password', 'Remembered-Pw2');
      await page.fill('#password_repeat', 'Remembered-Pw2');
      const callback = captureRequest(page, cb.redirectUri);
      await submit(page, 'form[action$="/init_password"] button[type=submit]');
      const t = await exchange(config, new URL((await callback).url()), a);
      assert.equal(t.claims().sub, r.userId);
      await context.close();
    });

    it('a second factor set up at sign-in when the login policy asks for one (forceMfa)', async () => {
      const { config } = await webApp();
      const login = unique('tess');
      const r = await latch.api('POST', '/management/v1/users/human', {
        userName: login,
        profile: { firstName: 'Tess', lastName: 'Factor' },
        email: { email: `${login}@example.com`, isEmailVerified: true },
      });
      await latch.api('POST', `/management/v1/users/${r.userId}/password`, { password: PW, noChangeRequired: true });
      const { policy } = await latch.api('GET', '/admin/v1/policies/login');
      await latch.api('PUT', '/admin/v1/policies/login', { ...policy, forceMfa: true });
      try {
        const a = await authRequest(config, cb.redirectUri);
        const { context, page } = await newPage();
        await page.goto(a.url.href);
        await signIn(page, login, PW);
        await page.waitForSelector('#secret');
        await screenshot(page, 'totp-setup');
        const secret = (await page.textContent('#secret')).trim();
        assert.match(await page.getAttribute('a[href^="otpauth:"]', 'href'), /^otpauth:\/\/totp\//);
        await page.fill('#code', totp(secret));
        const callback = captureRequest(page, cb.redirectUri);
        await submit(page, 'form[action$="/totp/setup"] button[type=submit]');
        const t = await exchange(config, new URL((await callback).url()), a);
        assert.equal(t.claims().sub, r.userId);
        assert.deepEqual(t.claims().amr, ['pwd', 'otp', 'mfa']);
        await context.close();
      } finally {
        await latch.api('PUT', '/admin/v1/policies/login', policy);
      }
    });

    it('error page and signed-out page', async () => {
      const { context, page } = await newPage();
      const q = new URLSearchParams({ client_id: 'no-such-client', redirect_uri: cb.redirectUri, response_type: 'code', scope: 'openid' });
      const r = await page.goto(`${latch.base}/oauth/v2/authorize?${q}`);
      assert.equal(r.status(), 400);
      assert.equal(await page.textContent('h1'), 'Something went wrong');
      assert.ok((await page.textContent('main')).includes(r.headers()['x-request-id']), 'the page shows the request id');
      assert.ok(!page.url().startsWith(cb.redirectUri), 'not redirected to an unverified client');
      await screenshot(page, 'error');
      const s = await page.goto(`${latch.base}/ui/signed_out`);
      assert.equal(s.status(), 200);
      assert.equal(await page.textContent('h1'), 'You are signed out');
      await screenshot(page, 'signed-out');
      await context.close();
    });
  });
}
