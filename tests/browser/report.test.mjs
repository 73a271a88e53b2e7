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
  parseColor, contrastRatio, MIN_GRAPHIC_CONTRAST, expectedScores, expectedVectorScales, maxWeight,
  expectedSoftmax, oklabHue, hueDistance, named,
} from './expect.mjs';
import {
  thumbnails, startThumbWatch, stopThumbWatch, neuronPixel, topbarLayout, sentenceLayout, contentWidth,
  matrixCellColours, matrixRowLabelColours, thumbStrip,
} from './page_checks.mjs';

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
async function open(name, { colorScheme = 'light', width = 1280, height = 900, hasTouch = false } = {}) {
  const file = join(ART, name + '.html');
  assert.ok(existsSync(file), file + ' missing: run `cargo test --release --test suite html_report:: -- --include-ignored`');
  const exp = JSON.parse(readFileSync(join(ART, name + '.expect.json'), 'utf8'));
  const context = await browser.newContext({ viewport: { width, height }, colorScheme, hasTouch });
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

/** Hover matrix cell (row a, column c) of a panel, at fraction (fx, fy) of the cell from its
 *  top-left corner (its centre by default), and return the tooltip text. */
async function hoverCell(page, id, a, c, fx = 0.5, fy = 0.5) {
  await settle(page);
  const g = await page.evaluate((pid) => window.attnviz.matrixGeometry(pid), id);
  let box = await page.locator('#' + id).boundingBox();
  const dy = g.margin + (a - g.oy + fy) * g.cell;
  // The pointer only reaches what is in the window (and below the sticky top bar).
  const vh = page.viewportSize().height;
  if (box.y + dy < 60 || box.y + dy > vh - 10) {
    await page.evaluate((by) => window.scrollBy(0, by), box.y + dy - vh / 2);
    box = await page.locator('#' + id).boundingBox();
  }
  await page.mouse.move(box.x + g.margin + (c - g.ox + fx) * g.cell, box.y + dy);
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

test('pair: in the dark theme the matrix view divides A from B with a white line in a dark halo', async () => {
  const { page, context, exp, log } = await open('pair', { colorScheme: 'dark' });
  await page.click('#tab-matrix');
  await settle(page);
  const b = exp.segments.indexOf(1);
  assert.ok(b > 0, 'the pair case has a sentence B');
  // A vertical strip of pixels across the line before row b, in the middle of column 0's cells.
  const strip = await page.evaluate(([id, b]) => {
    const c = document.getElementById(id);
    const g = window.attnviz.matrixGeometry(id);
    const s = c.width / c.getBoundingClientRect().width;
    const copy = document.createElement('canvas');
    copy.width = c.width;
    copy.height = c.height;
    const ctx = copy.getContext('2d', { willReadFrequently: true });
    ctx.drawImage(c, 0, 0);
    const x = Math.round((g.margin + (0.5 - g.ox) * g.cell) * s);
    const y = (g.margin + (b - g.oy) * g.cell) * s;
    const from = Math.max(0, Math.floor(y - 4 * s));
    const d = ctx.getImageData(x, from, 1, Math.ceil(8 * s)).data;
    const out = [];
    for (let i = 0; i < d.length; i += 4) out.push([d[i], d[i + 1], d[i + 2]]);
    return out;
  }, ['matrix-left', b]);
  const bg = parseColor(await page.evaluate(() => getComputedStyle(document.body).backgroundColor));
  const white = strip.filter((p) => Math.min(...p) >= 235);
  assert.ok(white.length > 0, 'a white line: ' + JSON.stringify(strip));
  assert.ok(contrastRatio(white[0], bg) >= MIN_GRAPHIC_CONTRAST, 'the line stands out from the dark background');
  // The halo: darker than any colour of the map (viridis never goes below a channel maximum of 84).
  assert.ok(strip.some((p) => Math.max(...p) <= 40), 'a dark halo beside it: ' + JSON.stringify(strip));
  await shot(page, 'pair-matrix-dark-divider');
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
  assert.deepEqual(toks, named(exp.display));
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

test('real-decoder: a causal, grouped-query SmolLM2 report with generated tokens and some layers loads clean', async () => {
  const { page, context, exp, log } = await open('real-decoder');
  // The layer picker names the captured layers by their numbers in the model.
  const options = await page.$$eval('#layer-select option', (os) => os.map((o) => o.textContent));
  assert.deepEqual(options, ['0', '14', '15', '29']);
  await shot(page, 'real-decoder-head');
  // Neuron view: softmax(q·k/√d) over the keys a query may see (the later ones listed, masked),
  // from the captured vectors (keys read through each query head's key/value head), equals the
  // stored attention.
  const worst = await page.evaluate(({ L, H, n }) => {
    let w = 0;
    for (let l = 0; l < L; l++) for (let h = 0; h < H; h++) for (const q of [0, 1, Math.floor(n / 2), n - 1]) {
      const d = window.attnviz.neuronData(l, h, q);
      // Every key is listed; exactly those after the query are masked.
      if (d.keys.length !== n || d.keys.some((k, i) => d.masked[i] !== (k > q))) return Infinity;
      w = Math.max(w, d.maxDiff);
    }
    return w;
  }, { L: exp.layers, H: exp.heads, n: exp.n });
  console.log('  real-decoder: max |softmax(q·k/√d) − attention| = ' + worst.toExponential(2));
  assert.ok(worst < 1e-5, 'neuron view of a GQA decoder: ' + worst);
  await page.click('#tab-neuron');
  await shot(page, 'real-decoder-neuron');
  await page.click('#tab-model');
  await settle(page);
  assert.equal(await page.locator('#model-grid .thumb').count(), exp.layers * exp.heads);
  await shot(page, 'real-decoder-model');
  assert.deepEqual(log.errors, []);
  assert.deepEqual(log.requests, []);
  await context.close();
});

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
  // A word is labelled with the text it stands for: its tokens' surfaces joined and trimmed
  // (a special token, which stands for no text, by its label).
  // Where a word repeats, its first token's number follows in subscript.
  const want = named(words.map((u) => u.map((i) => exp.surfaces[i]).join('').trim() || u.map((i) => exp.tokens[i]).join('')), words.map((u) => u[0]));
  assert.deepEqual(labels, want);
  assert.ok(labels.includes('separator') && labels.includes('Visualising'), 'merged words are shown whole');
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

/* ------------------------------------------------- layout, legibility and state (issue 8) */

const geometry = (page, id) => page.evaluate((pid) => window.attnviz.matrixGeometry(pid), id);
const weightIn = (tip) => Number(tip.match(/weight (\d\.\d{5})/)[1]);

test('real-paragraph: the matrix view fills the width it has, at every window width', async () => {
  const sides = {};
  let n = 0;
  for (const width of [1400, 1000, 600]) {
    const { page, context, exp, log } = await open('real-paragraph', { width, height: 900 });
    n = exp.n;
    await page.click('#tab-matrix');
    await settle(page);
    const avail = await page.evaluate(contentWidth);
    const left = await geometry(page, 'matrix-left');
    const right = await geometry(page, 'matrix-right');
    const twoUp = avail >= 2 * 360 + 24;
    // Square panels as wide as their share of the row, no taller than the window less the bar,
    // caption and colour bar (120 px), so a whole matrix fits on screen.
    const want = Math.min(twoUp ? (avail - 24) / 2 : avail, 900 - 120);
    assert.ok(left.side >= want - 1 && left.side <= avail, width + ' px: panel ' + left.side + ', want ' + want);
    assert.equal(right.side, left.side);
    const lbox = await page.locator('#matrix-left').boundingBox();
    const rbox = await page.locator('#matrix-right').boundingBox();
    assert.ok(Math.abs(lbox.width - left.side) < 0.5, 'the canvas is as wide as its layout');
    assert.equal(Math.abs(lbox.y - rbox.y) < 1, twoUp, width + ' px: panels side by side only when both fit');
    assert.ok(lbox.x + lbox.width <= width && rbox.x + rbox.width <= width, 'no panel past the window');
    // The plot takes what the labels leave, split evenly over the tokens.
    assert.equal(left.m, exp.n);
    assert.ok(Math.abs(left.cell * left.m - left.plot) < 1e-6);
    sides[width] = left.side;
    await shot(page, 'real-paragraph-matrix-' + width);
    assert.deepEqual(log.errors, []);
    await context.close();
  }
  console.log('  ' + n + ' tokens: matrix panel side at 1400/1000/600 px: ' + sides[1400] + '/' + sides[1000] + '/' + sides[600] + ' px');
  assert.ok(sides[1400] > sides[1000], 'wider window, wider matrix');
});

test('real-paragraph: the matrix zooms (buttons, keys, Ctrl+wheel), pans, fits again, and hover stays exact', async () => {
  const { page, context, exp, log } = await open('real-paragraph', { width: 1400, height: 900 });
  await page.click('#tab-matrix');
  await page.selectOption('#layer-select', '2');
  await page.selectOption('#head-select', '4');
  const g0 = await geometry(page, 'matrix-left');
  assert.equal(g0.zoom, 1);
  assert.equal(g0.labels, 'numbers', 'too many rows to name at ' + exp.n + ' tokens');
  // Exact at zoom 1 too, where a cell is under 2 px: the cell under the pointer is the one named.
  for (const [a, c] of [[0, 0], [Math.floor(exp.n / 2), Math.floor(exp.n / 2) + 1], [exp.n - 1, exp.n - 2]]) {
    const tip = await hoverCell(page, 'matrix-left', a, c);
    assert.ok(tip.includes('#' + a + ')') && tip.includes('#' + c + ')'), tip);
    assert.ok(Math.abs(weightIn(tip) - rawWeight(exp, 2, 4, a, c)) <= 1.3e-5);
  }
  await page.click('#matrix-zoom-in');
  const g1 = await geometry(page, 'matrix-left');
  assert.ok(Math.abs(g1.cell - 2 * g0.cell) < 1e-9, 'the + button doubles the cell size');
  assert.equal(await page.textContent('#matrix-zoom-level'), '×2.0');
  assert.equal((await geometry(page, 'matrix-right')).zoom, 2, 'both panels zoom together');
  await page.evaluate(() => document.activeElement && document.activeElement.blur());
  await page.keyboard.press('+');
  await page.keyboard.press('+');
  const g3 = await geometry(page, 'matrix-left');
  assert.equal(g3.zoom, 8);
  assert.equal(g3.labels, 'tokens', 'zoomed in, every visible row and column is named');
  assert.ok(g3.labelPx >= 9, 'in a legible font: ' + g3.labelPx + ' px');
  // Hover is exact near every edge of a cell, zoomed in.
  const a = Math.floor(g3.oy) + 7;
  const c = Math.floor(g3.ox) + 11;
  for (const [fx, fy] of [[0.5, 0.5], [0.1, 0.1], [0.9, 0.9], [0.1, 0.9]]) {
    const tip = await hoverCell(page, 'matrix-left', a, c, fx, fy);
    assert.match(tip, new RegExp('query +"' + exp.display[a].replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '" \\(#' + a + '\\)'));
    assert.match(tip, new RegExp('key +"' + exp.display[c].replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '" \\(#' + c + '\\)'));
    assert.ok(Math.abs(weightIn(tip) - rawWeight(exp, 2, 4, a, c)) <= 1.3e-5);
  }
  await shot(page, 'real-paragraph-matrix-zoomed');
  // Ctrl + wheel zooms at the pointer: the cell under it stays under it.
  const before = await hoverCell(page, 'matrix-left', a, c);
  await page.keyboard.down('Control');
  await page.mouse.wheel(0, -120);
  await page.keyboard.up('Control');
  const g4 = await geometry(page, 'matrix-left');
  assert.ok(g4.zoom > g3.zoom, 'Ctrl + wheel up zooms in');
  await page.mouse.move(1, 1);
  const box = await page.locator('#matrix-left').boundingBox();
  const px = box.x + g3.margin + (c - g3.ox + 0.5) * g3.cell;
  const py = box.y + g3.margin + (a - g3.oy + 0.5) * g3.cell;
  await page.mouse.move(px, py);
  assert.equal((await page.textContent('#tooltip')).split('\n').slice(0, 3).join('\n'), before.split('\n').slice(0, 3).join('\n'));
  // A plain wheel pans down; a drag pans sideways.
  await page.mouse.wheel(0, 100);
  const g5 = await geometry(page, 'matrix-left');
  assert.ok(Math.abs(g5.oy - (g4.oy + 100 / g4.cell)) < 1e-6 && g5.ox === g4.ox, 'wheel pans by its distance');
  await page.mouse.down();
  await page.mouse.move(px - 60, py, { steps: 4 });
  await page.mouse.up();
  const g6 = await geometry(page, 'matrix-left');
  assert.ok(Math.abs(g6.ox - (g5.ox + 60 / g5.cell)) < 1e-6, 'a drag pans with the pointer');
  // Fit: everything again.
  await page.click('#matrix-zoom-reset');
  const g7 = await geometry(page, 'matrix-left');
  assert.deepEqual([g7.zoom, g7.ox, g7.oy, g7.cell], [1, 0, 0, g0.cell]);
  assert.equal(await page.isDisabled('#matrix-zoom-out'), true);
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('real-pair: the neuron view draws q·k bars from a labelled zero axis, and keys the vector colours', async () => {
  const { page, context, exp, log } = await open('real-pair');
  const vec = JSON.parse(readFileSync(join(ART, 'real-pair.vectors.json'), 'utf8'));
  const [l, h, q] = [2, 4, 5];
  await page.click('#tab-neuron');
  await page.selectOption('#layer-select', String(l));
  await page.selectOption('#head-select', String(h));
  await page.selectOption('#neuron-query', String(q));
  await settle(page);
  const g = await page.evaluate(() => window.attnviz.neuronGeometry());
  const scores = expectedScores(exp, vec, l, h, q);
  const lo = Math.min(0, ...scores);
  const hi = Math.max(0, ...scores);
  assert.ok(lo < 0 && hi > 0, 'this row has scores of both signs');
  const axis = g.cols.score + ((0 - lo) / (hi - lo)) * g.barW;
  assert.ok(Math.abs(g.axisX - axis) < 1e-6, 'axis at q·k = 0: ' + g.axisX + ' vs ' + axis);
  const tick = (text) => g.ticks.find((t) => t.text === text);
  assert.ok(tick('0') && Math.abs(tick('0').x - axis) < 1e-9, 'the axis is labelled 0');
  assert.ok(tick(lo.toFixed(2)) || tick(hi.toFixed(2)), 'an end of the score axis is labelled: ' + JSON.stringify(g.ticks));
  // The most negative score's bar lies left of the axis (blue), the most positive's right (red).
  const rowY = (k) => g.y0 + g.keys.indexOf(k) * g.rh + g.rh / 2;
  const kNeg = scores.indexOf(Math.min(...scores));
  const kPos = scores.indexOf(Math.max(...scores));
  assert.ok(kNeg !== q && kPos !== q);
  const bg = parseColor(await page.evaluate(() => getComputedStyle(document.body).backgroundColor));
  const near = (p, c) => p.every((v, i) => Math.abs(v - c[i]) <= 2);
  const [negIn, negOut] = [await page.evaluate(neuronPixel, [axis - 3, rowY(kNeg)]), await page.evaluate(neuronPixel, [axis + 3, rowY(kNeg)])];
  assert.ok(negIn[2] > negIn[0] + 40, 'negative bar: blue left of the axis ' + negIn);
  assert.ok(near(negOut, bg), 'nothing right of the axis for a negative score ' + negOut);
  const [posIn, posOut] = [await page.evaluate(neuronPixel, [axis + 3, rowY(kPos)]), await page.evaluate(neuronPixel, [axis - 3, rowY(kPos)])];
  assert.ok(posIn[0] > posIn[2] + 40, 'positive bar: red right of the axis ' + posIn);
  assert.ok(near(posOut, bg), 'nothing left of the axis for a positive score ' + posOut);
  // Each softmax number stands clear of the longest bar.
  const numLeft = await page.evaluate(({ font, right, texts }) => {
    const ctx = document.createElement('canvas').getContext('2d');
    ctx.font = font;
    return Math.min(...texts.map((t) => right - ctx.measureText(t).width));
  }, { font: g.font, right: g.cols.softNum, texts: (await page.evaluate(() => window.attnviz.neuronData().softmax)).map((p) => p.toFixed(6)) });
  assert.ok(g.cols.soft + g.barW + 4 <= numLeft, 'softmax bars end before their numbers: ' + (g.cols.soft + g.barW) + ' vs ' + numLeft);
  // Colour legends: the key-vector and q∘k scales, blue (−) to red (+), with their true ranges.
  const want = expectedVectorScales(exp, vec, l, h, q);
  assert.equal(g.legends.length, 2);
  assert.ok(Math.abs(g.legends[0].scale - want.vector) <= 1e-6 * want.vector, 'vector scale ' + g.legends[0].scale + ' vs ' + want.vector);
  assert.ok(Math.abs(g.legends[1].scale - want.product) <= 1e-5 * want.product, 'product scale ' + g.legends[1].scale + ' vs ' + want.product);
  for (const lg of g.legends) {
    const [left, mid, right] = [
      await page.evaluate(neuronPixel, [lg.x + 1, lg.y]),
      await page.evaluate(neuronPixel, [lg.x + lg.w / 2 + 3, lg.y]),
      await page.evaluate(neuronPixel, [lg.x + lg.w - 2, lg.y]),
    ];
    assert.ok(left[2] > left[0] + 60 && right[0] > right[2] + 60, 'legend runs blue to red: ' + left + ' … ' + right);
    assert.ok(contrastRatio(mid, bg) < 1.3, 'and is pale at zero: ' + mid);
  }
  await shot(page, 'real-pair-neuron-axis');
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('single: no head looks picked on load; a click or ← → picks one; the hover colours are explained', async () => {
  const { page, context, exp, log } = await open('single');
  assert.equal(await page.locator('#head-legend button.current').count(), 0, 'no head outlined on load');
  assert.deepEqual(await page.$$eval('#head-legend button', (bs) => bs.map((b) => b.getAttribute('aria-pressed'))), range(exp.heads).map(() => 'true'));
  assert.match(await page.textContent('#head-status'), new RegExp('^All ' + exp.heads + ' heads shown'));
  assert.match(await page.textContent('#hv-key'), /colour of the head that links them most strongly, deeper for a larger weight/);
  await page.click('#tab-model');
  await page.waitForFunction(() => document.getElementById('model-grid').dataset.complete !== '');
  assert.equal(await page.locator('.thumb.current').count(), 0, 'no thumbnail outlined on load');
  await page.click('#tab-head');
  await page.evaluate(() => document.activeElement && document.activeElement.blur());
  await page.keyboard.press('ArrowRight');
  await settle(page);
  assert.deepEqual(await page.$$eval('#head-legend button.current', (bs) => bs.map((b) => b.dataset.head)), ['1']);
  assert.match(await page.textContent('#head-status'), /head 1 outlined/);
  // Hovering "fox" (a query): each key is tinted in the colour of the head with the largest
  // weight to it, as deep as that weight (to 0.85).
  const thr = safeThreshold(exp, 0.02);
  await setThreshold(page, thr);
  await page.hover('#hv-left .tok[data-token="4"]');
  await settle(page);
  assert.match(await page.textContent('#hv-key'), /"fox" \(#4\), under the pointer; +the tokens it attends to/);
  const swatches = await page.$$eval('#head-legend .swatch', (ss) => ss.map((s) => getComputedStyle(s).backgroundColor));
  const tints = await page.$$eval('#hv-right .tok', (ts) => ts.map((t) => getComputedStyle(t).backgroundColor));
  for (let k = 0; k < exp.n; k++) {
    let best = -1;
    let w = 0;
    for (let hh = 0; hh < exp.heads; hh++) {
      const v = rawWeight(exp, 0, hh, 4, k);
      if (v >= thr && v > w) { w = v; best = hh; }
    }
    if (best < 0) continue;
    const got = parseColor(tints[k]);
    const want = parseColor(swatches[best]);
    assert.deepEqual(got.slice(0, 3), want.slice(0, 3), 'key ' + k + ' in head ' + best + '\'s colour');
    assert.ok(Math.abs(got[3] - Math.min(0.85, w)) < 0.01, 'key ' + k + ' tinted ' + got[3] + ' for weight ' + w);
  }
  await shot(page, 'single-hover-key');
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('pair: the stats grid outlines no head on load', async () => {
  const { page, context, log } = await open('pair');
  await page.click('#tab-stats');
  await settle(page);
  assert.equal(await page.locator('.stat-cell.current').count(), 0);
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('real-paragraph: a long sentence takes one line until expanded; a short one has no toggle', async () => {
  for (const width of [1400, 600]) {
    const { page, context, log } = await open('real-paragraph', { width });
    const c = await page.evaluate(sentenceLayout);
    assert.ok(c.height <= 1.5 * c.lineHeight, width + ' px: one line, ' + c.height + ' px');
    assert.ok(c.cut && c.toggle && c.expanded === 'false', 'cut, with a toggle');
    await page.click('#summary-toggle');
    await settle(page);
    const e = await page.evaluate(sentenceLayout);
    assert.ok(e.height >= 3 * e.lineHeight && !e.cut && e.expanded === 'true', width + ' px: expanded to ' + e.height + ' px');
    await shot(page, 'real-paragraph-summary-open-' + width);
    await page.click('#summary-toggle');
    const again = await page.evaluate(sentenceLayout);
    assert.ok(again.height <= 1.5 * again.lineHeight && again.expanded === 'false');
    assert.deepEqual(log.errors, []);
    await context.close();
  }
  const { page, context } = await open('single');
  const s = await page.evaluate(sentenceLayout);
  assert.ok(!s.cut && !s.toggle, 'a sentence that fits needs no toggle');
  await context.close();
});

test('the tab bar stays on one line down to phone widths', async () => {
  for (const [name, width] of [['pair', 1400], ['pair', 700], ['pair', 600], ['pair', 420], ['single', 360]]) {
    const { page, context } = await open(name, { width, height: 700 });
    const t = await page.evaluate(topbarLayout);
    assert.equal(new Set(t.tabTops).size, 1, width + ' px: tabs on one row ' + t.tabTops);
    assert.ok(t.height <= 48, width + ' px: the bar is one line high (' + t.height + ' px)');
    assert.ok(t.right <= t.width, width + ' px: the last button is inside the window');
    if (width === 600) await shot(page, 'pair-600');
    await context.close();
  }
});

for (const style of ['lines', 'heatmap']) {
  test('real-paragraph: the model grid (' + style + ') keeps its drawing through a resize and redraws at the new size', async () => {
    // 140 tokens: drawing every thumbnail takes several 30 ms slices, so a grid that emptied its
    // thumbnails on resize would show empty ones between slices.
    const { page, context, log } = await open('real-paragraph', { width: 1400, height: 900 });
    await page.click('#tab-model');
    await page.selectOption('#thumb-style', style);
    await page.waitForFunction(() => document.getElementById('model-grid').dataset.complete !== '');
    const before = await page.evaluate(thumbnails);
    assert.ok(before.every((t) => !t.blank));
    await page.evaluate(startThumbWatch);
    const job = await page.$eval('#model-grid', (g) => g.dataset.complete);
    const t0 = Date.now();
    await page.setViewportSize({ width: 900, height: 900 });
    await page.waitForFunction((j) => { const c = document.getElementById('model-grid').dataset.complete; return c !== '' && c !== j; }, job);
    const redrawn = Date.now() - t0;
    const watch = await page.evaluate(stopThumbWatch);
    console.log('  ' + style + ': model grid redrawn ' + redrawn + ' ms after a resize; ' + watch.frames + ' frames watched, at most ' + watch.worst + ' empty thumbnails in any');
    assert.ok(watch.frames >= 2, 'frames were watched');
    assert.equal(watch.worst, 0, 'no thumbnail was ever empty');
    const after = await page.evaluate(thumbnails);
    assert.ok(after[0].cssWidth < before[0].cssWidth, 'narrower window, smaller thumbnails');
    assert.ok(after.every((t) => !t.blank && Math.abs(t.width - t.cssWidth) < 1), 'redrawn at the new size');
    await shot(page, 'real-paragraph-model-' + style + '-after-resize');
    assert.deepEqual(log.errors, []);
    await context.close();
  });
}

for (const theme of ['light', 'dark']) {
  test('real-pair: model-view thumbnails stand out from the ' + theme + ' background (3:1, WCAG non-text contrast)', async () => {
    const { page, context, exp, log } = await open('real-pair', { colorScheme: theme });
    await page.click('#tab-model');
    await page.waitForFunction(() => document.getElementById('model-grid').dataset.complete !== '');
    assert.equal(await page.inputValue('#thumb-style'), 'lines');
    const bg = parseColor(await page.evaluate(() => getComputedStyle(document.body).backgroundColor));
    // Every head's colour, as its legend swatch shows it.
    await page.click('#tab-head');
    const swatches = await page.$$eval('#head-legend .swatch', (ss) => ss.map((s) => getComputedStyle(s).backgroundColor));
    const worst = Math.min(...swatches.map((c) => contrastRatio(parseColor(c), bg)));
    assert.ok(worst >= MIN_GRAPHIC_CONTRAST, theme + ': weakest head colour ' + worst.toFixed(2) + ':1');
    // A thumbnail whose head has a near-opaque line (weight ≥ 0.9) shows that colour at full
    // strength somewhere: lines wide enough to fill whole pixels.
    await page.click('#tab-model');
    await page.waitForFunction(() => document.getElementById('model-grid').dataset.complete !== '');
    const thumbs = await page.evaluate(thumbnails);
    const strong = thumbs.filter((t) => maxWeight(exp, t.layer, t.head) >= 0.9);
    assert.ok(strong.length >= 10, strong.length + ' thumbnails with a strong line');
    // Canvas blends in sRGB: a line of weight w is drawn at opacity w (to 1/64), so a pixel it
    // covers whole shows the colour mixed with the background in that proportion.
    const mix = (c, w) => c.map((v, i) => v * w + bg[i] * (1 - w));
    let weakest = Infinity;
    for (const t of strong) {
      const full = contrastRatio(mix(parseColor(swatches[t.head]), maxWeight(exp, t.layer, t.head) - 1 / 64), bg);
      assert.ok(t.maxContrast >= full - 0.05, theme + ': L' + t.layer + ' H' + t.head + ' shows ' + t.maxContrast.toFixed(2) + ':1, a whole pixel of its strongest line ' + full.toFixed(2) + ':1');
      weakest = Math.min(weakest, t.maxContrast);
    }
    // On screen, every strong line meets WCAG's 3:1 (bertviz's orange on white: 2.53:1 even
    // fully opaque).
    console.log('  ' + theme + ': weakest head colour ' + worst.toFixed(2) + ':1; weakest strong line on screen ' + weakest.toFixed(2) + ':1 (bertviz: 2.53:1 for its orange on white, fully opaque)');
    assert.ok(weakest >= MIN_GRAPHIC_CONTRAST, theme + ': weakest strong line ' + weakest.toFixed(2) + ':1');
    await shot(page, 'real-pair-model-' + theme);
    assert.deepEqual(log.errors, []);
    await context.close();
  });
}

test('the page adds nothing to the global scope but window.attnviz', async () => {
  const { page, context } = await open('single');
  const extra = await page.evaluate(() => {
    const blank = document.createElement('iframe');
    document.body.append(blank);
    const base = new Set(Object.getOwnPropertyNames(blank.contentWindow));
    const ids = new Set(Array.from(document.querySelectorAll('[id]'), (e) => e.id));
    // (Numbered properties are frames, here the blank one.)
    const out = Object.getOwnPropertyNames(window).filter((k) => !base.has(k) && !ids.has(k) && !/^\d+$/.test(k));
    blank.remove();
    return out;
  });
  assert.deepEqual(extra, ['attnviz']);
  await context.close();
});

test('real-paragraph: a two-finger pinch zooms the matrix (touch)', async () => {
  const { page, context, log } = await open('real-paragraph', { width: 600, height: 900, hasTouch: true });
  await page.click('#tab-matrix');
  await settle(page);
  await page.locator('#matrix-left').scrollIntoViewIfNeeded();
  const g = await geometry(page, 'matrix-left');
  const box = await page.locator('#matrix-left').boundingBox();
  const cx = box.x + g.margin + g.plot / 2;
  const cy = box.y + g.margin + g.plot / 2;
  const cdp = await context.newCDPSession(page);
  const touch = (type, d) => cdp.send('Input.dispatchTouchEvent', {
    type, touchPoints: type === 'touchEnd' ? [] : [{ x: cx - d, y: cy, id: 1 }, { x: cx + d, y: cy, id: 2 }],
  });
  await touch('touchStart', 20);
  for (const d of [30, 45, 60, 80]) await touch('touchMove', d);
  await touch('touchEnd', 0);
  const z = await geometry(page, 'matrix-left');
  assert.ok(z.zoom > 3 && z.zoom < 5, 'fingers 40 → 160 px apart zoom about ×4: ' + z.zoom);
  assert.deepEqual(log.errors, []);
  await context.close();
});

/* ------------------------------------------------------- decoder reports (causal, GQA, generated) */

const cssColor = (page, name) => page.evaluate((n) => getComputedStyle(document.documentElement).getPropertyValue(n).trim(), name);
const rgbOf = (css) => parseColor(css).slice(0, 3);
const near = (a, b, tol) => Math.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]) <= tol;
const triple = (s) => s.split(',').map(Number);

test('causal: the summary and About name the causal mask, kv heads, RoPE, the sink and the generated text', async () => {
  const { page, context, exp, log } = await open('causal');
  assert.equal(exp.mask, 'causal');
  const shape = await page.textContent('#model-shape');
  assert.match(shape, /9 heads over 3 key\/value heads/);
  assert.match(shape, /causal/);
  assert.equal(await page.isVisible('#generated-line'), true);
  const gen = exp.surfaces.filter((_, i) => exp.generated[i]).join('').trim();
  assert.equal(await page.textContent('#generated-text'), gen);
  const about = await page.$$eval('#about-table tr', (rs) => Object.fromEntries(rs.map((r) => [r.cells[0].textContent, r.cells[1].textContent])));
  assert.match(about['Attention'], /causal: a token sees itself and the tokens before it/);
  assert.match(about['Key/value heads'], /kv 1: heads 3, 4, 5/);
  assert.match(about['Positions'], /rotary \(RoPE\)/);
  assert.match(about['Generated'], /tokens #7–9/);
  assert.match(about['Attention sink'], /"The" \(#0/);
  // The sink is tagged in both token columns; its title says why.
  const tags = await page.$$eval('#view-head .tok.sink', (ts) => ts.map((t) => [t.dataset.unit, t.querySelector('.tag').textContent, t.title]));
  assert.equal(tags.length, 2);
  for (const [unit, text, title] of tags) {
    assert.equal(unit, '0');
    assert.equal(text, 'sink');
    assert.match(title, /attention sink/);
  }
  assert.equal(await page.isVisible('#head-causal-hint'), true);
  await shot(page, 'causal-head');
  assert.deepEqual(log.errors, []);
  assert.deepEqual(log.requests, []);
  await context.close();
});

test('causal-junk: the head view draws no masked link, even where the weight is large', async () => {
  const { page, context, exp, log } = await open('causal-junk');
  // Every weight of this report is above zero (a bidirectional softmax), and the value is flagged
  // causal: what the view leaves out, it leaves out because the cell is masked.
  assert.ok(exp.weights.every((w) => w > 0));
  await setThreshold(page, 0);
  const all = range(exp.heads);
  const n = exp.n;
  assert.equal(await lines(page), all.length * n * (n + 1) / 2);
  const thr = safeThreshold(exp, 0.05);
  await setThreshold(page, thr);
  for (const layer of range(exp.layers)) {
    await page.selectOption('#layer-select', String(layer));
    assert.equal(await lines(page), expectedLines(exp, { layer, heads: all, thr }));
  }
  // Hovering a key keeps only the queries that may see it: those at or after it.
  await page.hover('#hv-right .tok[data-unit="4"]');
  assert.equal(await lines(page), expectedLines(exp, { layer: exp.layers - 1, heads: all, thr, toK: 4 }));
  await page.mouse.move(0, 0);
  // Merged into words and with [CLS]/[SEP] hidden, the mask still follows token positions.
  await page.check('#hide-special');
  const thrHidden = safeThreshold(exp, 0.05, { hide: true });
  await setThreshold(page, thrHidden);
  assert.equal(await lines(page), expectedLines(exp, { layer: exp.layers - 1, heads: all, thr: thrHidden, hide: true }));
  await shot(page, 'causal-junk-head');
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('causal-junk: masked matrix cells are hatched, not coloured by their weight; thumbnails too', async () => {
  const { page, context, exp, log } = await open('causal-junk');
  await page.click('#tab-matrix');
  await settle(page);
  const bg = (await page.evaluate(() => getComputedStyle(document.body).backgroundColor)).match(/\d+/g).slice(0, 3).join(',');
  for (const id of ['matrix-left', 'matrix-right']) {
    for (const [a, c] of [[2, 7], [0, 11], [9, 10]]) {
      const colours = await page.evaluate(matrixCellColours, [id, a, c]);
      assert.ok(colours.length >= 2 && colours.includes(bg), id + ' masked (' + a + ', ' + c + ') is hatched: ' + colours);
    }
    for (const [a, c] of [[7, 2], [11, 0], [10, 10]]) {
      const colours = await page.evaluate(matrixCellColours, [id, a, c]);
      assert.equal(colours.length, 1, id + ' visible (' + a + ', ' + c + ') is one colour: ' + colours);
      assert.notEqual(colours[0], bg);
    }
  }
  assert.match(await hoverCell(page, 'matrix-left', 3, 8), /masked: the key comes after the query/);
  assert.equal(await page.locator('#view-matrix canvas.mask-key').first().isVisible(), true);
  await shot(page, 'causal-junk-matrix');
  // Heatmap thumbnails: the top-right corner (masked) is hatched, never a colour of the map.
  await page.click('#tab-model');
  await page.selectOption('#thumb-style', 'heatmap');
  await page.waitForFunction(() => document.getElementById('model-grid').dataset.complete !== '');
  const corner = await page.evaluate(thumbStrip, [0, 1, 'corner']);
  assert.ok(corner.includes(bg) && corner.length >= 2, 'hatched corner: ' + corner);
  await shot(page, 'causal-junk-model');
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('causal: heads group by the key/value head they share', async () => {
  const { page, context, exp, log } = await open('causal');
  assert.deepEqual(exp.kv_head, [0, 0, 0, 1, 1, 1, 2, 2, 2]);
  // The toggle exists for grouped-query attention only, and every head names its kv head.
  assert.equal(await page.isVisible('#kv-control'), true);
  const titles = await page.$$eval('#head-legend button[data-head]', (bs) => bs.map((b) => b.title));
  assert.match(titles[4], /kv head 1, shared with heads 3, 5/);
  await page.check('#group-kv');
  await settle(page);
  const groups = await page.$$eval('#head-legend .kv-group', (gs) => gs.map((g) => Array.from(g.querySelectorAll('button[data-head]'), (b) => Number(b.dataset.head))));
  assert.deepEqual(groups, [[0, 1, 2], [3, 4, 5], [6, 7, 8]]);
  // One colour family per group: every head is closer in hue to its group than to any other.
  const colours = await page.$$eval('#head-legend button[data-head] .swatch', (ss) => ss.map((s) => getComputedStyle(s).backgroundColor));
  const hues = colours.map((c) => oklabHue(parseColor(c)));
  for (let h = 0; h < exp.heads; h++) {
    const mine = exp.kv_head[h];
    const inGroup = range(exp.heads).filter((o) => o !== h && exp.kv_head[o] === mine).map((o) => hueDistance(hues[h], hues[o]));
    const outside = range(exp.heads).filter((o) => exp.kv_head[o] !== mine).map((o) => hueDistance(hues[h], hues[o]));
    assert.ok(Math.max(...inGroup) < Math.min(...outside), 'head ' + h + ': ' + colours);
  }
  // A group's button shows only its heads; again, all of them.
  const thr = safeThreshold(exp, 0.05);
  await setThreshold(page, thr);
  await page.click('#head-legend button[data-kv-group="1"]');
  await settle(page);
  const shown = await page.evaluate(() => window.attnviz.state.shown);
  assert.deepEqual(shown, range(exp.heads).map((h) => exp.kv_head[h] === 1));
  assert.equal(await lines(page), expectedLines(exp, { layer: 2, heads: [3, 4, 5], thr }));
  assert.match(await page.textContent('#head-status'), /key\/value head 1/);
  await shot(page, 'causal-grouped');
  await page.click('#head-legend button[data-kv-group="1"]');
  await settle(page);
  assert.deepEqual(await page.evaluate(() => window.attnviz.state.shown), range(exp.heads).map(() => true));
  // The model grid brackets the groups; g turns grouping off.
  await page.click('#tab-model');
  await settle(page);
  const bands = await page.$$eval('#model-grid .kv-band', (bs) => bs.map((b) => [b.textContent, b.style.gridColumn]));
  assert.deepEqual(bands, [['kv 0', 'span 3'], ['kv 1', 'span 3'], ['kv 2', 'span 3']]);
  await page.keyboard.press('g');
  await settle(page);
  assert.equal(await page.evaluate(() => window.attnviz.state.groupKv), false);
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('causal: generated tokens are marked in every view', async () => {
  const { page, context, exp, log } = await open('causal');
  const genIdx = range(exp.n).filter((i) => exp.generated[i]);
  assert.deepEqual(genIdx, [7, 8, 9]);
  const generated = rgbOf(await cssColor(page, '--generated'));
  // Head view: both token columns, the first generated token under a dashed line.
  for (const side of ['left', 'right']) {
    const marked = await page.$$eval('#hv-' + side + ' .tok.generated', (ts) => ts.map((t) => Number(t.dataset.unit)));
    assert.deepEqual(marked, genIdx);
    assert.equal(await page.$eval('#hv-' + side + ' .tok.gen-first', (t) => Number(t.dataset.unit)), 7);
    const colour = await page.$eval('#hv-' + side + ' .tok[data-unit="8"]', (t) => getComputedStyle(t).color);
    assert.ok(near(rgbOf(colour), generated, 2), colour);
  }
  // Matrix view: generated rows are labelled in the generated colour, the others not.
  await page.click('#tab-matrix');
  await settle(page);
  for (let a = 0; a < exp.n; a++) {
    const colours = (await page.evaluate(matrixRowLabelColours, ['matrix-left', a])).map(triple);
    const orange = colours.some((c) => near(c, generated, 40));
    assert.equal(orange, exp.generated[a], 'row label ' + a + ': ' + colours.length + ' colours');
  }
  // Model view: an edge in the generated colour over the generated rows only.
  await page.click('#tab-model');
  await page.waitForFunction(() => document.getElementById('model-grid').dataset.complete !== '');
  for (const style of ['lines', 'heatmap']) {
    await page.selectOption('#thumb-style', style);
    await page.waitForFunction(() => document.getElementById('model-grid').dataset.complete !== '');
    const genEdge = (await page.evaluate(thumbStrip, [1, 4, 'left', 0.8, 0.95])).map(triple);
    assert.ok(genEdge.every((c) => near(c, generated, 2)), style + ': ' + genEdge);
    const promptEdge = (await page.evaluate(thumbStrip, [1, 4, 'left', 0.1, 0.6])).map(triple);
    assert.ok(!promptEdge.some((c) => near(c, generated, 2)), style + ': ' + promptEdge);
  }
  // Neuron view: the query menu says which tokens were generated.
  const options = await page.$$eval('#neuron-query option', (os) => os.map((o) => o.textContent));
  genIdx.forEach((i) => assert.match(options[i], /\(generated\)$/));
  assert.match(options[0], /\(sink\)$/);
  await page.click('#tab-neuron');
  await shot(page, 'causal-neuron');
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('causal: the neuron view reads each head\'s key/value head, after RoPE, and leaves masked keys out', async () => {
  const { page, context, exp, log } = await open('causal');
  const vec = JSON.parse(readFileSync(join(ART, 'causal.vectors.json'), 'utf8'));
  // Keys are [layers, kv heads, n, d]: 3 of them per layer, not 9.
  assert.equal(vec.keys.length, exp.layers * 3 * exp.n * exp.head_dim);
  await page.click('#tab-neuron');
  await settle(page);
  // The last token is the query on load: it sees every key.
  assert.equal(await page.evaluate(() => window.attnviz.state.neuronQuery), exp.n - 1);
  let worst = 0;
  let worstStored = 0;
  for (let l = 0; l < exp.layers; l++) for (let h = 0; h < exp.heads; h++) for (const q of [0, 3, 6, 9]) {
    const d = await page.evaluate(([L, Hd, Q]) => window.attnviz.neuronData(L, Hd, Q), [l, h, q]);
    const want = expectedSoftmax(exp, vec, l, h, q);
    assert.equal(d.kvHead, exp.kv_head[h]);
    for (let k = 0; k < exp.n; k++) {
      assert.equal(d.masked[k], k > q, 'masked ' + [l, h, q, k]);
      if (k > q) {
        assert.equal(d.scores[k], null);
        assert.equal(d.softmax[k], 0);
        continue;
      }
      worst = Math.max(worst, Math.abs(d.softmax[k] - want[k]));
      worstStored = Math.max(worstStored, Math.abs(d.softmax[k] - rawWeight(exp, l, h, q, k)));
    }
  }
  console.log('  causal: max |page softmax − sidecar softmax| = ' + worst.toExponential(2) +
    ', vs transformers\' attention ' + worstStored.toExponential(2));
  assert.ok(worst < 1e-6, 'page vs sidecar vectors: ' + worst);
  assert.ok(worstStored < 1e-5, 'softmax of the captured (RoPE) vectors vs attention: ' + worstStored);
  await page.selectOption('#head-select', '4');
  const check = await page.textContent('#neuron-check');
  assert.match(check, /kv head 1, shared with heads 3, 5/);
  assert.match(check, /after the rotary position embedding/);
  assert.match(check, /keys after the query are masked/);
  await page.selectOption('#neuron-query', '3');
  await shot(page, 'causal-neuron-q3');
  assert.deepEqual(log.errors, []);
  await context.close();
});

/* ------------------------------------------------- shared links, labels (issue 20) */

/**
 * The colours on the head view's canvas along the vertical line through the middle of the lines,
 * within `dy` CSS px of `y` (canvas CSS px), each [r, g, b, a].
 */
async function columnColours(page, y, dy) {
  await settle(page);
  return page.$eval('#hv-canvas', (c, [y, dy]) => {
    // A copy to read from, so the page's own canvas is never read back.
    const copy = document.createElement('canvas');
    copy.width = c.width;
    copy.height = c.height;
    const ctx = copy.getContext('2d', { willReadFrequently: true });
    ctx.drawImage(c, 0, 0);
    const scale = c.width / c.getBoundingClientRect().width;
    const x = Math.round(c.width / 2);
    const from = Math.max(0, Math.round((y - dy) * scale));
    const to = Math.min(c.height - 1, Math.round((y + dy) * scale));
    const d = ctx.getImageData(x, from, 1, to - from + 1).data;
    const out = [];
    for (let i = 0; i < d.length; i += 4) out.push([d[i], d[i + 1], d[i + 2], d[i + 3]]);
    return out;
  }, [y, dy]);
}

test('shared-links: two heads that share a link both show, side by side, and the picked one is drawn last', async () => {
  const { page, context, exp, log } = await open('shared-links');
  // Heads 0 and 1 put every row wholly on token 0: each link q → 0 is drawn by both.
  for (let q = 0; q < exp.n; q++) {
    assert.equal(exp.weights[(0 * exp.n + q) * exp.n], 1);
    assert.equal(exp.weights[(1 * exp.n + q) * exp.n], 1);
  }
  await page.evaluate(() => window.attnviz.set({ shown: [true, true, false] }));
  assert.equal(await lines(page), 2 * exp.n);
  const swatch = async (h) => parseColor(await page.$eval('#head-legend button[data-head="' + h + '"] .swatch', (s) => getComputedStyle(s).backgroundColor));
  const colours = [await swatch(0), await swatch(1)];
  const hues = colours.map(oklabHue);
  assert.ok(hueDistance(hues[0], hues[1]) > 0.5, 'the two heads have distinct hues');
  // Where each shared link crosses the middle of the canvas: halfway between the query's and
  // the key's rows.
  const rowY = async (side, a) => page.$eval('#hv-' + side + ' .tok[data-unit="' + a + '"]', (t) => {
    const c = document.getElementById('hv-canvas').getBoundingClientRect();
    const r = t.getBoundingClientRect();
    return r.top + r.height / 2 - c.top;
  });
  const y0 = await rowY('right', 0);
  const near = (rgb, target) => Math.max(...rgb.slice(0, 3).map((v, i) => Math.abs(v - target[i]))) <= 40;
  const seen = async (q) => {
    const mid = ((await rowY('left', q)) + y0) / 2;
    const px = (await columnColours(page, mid, 6)).filter((p) => p[3] > 200);
    return colours.map((c) => px.some((p) => near(p, c)));
  };
  for (const q of [2, 5]) assert.deepEqual(await seen(q), [true, true], 'both heads visible on link ' + q + ' → 0');
  // Picking head 0 draws it last; both stay visible.
  await page.evaluate(() => window.attnviz.set({ head: 0, headPicked: true }));
  assert.deepEqual(await page.evaluate(() => window.attnviz.drawn.order), [1, 0]);
  assert.deepEqual(await seen(5), [true, true]);
  // Hovering head 1 in the legend draws it last instead.
  await page.hover('#head-legend button[data-head="1"]');
  await settle(page);
  assert.deepEqual(await page.evaluate(() => window.attnviz.drawn.order), [0, 1]);
  await page.mouse.move(0, 0);
  await settle(page);
  assert.match(await page.$eval('#hv-info', (e) => e.textContent), /drawn once per head, side by side/);
  await shot(page, 'shared-links-head');
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('single: square-root and log colour bars carry ticks where their scale puts them; linear ones none', async () => {
  const { page, context, log } = await open('single');
  await page.evaluate(() => window.attnviz.set({ view: 'matrix', matrixScale: 'linear' }));
  await settle(page);
  const ticks = () => page.$$eval('#matrix-left-ticks .cbar-tick', (ts) => ts.map((t) => {
    const r = t.getBoundingClientRect();
    return { label: t.textContent, at: parseFloat(t.style.left) / 100, x: r.left + r.width / 2, left: r.left, right: r.right };
  }));
  assert.deepEqual(await ticks(), [], 'a linear bar needs none');
  for (const [kind, place] of [['sqrt', (v, top) => Math.sqrt(v / top)], ['log', (v, top) => 1 + Math.log10(v / top) / 3]]) {
    await page.evaluate((k) => window.attnviz.set({ matrixScale: k }), kind);
    await settle(page);
    const top = Number(await page.$eval('#matrix-left-max', (e) => e.textContent));
    const bar = await page.$eval('#view-matrix .matrix-panel .cbar', (c) => { const r = c.getBoundingClientRect(); return { left: r.left, width: r.width }; });
    const got = await ticks();
    assert.ok(got.length >= 2, kind + ': ' + JSON.stringify(got));
    for (const t of got) {
      // A 1-2-5 number, placed where the scale puts it (the bar's top label has 3 digits).
      assert.match(t.label, /^(0\.0*)?[125]0*$/, kind);
      assert.ok(Math.abs(t.at - place(Number(t.label), top)) < 0.01, kind + ' ' + t.label + ' at ' + t.at);
      assert.ok(Math.abs(t.x - (bar.left + 1 + t.at * (bar.width - 2))) < 2, kind + ' ' + t.label + ' drawn off its place');
    }
    // Apart on the bar, and their numbers side by side without overlapping.
    for (let i = 1; i < got.length; i++) {
      assert.ok(got[i].at - got[i - 1].at >= 0.094, kind + ': ticks too close');
      assert.ok(got[i].left >= got[i - 1].right + 2, kind + ': ' + got[i - 1].label + ' and ' + got[i].label + ' overlap');
    }
  }
  await shot(page, 'single-matrix-log-ticks');
  assert.deepEqual(log.errors, []);
  await context.close();
});

test('shared-links: tokens are shown as read, repeated ones with their position, raw on request', async () => {
  const { page, context, log } = await open('shared-links');
  const column = () => page.$$eval('#hv-left .tok', (ts) => ts.map((t) => t.textContent));
  assert.deepEqual(await column(), ['The', 'cat₁', 'sat', 'on', 'the', 'cat₅']);
  await page.check('#raw-tokens');
  await settle(page);
  assert.deepEqual(await column(), ['The', 'Ġcat₁', 'Ġsat', 'Ġon', 'Ġthe', 'Ġcat₅']);
  // The key r toggles back (once the checkbox has let go of the keyboard).
  await page.locator('#raw-tokens').blur();
  await page.keyboard.press('r');
  await settle(page);
  assert.deepEqual(await column(), ['The', 'cat₁', 'sat', 'on', 'the', 'cat₅']);
  // The matrix view labels its rows the same way.
  await page.evaluate(() => window.attnviz.set({ view: 'matrix' }));
  await settle(page);
  assert.match(await page.$eval('#matrix-left-scale', (e) => e.textContent), /attention weight/);
  assert.deepEqual(log.errors, []);
  await context.close();
});
