// Drives headless Chromium through /workbench/episodes and
// /workbench/episodes/demo after run.sh's scripted agent session: the
// numbers (calls, spend against the budget, denials by label), the diffs of
// the rewrite and the edit, the commands with their argv and exit codes, the
// links to records and entries, paging, the 400s and 404, and screenshots.
// run.sh sets WORKBENCH_SESSION (the session's A2A replies, one a line) and
// what harness.mjs reads.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CSP, artifacts, base, check, fits, open, openDetails, step, text, worldBlock } from './harness.mjs';

const replies = Object.fromEntries(
  readFileSync(process.env.WORKBENCH_SESSION, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l).result)
    .map((r) => [r.id, r]),
);
const data = (id) => replies[id].artifacts[0].parts[0].data;
// workbench.mjs's three calls come first: the session's calls are #3 to #8.
const position = { 'w-app': 3, 'x-fail': 4, 'w-fix': 5, 'e-say': 6, 'x-pass': 7, 'w-over': 8 };
const CALLS = 9;
const episode = `${base}/workbench/episodes/demo`;

const { page, scripts, close } = await open('episodes');
const cells = (row, sel) => row.locator(sel).allInnerTexts();

await step('main page links the episodes', async () => {
  await page.goto(`${base}/workbench`);
  await page.locator('#episodes-link').click();
  await page.waitForLoadState();
  check('episodes url', page.url() === `${base}/workbench/episodes`, page.url());
});

await step('episodes list', async () => {
  const resp = await page.goto(`${base}/workbench/episodes`);
  check('list status 200', resp.status() === 200, String(resp.status()));
  check('list strict csp', resp.headers()['content-security-policy'] === CSP);
  const row = page.locator('#episode-demo');
  check('one row for demo', (await row.count()) === 1);
  check('list: calls', (await text(row, '.calls')) === String(CALLS), await text(row, '.calls'));
  check('list: states', (await text(row, '.states')) === `committed ${CALLS}`, await text(row, '.states'));
  check('list: effects by status', (await text(row, '.effects')) === 'denied 1 · ok 8', await text(row, '.effects'));
  const grants = {};
  for (const g of await row.locator('.grant').all()) {
    grants[await text(g, '.grant-effect')] = `${await text(g, '.grant-spent')}/${await text(g, '.grant-budget')}`;
  }
  const want = {
    'Workspace.Exec': '2/1000', 'Workspace.Read': '2/1000', 'Workspace.Write': '4/1000', 'World.Commit': '0/1000',
    'world.apply': '0/1000',
  };
  check('list: spend against budget per grant', JSON.stringify(grants) === JSON.stringify(want), JSON.stringify(grants));
  const meter = await row.locator('svg.meter title').allTextContents();
  check('list: each meter says its numbers', meter.includes('Workspace.Write on worktree: 4 spent of 1000'), meter.join('; '));
  const activity = await row.locator('svg.columns rect title').allTextContents();
  const counted = activity.map((t) => Number(t.match(/: (\d+) calls?$/)?.[1] ?? NaN)).reduce((a, b) => a + b, 0);
  check('list: activity columns add up to the calls', counted === CALLS, activity.join('; '));
  const box = await row.locator('svg.meter').first().boundingBox();
  check('list: meters are drawn', box && box.width >= 100 && box.height > 0, JSON.stringify(box));
  check('list: no script element', (await scripts()) === 0);
  check('list: one approval waits for a person', (await text(page, '#waiting-count')) === '1');
  const decide = await text(page, '#waiting .approval-commands');
  check('list: the commands that decide it', /^worldd approve ap-[0-9a-f]{16} · worldd deny ap-[0-9a-f]{16}$/.test(decide), decide);
  await fits(page, 'episodes list');
  await page.screenshot({ path: join(artifacts, 'workbench-episodes.png'), fullPage: true });
  await row.locator('a.episode-link').click();
  await page.waitForLoadState();
  check('list links the episode', page.url() === episode, page.url());
});

await step('episode summary, spend and denials', async () => {
  const resp = await page.goto(episode);
  check('episode status 200', resp.status() === 200, String(resp.status()));
  check('episode strict csp', resp.headers()['content-security-policy'] === CSP);
  check('summary: calls', (await text(page, '#summary-calls')) === String(CALLS));
  check('episode: one approval waits for a person', (await text(page, '#waiting-count')) === '1');
  const write = page.locator('#spend-table tr.spend-row', { hasText: 'Workspace.Write' });
  const figures = await Promise.all(
    ['before', 'page', 'after', 'total', 'budget', 'remaining'].map((c) => text(write, `.spend-${c}`)),
  );
  check('spend table: write before/page/after/now/budget/remaining', figures.join(' ') === '0 4 4 4 1000 996', figures.join(' '));
  const exec = page.locator('#spend-table tr.spend-row', { hasText: 'Workspace.Exec' });
  check('spend table: exec spent 2 of 1000', `${await text(exec, '.spend-total')}/${await text(exec, '.spend-budget')}` === '2/1000');
  const charts = page.locator('figure.spend-chart');
  const names = await charts.locator('figcaption .spend-name').allInnerTexts();
  check('a spend chart per grant spent on', names.join('; ') === 'Workspace.Exec worktree; Workspace.Read worktree; Workspace.Write worktree', names.join('; '));
  const writeChart = charts.filter({ hasText: 'Workspace.Write' });
  const dots = await writeChart.locator('circle.dot title').allTextContents();
  const totals = dots.map((t) => Number(t.match(/: (\d+) spent/)?.[1]));
  check('write chart: running total 1 to 4', totals.join(',') === '1,2,3,4', dots.join('; '));
  check('write chart: the edit is a step', dots.some((t) => t.startsWith(`#${position['e-say']} ailang-edit ended `)), dots.join('; '));
  // 4 spent of 1000: the chart spans what was spent, and says the budget as a number.
  check('write chart: no budget line far above the steps', (await writeChart.locator('line.limit').count()) === 0);
  const budget = await writeChart.locator('text.budget').allTextContents();
  check('write chart: the budget written', budget.length === 1 && budget[0].startsWith('budget 1000'), budget.join('; '));
  const words = await text(writeChart, '.spend-words');
  check('write chart: its numbers in words', words === '0 → 4 over these calls; 4 of 1000 spent, 996 left', words);
  const box = await writeChart.locator('svg.steps').boundingBox();
  check('write chart drawn', box && box.width >= 300 && box.height >= 100, JSON.stringify(box));
  // Every chart's line spans its plot's height: the marks say something.
  const spans = await page.locator('svg.steps').evaluateAll((svgs) =>
    svgs.map((svg) => {
      const axis = svg.querySelector('line.axis');
      const plot = axis.y2.baseVal.value - axis.y1.baseVal.value;
      return svg.querySelector('polyline.line').getBBox().height / plot;
    }),
  );
  check('every spend chart spans its plot', spans.length === 3 && spans.every((r) => r > 0.95 && r <= 1.01), spans.join(', '));
  await fits(page, 'episode');
  const denials = page.locator('#denials-table tr.denial');
  check('denials: one label', (await denials.count()) === 1);
  check('denials: denied:budget 1', `${await text(denials, '.denial-label')} ${await text(denials, '.denial-count')}` === 'denied:budget 1');
  const bar = await page.locator('svg.bars rect.bar title').allTextContents();
  check('denials chart says its numbers', bar.join('; ') === 'denied:budget: 1', bar.join('; '));
  await page.screenshot({ path: join(artifacts, 'workbench-episode.png'), fullPage: true });
});

await step('timeline', async () => {
  await page.goto(episode);
  const rows = page.locator('#timeline tr.call');
  check('timeline: every call on the newest page', (await rows.count()) === CALLS, String(await rows.count()));
  const order = await page.locator('#timeline tr.call td.position').allInnerTexts();
  check('timeline: newest first', order.join(',') === '8,7,6,5,4,3,2,1,0', order.join(','));
  check('timeline: the heading says what it shows', (await text(page, '#calls')) === `Calls #0–#8 of ${CALLS}, newest first`);
  // What each call did, in words.
  const said = async (pos) => (await page.locator(`#call-${pos} .said`).first().innerText()).split('\n')[0];
  for (const [pos, want] of [
    [0, /^read hello\.txt$/],
    [1, /^wrote page\.html, \+1 line$/],
    [2, /^read page\.html$/],
    [position['w-app'], /^wrote app\.py, \+5 lines$/],
    [position['x-fail'], /^ran python3 app\.py → exit 1 in \d+(\.\d)? m?s$/],
    [position['w-fix'], /^wrote app\.py, \+1 −1 lines$/],
    [position['e-say'], /^edited app\.py, \+1 −1 lines$/],
    [position['x-pass'], /^ran python3 app\.py → exit 0 in \d+(\.\d)? m?s$/],
    [position['w-over'], /^tried to write app\.py — denied: budget$/],
  ]) {
    const got = await said(pos);
    check(`timeline #${pos} says: ${got}`, want.test(got), `${got} !~ ${want}`);
  }
  const summaries = await page.locator(`#call-${position['x-fail']} details summary`).allInnerTexts();
  const long = page.locator('#call-0 .task');
  check('timeline: a 64-hex task id whole in its title and text', (await long.getAttribute('title')) === process.env.WORKBENCH_LONG_TASK && (await long.innerText()) === process.env.WORKBENCH_LONG_TASK);
  const shownWidth = (await long.boundingBox())?.width ?? 1e9;
  check('timeline: and short on the page', shownWidth < 120, String(shownWidth));
  check('timeline: the output a click away', summaries.join(',') === 'output', summaries.join(','));
  check('timeline: the diff a click away', (await page.locator(`#call-${position['w-fix']} details summary`).allInnerTexts()).join(',') === 'diff');
  for (const [id, pos] of Object.entries(position)) {
    const row = page.locator(`#call-${pos}`);
    const { entry, record } = worldBlock(replies[id]);
    check(`timeline #${pos}: task ${id}`, (await text(row, '.task')) === id, await text(row, '.task'));
    check(`timeline #${pos}: the whole task id on hover`, (await row.locator('.task').getAttribute('title')) === id);
    const recordHref = await row.locator('a.effect-link').getAttribute('href');
    check(`timeline #${pos}: links its effect record`, recordHref === `/workbench?object=${record}`, recordHref);
    const entryHref = await row.locator('a.entry-link').getAttribute('href');
    check(`timeline #${pos}: links its entry`, entryHref === `/workbench?entry=${entry}`, entryHref);
  }
  const over = page.locator(`#call-${position['w-over']}`);
  check('timeline: the denial and its label', (await text(over, '.call-status')) === 'denied denied:budget', await text(over, '.call-status'));
  check('timeline: the denial leaves the small session nothing', (await text(over, '.call-budget')) === '0');
  const fix = page.locator(`#call-${position['w-fix']}`);
  check('timeline: a write costs 1', (await text(fix, '.call-cost')) === '1');
  check('timeline: the denied write paid nothing', (await text(over, '.call-cost')) === '0 of 1 asked', await text(over, '.call-cost'));
  check('timeline: budget after the third write', (await text(fix, '.call-budget')) === '997', await text(fix, '.call-budget'));
  await fix.locator('a.effect-link').click();
  await page.waitForLoadState();
  check('record link opens the effect record', (await text(page, '#semantic-id')) === 'world/effect-record/v2');
  check('the record names its call', (await text(page, '#happened-call')) === 'a2a:demo:w-fix');
  await page.goto(`${base}/workbench?object=${worldBlock(replies['w-over']).record}`);
  const decision = await text(page, '#happened-decision');
  check('a denied record says so', decision === 'denied (denied:budget)', decision);
  check('a denied record: budget before → after', (await text(page, '#happened-budget')) === '0 → 0', await text(page, '#happened-budget'));
  await page.goto(episode);
  await page.locator(`#call-${position['w-fix']} a.entry-link`).click();
  await page.waitForLoadState();
  check('entry link opens its entry', (await text(page, '#record-invocationId')) === 'a2a:demo:w-fix');
});

await step('what changed', async () => {
  await page.goto(episode);
  await openDetails(page);
  const change = (id) => page.locator(`#change-${position[id]}-0`);
  const first = change('w-app');
  check('first write: whole content', (await text(first, '.change-note')).includes('the whole content'), await text(first, '.change-note'));
  check('first write: five added lines', (await first.locator('.add').count()) === 5);
  const fix = change('w-fix');
  check('rewrite: against the first write', (await text(fix, '.change-note')) === `against the write of #${position['w-app']}`, await text(fix, '.change-note'));
  check('rewrite: the removed line', (await cells(fix, '.del')).join('|') === '-    return a - b', (await cells(fix, '.del')).join('|'));
  check('rewrite: the added line', (await cells(fix, '.add')).join('|') === '+    return a + b', (await cells(fix, '.add')).join('|'));
  const edit = change('e-say');
  check('edit: its old text removed', (await cells(edit, '.del')).join('|') === '-print(add(2, 3))', (await cells(edit, '.del')).join('|'));
  check('edit: its new text added', (await cells(edit, '.add')).join('|') === '+print("sum", add(2, 3))', (await cells(edit, '.add')).join('|'));
  // A denied write wrote nothing: its words say so, and there is no diff to open.
  const over = page.locator(`#call-${position['w-over']}`);
  check('denied write: no diff to open', (await over.locator('details, pre.diff').count()) === 0);
  const hostile = page.locator('#change-1-0 .add');
  check('a written <script> is diff text', (await hostile.allInnerTexts()).join('') === '+<h1>hi</h1><script>alert(1)</script>');
  check('changes: no script element', (await scripts()) === 0);
  await fits(page, 'episode, every diff and output open');
  await page.locator('#timeline').screenshot({ path: join(artifacts, 'workbench-episode-calls-open.png') });
});

await step('what ran', async () => {
  await page.goto(episode);
  await openDetails(page);
  for (const [id, code] of [['x-fail', '1'], ['x-pass', '0']]) {
    const row = page.locator(`#run-${position[id]}-0`);
    const argv = await cells(row, 'code.arg');
    check(`${id}: argv as run`, JSON.stringify(argv) === JSON.stringify(data(id).argv), JSON.stringify(argv));
    check(`${id}: exit code ${code}`, (await text(row, '.exit-code')) === code && String(data(id).exit_code) === code);
    check(`${id}: duration`, (await text(row, '.duration')) === `${data(id).duration_ms} ms`, await text(row, '.duration'));
  }
  const failed = page.locator(`#run-${position['x-fail']}-0`);
  check('failing command: its stdout', (await text(failed, 'pre.stdout')).trim() === '-1');
  check('failing command: its stderr', (await text(failed, 'pre.stderr')).includes('AssertionError: add is wrong'));
  check('passing command: its stdout', (await text(page.locator(`#run-${position['x-pass']}-0`), 'pre.stdout')).trim() === 'sum 5');
  await page.locator(`#call-${position['x-fail']}`).screenshot({ path: join(artifacts, 'workbench-episode-run.png') });
});

await step('paging', async () => {
  await page.goto(`${episode}?from=5`);
  const shown = await page.locator('#timeline tr.call td.position').allInnerTexts();
  check('from=5 shows #8 to #5', shown.join(',') === '8,7,6,5', shown.join(','));
  check('no newer page after the newest calls', (await page.locator('#later-calls').count()) === 0);
  check('the older page says which calls it shows', (await text(page, '#earlier-calls')) === 'older: #0–#4 ›', await text(page, '#earlier-calls'));
  // The rewrite is still compared with the write before the page.
  await openDetails(page);
  const note = await text(page, `#change-${position['w-fix']}-0 .change-note`);
  check('a page reads back for what a write replaced', note === `against the write of #${position['w-app']}`, note);
  const write = page.locator('#spend-table tr.spend-row', { hasText: 'Workspace.Write' });
  check('spend set on the running total', `${await text(write, '.spend-before')} ${await text(write, '.spend-page')}` === '2 2');
  await page.locator('#earlier-calls').click();
  await page.waitForLoadState();
  check('earlier page', page.url() === `${episode}?from=0`, page.url());
});

for (const [name, path, status] of [
  ['list: unknown parameter is 400', '/workbench/episodes?bogus=1', 400],
  ['list: bad cursor is 400', '/workbench/episodes?after=nope', 400],
  ['episode: bad from is 400', '/workbench/episodes/demo?from=x', 400],
  ['episode: repeated from is 400', '/workbench/episodes/demo?from=1&from=2', 400],
  ['episode: malformed name is 400', '/workbench/episodes/Not_An_Episode', 400],
  ['episode: hostile name is escaped', '/workbench/episodes/%3Cscript%3Ealert(1)%3C%2Fscript%3E', 400],
  ['unknown episode is 404', '/workbench/episodes/nosuch', 404],
]) {
  await step(name, async () => {
    const resp = await page.goto(`${base}${path}`);
    const err = await text(page, '#error');
    check(name, resp.status() === status && err.length > 0 && (await scripts()) === 0, `${resp.status()} ${err}`);
  });
}

await close();
