// What the browser tests share: Debian's headless Chromium through
// playwright-core, confined to the daemon's origin, with every dialog,
// console error (a CSP refusal among them) and outside request counted, and
// `check`/`step` that print one line per check and a closing count.
// run.sh sets the environment: WORKBENCH_BASE, WORKBENCH_PROFILE,
// WORLD_ARTIFACTS, PLAYWRIGHT_FROM.
import { createRequire } from 'node:module';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const require = createRequire(join(process.env.PLAYWRIGHT_FROM, 'package.json'));
const { chromium } = require('playwright-core');

export const base = process.env.WORKBENCH_BASE;
export const artifacts = process.env.WORLD_ARTIFACTS;
export const CSP =
  "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

let passed = 0;
let failed = 0;
export function check(name, ok, detail = '') {
  if (ok) {
    passed++;
    console.log(`ok ${name}`);
  } else {
    failed++;
    console.log(`FAIL ${name}${detail ? `: ${detail}` : ''}`);
  }
}
export async function step(name, fn) {
  try {
    await fn();
  } catch (e) {
    check(name, false, String(e && e.message ? e.message.split('\n')[0] : e));
  }
}
// From an A2A reply: metadata.entry_index, and the first effect record of the tool result's world block.
export function worldBlock(result) {
  const data = result.artifacts?.[0]?.parts?.[0]?.data;
  return { entry: result.metadata?.entry_index, record: data?.world?.effects?.[0]?.record };
}
export const text = (page, sel) => page.locator(sel).first().innerText({ timeout: 5000 });
// Nothing on the page scrolls sideways in the 1280 px window every test opens.
export async function fits(page, name) {
  const { scroll, inner } = await page.evaluate(() => ({
    scroll: document.documentElement.scrollWidth,
    inner: window.innerWidth,
  }));
  check(`${name}: no horizontal overflow at ${inner} px (scrollWidth ${scroll})`, inner === 1280 && scroll <= inner);
}
// Opens every <details> (a diff, an output), as a reader's clicks would.
export const openDetails = (page) => page.evaluate(() => document.querySelectorAll('details').forEach((d) => (d.open = true)));

// A fresh profile (its own directory under WORKBENCH_PROFILE) and one page.
export async function open(profile) {
  const dir = join(process.env.WORKBENCH_PROFILE, profile);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  mkdirSync(artifacts, { recursive: true });
  const context = await chromium.launchPersistentContext(dir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 1280, height: 800 },
  });
  // Nothing but the daemon: any other request is refused and counted.
  const external = [];
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (url.origin === base) return route.continue();
    external.push(url.href);
    return route.abort();
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const dialogs = [];
  const consoleErrors = [];
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    d.dismiss().catch(() => {});
  });
  // The 400 and 404 pages log "Failed to load resource"; anything else (a CSP refusal, say) counts.
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource: the server responded with a status of 4'))
      consoleErrors.push(m.text());
  });
  const scripts = () => page.evaluate(() => document.querySelectorAll('script').length);
  // The checks every test ends with, then its count and exit code.
  async function close() {
    check('no dialog ever opened', dialogs.length === 0, dialogs.join('; '));
    check('no request left 127.0.0.1', external.length === 0, external.join(' '));
    check('no console errors', consoleErrors.length === 0, consoleErrors.join('; '));
    await context.close();
    console.log(`${passed} passed, ${failed} failed`);
    process.exit(failed === 0 ? 0 : 1);
  }
  return { page, scripts, close };
}
