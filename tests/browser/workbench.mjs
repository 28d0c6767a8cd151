// Drives headless Chromium (Debian's, through playwright-core) through
// worldd's /workbench: log → entry → effect record → payload, the `<script>`
// payloads shown as text, the 400s, and a screenshot. run.sh sets the
// environment: WORKBENCH_CALLS (the A2A replies, one a line), WORKBENCH_DB,
// and what harness.mjs reads.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CSP, artifacts, base, check, fits, open, step, text, worldBlock } from './harness.mjs';

const calls = readFileSync(process.env.WORKBENCH_CALLS, 'utf8').trim().split('\n').map((l) => JSON.parse(l).result);
const [readHello, writePage, readPage] = calls;
const SCRIPT_TEXT = '<script>alert(1)</script>';

const { page, scripts, close } = await open('workbench');

await step('home', async () => {
  const resp = await page.goto(`${base}/workbench`);
  const h = resp.headers();
  check('home status 200', resp.status() === 200, String(resp.status()));
  check('content-type html utf-8', h['content-type'] === 'text/html; charset=utf-8', h['content-type']);
  check('cache-control no-store', h['cache-control'] === 'no-store', h['cache-control']);
  check('strict csp', h['content-security-policy'] === CSP, h['content-security-policy']);
  check('nosniff and no-referrer', h['x-content-type-options'] === 'nosniff' && h['referrer-policy'] === 'no-referrer');
  const health = await text(page, '#health');
  check('health shows daemon version and store', /0\.1\.0/.test(health) && health.includes(process.env.WORKBENCH_DB), health);
  const head = await text(page, '#head');
  check('head shows revision 3 of a 4-entry log', /revision\s+3/.test(head) && /log length\s+4/.test(head), head);
  const indices = await page.locator('#log a.entry-link').allInnerTexts();
  check('log lists entries 3-0, newest first', indices.join(',') === '3,2,1,0', indices.join(','));
  check('the log heading says what it shows', (await text(page, '#log-heading')) === 'Log entries #0–#3 of 4, newest first');
  check('no newer or older page for 4 entries', (await page.locator('#next-page, #prev-page').count()) === 0);
  // It opens on the newest episodes, each linked, above the log.
  const episodes = await page.locator('#home-episodes a.episode-link').allInnerTexts();
  check('home: the newest episodes first', episodes.join(',') === 'demo', episodes.join(','));
  const order = await page.evaluate(() => [...document.querySelectorAll('h2')].map((h) => h.id || h.textContent));
  check('home: episodes, then the log, then head and health', order.slice(0, 2).join(',') === 'newest-episodes,log-heading', order.join(','));
  const episodeCells = await page.locator('#log td.episode').allInnerTexts();
  check('home: each call entry names its episode', episodeCells.join(',') === 'demo,demo,demo,—', episodeCells.join(','));
  await fits(page, 'home');
  await page.screenshot({ path: join(artifacts, 'workbench-log.png'), fullPage: true });
});

const write = worldBlock(writePage);
let entryUrl = '';
await step('log to entry', async () => {
  await page.goto(`${base}/workbench`);
  const row = page.locator('#log tr', { hasText: 'ailang-write' });
  check('log row names the skill', (await row.count()) === 1);
  await row.locator('a.entry-link').click();
  await page.waitForLoadState();
  entryUrl = page.url();
  check('entry url', entryUrl === `${base}/workbench?entry=${write.entry}`, `${entryUrl} vs entry ${write.entry}`);
  check('entry index shown', (await text(page, '#entry-index')) === String(write.entry));
  check('transition id shown', (await text(page, '#record-skillId')) === 'ailang-write');
  const inv = await text(page, '#record-invocationId');
  check('invocation id shown', inv === 'a2a:demo:write-page', inv);
  check('writtenBy coordinator:a2a', (await text(page, '#entry')).includes('coordinator:a2a'));
  const episodeHref = await page.locator('#record-episodeId a.episode-link').getAttribute('href');
  check('entry: the episode is a link', episodeHref === '/workbench/episodes/demo', episodeHref);
  const approval = await text(page, '#effect-records .effect-approval');
  check('entry: who approved, beside the effect', approval === 'not asked', approval);
  await fits(page, 'entry');
  check('input, output and plan linked', (await page.locator('#record a.input-link, #record a.output-link, #record a.plan-link').count()) === 3);
  check('entry names its world', (await page.locator('#entry a.world-link').count()) === 1);
  const rows = page.locator('#effect-records tr.effect-row');
  check('one effect record', (await rows.count()) === 1);
  const status = await text(page, '#effect-records .effect-status');
  check('effect status ok', status === 'ok', status);
  const cost = Number(await text(page, '#effect-records .effect-cost'));
  const budget = await text(page, '#effect-records .effect-budget');
  const [before, after] = budget.split('→').map((s) => Number(s.trim()));
  check('budget figures shown', before === 1000 && after === before - cost && cost >= 1, `${budget} cost ${cost}`);
  const href = await page.locator('#effect-records a.effect-link').getAttribute('href');
  check('effect link is the reply’s record', href === `/workbench?object=${write.record}`, `${href} vs ${write.record}`);
  await page.screenshot({ path: join(artifacts, 'workbench.png'), fullPage: true });
});

let requestHref = null;
await step('entry to effect record to payload', async () => {
  await page.goto(entryUrl);
  const budget = await text(page, '#effect-records .effect-budget');
  await page.locator('#effect-records a.effect-link').click();
  await page.waitForLoadState();
  check('effect record page', (await text(page, '#semantic-id')) === 'world/effect-record/v2');
  // The record says what happened, in words, with what it belongs to linked.
  const happened = {};
  for (const k of ['effect', 'decision', 'cost', 'budget', 'approval', 'call', 'episode']) {
    happened[k] = await text(page, `#happened-${k}`);
  }
  check('record: the effect and its decision', happened.effect === 'Workspace.Write' && happened.decision === 'allowed; it ran', JSON.stringify(happened));
  check('record: cost and budget before → after', happened.budget === budget && Number(happened.cost) >= 1, JSON.stringify(happened));
  check('record: no approval asked', happened.approval === 'no approval was asked', happened.approval);
  check('record: its call', happened.call === 'a2a:demo:write-page', happened.call);
  const links = await page.locator('#what-happened a.entry-link, #what-happened a.episode-link').evaluateAll((as) => as.map((a) => a.getAttribute('href')));
  check('record: its entry and episode linked', links.join(' ') === `/workbench?entry=${write.entry} /workbench/episodes/demo`, links.join(' '));
  await fits(page, 'record');
  await page.screenshot({ path: join(artifacts, 'workbench-record.png'), fullPage: true });
  const referrers = await text(page, '#referrers');
  check('referrers name the invocation record', referrers.includes('world/invocation-record/v2'), referrers);
  await page.locator('a.payload-link').click();
  await page.waitForLoadState();
  check('payload url', page.url().endsWith('&payload=1'), page.url());
  check('payload is JSON', (await text(page, '#payload-info')).includes('JSON'));
  const record = JSON.parse(await page.locator('#payload').innerText());
  check(
    'payload matches the entry page',
    record.allowed === true && record.failed === false && budget === `${record.budgetBefore} → ${record.budgetAfter}`,
    JSON.stringify(record),
  );
  check('payload refs are links', (await page.locator('#payload a.ref-link').count()) === 2);
  requestHref = await page.locator('#payload a.ref-link', { hasText: record.requestRef }).getAttribute('href');
  await page.screenshot({ path: join(artifacts, 'workbench-payload.png'), fullPage: true });
});

// The objects holding the `<script>` text: the write's request (length-prefixed, not JSON; its
// JSON part escapes `<` as \u003c) and the read's result (JSON). Each payload must be shown as
// text exactly: the raw bytes (from the REST route) verbatim, or their pretty JSON.
async function rawPayload(ref) {
  const r = await fetch(`${base}/v1/objects/${ref}?payload=true`);
  return Buffer.from((await r.json()).payload, 'base64').toString('utf8');
}
async function scriptShownAsText(name, ref, kind) {
  await step(name, async () => {
    const raw = await rawPayload(ref);
    let expected = raw;
    try {
      expected = JSON.stringify(JSON.parse(raw), null, 2);
    } catch {}
    check(`${name}: holds the script text`, expected.includes(SCRIPT_TEXT) || raw.includes('\\u003cscript\\u003e'), raw);
    const resp = await page.goto(`${base}/workbench?object=${ref}&payload=1`);
    check(`${name}: status 200`, resp.status() === 200);
    const info = await text(page, '#payload-info');
    check(`${name}: ${kind}`, info.includes(kind), info);
    const shown = await page.locator('#payload').innerText();
    check(`${name}: shown as text, exactly`, shown === expected, shown.slice(0, 300));
    check(`${name}: no script element`, (await scripts()) === 0);
  });
}
await step('request object', async () => {
  if (!requestHref) throw new Error('no request link found');
  await page.goto(`${base}${requestHref}`);
  check('request object kind', (await text(page, '#semantic-id')) === 'world/effect-request/v1');
});
if (requestHref) await scriptShownAsText('write request payload', requestHref.split('=')[1], 'not JSON');
const readResult = worldBlock(readPage);
let resultRef = null;
await step('read result link', async () => {
  await page.goto(`${base}/workbench?object=${readResult.record}&payload=1`);
  resultRef = JSON.parse(await page.locator('#payload').innerText()).resultRef;
});
if (resultRef) {
  await scriptShownAsText('read result payload', resultRef, 'JSON');
  const resp = await page.goto(`${base}/workbench?object=${resultRef}&payload=1`);
  check('read result: literal <script> on the page', (await page.locator('#payload').innerText()).includes(SCRIPT_TEXT));
  check('read result: escaped in the source', (await resp.text()).includes('&lt;script&gt;alert(1)&lt;/script&gt;'));
  check('read result: no script element', (await scripts()) === 0);
  await page.screenshot({ path: join(artifacts, 'workbench-script.png'), fullPage: true });
}

await step('paging', async () => {
  await page.goto(`${base}/workbench?from=2`);
  const indices = await page.locator('#log a.entry-link').allInnerTexts();
  check('from=2 shows entries 3 and 2', indices.join(',') === '3,2', indices.join(','));
  check('the older page says which entries it shows', (await text(page, '#prev-page')) === 'older: #0–#1 ›');
  await page.locator('#prev-page').click();
  await page.waitForLoadState();
  check('previous page', page.url() === `${base}/workbench?from=0`, page.url());
});

await step('world view', async () => {
  await page.goto(entryUrl);
  await page.locator('#entry a.world-link').click();
  await page.waitForLoadState();
  const w = await text(page, '#world');
  check('world revision is the entry index', new RegExp(`revision\\s+${write.entry}\\b`).test(w), w);
  await page.locator('#world a.entry-link').click();
  await page.waitForLoadState();
  check('world links back to its entry', page.url() === entryUrl, page.url());
});

for (const [name, query, status] of [
  ['unknown parameter is 400', '?bogus=1', 400],
  ['repeated parameter is 400', '?from=0&from=1', 400],
  ['reference-only commitsAfter is 400', '?commitsAfter=x', 400],
  ['malformed ref is 400', '?object=sha256:nope', 400],
  ['absent entry is 404', '?entry=999', 404],
  ['hostile parameter is escaped', '?%3Cscript%3Ealert(1)%3C%2Fscript%3E=1', 400],
]) {
  await step(name, async () => {
    const resp = await page.goto(`${base}/workbench${query}`);
    const err = await text(page, '#error');
    check(name, resp.status() === status && err.length > 0 && (await scripts()) === 0, `${resp.status()} ${err}`);
  });
}

check('read of hello.txt committed', typeof worldBlock(readHello).entry === 'number');
await close();
