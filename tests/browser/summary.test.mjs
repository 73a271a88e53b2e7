// Browser test of the HTML report of a summarised run (`--summarise --html`, written by
// crates/render/src/html/summary.rs): the matrix view's pooled map, its zoom down to single
// tokens, the head view's links and the stats view, each held to the CLI's JSON export of the
// same run (`summary`), not to the page's own code.
//
// Run by `cargo test --release --test suite summarised:: -- --include-ignored`, which writes
// summary.html and summary.json with the CLI into $ATTNVIZ_ARTIFACTS.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const ART = resolve(process.env.ATTNVIZ_ARTIFACTS || '../artifacts/summary');
const SCREENS = join(ART, 'screens');
mkdirSync(SCREENS, { recursive: true });

function expectations() {
  const file = join(ART, 'summary.json');
  assert.ok(existsSync(file), file + ' missing: run `cargo test --release --test suite summarised:: -- --include-ignored`');
  return JSON.parse(readFileSync(file, 'utf8')).summary;
}

async function ready(page) {
  await page.waitForFunction(() => document.documentElement.dataset.ready === 'true' || document.querySelector('#status.error'), null, { timeout: 30000 });
  const failure = await page.$eval('#status', (s) => (s.classList.contains('error') ? s.textContent : ''));
  assert.equal(failure, '', 'the page reported an error');
}

const HALF_STEP = 0.5 / 65535 + 1e-6;

let browser;
before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--no-first-run'],
  });
});
after(async () => { if (browser) await browser.close(); });

test('chromium: the summarised report shows the JSON\'s summaries in every view', async () => {
  const sum = expectations();
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  const requests = [];
  page.on('request', (r) => { if (!r.url().startsWith('file:') && !r.url().startsWith('data:')) requests.push(r.url()); });
  await page.goto(pathToFileURL(join(ART, 'summary.html')).href);
  await ready(page);
  const meta = await page.evaluate(() => window.attnviz.META);
  const detail = meta.detail;
  const layer = sum.layers[detail];
  assert.equal(meta.layers[detail], layer.layer, 'the detail layer is the JSON\'s');
  assert.equal(meta.pool, sum.pool);
  assert.equal(meta.queries, sum.queries);

  // The pooled map: each JSON block sum divided by its queries.
  const pooled = await page.evaluate(() => Array.from(window.attnviz.sections().pooled));
  const nb = Math.ceil(sum.queries / sum.pool);
  let worst = 0;
  for (let h = 0; h < meta.heads; h++) {
    layer.heads[h].pooled.forEach((row, i) => {
      const queries = Math.min(sum.pool, sum.queries - i * sum.pool);
      row.forEach((v, j) => { worst = Math.max(worst, Math.abs(pooled[(h * nb + i) * nb + j] - v / queries)); });
    });
  }
  assert.ok(worst <= HALF_STEP + 1e-6, 'pooled shares within half a step of the JSON: ' + worst);

  // Zoom to 32 × 32 tokens around query 200: single tokens, each stored top key at its weight.
  const q = Math.min(200, sum.queries - 1);
  await page.evaluate((q) => window.attnviz.setWindow(q - 16, q + 16, q - 24, q + 8), q);
  const drawn = await page.evaluate(() => window.attnviz.drawn());
  assert.equal(drawn.tokens, true, 'a window of 32 tokens shows single tokens');
  const head = meta.head;
  const keys = layer.heads[head].top_keys[q];
  const weights = layer.heads[head].top_weights[q];
  for (let i = 0; i < keys.length; i++) {
    const text = await page.evaluate(([q, k]) => window.attnviz.describeCell(q, k), [q, keys[i]]);
    const got = Number(/weight ([0-9.]+)/.exec(text)[1]);
    assert.ok(Math.abs(got - weights[i]) <= 1e-5 + HALF_STEP, 'top key ' + keys[i] + ' of query ' + q + ': ' + text + ' vs ' + weights[i]);
  }
  // A key that is not a top key (and not masked) is unknown, bounded by the smallest stored weight.
  const other = [...Array(q + 1).keys()].reverse().find((k) => !keys.includes(k));
  if (other !== undefined) {
    const text = await page.evaluate(([q, k]) => window.attnviz.describeCell(q, k), [q, other]);
    assert.match(text, /not stored: at most/, text);
  }
  // A full row asked for: exact everywhere.
  if (sum.rows.length) {
    const r = sum.rows[sum.rows.length - 1];
    await page.evaluate((r) => window.attnviz.setWindow(r - 10, r + 1, Math.max(0, r - 40), r + 1), r);
    for (const k of [0, r - 1, r]) {
      const text = await page.evaluate(([r, k]) => window.attnviz.describeCell(r, k), [r, k]);
      const got = Number(/weight ([0-9.]+)/.exec(text)[1]);
      assert.match(text, /full row kept/);
      assert.ok(Math.abs(got - layer.heads[head].rows[sum.rows.length - 1][k]) <= 1e-5 + HALF_STEP, text);
    }
  }
  await page.screenshot({ path: join(SCREENS, 'summary-matrix-tokens.png'), fullPage: true });
  // Drag a rectangle: the window follows it.
  await page.keyboard.press('0');
  const box = await page.$eval('#matrix', (c) => { const r = c.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width }; });
  await page.mouse.move(box.x + box.w * 0.25, box.y + box.w * 0.25);
  await page.mouse.down();
  await page.mouse.move(box.x + box.w * 0.5, box.y + box.w * 0.5, { steps: 4 });
  await page.mouse.up();
  const win = await page.evaluate(() => window.attnviz.state.win);
  const n = sum.queries;
  assert.ok(Math.abs(win.q0 - n / 4) <= 2 && Math.abs(win.q1 - n / 2) <= 3, 'dragged to the middle quarter: ' + JSON.stringify(win));
  await page.screenshot({ path: join(SCREENS, 'summary-matrix.png'), fullPage: true });

  // Head view: as many links as the JSON has for the window's queries above the threshold.
  await page.keyboard.press('2');
  const from = await page.evaluate(() => window.attnviz.state.from);
  const threshold = await page.evaluate(() => window.attnviz.state.threshold);
  let want = 0;
  for (let h = 0; h < meta.heads; h++) {
    for (let qq = from; qq < Math.min(n, from + 40); qq++) {
      want += layer.heads[h].top_weights[qq].filter((w) => w >= threshold + HALF_STEP || (w >= threshold - HALF_STEP && w > meta.link_threshold)).length;
    }
  }
  const info = await page.$eval('#head-info', (e) => e.textContent);
  const got = Number(/^(\d+) links/.exec(info)[1]);
  assert.ok(Math.abs(got - want) <= 2, 'links drawn: ' + info + ' vs ' + want + ' in the JSON');
  await page.screenshot({ path: join(SCREENS, 'summary-head.png'), fullPage: true });

  // Stats view: one cell per layer and head, the sink mass the JSON's sink_mean.
  await page.keyboard.press('3');
  const cells = await page.$$eval('#stats-grid .cell', (cs) => cs.map((c) => ({ l: Number(c.dataset.layer), h: Number(c.dataset.head), text: c.textContent })));
  assert.equal(cells.length, sum.layers.length * meta.heads);
  for (const c of cells) {
    assert.equal(c.text, sum.layers[c.l].heads[c.h].sink_mean.toFixed(2), 'sink mass of layer ' + c.l + ' head ' + c.h);
  }
  await page.click('#stats-grid .cell[data-layer="0"][data-head="1"]');
  assert.deepEqual(await page.evaluate(() => [window.attnviz.state.slot, window.attnviz.state.head]), [0, 1]);
  await page.screenshot({ path: join(SCREENS, 'summary-stats.png'), fullPage: true });

  // The input's markup stayed text.
  assert.equal(await page.$$eval('#input-text b, main b', (b) => b.length), 0, 'no element from the input');
  assert.match(await page.$eval('#input-text', (e) => e.textContent), /<b>/);
  assert.deepEqual(errors, [], 'no script errors');
  assert.deepEqual(requests, [], 'no network request');
  await page.close();
});
