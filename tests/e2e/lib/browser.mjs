// Debian's Chromium driven by playwright-core (no browser download), test-peers.md 1a.

import { chromium } from 'playwright-core';
import { mkdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { REPO } from './latch.mjs';

export const CHROMIUM = process.env.LATCH_E2E_CHROMIUM || '/usr/bin/chromium';
export const SCREENSHOTS = join(REPO, 'artifacts', 'screenshots');

/** A headless Chromium; playwright gives every launch a fresh temporary user-data-dir. */
export async function launch() {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium (tests/e2e/run does it)`);
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
}

/** Saves a full-page screenshot as artifacts/screenshots/<name>.png and returns the path. */
export async function screenshot(page, name) {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const path = join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/**
 * Resolves with the first request the page makes whose URL starts with `prefix` (the client's
 * redirect URI). page.route() does not see requests reached through a redirect; the request
 * event does.
 */
export function captureRequest(page, prefix, timeoutMs = 15_000) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      page.off('request', on);
      reject(new Error(`no request to ${prefix} within ${timeoutMs} ms (page at ${page.url()})`));
    }, timeoutMs);
    function on(req) {
      if (req.url().startsWith(prefix)) {
        clearTimeout(t);
        page.off('request', on);
        resolve(req);
      }
    }
    page.on('request', on);
  });
}

/** Clicks (a selector or a locator) and waits for the navigation the click starts (a form post). */
export async function submit(page, target) {
  const click = typeof target === 'string' ? page.click(target) : target.click();
  await Promise.all([page.waitForNavigation(), click]);
}

/** Signs in on the login name and password pages shown in `page`. */
export async function signIn(page, login, password) {
  await page.waitForSelector('#loginname');
  await page.fill('#loginname', login);
  await submit(page, 'form[action$="/loginname"] button[type=submit]');
  await page.waitForSelector('#password');
  await page.fill('#password', password);
  await submit(page, 'form[action$="/password"] button[type=submit]');
}

