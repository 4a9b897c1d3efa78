// Users brought over from Keycloak and Auth0 with their password hashes: the real export samples
// go through `latch migrate` and `POST /admin/v1/import`, then each user signs in through the
// login pages in Chromium, and the stored hash has become argon2id.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Latch, REPO, codeFromMail, databases, latchBin, ownTempDir } from '../lib/latch.mjs';
import { launch, captureRequest, signIn, submit } from '../lib/browser.mjs';
import { callbackServer } from '../lib/callback.mjs';
import { client, rpConfig, authRequest, exchange } from '../lib/oidc.mjs';
import { totp } from '../lib/totp.mjs';

const SAMPLES = join(REPO, 'tests', 'fixtures', 'migration'); // copies of ../shared/data/migration

/** Runs `latch migrate ...` and returns the import body it wrote. */
function convert(dir, name, args) {
  const output = join(dir, `${name}.json`);
  execFileSync(latchBin(), ['migrate', ...args, '--output', output], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  return JSON.parse(readFileSync(output, 'utf8'));
}

for (const db of databases()) {
  describe(`Keycloak and Auth0 users after an import (${db})`, () => {
    let latch;
    let browser;
    let cb;
    let dir;

    before(async () => {
      [latch, browser, cb] = await Promise.all([Latch.start({ database: db }), launch(), callbackServer()]);
      dir = ownTempDir(mkdtempSync(join(tmpdir(), 'latch-e2e-migrate-')));
    });
    after(async () => {
      await browser?.close();
      await cb?.close();
      await latch?.stop();
    });

    it('sign in with the imported hashes, which are then re-hashed to argon2id', async () => {
      const org = (await latch.api('GET', '/management/v1/orgs/me')).org.id;
      const bodies = [
        convert(dir, 'keycloak-pbkdf2', ['keycloak', '--realm', join(SAMPLES, 'keycloak-26.6.0-migration-realm-users-excerpt.json'),
          '--org', org, '--email-domain', 'users.example.test']),
        convert(dir, 'keycloak-argon2', ['keycloak', '--realm', join(SAMPLES, 'keycloak26-argon2-user.json'), '--org', org]),
        convert(dir, 'auth0', ['auth0', '--users', join(SAMPLES, 'auth0-users-export-sample.ndjson'),
          '--passwords', join(SAMPLES, 'auth0-password-hashes-export-sample.ndjson'), '--org', org]),
      ];
      const imported = new Map(); // user name -> original hash
      const ids = new Map(); // user name -> user id
      const otp = new Map(); // user name -> TOTP secret
      for (const body of bodies) {
        assert.equal(body.dataOrgs.orgs[0].orgId, org);
        const report = await latch.api('POST', '/admin/v1/import', body);
        assert.deepEqual(report.errors, [], JSON.stringify(report));
        for (const u of body.dataOrgs.orgs[0].humanUsers) {
          assert.ok(report.success.orgs[0].humanUserIds.includes(u.userId), `${u.user.userName} imported`);
          ids.set(u.user.userName, u.userId);
          if (u.user.otpCode) otp.set(u.user.userName, u.user.otpCode);
          if (u.user.hashedPassword) imported.set(u.user.userName, u.user.hashedPassword.value);
        }
      }
      // Every converted user arrived with its name, names, address and verified flag.
      for (const body of bodies) {
        for (const u of body.dataOrgs.orgs[0].humanUsers) {
          const { user } = await latch.api('GET', `/management/v1/users/${u.userId}`);
          assert.equal(user.userName, u.user.userName);
          assert.equal(user.human.profile.firstName, u.user.profile.firstName);
          assert.equal(user.human.profile.lastName, u.user.profile.lastName);
          assert.equal(user.human.email.email, u.user.email.email);
          assert.equal(Boolean(user.human.email.isEmailVerified), Boolean(u.user.email.isEmailVerified), u.user.userName);
          assert.equal(user.state, u.state === 'USER_STATE_INACTIVE' ? 'USER_STATE_INACTIVE'
            : (u.user.hashedPassword ? 'USER_STATE_ACTIVE' : 'USER_STATE_INITIAL'), u.user.userName);
        }
      }
      const kcNames = bodies[0].dataOrgs.orgs[0].humanUsers.map((u) => u.user.userName).sort();
      assert.deepEqual(kcNames, ['consent-user', 'migration-test-user', 'offline-test-user']);
      const auth0Alice = bodies[2].dataOrgs.orgs[0].humanUsers.find((u) => u.user.email.email === 'alice@example.test');
      const people = [
        { login: 'offline-test-user', password: 'password2', prefix: '$pbkdf2-sha256$', verify: 'offline-test-user@users.example.test' },
        { login: 'jane.doe', password: 'secret', prefix: '$argon2id$v=19$m=7168', disabled: true },
        { login: auth0Alice.user.userName, password: 'password2', prefix: '$2b$' },
      ];
      const app = await latch.oidcApp({ redirectUris: [cb.redirectUri] });
      const config = await rpConfig(latch, app.clientId, client.ClientSecretBasic(app.clientSecret));
      for (const p of people) {
        assert.ok(imported.get(p.login)?.startsWith(p.prefix), `${p.login} came with its ${p.prefix} hash`);
        if (p.disabled) {
          // Disabled in Keycloak, so imported as USER_STATE_INACTIVE: refused until reactivated.
          const context = await browser.newContext();
          const page = await context.newPage();
          await page.goto((await authRequest(config, cb.redirectUri)).url.href);
          await signIn(page, p.login, p.password);
          assert.match(await page.textContent('main'), /deactivated/);
          await context.close();
          await latch.api('POST', `/management/v1/users/${ids.get(p.login)}/_reactivate`, {});
        }
        const context = await browser.newContext();
        const page = await context.newPage();
        const a = await authRequest(config, cb.redirectUri);
        const callback = captureRequest(page, cb.redirectUri);
        await page.goto(a.url.href);
        await signIn(page, p.login, p.password);
        if (otp.get(p.login)) {
          // Keycloak's TOTP credential came along: the code of the imported secret is asked for.
          await page.waitForSelector('#code');
          await page.fill('#code', totp(otp.get(p.login)));
          await submit(page, 'form[action$="/totp"] button[type=submit]');
        }
        if (p.verify) {
          // An address the conversion made up is unverified: the code from the mail confirms it.
          await page.waitForSelector('#code');
          await page.fill('#code', codeFromMail(await latch.outboxMessage(p.verify)));
          await submit(page, 'form[action$="/verify_email"] button[type=submit]');
        }
        const tokens = await exchange(config, new URL((await callback).url()), a);
        assert.equal(tokens.claims().sub, ids.get(p.login), `${p.login} signed in`);
        await context.close();
      }
      // The export shows what is stored now: latch's own argon2id, no longer the imported hash.
      const doc = await latch.api('POST', '/admin/v1/export', { org_ids: [org], with_passwords: true, response_output: true });
      const stored = new Map(doc.orgs[0].humanUsers.map((u) => [u.user.userName, u.user.hashedPassword?.value]));
      for (const p of people) {
        const h = stored.get(p.login);
        assert.match(h, /^\$argon2id\$v=19\$m=1024,t=1,p=1\$/, `${p.login} re-hashed with latch's parameters`);
        assert.notEqual(h, imported.get(p.login));
      }
      // A wrong password is still wrong after the re-hash.
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto((await authRequest(config, cb.redirectUri)).url.href);
      await signIn(page, 'jane.doe', 'not-secret');
      assert.match(await page.textContent('main'), /the password is wrong/);
      assert.ok(page.url().startsWith(latch.base), 'no code for a wrong password');
      await context.close();
    });
  });
}
