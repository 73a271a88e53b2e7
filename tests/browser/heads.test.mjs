// Browser tests of the heads view (a tiny random GPT-2 with its language-model head): per-head
// direct logit attribution and head ablation as layers × heads grids, the heads ranked beside.
//
// Run by `cargo test --release --test suite html_report:: -- --include-ignored`, which writes
// the report with the CLI into $ATTNVIZ_ARTIFACTS beside the CLI's JSON export of the same run:
// every expected number here comes from that JSON (`head_attribution`, `head_ablation`).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';

const ART = resolve(process.env.ATTNVIZ_ARTIFACTS || '../artifacts/html');
const SCREENS = join(ART, 'screens');
mkdirSync(SCREENS, { recursive: true });

function expectations(name) {
  const file = join(ART, name + '.json');
  assert.ok(existsSync(file), file + ' missing: run `cargo test --release --test suite html_report:: -- --include-ignored`');
  return JSON.parse(readFileSync(file, 'utf8'));
}

async function ready(page) {
  const done = () => document.documentElement.dataset.ready === 'true' || document.querySelector('#status.error');
  if (typeof page.setViewport === 'function') await page.waitForFunction(done, { timeout: 20000 });
  else await page.waitForFunction(done, null, { timeout: 20000 });
  const failure = await page.$eval('#status', (s) => (s.classList.contains('error') ? s.textContent : ''));
  assert.equal(failure, '', 'the page reported an error');
}

/** A number as the view writes it: signed, a true minus, three decimals (one from 100 up). */
function num(v) {
  return (v > 0 ? '+' : v < 0 ? '−' : '') + Math.abs(v).toFixed(Math.abs(v) >= 100 ? 1 : 3);
}

const shown = (page) => page.evaluate(async () => {
  await window.attnviz.settled();
  return {
    view: window.attnviz.state.view,
    tab: !document.getElementById('tab-heads').hidden,
    visible: !document.getElementById('view-heads').hidden,
    cells: [...document.querySelectorAll('#heads-grid .heads-cell')].map((c) => ({
      l: Number(c.dataset.layer), h: Number(c.dataset.head), text: c.textContent, bg: getComputedStyle(c).backgroundColor,
    })),
    ranked: [...document.querySelectorAll('#heads-ranked li')].map((li) => [...li.querySelectorAll('span')].slice(0, 2).map((s) => s.textContent).join(' ')),
    value: document.getElementById('heads-value').textContent,
    desc: document.getElementById('heads-desc').textContent,
    injected: document.querySelectorAll('#typed').length,
    width: document.documentElement.scrollWidth,
    viewport: window.innerWidth,
  };
});

function checkGrid(got, part, grid, what) {
  assert.equal(got.cells.length, part.layers * part.heads, what + ': one cell per layer and head');
  for (const c of got.cells) assert.equal(c.text, num(grid[c.l][c.h]), what + ': cell L' + c.l + ' H' + c.h);
  const want = part.ranked.map((r) => 'L' + r.layer + ' H' + r.head + ' ' + num(r.value));
  assert.deepEqual(got.ranked, want, what + ': the ranked list is the JSON\'s');
  const byValue = got.cells.slice().sort((a, b) => grid[a.l][a.h] - grid[b.l][b.h]);
  assert.notEqual(byValue[0].bg, byValue[byValue.length - 1].bg, what + ': cells are coloured by value');
  assert.ok(got.desc.includes(JSON.stringify(part.target.text)), what + ': the description names the target as text: ' + got.desc);
  assert.ok(got.width <= got.viewport + 1, what + ': the page does not overflow sideways (' + got.width + ' > ' + got.viewport + ')');
}

async function exercise(page, name, what) {
  const json = expectations(name);
  const att = json.head_attribution;
  const abl = json.head_ablation;
  await page.goto(pathToFileURL(join(ART, name + '.html')).href);
  await ready(page);
  let got = await shown(page);
  assert.equal(got.view, 'heads', what + ': a report written with attribution opens on the heads view');
  assert.ok(got.tab && got.visible, what + ': the heads tab and view are shown');
  assert.equal(got.injected, 0, what + ': the typed <span id=typed> is text, not markup');
  checkGrid(got, att, att.per_head, what + ' attribution');
  const top = att.ranked[0];
  assert.ok(got.value.startsWith('layer ' + top.layer + ' · head ' + top.head), what + ': on load the strip shows the top head: ' + got.value);
  // Hover a cell: the strip follows it.
  await page.hover('#heads-grid .heads-cell[data-layer="0"][data-head="1"]');
  got = await shown(page);
  assert.ok(got.value.includes('layer 0 · head 1') && got.value.includes(num(att.per_head[0][1])), what + ' hovered: ' + got.value);
  // The ablation's grid behind its button.
  await page.click('#heads-pick button[data-part="ablation"]');
  got = await shown(page);
  checkGrid(got, abl, abl.delta, what + ' ablation');
  assert.ok(got.desc.includes(abl.mode === 'mean' ? 'its mean' : 'zeroed'), what + ': the ablation says its mode');
  // Key 1 leaves the view, 8 comes back.
  await page.keyboard.press('1');
  assert.equal((await shown(page)).view, 'head', what + ': key 1 opens the head view');
  await page.keyboard.press('8');
  assert.equal((await shown(page)).view, 'heads', what + ': key 8 opens the heads view');
}

let browser;
before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--no-first-run'],
  });
});
after(async () => { if (browser) await browser.close(); });

for (const width of [1200, 420]) {
  test('chromium ' + width + ' px: the heads view shows the JSON\'s attribution and ablation', async () => {
    const page = await browser.newPage({ viewport: { width, height: 800 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await exercise(page, 'heads-gpt2', 'chromium ' + width);
    await page.screenshot({ path: join(SCREENS, 'heads-gpt2-chromium-' + width + '.png') });
    assert.deepEqual(errors, [], 'no script errors');
    await page.close();
  });
}

test('chromium: a report without attribution has no heads tab, and #view=heads falls back to the head view', async () => {
  const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(pathToFileURL(join(ART, 'lens-gpt2-none.html')).href + '#view=heads');
  await ready(page);
  const got = await page.evaluate(() => ({ tab: document.getElementById('tab-heads').hidden, view: window.attnviz.state.view }));
  assert.deepEqual(got, { tab: true, view: 'head' });
  await page.keyboard.press('8');
  assert.equal(await page.evaluate(() => window.attnviz.state.view), 'head', 'key 8 does nothing without attribution');
  assert.deepEqual(errors, [], 'no script errors');
  await page.close();
});

test('firefox: the heads view shows the JSON\'s attribution and ablation', async () => {
  const ff = await puppeteer.launch({ browser: 'firefox', executablePath: process.env.FIREFOX || '/usr/bin/firefox-esr', headless: true });
  try {
    const page = await ff.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.setViewport({ width: 1200, height: 800 });
    await exercise(page, 'heads-gpt2', 'firefox');
    await page.screenshot({ path: join(SCREENS, 'heads-gpt2-firefox.png') });
    assert.deepEqual(errors, [], 'no script errors');
  } finally {
    await ff.close();
  }
});
