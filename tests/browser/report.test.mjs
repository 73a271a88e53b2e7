// Headless-Chromium tests of the attnviz HTML report.
//
// Run by `cargo test --release --test suite html_report:: -- --include-ignored`, which first writes the reports and their
// `*.expect.json` sidecars (exact f32 weights) into $ATTNVIZ_ARTIFACTS. Every expected number here
// is computed from the sidecar, independently of the page's own decoding and drawing code.
// Screenshots go to $ATTNVIZ_ARTIFACTS/screens/.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import {
  rawWeight, expectedUnits, expectedMatrix, expectedLines, safeThreshold, range,
} from './expect.mjs';

const ART = resolve(process.env.ATTNVIZ_ARTIFACTS || '../artifacts/html');
const SCREENS = join(ART, 'screens');
mkdirSync(SCREENS, { recursive: true });
const INJECTION = '</script><script>alert(1)</script><img src=x onerror=alert(2)>';

let browser;
before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--no-first-run'],
  });
});
after(async () => { if (browser) await browser.close(); });

/** Open a report; record console errors, page errors, dialogs and every request. */
async function open(name, { colorScheme = 'light', width = 1280, height = 900 } = {}) {
  const file = join(ART, name + '.html');
  assert.ok(existsSync(file), file + ' missing: run `cargo test --release --test suite html_report:: -- --include-ignored`');
  const exp = JSON.parse(readFileSync(join(ART, name + '.expect.json'), 'utf8'));
  const context = await browser.newContext({ viewport: { width, height }, colorScheme });
  const page = await context.newPage();
  const url = pathToFileURL(file).href;
  const log = { errors: [], requests: [], dialogs: [] };
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') log.errors.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', (e) => log.errors.push('pageerror: ' + e.message));
  page.on('dialog', async (d) => { log.dialogs.push(d.message()); await d.dismiss(); });
  page.on('request', (r) => { if (r.url() !== url) log.requests.push(r.url()); });
  await page.goto(url);
  await page.waitForFunction(() => document.documentElement.dataset.ready === 'true' ||
    document.querySelector('#status.error'), null, { timeout: 20000 });
  const failure = await page.$eval('#status', (s) => (s.classList.contains('error') ? s.textContent : ''));
  assert.equal(failure, '', 'the page reported an error');
  return { page, context, exp, log };
}

async function settle(page) { await page.evaluate(() => window.attnviz.settled()); }
async function lines(page) { await settle(page); return Number(await page.$eval('#hv-canvas', (c) => c.dataset.lines)); }
async function canvasPixels(page, sel) { await settle(page); return page.$eval(sel, (c) => c.toDataURL()); }
async function shot(page, name) { await settle(page); await page.screenshot({ path: join(SCREENS, name + '.png'), fullPage: true }); }

async function setThreshold(page, thr) {
  await page.locator('#threshold').fill(String(thr));
  await settle(page);
  assert.equal(await page.evaluate(() => window.attnviz.state.threshold), thr);
}

/* ----------------------------------------------------------------- tests */

test('single: loads with no console errors and no network requests', async () => {
  const { page, context, exp, log } = await open('single');
  assert.equal(await page.title(), 'attnviz — ' + exp.text);
  assert.equal(await page.textContent('#sentence-a'), exp.text);
  // Both token columns list every token.
  assert.equal(await page.locator('#hv-left .tok').count(), exp.n);
  assert.equal(await page.locator('#hv-right .tok').count(), exp.n);
  await shot(page, 'single-head');
  assert.deepEqual(log.errors, []);
  assert.deepEqual(log.requests, []);
  const t = await page.evaluate(() => window.attnviz.timings);
  console.log('  time to interactive (12 tokens): ' + t.interactive.toFixed(0) + ' ms');
  await context.close();
});

test('single: head view draws one line per weight above the threshold', async () => {
  const { page, context, exp, log } = await open('single');
  const thr = safeThreshold(exp, 0.03);
  await setThreshold(page, thr);
  const all = range(exp.heads);
  assert.equal(await lines(page), expectedLines(exp, { layer: 0, heads: all, thr }));
  await page.selectOption('#layer-select', '2');
  assert.equal(await lines(page), expectedLines(exp, { layer: 2, heads: all, thr }));
  // Double-click shows only that head.
  await page.dblclick('#head-legend button[data-head="3"]');
  const solo = await lines(page);
  assert.equal(solo, expectedLines(exp, { layer: 2, heads: [3], thr }));
  assert.ok(solo > 0 && solo < exp.n * exp.n, 'a sensible number of lines: ' + solo);
  const shown = await page.$$eval('#head-legend button', (bs) => bs.map((b) => b.getAttribute('aria-pressed')));
  assert.deepEqual(shown, all.map((h) => String(h === 3)));
  await shot(page, 'single-head-solo3');
  // Threshold 0 draws every positive weight: n × n for one head.
  await setThreshold(page, 0);
  assert.equal(await lines(page), expectedLines(exp, { layer: 2, heads: [3], thr: 0 }));
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('single: toggling a head, hovering tokens and switching layers change the drawing', async () => {
  const { page, context, exp, log } = await open('single');
  const thr = safeThreshold(exp, 0.02);
  await setThreshold(page, thr);
  const all = range(exp.heads);
  const before = await canvasPixels(page, '#hv-canvas');
  assert.equal(await lines(page), expectedLines(exp, { layer: 0, heads: all, thr }));

  await page.click('#head-legend button[data-head="0"]');
  const without0 = all.filter((h) => h !== 0);
  assert.equal(await lines(page), expectedLines(exp, { layer: 0, heads: without0, thr }));
  const toggled = await canvasPixels(page, '#hv-canvas');
  assert.notEqual(toggled, before, 'toggling a head changes the drawing');
  await page.click('#head-legend button[data-head="0"]');
  assert.equal(await lines(page), expectedLines(exp, { layer: 0, heads: all, thr }));

  // Hover a query token: only its outgoing lines.
  await page.hover('#hv-left .tok[data-token="4"]');
  assert.equal(await lines(page), expectedLines(exp, { layer: 0, heads: all, thr, fromQ: 4 }));
  assert.notEqual(await canvasPixels(page, '#hv-canvas'), before);
  await shot(page, 'single-hover-left-fox');
  // Hover a key token: only its incoming lines.
  await page.hover('#hv-right .tok[data-token="9"]');
  assert.equal(await lines(page), expectedLines(exp, { layer: 0, heads: all, thr, toK: 9 }));
  await page.mouse.move(5, 5);
  assert.equal(await lines(page), expectedLines(exp, { layer: 0, heads: all, thr }));

  // Switching layers redraws from that layer's weights.
  await page.selectOption('#layer-select', '5');
  assert.equal(await lines(page), expectedLines(exp, { layer: 5, heads: all, thr }));
  assert.notEqual(await canvasPixels(page, '#hv-canvas'), before);
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('single: keyboard moves across layers and heads', async () => {
  const { page, context, exp } = await open('single');
  const thr = safeThreshold(exp, 0.05);
  await setThreshold(page, thr);
  await page.evaluate(() => document.activeElement && document.activeElement.blur());
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('ArrowDown');
  await settle(page);
  assert.equal(await page.inputValue('#layer-select'), '2');
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('o'); // only the current head
  assert.equal(await page.evaluate(() => window.attnviz.state.head), 2);
  assert.equal(await lines(page), expectedLines(exp, { layer: 2, heads: [2], thr }));
  await page.keyboard.press('ArrowUp');
  assert.equal(await lines(page), expectedLines(exp, { layer: 1, heads: [2], thr }));
  await page.keyboard.press('a');
  assert.equal(await lines(page), expectedLines(exp, { layer: 1, heads: range(exp.heads), thr }));
  await page.keyboard.press('3');
  await settle(page);
  assert.equal(await page.isVisible('#view-matrix'), true);
  await context.close();
});

test('single: hiding [CLS]/[SEP] renormalises the rows and says so', async () => {
  const { page, context, exp, log } = await open('single');
  const thr = safeThreshold(exp, 0.04, { hide: true }, undefined, [[0, null]]);
  await setThreshold(page, thr);
  await page.check('#hide-special');
  await settle(page);
  assert.equal(await page.locator('#hv-left .tok').count(), exp.n - 2);
  assert.match(await page.textContent('#special-note'), /renormalised/);
  assert.equal(await lines(page), expectedLines(exp, { layer: 0, heads: range(exp.heads), thr, hide: true }));
  await shot(page, 'single-hide-special');
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('single: model view shows layers × heads thumbnails and opens a head', async () => {
  const { page, context, exp, log } = await open('single');
  await page.click('#tab-model');
  await settle(page);
  assert.equal(await page.locator('#model-grid .thumb').count(), exp.layers * exp.heads);
  await page.waitForFunction(() => document.getElementById('model-grid').dataset.complete !== '');
  await shot(page, 'single-model');
  // Thumbnails differ from each other: they are drawn from each head's weights.
  const a = await page.$eval('.thumb[data-layer="0"][data-head="0"] canvas', (c) => c.toDataURL());
  const b = await page.$eval('.thumb[data-layer="3"][data-head="5"] canvas', (c) => c.toDataURL());
  assert.notEqual(a, b);
  await page.click('.thumb[data-layer="4"][data-head="7"]');
  await settle(page);
  assert.equal(await page.isVisible('#view-head'), true);
  assert.equal(await page.inputValue('#layer-select'), '4');
  const thr = await page.evaluate(() => window.attnviz.state.threshold);
  assert.equal(await lines(page), expectedLines(exp, { layer: 4, heads: [7], thr }));
  // The heatmap style draws too.
  await page.click('#tab-model');
  await page.selectOption('#thumb-style', 'heatmap');
  await page.waitForFunction(() => document.getElementById('model-grid').dataset.complete !== '');
  await shot(page, 'single-model-heatmap');
  assert.deepEqual(log.errors, []);
  await context.close();
});

/** Hover matrix cell (row a, column c) of a panel and return the tooltip text. */
async function hoverCell(page, id, a, c) {
  await settle(page);
  const g = await page.evaluate((pid) => window.attnviz.matrixGeometry(pid), id);
  const box = await page.locator('#' + id).boundingBox();
  await page.mouse.move(box.x + g.margin + (c + 0.5) * g.cell, box.y + g.margin + (a + 0.5) * g.cell);
  return page.textContent('#tooltip');
}

test('single: matrix view shows each value on hover, and the mean over heads', async () => {
  const { page, context, exp, log } = await open('single');
  await page.click('#tab-matrix');
  await page.selectOption('#layer-select', '3');
  await page.selectOption('#head-select', '5');
  const tip = await hoverCell(page, 'matrix-left', 4, 9);
  assert.match(tip, /Layer 3, head 5/);
  assert.match(tip, /query +"fox"/);
  assert.match(tip, /key +"dog"/);
  const shown = Number(tip.match(/weight (\d\.\d{5})/)[1]);
  // 5 decimals (±5e-6) of a 16-bit value (±7.63e-6).
  assert.ok(Math.abs(shown - rawWeight(exp, 3, 5, 4, 9)) <= 1.3e-5, shown + ' vs ' + rawWeight(exp, 3, 5, 4, 9));
  await shot(page, 'single-matrix');
  const tip2 = await hoverCell(page, 'matrix-right', 2, 2);
  let mean = 0;
  for (let h = 0; h < exp.heads; h++) mean += rawWeight(exp, 3, h, 2, 2) / exp.heads;
  const shown2 = Number(tip2.match(/weight (\d\.\d{5})/)[1]);
  assert.ok(Math.abs(shown2 - mean) <= 1.3e-5, shown2 + ' vs ' + mean);
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('single: neuron view softmax equals the attention row', async () => {
  const { page, context, exp, log } = await open('single');
  assert.ok(exp.neuron);
  await page.click('#tab-neuron');
  await page.selectOption('#layer-select', '1');
  await page.selectOption('#head-select', '6');
  await page.selectOption('#neuron-query', '4');
  await settle(page);
  const d = await page.evaluate(() => window.attnviz.neuronData());
  assert.equal(d.keys.length, exp.n);
  assert.equal(d.q.length, exp.head_dim);
  for (let k = 0; k < exp.n; k++) {
    const w = rawWeight(exp, 1, 6, 4, k);
    assert.ok(Math.abs(d.softmax[k] - w) < 1e-5, 'softmax ' + k + ': ' + d.softmax[k] + ' vs ' + w);
    assert.ok(Math.abs(d.stored[k] - w) <= 7.7e-6, 'stored ' + k);
    // q·k/√d from the shown vectors.
    let s = 0;
    for (let i = 0; i < exp.head_dim; i++) s += d.q[i] * d.k[k][i];
    assert.ok(Math.abs(s / Math.sqrt(exp.head_dim) - d.scores[k]) < 1e-9);
  }
  assert.match(await page.textContent('#neuron-check'), /equals the attention row to within/);
  await shot(page, 'single-neuron');
  // Clicking a key row makes it the query.
  const g = await page.evaluate(() => window.attnviz.neuronGeometry());
  const box = await page.locator('#neuron-canvas').boundingBox();
  await page.mouse.click(box.x + 20, box.y + g.y0 + 7.5 * g.rh);
  await settle(page);
  assert.equal(await page.evaluate(() => window.attnviz.state.neuronQuery), 7);
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('single-u8-raw: 8-bit, uncompressed storage decodes to the same picture', async () => {
  const { page, context, exp, log } = await open('single-u8-raw');
  const meta = await page.evaluate(() => window.attnviz.meta.payload);
  assert.equal(meta.compression, 'none');
  assert.equal(meta.sections[0].dtype, 'u8');
  // 8-bit values are within 1/510 of the weight: keep the threshold 2e-3 away from every weight
  // of the head drawn.
  const thr = safeThreshold(exp, 0.08, {}, 0.5 / 255, [[3, 2]]);
  await setThreshold(page, thr);
  await page.selectOption('#layer-select', '3');
  await page.dblclick('#head-legend button[data-head="2"]');
  const n = await lines(page);
  assert.equal(n, expectedLines(exp, { layer: 3, heads: [2], thr }));
  assert.ok(n > 0);
  await page.click('#tab-matrix');
  await page.selectOption('#head-select', '2');
  const tip = await hoverCell(page, 'matrix-left', 5, 6);
  assert.match(tip, /stored in 8 bits/);
  const shown = Number(tip.match(/weight (\d\.\d{3})/)[1]);
  assert.ok(Math.abs(shown - rawWeight(exp, 3, 2, 5, 6)) <= 5e-4 + 1 / 510, String(shown));
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('pair: the pair filter keeps only the chosen segment pairs', async () => {
  const { page, context, exp, log } = await open('pair');
  assert.equal(await page.isVisible('#pair-filter'), true);
  assert.equal(await page.textContent('#sentence-b'), exp.pair);
  const thr = safeThreshold(exp, 0.03);
  await setThreshold(page, thr);
  await page.selectOption('#layer-select', '1');
  const heads = range(exp.heads);
  const counts = {};
  for (const pair of ['AA', 'BB', 'AB', 'BA', 'all']) {
    await page.click('#pair-filter button[data-pair="' + pair + '"]');
    counts[pair] = await lines(page);
    assert.equal(counts[pair], expectedLines(exp, { layer: 1, heads, thr, pair }), pair);
    if (pair === 'AB') await shot(page, 'pair-filter-AB');
  }
  assert.equal(counts.all, counts.AA + counts.BB + counts.AB + counts.BA);
  assert.ok(counts.AB > 0 && counts.AB < counts.all);
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('pair: stats grid shows every head and opens the clicked one', async () => {
  const { page, context, exp, log } = await open('pair');
  assert.equal(await page.isVisible('#tab-stats'), true);
  await page.click('#tab-stats');
  await settle(page);
  const cells = page.locator('#stats-grid .stat-cell');
  assert.equal(await cells.count(), exp.layers * exp.heads);
  const stat = exp.stats[0];
  const text = await page.textContent('#stats-grid .stat-cell[data-layer="2"][data-head="3"]');
  assert.ok(text.startsWith(stat.values[2][3].toFixed(3)), text);
  const tagged = await page.textContent('#stats-grid .stat-cell[data-layer="0"][data-head="0"] .tag');
  assert.equal(tagged, exp.head_labels[0][0]);
  await shot(page, 'pair-stats');
  await page.click('#stats-grid .stat-cell[data-layer="2"][data-head="3"]');
  await settle(page);
  assert.equal(await page.isVisible('#view-head'), true);
  assert.equal(await page.inputValue('#layer-select'), '2');
  const thr = await page.evaluate(() => window.attnviz.state.threshold);
  assert.equal(await lines(page), expectedLines(exp, { layer: 2, heads: [3], thr }));
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('pair: an analysis matrix is shown in the matrix view', async () => {
  const { page, context, exp, log } = await open('pair');
  await page.click('#tab-matrix');
  await page.selectOption('#layer-select', '2');
  await page.selectOption('#matrix-right-select', 'mean_check');
  const tip = await hoverCell(page, 'matrix-right', 3, 10);
  const shown = Number(tip.match(/weight (\d\.\d{5})/)[1]);
  const want = exp.matrices[0].layers[2][3 * exp.n + 10];
  assert.ok(Math.abs(shown - want) <= 1.3e-5, shown + ' vs ' + want);
  await shot(page, 'pair-matrix');
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('injection: the script-injection sentence shows as text and runs nothing', async () => {
  const { page, context, exp, log } = await open('injection');
  assert.equal(exp.text, INJECTION);
  assert.deepEqual(log.dialogs, [], 'no alert ran');
  assert.deepEqual(log.errors, []);
  assert.deepEqual(log.requests, [], 'the <img src=x> made no request');
  assert.equal(await page.title(), INJECTION);
  assert.equal(await page.textContent('#sentence-a'), INJECTION);
  assert.equal(await page.textContent('#sentence-b'), INJECTION);
  assert.equal(await page.locator('img').count(), 0);
  assert.equal(await page.locator('script').count(), 3);
  const aboutCells = await page.$$eval('#about-table td', (tds) => tds.map((t) => t.textContent));
  assert.ok(aboutCells.includes(INJECTION));
  await page.click('#tab-head');
  await settle(page);
  const toks = await page.$$eval('#hv-left .tok', (ts) => ts.map((t) => t.textContent));
  assert.deepEqual(toks, exp.tokens);
  await page.click('#tab-neuron');
  await page.selectOption('#neuron-query', '1');
  await page.click('#tab-matrix');
  await page.hover('#matrix-left');
  await shot(page, 'injection');
  assert.deepEqual(log.dialogs, []);
  assert.deepEqual(log.errors, []);
  assert.deepEqual(log.requests, []);
  await context.close();
});

test('theme: follows the system, and the toggle overrides it', async () => {
  const { page, context, log } = await open('single', { colorScheme: 'dark' });
  const bg = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.equal(await bg(), 'rgb(18, 20, 25)', 'dark system theme');
  await shot(page, 'single-dark');
  await page.click('#theme-toggle'); // auto -> light
  await settle(page);
  assert.equal(await bg(), 'rgb(255, 255, 255)');
  await page.click('#theme-toggle'); // light -> dark
  await settle(page);
  assert.equal(await bg(), 'rgb(18, 20, 25)');
  await page.click('#tab-matrix');
  await shot(page, 'single-matrix-dark');
  await page.click('#tab-neuron');
  await shot(page, 'single-neuron-dark');
  assert.deepEqual(log.errors, []);
  await context.close();
});

/* ------------------------------------------------- real all-MiniLM-L6-v2 */

for (const name of ['real-pair', 'real-injection', 'real-paragraph']) {
  test(name + ': real attention loads clean and every view matches the data', async () => {
    const { page, context, exp, log } = await open(name);
    await shot(page, name + '-head');
    const thr = safeThreshold(exp, 0.05);
    await setThreshold(page, thr);
    const all = range(exp.heads);
    for (const layer of [0, 3, exp.layers - 1]) {
      await page.selectOption('#layer-select', String(layer));
      assert.equal(await lines(page), expectedLines(exp, { layer, heads: all, thr }), 'layer ' + layer);
    }
    await page.dblclick('#head-legend button[data-head="5"]');
    assert.equal(await lines(page), expectedLines(exp, { layer: exp.layers - 1, heads: [5], thr }));
    await page.click('#head-legend button[data-head="5"]'); // toggled off: nothing left
    assert.equal(await lines(page), 0);
    await page.keyboard.press('a');
    await page.hover('#hv-left .tok[data-token="2"]');
    assert.equal(await lines(page), expectedLines(exp, { layer: exp.layers - 1, heads: all, thr, fromQ: 2 }));
    await shot(page, name + '-hover');
    await page.mouse.move(1, 1);
    if (exp.segments.includes(1)) {
      await page.click('#pair-filter button[data-pair="AB"]');
      assert.equal(await lines(page), expectedLines(exp, { layer: exp.layers - 1, heads: all, thr, pair: 'AB' }));
      await shot(page, name + '-AB');
      await page.click('#pair-filter button[data-pair="all"]');
    }

    // Neuron view: softmax(q·k/√d) from the engine's captured vectors equals its attention.
    assert.ok(exp.neuron);
    await page.click('#tab-neuron');
    await page.selectOption('#head-select', '3');
    await page.selectOption('#neuron-query', String(Math.min(4, exp.n - 1)));
    await shot(page, name + '-neuron');
    const queries = exp.n <= 40 ? range(exp.n) : [0, 1, Math.floor(exp.n / 2), exp.n - 1];
    const soft = await page.evaluate(({ L, H, qs }) => {
      const out = [];
      for (let l = 0; l < L; l++) for (let h = 0; h < H; h++) for (const q of qs) {
        out.push(window.attnviz.neuronData(l, h, q).softmax);
      }
      return out;
    }, { L: exp.layers, H: exp.heads, qs: queries });
    let worst = 0;
    let i = 0;
    for (let l = 0; l < exp.layers; l++) for (let h = 0; h < exp.heads; h++) for (const q of queries) {
      const row = soft[i++];
      for (let k = 0; k < exp.n; k++) worst = Math.max(worst, Math.abs(row[k] - rawWeight(exp, l, h, q, k)));
    }
    console.log('  ' + name + ': max |softmax(q·k/√d) − attention| = ' + worst.toExponential(2));
    assert.ok(worst < 1e-5, 'softmax of the captured vectors vs attention: ' + worst);

    await page.click('#tab-model');
    await settle(page);
    assert.equal(await page.locator('#model-grid .thumb').count(), exp.layers * exp.heads);
    await page.waitForFunction(() => document.getElementById('model-grid').dataset.complete !== '');
    await shot(page, name + '-model');
    await page.click('#tab-matrix');
    await hoverCell(page, 'matrix-left', 1, 2);
    await shot(page, name + '-matrix');
    assert.deepEqual(log.errors, []);
    assert.deepEqual(log.requests, []);
    assert.deepEqual(log.dialogs, []);
    await context.close();
  });
}

test('real-paragraph: merging word pieces sums attention to a word and averages it from a word', async () => {
  const { page, context, exp, log } = await open('real-paragraph');
  const words = expectedUnits(exp, { words: true });
  assert.ok(words.length < exp.n, 'the paragraph has split words');
  const thr = safeThreshold(exp, 0.05, { words: true });
  await setThreshold(page, thr);
  await page.check('#merge-words');
  await settle(page);
  const labels = await page.$$eval('#hv-left .tok', (ts) => ts.map((t) => t.textContent));
  assert.equal(labels.length, words.length);
  const want = words.map((u) => u.map((i) => exp.tokens[i].replace(/^##/, '')).join(''));
  assert.deepEqual(labels, want);
  assert.ok(labels.includes('separator') && labels.includes('visualising'), 'merged words are shown whole');
  assert.match(await page.textContent('#words-note'), /sum over its pieces/);
  const all = range(exp.heads);
  for (const layer of [0, exp.layers - 1]) {
    await page.selectOption('#layer-select', String(layer));
    assert.equal(await lines(page), expectedLines(exp, { layer, heads: all, thr, words: true }), 'layer ' + layer);
  }
  await shot(page, 'real-paragraph-words');
  // With [CLS]/[SEP] hidden as well.
  const thr2 = safeThreshold(exp, 0.05, { words: true, hide: true }, undefined, [[exp.layers - 1, null]]);
  await setThreshold(page, thr2);
  await page.check('#hide-special');
  assert.equal(await lines(page), expectedLines(exp, { layer: exp.layers - 1, heads: all, thr: thr2, words: true, hide: true }));
  await page.uncheck('#hide-special');
  // The matrix view shows the merged value: "separator" (3 pieces) as key and as query.
  const sep = labels.indexOf('separator');
  const { M, B, m } = expectedMatrix(exp, 2, 4, { words: true });
  await page.click('#tab-matrix');
  await page.selectOption('#layer-select', '2');
  await page.selectOption('#head-select', '4');
  for (const [a, c] of [[sep, sep - 1], [sep - 1, sep], [sep, sep]]) {
    const tip = await hoverCell(page, 'matrix-left', a, c);
    const shown = Number(tip.match(/weight (\d\.\d{5})/)[1]);
    // 5 decimals, plus 16-bit storage of each summed piece.
    assert.ok(Math.abs(shown - M[a * m + c]) <= 5e-6 + B[a * m + c] + 1e-9, a + ',' + c + ': ' + shown + ' vs ' + M[a * m + c]);
    const bound = Number(tip.match(/±(\S+):/)[1]);
    assert.ok(Math.abs(bound - B[a * m + c]) <= 0.05 * B[a * m + c] + 1e-7, 'stated bound ' + bound + ' vs ' + B[a * m + c]);
  }
  await shot(page, 'real-paragraph-words-matrix');
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('real-paragraph-initial: a report written with words merged and [CLS]/[SEP] hidden opens that way', async () => {
  const { page, context, exp, log } = await open('real-paragraph-initial');
  assert.equal(await page.isVisible('#view-matrix'), true);
  assert.equal(await page.isChecked('#merge-words'), true);
  assert.equal(await page.isChecked('#hide-special'), true);
  assert.equal(await page.isVisible('#special-note'), true);
  assert.equal(await page.isVisible('#words-note'), true);
  const g = await page.evaluate(() => window.attnviz.matrixGeometry('matrix-left'));
  assert.equal(g.m, expectedUnits(exp, { words: true, hide: true }).length);
  // And it can go back to tokens.
  await page.uncheck('#merge-words');
  await page.uncheck('#hide-special');
  await settle(page);
  assert.equal((await page.evaluate(() => window.attnviz.matrixGeometry('matrix-left'))).m, exp.n);
  assert.deepEqual(log.errors, []);
  await context.close();
});
