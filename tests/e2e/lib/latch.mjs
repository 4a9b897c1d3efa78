// Starts the latch binary in a temporary directory on a free port (SQLite or PostgreSQL),
// seeds it through the management API, and stops it. It builds nothing: the binary comes
// from LATCH_BIN (default: target/debug/latch of the repository, or $CARGO_TARGET_DIR/debug/latch).

import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync, readdirSync, rmSync, existsSync, openSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { lookup } from 'node:dns/promises';

export const E2E_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const REPO = resolve(E2E_DIR, '..', '..');
export const ADMIN_PASSWORD = 'Admin-Passw0rd!';
/** The host of the issuer (openid-client needs the issuer to equal the URL it is given):
 *  `localhost`, unless it resolves to something else than 127.0.0.1 first (latch listens on
 *  127.0.0.1 only), then `127.0.0.1` in the issuer and the clients alike. */
export const HOST = process.env.LATCH_E2E_HOST
  || ((await lookup('localhost').catch(() => ({}))).address === '127.0.0.1' ? 'localhost' : '127.0.0.1');

export function latchBin() {
  if (process.env.LATCH_BIN) return resolve(REPO, process.env.LATCH_BIN);
  const target = process.env.CARGO_TARGET_DIR ? resolve(REPO, process.env.CARGO_TARGET_DIR) : join(REPO, 'target');
  return join(target, 'debug', 'latch');
}

/** The stores to run on: LATCH_E2E_DATABASE if set, else SQLite, and PostgreSQL too when
 *  LATCH_TEST_DATABASE_URL is set. */
export function databases() {
  const only = process.env.LATCH_E2E_DATABASE;
  if (only) {
    if (!['sqlite', 'postgres'].includes(only)) throw new Error(`LATCH_E2E_DATABASE must be sqlite or postgres, not ${only}`);
    return [only];
  }
  return process.env.LATCH_TEST_DATABASE_URL ? ['sqlite', 'postgres'] : ['sqlite'];
}

export function pgAdminUrl() {
  return process.env.LATCH_TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
}

function psql(sql) {
  execFileSync('psql', [pgAdminUrl(), '-v', 'ON_ERROR_STOP=1', '-qAtc', sql], { stdio: ['ignore', 'pipe', 'pipe'] });
}

export async function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.on('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export class ApiError extends Error {
  constructor(method, path, status, body) {
    super(`${method} ${path} -> ${status}: ${JSON.stringify(body)}`);
    this.status = status;
    this.body = body;
  }
}

// Children (latch, aiosmtpd) die with this process and their temp dirs go, even when a test
// crashes or is interrupted (PostgreSQL databases left behind are dropped by scripts/test).
const children = new Set();
const tempDirs = new Set();
export function ownChild(proc) {
  children.add(proc);
  proc.on('exit', () => children.delete(proc));
  return proc;
}
export function ownTempDir(dir) {
  tempDirs.add(dir);
  return dir;
}
function reap() {
  for (const c of children) c.kill('SIGKILL');
  if (!process.env.LATCH_E2E_KEEP) for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
}
process.on('exit', reap);
for (const sig of ['SIGINT', 'SIGTERM']) process.once(sig, () => { reap(); process.exit(130); });

let counter = 0;
/** A name unique within this process (user names are unique per instance). */
export function unique(prefix) {
  counter += 1;
  return `${prefix}${counter}${randomBytes(3).toString('hex')}`;
}

export class Latch {
  /** @param {{database?: string, env?: Record<string,string>, configToml?: string}} opts */
  static async start(opts = {}) {
    const l = new Latch();
    await l.#start(opts);
    return l;
  }

  async #start({ database = databases()[0], env = {}, configToml }) {
    const bin = latchBin();
    if (!existsSync(bin)) throw new Error(`no latch binary at ${bin}: build it with 'cargo build --bin latch' or set LATCH_BIN`);
    this.database = database;
    this.dir = ownTempDir(mkdtempSync(join(tmpdir(), `latch-e2e-${database}-`)));
    this.dataDir = join(this.dir, 'data');
    this.port = await freePort();
    this.base = `http://${HOST}:${this.port}`;
    const vars = {
      PATH: process.env.PATH,
      HOME: process.env.HOME || this.dir,
      LATCH_LISTEN: `127.0.0.1:${this.port}`,
      LATCH_EXTERNAL_URL: this.base,
      LATCH_PASSWORD_ARGON2_MEMORY_KIB: '1024',
      LATCH_PASSWORD_ARGON2_ITERATIONS: '1',
      LATCH_FIRSTINSTANCE_ADMIN_PASSWORD: ADMIN_PASSWORD,
      LATCH_LOG_LEVEL: process.env.LATCH_E2E_LOG_LEVEL || 'warn',
      LATCH_SHUTDOWN_TIMEOUT: '5s',
      // The suites sign the same test users in many times a minute.
      LATCH_LIMITS_LOGIN_PER_NAME: '300/1m',
      NO_COLOR: '1', // readable latch.log (latch colours its log even when it is not a terminal)
      ...env,
    };
    if (configToml !== undefined) {
      vars.LATCH_CONFIG = join(this.dir, 'latch.toml');
      writeFileSync(vars.LATCH_CONFIG, configToml);
    }
    if (database === 'postgres') {
      this.pgDatabase = `latch_t_e2e_${randomBytes(6).toString('hex')}`;
      psql(`CREATE DATABASE "${this.pgDatabase}"`);
      const u = new URL(pgAdminUrl());
      u.pathname = `/${this.pgDatabase}`;
      vars.LATCH_DATABASE_URL = u.href;
    } else if (database !== 'sqlite') {
      throw new Error(`unknown database ${database}`);
    }
    this.logPath = join(this.dir, 'latch.log');
    const log = openSync(this.logPath, 'a');
    this.proc = ownChild(spawn(bin, ['serve'], { cwd: this.dir, env: vars, stdio: ['ignore', log, log] }));
    this.exited = new Promise((ok) => this.proc.on('exit', (code, signal) => ok({ code, signal })));
    let exit = null;
    this.exited.then((e) => { exit = e; });
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (exit) throw new Error(`latch exited during start (${JSON.stringify(exit)}):\n${this.log()}`);
      try {
        const r = await fetch(`${this.base}/readyz`);
        if (r.status === 200) break;
      } catch { /* not listening yet */ }
      if (Date.now() > deadline) {
        await this.stop();
        throw new Error(`latch not ready within 60 s:\n${this.log()}`);
      }
      await sleep(100);
    }
    this.pat = readFileSync(join(this.dataDir, 'admin.pat'), 'utf8').trim();
    this.discovery = await (await fetch(`${this.base}/.well-known/openid-configuration`)).json();
    return this;
  }

  log() {
    try { return readFileSync(this.logPath, 'utf8').split('\n').slice(-60).join('\n'); } catch { return ''; }
  }

  url(path) { return `${this.base}${path}`; }

  async stop() {
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill('SIGTERM');
      const t = setTimeout(() => this.proc.kill('SIGKILL'), 10_000);
      await this.exited;
      clearTimeout(t);
    }
    if (this.pgDatabase) {
      try { psql(`DROP DATABASE IF EXISTS "${this.pgDatabase}" WITH (FORCE)`); } catch (e) { console.error(`could not drop ${this.pgDatabase}: ${e}`); }
    }
    if (this.dir && !process.env.LATCH_E2E_KEEP) rmSync(this.dir, { recursive: true, force: true });
    else if (this.dir) console.error(`kept ${this.dir}`);
  }

  /** A management/admin API call as the machine administrator; throws on a non-2xx answer. */
  async api(method, path, body) {
    const r = await fetch(this.url(path), {
      method,
      headers: { authorization: `Bearer ${this.pat}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    let json;
    try { json = text ? JSON.parse(text) : {}; } catch { json = text; }
    if (!r.ok) throw new ApiError(method, path, r.status, json);
    return json;
  }

  // ----- seeding -----

  async project(name = unique('proj')) {
    const p = await this.api('POST', '/management/v1/projects', { name });
    return p.id;
  }

  /** An OIDC web app (code flow, refresh, client_secret_basic unless `extra` says otherwise),
   *  in a new project unless `projectId` is given. Returns {clientId, clientSecret, appId, projectId}. */
  async oidcApp(extra = {}, projectId) {
    projectId ??= await this.project();
    const body = {
      name: unique('app'),
      redirectUris: ['http://127.0.0.1:9/cb'],
      postLogoutRedirectUris: ['http://127.0.0.1:9/bye'],
      responseTypes: ['OIDC_RESPONSE_TYPE_CODE'],
      grantTypes: ['OIDC_GRANT_TYPE_AUTHORIZATION_CODE', 'OIDC_GRANT_TYPE_REFRESH_TOKEN'],
      appType: 'OIDC_APP_TYPE_WEB',
      authMethodType: 'OIDC_AUTH_METHOD_TYPE_BASIC',
      devMode: true,
      ...extra,
    };
    const r = await this.api('POST', `/management/v1/projects/${projectId}/apps/oidc`, body);
    return { clientId: r.clientId, clientSecret: r.clientSecret, appId: r.appId, projectId };
  }

  /** A key of an app (for private_key_jwt): the decoded key file {type, keyId, key, appId, clientId}. */
  async appKey(projectId, appId) {
    const r = await this.api('POST', `/management/v1/projects/${projectId}/apps/${appId}/keys`, { type: 'KEY_TYPE_JSON' });
    return JSON.parse(Buffer.from(r.keyDetails, 'base64').toString('utf8'));
  }

  /** A human user with a verified e-mail and a password that needs no change; returns the user id. */
  async human(userName, password, { email = `${userName}@example.com`, verified = true, firstName = userName, lastName = 'Test' } = {}) {
    const r = await this.api('POST', '/management/v1/users/human', {
      userName,
      profile: { firstName, lastName },
      email: { email, isEmailVerified: verified },
    });
    if (password) {
      await this.api('POST', `/management/v1/users/${r.userId}/password`, { password, noChangeRequired: true });
    }
    return r.userId;
  }

  /** A machine user; returns its id. */
  async machine(userName, { jwt = false } = {}) {
    const r = await this.api('POST', '/management/v1/users/machine', {
      userName,
      name: userName,
      accessTokenType: jwt ? 'ACCESS_TOKEN_TYPE_JWT' : 'ACCESS_TOKEN_TYPE_BEARER',
    });
    return r.userId;
  }

  async machineSecret(userId) {
    const r = await this.api('PUT', `/management/v1/users/${userId}/secret`, {});
    return r.clientSecret;
  }

  /** A key file of a machine user: {type: 'serviceaccount', keyId, key, userId}. */
  async machineKey(userId) {
    const r = await this.api('POST', `/management/v1/users/${userId}/keys`, { type: 'KEY_TYPE_JSON' });
    return JSON.parse(Buffer.from(r.keyDetails, 'base64').toString('utf8'));
  }

  async loginPolicy(policy) {
    return this.api('PUT', '/admin/v1/policies/login', policy);
  }

  async lockoutPolicy(maxPasswordAttempts) {
    return this.api('PUT', '/admin/v1/policies/password/lockout', { maxPasswordAttempts });
  }

  /** The newest message in the outbox addressed to `to`, as text (waits up to `timeoutMs`). */
  async outboxMessage(to, timeoutMs = 5000) {
    const dir = join(this.dataDir, 'outbox');
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (existsSync(dir)) {
        const files = readdirSync(dir)
          .filter((f) => f.endsWith('.eml'))
          .map((f) => join(dir, f))
          .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
        for (const f of files) {
          const text = readFileSync(f, 'utf8');
          if (text.includes(to)) return text;
        }
      }
      if (Date.now() > deadline) throw new Error(`no message to ${to} in ${dir}`);
      await sleep(100);
    }
  }
}

/** The 8-character code in an e-mail (RFC 5322 text; the body may be quoted-printable or base64). */
export function codeFromMail(raw) {
  const [head, ...rest] = raw.split(/\r?\n\r?\n/);
  let body = rest.join('\n\n');
  if (/content-transfer-encoding:\s*base64/i.test(head)) body = Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
  else if (/content-transfer-encoding:\s*quoted-printable/i.test(head)) {
    body = body.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_, h) => String.fromCharCode(parseInt(h, 16)));
  }
  const m = body.match(/: ([A-Z0-9]{8})\s*$/m);
  if (!m) throw new Error(`no 8-character code in the message:\n${raw}`);
  return m[1];
}
