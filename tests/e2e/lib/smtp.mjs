// A real SMTP sink: aiosmtpd (PyPI, installed in tests/py/.venv) with its Mailbox handler,
// so every message lands as a file in a maildir (test-peers.md 5).

import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO, freePort, ownChild, ownTempDir } from './latch.mjs';

export function python() {
  return process.env.LATCH_E2E_PYTHON || join(REPO, 'tests', 'py', '.venv', 'bin', 'python');
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The SMTP greeting (one line) of host:port, or null when nothing answers. */
function banner(port) {
  return new Promise((ok) => {
    const s = connect(port, '127.0.0.1');
    s.setTimeout(1000);
    s.once('data', (d) => { s.end('QUIT\r\n'); ok(d.toString()); });
    s.once('error', () => ok(null));
    s.once('timeout', () => { s.destroy(); ok(null); });
  });
}

export async function startSmtpSink() {
  const py = python();
  if (!existsSync(py)) throw new Error(`no Python with aiosmtpd at ${py}: run tests/e2e/run (or set LATCH_E2E_PYTHON)`);
  const dir = ownTempDir(mkdtempSync(join(tmpdir(), 'latch-smtp-')));
  const maildir = join(dir, 'maildir'); // must not exist yet: Mailbox creates cur/ new/ tmp/
  const port = await freePort();
  let out = '';
  const proc = ownChild(spawn(py, ['-m', 'aiosmtpd', '-n', '-l', `127.0.0.1:${port}`, '-c', 'aiosmtpd.handlers.Mailbox', maildir], {
    stdio: ['ignore', 'pipe', 'pipe'],
  }));
  proc.stdout.on('data', (d) => { out += d; });
  proc.stderr.on('data', (d) => { out += d; });
  const exited = new Promise((ok) => proc.on('exit', ok));
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`aiosmtpd exited: ${out}`);
    const b = await banner(port);
    if (b && b.startsWith('220')) break;
    if (Date.now() > deadline) { proc.kill(); throw new Error(`aiosmtpd did not answer on ${port}: ${out}`); }
    await sleep(100);
  }
  return {
    port,
    maildir,
    /** The raw messages delivered so far (RFC 5322 text), oldest first. */
    messages() {
      const d = join(maildir, 'new');
      if (!existsSync(d)) return [];
      return readdirSync(d).sort().map((f) => readFileSync(join(d, f), 'utf8'));
    },
    /** Waits for a message to `to`. */
    async waitFor(to, timeoutMs = 10_000) {
      const end = Date.now() + timeoutMs;
      for (;;) {
        const m = this.messages().filter((t) => t.includes(to));
        if (m.length) return m[m.length - 1];
        if (Date.now() > end) throw new Error(`no message to ${to} in ${maildir} (aiosmtpd: ${out})`);
        await sleep(100);
      }
    },
    async stop() {
      if (proc.exitCode === null) { proc.kill('SIGTERM'); await exited; }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
