// Browser tests of the logit lens view (tiny random GPT-2 and Llama, with their language-model heads): a stages × positions table, each cell the
// most probable token coloured by its probability, the hovered or clicked cell's top k above it.
//
// Run by `cargo test --release --test suite html_report:: -- --include-ignored`, which writes
// the report with the CLI into $ATTNVIZ_ARTIFACTS beside the CLI's JSON export of the same run:
// every expected token and probability here comes from that JSON (`logit_lens`), not the page.

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
  return JSON.parse(readFileSync(file, 'utf8')).logit_lens;
}

async function ready(page) {
  const done = () => document.documentElement.dataset.ready === 'true' || document.querySelector('#status.error');
  // Puppeteer (Firefox) takes the options second, Playwright (Chromium) third.
  if (typeof page.setViewport === 'function') await page.waitForFunction(done, { timeout: 20000 });
  else await page.waitForFunction(done, null, { timeout: 20000 });
  const failure = await page.$eval('#status', (s) => (s.classList.contains('error') ? s.textContent : ''));
  assert.equal(failure, '', 'the page reported an error');
}

/** What the page shows: the tab, the header, every cell's text and colour, the strip's text. */
const shown = (page) => page.evaluate(async () => {
  await window.attnviz.settled();
  const cells = [...document.querySelectorAll('#lens-grid .lens-cell')];
  return {
    view: window.attnviz.state.view,
    tab: !document.getElementById('tab-lens').hidden,
    visible: !document.getElementById('view-lens').hidden,
    positions: [...document.querySelectorAll('#lens-grid .lens-pos')].map((e) => e.textContent),
    stages: [...document.querySelectorAll('#lens-grid .lens-stage')].map((e) => e.textContent),
    cells: cells.map((c) => ({ s: Number(c.dataset.stage), p: Number(c.dataset.pos), text: c.textContent, bg: getComputedStyle(c).backgroundColor })),
    strip: [...document.querySelectorAll('#lens-top > span:not(.lens-where)')].map((e) => e.textContent),
    where: document.querySelector('#lens-top .lens-where').textContent,
    width: document.documentElement.scrollWidth,
    viewport: window.innerWidth,
  };
});

/** The cell text the page should show for a lens token, by the display rules of
 *  src/attention/display.rs: a token of spaces only is ␣, a word's leading space is dropped, a
 *  line feed is ↵, a tab ⇥, other control and format characters ⟨U+XXXX⟩. */
function cellText(text) {
  if (text.length && /^ +$/.test(text)) return '␣'.repeat(Math.min(3, text.length));
  const rest = text.startsWith(' ') ? text.slice(1) : text;
  return Array.from(rest).map((c) => {
    if (c === '\n') return '↵';
    if (c === '\t') return '⇥';
    if (/^[\p{Cc}\p{Cf}]$/u.test(c)) return '⟨U+' + c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0') + '⟩';
    return c;
  }).join('');
}

function checkTable(got, lens, what) {
  assert.equal(got.view, 'lens', what + ': a report written with the lens opens on it');
  assert.ok(got.tab && got.visible, what + ': the lens tab and view are shown');
  assert.deepEqual(got.positions, lens.positions, what + ': the column heads are the positions');
  assert.deepEqual(got.stages, lens.stages, what + ': the row heads are the stages');
  assert.equal(got.cells.length, lens.stages.length * lens.positions.length, what + ': one cell per stage and position');
  for (const c of got.cells) {
    assert.equal(c.text, cellText(lens.top[c.s][c.p][0].text), what + ': cell ' + c.s + ',' + c.p + ' shows the top token');
  }
  // Colour follows probability: the cells of the most and least probable top tokens differ.
  const byProb = got.cells.slice().sort((a, b) => lens.top[a.s][a.p][0].prob - lens.top[b.s][b.p][0].prob);
  assert.notEqual(byProb[0].bg, byProb[byProb.length - 1].bg, what + ': cells are coloured by probability');
  assert.ok(got.width <= got.viewport + 1, what + ': the page does not overflow sideways (' + got.width + ' > ' + got.viewport + ')');
}

function checkStrip(got, lens, s, p, what) {
  assert.ok(got.where.startsWith(lens.stages[s] + ' · position ' + p), what + ': the strip names the cell: ' + got.where);
  const want = lens.top[s][p].map((t) => cellText(t.text) + (100 * t.prob).toFixed(1) + '%');
  assert.deepEqual(got.strip, want, what + ': the strip lists the cell\'s top ' + lens.k + ' with their probabilities');
}

async function exercise(page, name, what) {
  const lens = expectations(name);
  await page.goto(pathToFileURL(join(ART, name + '.html')).href);
  await ready(page);
  let got = await shown(page);
  checkTable(got, lens, what);
  // On load, the last stage at the last position: the model's own prediction there.
  const S = lens.stages.length - 1;
  const P = lens.positions.length - 1;
  checkStrip(got, lens, S, P, what + ' on load');
  // Hover another cell: the strip follows it.
  await page.hover('#lens-grid .lens-cell[data-stage="1"][data-pos="0"]');
  checkStrip(await shown(page), lens, 1, 0, what + ' hovered');
  // Click pins it: hovering elsewhere no longer changes the strip; a second click unpins.
  await page.click('#lens-grid .lens-cell[data-stage="0"][data-pos="' + P + '"]');
  await page.hover('#lens-grid .lens-cell[data-stage="1"][data-pos="0"]');
  got = await shown(page);
  checkStrip(got, lens, 0, P, what + ' pinned');
  assert.match(got.where, /pinned/, what + ': the strip says the cell is pinned');
  await page.click('#lens-grid .lens-cell[data-stage="0"][data-pos="' + P + '"]');
  await page.hover('#lens-grid .lens-cell[data-stage="1"][data-pos="0"]');
  checkStrip(await shown(page), lens, 1, 0, what + ' unpinned');
  // Key 1 leaves the lens view, 7 comes back.
  await page.keyboard.press('1');
  assert.equal((await shown(page)).view, 'head', what + ': key 1 opens the head view');
  await page.keyboard.press('7');
  assert.equal((await shown(page)).view, 'lens', what + ': key 7 opens the lens view');
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

for (const [name, what] of [['lens-gpt2', 'GPT-2'], ['lens-llama', 'Llama']]) {
  test('chromium: the lens view of a ' + what + ' shows the JSON\'s lens', async () => {
    const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await exercise(page, name, 'chromium ' + what);
    await page.screenshot({ path: join(SCREENS, name + '-chromium.png') });
    assert.deepEqual(errors, [], 'no script errors');
    await page.close();
  });
}

test('chromium: a report without the lens has no lens tab, and #view=lens falls back to the head view', async () => {
  const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
  await page.goto(pathToFileURL(join(ART, 'lens-gpt2-none.html')).href + '#view=lens');
  await ready(page);
  const got = await page.evaluate(() => ({ tab: document.getElementById('tab-lens').hidden, view: window.attnviz.state.view }));
  assert.deepEqual(got, { tab: true, view: 'head' });
  await page.keyboard.press('7');
  assert.equal(await page.evaluate(() => window.attnviz.state.view), 'head', 'key 7 does nothing without a lens');
  await page.close();
});

test('firefox: the lens view of a decoder shows the JSON\'s lens', async () => {
  const ff = await puppeteer.launch({ browser: 'firefox', executablePath: process.env.FIREFOX || '/usr/bin/firefox-esr', headless: true });
  try {
    const page = await ff.newPage();
    await page.setViewport({ width: 1200, height: 800 });
    await exercise(page, 'lens-gpt2', 'firefox decoder');
    await page.screenshot({ path: join(SCREENS, 'lens-gpt2-firefox.png') });
  } finally {
    await ff.close();
  }
});
