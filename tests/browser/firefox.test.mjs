// The HTML report in headless Firefox (Debian's firefox-esr, driven over WebDriver BiDi by
// puppeteer-core): it must open from file:// with no console error and no network request, and
// draw what the data says, as in Chromium (report.test.mjs covers every interaction there).
//
// Run by `cargo test --release --test suite html_report:: -- --include-ignored` after it has written the reports.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import puppeteer from 'puppeteer-core';
import {
  expectedLines, safeThreshold, range, rawWeight, parseColor, contrastRatio, MIN_GRAPHIC_CONTRAST,
  expectedScores, maxWeight, expectedSoftmax,
} from './expect.mjs';
import {
  thumbnails, startThumbWatch, stopThumbWatch, neuronPixel, topbarLayout, sentenceLayout, contentWidth,
  matrixCellColours,
} from './page_checks.mjs';

const ART = resolve(process.env.ATTNVIZ_ARTIFACTS || '../artifacts/html');
const SCREENS = join(ART, 'screens');
mkdirSync(SCREENS, { recursive: true });
const FIREFOX = process.env.FIREFOX || '/usr/bin/firefox-esr';

let browser;
before(async () => {
  assert.ok(existsSync(FIREFOX), FIREFOX + ' missing: apt-get install -y firefox-esr');
  browser = await puppeteer.launch({ browser: 'firefox', executablePath: FIREFOX, headless: true });
});
after(async () => { if (browser) await browser.close(); });

async function open(name, { width = 1280, height = 900 } = {}) {
  const file = join(ART, name + '.html');
  assert.ok(existsSync(file), file + ' missing: run `cargo test --release --test suite html_report:: -- --include-ignored`');
  const exp = JSON.parse(readFileSync(join(ART, name + '.expect.json'), 'utf8'));
  const page = await browser.newPage();
  await page.setViewport({ width, height });
  const url = pathToFileURL(file).href;
  const log = { errors: [], requests: [], dialogs: [] };
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warn') log.errors.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', (e) => log.errors.push('pageerror: ' + e.message));
  page.on('dialog', async (d) => { log.dialogs.push(d.message()); await d.dismiss(); });
  // data: URLs never reach the network (Firefox loads one of its own, a font, in every page).
  page.on('request', (r) => { if (r.url() !== url && !r.url().startsWith('data:')) log.requests.push(r.url()); });
  await page.goto(url);
  await page.waitForFunction(() => document.documentElement.dataset.ready === 'true' ||
    document.querySelector('#status.error'), { timeout: 20000 });
  const failure = await page.$eval('#status', (s) => (s.classList.contains('error') ? s.textContent : ''));
  assert.equal(failure, '', 'the page reported an error');
  return { page, exp, log };
}

async function settle(page) { await page.evaluate(() => window.attnviz.settled()); }
async function lines(page) { await settle(page); return Number(await page.$eval('#hv-canvas', (c) => c.dataset.lines)); }

async function setThreshold(page, thr) {
  await page.$eval('#threshold', (el, v) => { el.value = String(v); el.dispatchEvent(new Event('input')); }, thr);
  await settle(page);
  assert.equal(await page.evaluate(() => window.attnviz.state.threshold), thr);
}

for (const name of ['single', 'pair', 'injection']) {
  test('firefox ' + name + ': loads clean from file:// and draws the expected lines', async () => {
    const { page, exp, log } = await open(name);
    await page.click('#tab-head');
    await settle(page);
    assert.equal(await page.$eval('#sentence-a', (e) => e.textContent), exp.text);
    assert.equal(await page.$$eval('#hv-left .tok', (ts) => ts.length), exp.n);
    const thr = safeThreshold(exp, 0.03);
    await setThreshold(page, thr);
    const all = range(exp.heads);
    assert.equal(await lines(page), expectedLines(exp, { layer: 0, heads: all, thr }));
    await page.select('#layer-select', String(exp.layers - 1));
    assert.equal(await lines(page), expectedLines(exp, { layer: exp.layers - 1, heads: all, thr }));
    await page.click('#tab-model');
    await settle(page);
    assert.equal(await page.$$eval('#model-grid .thumb', (ts) => ts.length), exp.layers * exp.heads);
    await page.screenshot({ path: join(SCREENS, 'firefox-' + name + '.png') });
    assert.deepEqual(log.dialogs, [], 'no alert ran');
    assert.deepEqual(log.errors, []);
    assert.deepEqual(log.requests, []);
    await page.close();
  });
}

test('firefox causal: masked cells hatched and never linked, heads grouped by kv head, the neuron view reads kv heads', async () => {
  const { page, exp, log } = await open('causal-junk');
  await setThreshold(page, 0);
  assert.equal(await lines(page), exp.heads * exp.n * (exp.n + 1) / 2);
  await page.click('#tab-matrix');
  await settle(page);
  const bg = (await page.evaluate(() => getComputedStyle(document.body).backgroundColor)).match(/\d+/g).slice(0, 3).join(',');
  const masked = await page.evaluate(matrixCellColours, ['matrix-left', 2, 7]);
  assert.ok(masked.length >= 2 && masked.includes(bg), 'hatched: ' + masked);
  assert.equal((await page.evaluate(matrixCellColours, ['matrix-left', 7, 2])).length, 1);
  await page.screenshot({ path: join(SCREENS, 'firefox-causal-junk-matrix.png') });
  assert.deepEqual(log.errors, []);
  await page.close();

  const real = await open('causal');
  const vec = JSON.parse(readFileSync(join(ART, 'causal.vectors.json'), 'utf8'));
  await real.page.click('#group-kv');
  await settle(real.page);
  assert.equal(await real.page.$$eval('#head-legend .kv-group', (gs) => gs.length), 3);
  await real.page.click('#tab-neuron');
  await settle(real.page);
  for (const h of [0, 4, 8]) {
    const d = await real.page.evaluate((hd) => window.attnviz.neuronData(2, hd, 6), h);
    const want = expectedSoftmax(real.exp, vec, 2, h, 6);
    for (let k = 0; k < real.exp.n; k++) {
      if (k > 6) assert.equal(d.scores[k], null);
      else assert.ok(Math.abs(d.softmax[k] - want[k]) < 1e-6, 'head ' + h + ' key ' + k);
    }
  }
  await real.page.screenshot({ path: join(SCREENS, 'firefox-causal-neuron.png') });
  assert.deepEqual(real.log.errors, []);
  assert.deepEqual(real.log.requests, []);
  await real.page.close();
});

/* ------------------------------------------------- layout, legibility and state (issue 8) */

const shot = (page, name) => page.screenshot({ path: join(SCREENS, 'firefox-' + name + '.png') });

test('firefox real-paragraph: the matrix fills the window, zooms, and hover stays exact', async () => {
  const { page, exp, log } = await open('real-paragraph', { width: 1400, height: 900 });
  await page.click('#tab-matrix');
  await page.select('#layer-select', '2');
  await page.select('#head-select', '4');
  await settle(page);
  const avail = await page.evaluate(contentWidth);
  const g = await page.evaluate(() => window.attnviz.matrixGeometry('matrix-left'));
  assert.ok(g.side >= Math.min((avail - 24) / 2, 900 - 120) - 1, 'panel ' + g.side + ' of ' + avail);
  await page.click('#matrix-zoom-in');
  await page.click('#matrix-zoom-in');
  await settle(page);
  const z = await page.evaluate(() => window.attnviz.matrixGeometry('matrix-left'));
  assert.equal(z.zoom, 4);
  const [a, c] = [Math.floor(z.oy) + 5, Math.floor(z.ox) + 9];
  await page.evaluate(() => document.getElementById('matrix-left').scrollIntoView({ block: 'center' }));
  const box = await (await page.$('#matrix-left')).boundingBox();
  for (const [fx, fy] of [[0.5, 0.5], [0.15, 0.85]]) {
    await page.mouse.move(box.x + z.margin + (c - z.ox + fx) * z.cell, box.y + z.margin + (a - z.oy + fy) * z.cell);
    const tip = await page.$eval('#tooltip', (t) => t.textContent);
    assert.ok(tip.includes('(#' + a + ')') && tip.includes('(#' + c + ')'), tip);
    assert.ok(Math.abs(Number(tip.match(/weight (\d\.\d{5})/)[1]) - rawWeight(exp, 2, 4, a, c)) <= 1.3e-5, tip);
  }
  await shot(page, 'real-paragraph-matrix-zoomed');
  await page.evaluate(() => window.scrollTo(0, 0)); // the button, clear of the sticky top bar
  await page.click('#matrix-zoom-reset');
  assert.equal(await page.evaluate(() => window.attnviz.matrixGeometry('matrix-left').zoom), 1);
  assert.deepEqual(log.errors, []);
  await page.close();
});

test('firefox real-pair: q·k bars grow from a labelled zero axis', async () => {
  const { page, exp, log } = await open('real-pair');
  const vec = JSON.parse(readFileSync(join(ART, 'real-pair.vectors.json'), 'utf8'));
  await page.click('#tab-neuron');
  await page.select('#layer-select', '2');
  await page.select('#head-select', '4');
  await page.select('#neuron-query', '5');
  await settle(page);
  const g = await page.evaluate(() => window.attnviz.neuronGeometry());
  const scores = expectedScores(exp, vec, 2, 4, 5);
  const lo = Math.min(0, ...scores);
  const hi = Math.max(0, ...scores);
  const axis = g.cols.score + ((0 - lo) / (hi - lo)) * g.barW;
  assert.ok(Math.abs(g.axisX - axis) < 1e-6);
  assert.ok(g.ticks.some((t) => t.text === '0' && Math.abs(t.x - axis) < 1e-9));
  const kNeg = scores.indexOf(Math.min(...scores));
  const y = g.y0 + g.keys.indexOf(kNeg) * g.rh + g.rh / 2;
  const left = await page.evaluate(neuronPixel, [axis - 3, y]);
  assert.ok(left[2] > left[0] + 40, 'the negative bar is left of the axis: ' + left);
  await shot(page, 'real-pair-neuron');
  assert.deepEqual(log.errors, []);
  await page.close();
});

test('firefox real-paragraph: no head outlined on load, the sentence on one line, the tabs on one line at 600 px', async () => {
  const { page, log } = await open('real-paragraph', { width: 600, height: 800 });
  assert.equal(await page.$$eval('#head-legend button.current', (b) => b.length), 0);
  const s = await page.evaluate(sentenceLayout);
  assert.ok(s.height <= 1.5 * s.lineHeight && s.cut && s.toggle, JSON.stringify(s));
  await page.click('#summary-toggle');
  const e = await page.evaluate(sentenceLayout);
  assert.ok(!e.cut && e.height >= 3 * e.lineHeight, JSON.stringify(e));
  const t = await page.evaluate(topbarLayout);
  assert.equal(new Set(t.tabTops).size, 1, 'tabs on one row: ' + t.tabTops);
  assert.ok(t.height <= 48 && t.right <= t.width, JSON.stringify(t));
  await shot(page, 'real-paragraph-600');
  assert.deepEqual(log.errors, []);
  await page.close();
});

test('firefox real-paragraph: the model grid keeps its drawing through a resize', async () => {
  const { page, log } = await open('real-paragraph', { width: 1400, height: 900 });
  await page.click('#tab-model');
  await page.waitForFunction(() => document.getElementById('model-grid').dataset.complete !== '');
  const job = await page.$eval('#model-grid', (g) => g.dataset.complete);
  await page.evaluate(startThumbWatch);
  await page.setViewport({ width: 900, height: 900 });
  await page.waitForFunction((j) => { const c = document.getElementById('model-grid').dataset.complete; return c !== '' && c !== j; }, {}, job);
  const watch = await page.evaluate(stopThumbWatch);
  assert.ok(watch.frames >= 2);
  assert.equal(watch.worst, 0, 'no thumbnail was ever empty');
  const after = await page.evaluate(thumbnails);
  assert.ok(after.every((t) => !t.blank && Math.abs(t.width - t.cssWidth) < 1));
  assert.deepEqual(log.errors, []);
  await page.close();
});

for (const theme of ['light', 'dark']) {
  test('firefox real-pair: thumbnails and head colours reach 3:1 against the ' + theme + ' background', async () => {
    const { page, exp, log } = await open('real-pair');
    await page.evaluate((t) => window.attnviz.set({ theme: t }), theme);
    await settle(page);
    const bg = parseColor(await page.evaluate(() => getComputedStyle(document.body).backgroundColor));
    const swatches = await page.$$eval('#head-legend .swatch', (ss) => ss.map((s) => getComputedStyle(s).backgroundColor));
    assert.ok(swatches.every((c) => contrastRatio(parseColor(c), bg) >= MIN_GRAPHIC_CONTRAST), swatches.join(' '));
    await page.click('#tab-model');
    await page.waitForFunction(() => document.getElementById('model-grid').dataset.complete !== '');
    const strong = (await page.evaluate(thumbnails)).filter((t) => maxWeight(exp, t.layer, t.head) >= 0.9);
    assert.ok(strong.length >= 10 && strong.every((t) => t.maxContrast >= MIN_GRAPHIC_CONTRAST), 'strong lines: ' + strong.map((t) => t.maxContrast.toFixed(2)).join(' '));
    await shot(page, 'real-pair-model-' + theme);
    assert.deepEqual(log.errors, []);
    await page.close();
  });
}
