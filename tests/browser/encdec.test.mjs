// Browser tests of the HTML report of an encoder–decoder run (tiny random BART and T5): one page
// with the encoder, decoder and cross-attention, an Encoder / Decoder / Cross selector, and
// cross-attention drawn decoder tokens × encoder tokens in every view.
//
// Run by `cargo test --release --test suite html_report:: -- --include-ignored`, which writes the
// reports with the CLI into $ATTNVIZ_ARTIFACTS, each beside the CLI's JSON export of the same run
// (`--full-precision`): every expected number here comes from that JSON, not from the page.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';
import { named } from './expect.mjs';

const ART = resolve(process.env.ATTNVIZ_ARTIFACTS || '../artifacts/html');
const SCREENS = join(ART, 'screens');
mkdirSync(SCREENS, { recursive: true });
/** Half a 16-bit storage step, the most a shown weight may differ from the model's. */
const STEP = 0.5 / 65535;

let browser;
before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--no-first-run'],
  });
});
after(async () => { if (browser) await browser.close(); });

function expectations(name) {
  const file = join(ART, name + '.json');
  assert.ok(existsSync(file), file + ' missing: run `cargo test --release --test suite html_report:: -- --include-ignored`');
  return JSON.parse(readFileSync(file, 'utf8'));
}

/** The JSON's weights of one kind: [layers][heads][queries][keys], nested arrays. */
function weightOf(kindJson, l, h, q, k) { return kindJson.attention[l][h][q][k]; }

async function ready(page) {
  await page.waitForFunction(() => document.documentElement.dataset.ready === 'true' ||
    document.querySelector('#status.error'), null, { timeout: 20000 });
  const failure = await page.$eval('#status', (s) => (s.classList.contains('error') ? s.textContent : ''));
  assert.equal(failure, '', 'the page reported an error');
}

/** Switch kind with `action` (a click or a key) and wait for the page to boot on it. */
async function switchKind(page, action) {
  await action();
  await ready(page);
}

async function open(name, { width = 1280, height = 900, hash = '' } = {}) {
  const file = join(ART, name + '.html');
  assert.ok(existsSync(file), file + ' missing');
  const context = await browser.newContext({ viewport: { width, height } });
  const page = await context.newPage();
  const log = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') log.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', (e) => log.push('pageerror: ' + e.message));
  page.on('request', (r) => { if (!r.url().startsWith('file:')) log.push('request: ' + r.url()); });
  await page.goto(pathToFileURL(file).href + hash);
  await ready(page);
  return { page, context, log };
}

async function columns(page) {
  return page.evaluate(() => ({
    // Each token's own text (a decoder's first token also carries a "sink" tag).
    left: [...document.querySelectorAll('#hv-left .tok')].map((t) => [...t.childNodes].filter((n) => n.nodeType === 3).map((n) => n.textContent).join('')),
    right: [...document.querySelectorAll('#hv-right .tok')].map((t) => [...t.childNodes].filter((n) => n.nodeType === 3).map((n) => n.textContent).join('')),
    leftX: document.getElementById('hv-left').getBoundingClientRect().left,
    rightX: document.getElementById('hv-right').getBoundingClientRect().left,
    headings: document.getElementById('hv-heads').hidden ? null
      : [document.getElementById('hv-head-left').textContent, document.getElementById('hv-head-right').textContent],
    pressed: [...document.querySelectorAll('#kind-select button')].filter((b) => b.getAttribute('aria-pressed') === 'true').map((b) => b.dataset.kind),
    kinds: [...document.querySelectorAll('#kind-select button')].map((b) => b.textContent),
  }));
}

/** A threshold no weight of the layer is within 1e-4 of, so quantisation cannot move a line. */
function safeThreshold(kind, l, from) {
  const all = kind.attention[l].flat(2);
  for (let t = from; t < 0.9; t += 0.001) if (all.every((w) => Math.abs(w - t) > 1e-4)) return Number(t.toFixed(3));
  throw new Error('no safe threshold');
}

test('cross-attention: decoder tokens left, encoder tokens right, every line and cell of the JSON', async () => {
  const exp = expectations('encdec-long-source');
  const cross = exp.cross;
  const nt = cross.tokens.length;
  const ns = cross.key_tokens.length;
  assert.ok(ns > 2 * nt, 'a long source over a short target');
  const { page, context, log } = await open('encdec-long-source');
  let c = await columns(page);
  assert.deepEqual(c.kinds, ['Encoder', 'Decoder', 'Cross']);
  assert.deepEqual(c.pressed, ['cross'], 'opens on cross-attention');
  // Shown as read (the JSON's display texts), a repeated one with its number.
  assert.deepEqual(c.left, named(cross.display), 'left: the decoder tokens, in order');
  assert.deepEqual(c.right, named(cross.key_display), 'right: the encoder tokens, in order');
  assert.ok(c.leftX < c.rightX);
  assert.match(c.headings[0], new RegExp('^decoder .*' + nt + '$'));
  assert.match(c.headings[1], new RegExp('^encoder .*' + ns + '$'));
  // Every line of the layer at a safe threshold, counted from the JSON.
  const layer = await page.evaluate(() => window.attnviz.state.layer);
  const thr = safeThreshold(cross, layer, 0.05);
  await page.evaluate((t) => { window.attnviz.set({ threshold: t }); }, thr);
  await page.evaluate(() => window.attnviz.settled());
  let want = 0;
  for (let h = 0; h < cross.attention[layer].length; h++) {
    for (let q = 0; q < nt; q++) for (let k = 0; k < ns; k++) if (weightOf(cross, layer, h, q, k) >= thr) want++;
  }
  assert.ok(want > 0);
  assert.equal(await page.evaluate(() => window.attnviz.drawn.lines), want);
  // Hovering a decoder token leaves only its lines, to encoder tokens.
  await page.hover('#hv-left .tok[data-unit="2"]');
  await page.evaluate(() => window.attnviz.settled());
  let fromOne = 0;
  for (let h = 0; h < cross.attention[layer].length; h++) for (let k = 0; k < ns; k++) if (weightOf(cross, layer, h, 2, k) >= thr) fromOne++;
  assert.equal(await page.evaluate(() => window.attnviz.drawn.lines), fromOne);
  await page.screenshot({ path: join(SCREENS, 'encdec-cross-head.png') });
  // Matrix: decoder rows × encoder columns, cells as in the JSON.
  await page.keyboard.press('3');
  await page.evaluate(() => window.attnviz.settled());
  const g = await page.evaluate(() => window.attnviz.matrixGeometry('matrix-left'));
  assert.equal(g.m, nt, 'rows: decoder tokens');
  assert.equal(g.mk, ns, 'columns: encoder tokens');
  assert.ok(Math.abs(g.plot / g.plotH - ns / nt) < 0.01, 'square cells: the plot is ' + ns + ' × ' + nt);
  assert.match(await page.textContent('#matrix-axes'), /rows are the \d+ decoder .* columns the \d+ encoder/);
  for (const [q, k] of [[0, 0], [nt - 1, ns - 1], [1, ns - 2], [nt - 2, 3]]) {
    const shown = await page.evaluate(([l, q, k]) => window.attnviz.weight(l, 0, q, k), [layer, q, k]);
    assert.ok(Math.abs(shown - weightOf(cross, layer, 0, q, k)) <= STEP + 1e-9, 'cell ' + q + ',' + k);
  }
  await page.screenshot({ path: join(SCREENS, 'encdec-cross-matrix.png') });
  // Model view: non-square heatmap thumbnails (wide: more encoder than decoder tokens).
  await page.evaluate(() => window.attnviz.set({ view: 'model', thumbStyle: 'heatmap' }));
  const thumb = await page.$eval('#model-grid .thumb canvas', (cv) => [cv.getBoundingClientRect().width, cv.getBoundingClientRect().height]);
  assert.ok(thumb[0] > 1.5 * thumb[1], 'a wide thumbnail: ' + thumb);
  // Stats: the alignment figures first, as the JSON has them.
  await page.evaluate(() => window.attnviz.set({ view: 'stats' }));
  assert.equal(await page.$eval('#stat-select', (s) => s.value), 'argmax_share');
  // Neuron: the softmax recomputed from the vectors equals the captured row.
  await page.evaluate(() => window.attnviz.set({ view: 'neuron' }));
  const diff = Number(await page.$eval('#neuron-canvas', (cv) => cv.dataset.maxDiff));
  assert.ok(diff < 2e-5, 'BART cross-attention softmax off by ' + diff);
  assert.equal(await page.$$eval('#neuron-query option', (o) => o.length), nt, 'queries: the decoder tokens');
  // The selector switches kinds (a click, then the keyboard), and the fragment remembers it.
  await switchKind(page, () => page.click('#kind-select button[data-kind="encoder"]'));
  assert.match(await page.evaluate(() => location.hash), /kind=encoder/);
  assert.equal(await page.evaluate(() => window.attnviz.state.view), 'neuron', 'the view is kept');
  await page.evaluate(() => window.attnviz.set({ view: 'head' }));
  c = await columns(page);
  assert.deepEqual(c.pressed, ['encoder']);
  assert.deepEqual(c.left, named(exp.encoder.display));
  assert.deepEqual(c.right, named(exp.encoder.display));
  assert.equal(c.headings, null, 'self-attention: no side headings');
  await switchKind(page, () => page.keyboard.press('d'));
  c = await columns(page);
  assert.deepEqual(c.pressed, ['decoder']);
  assert.deepEqual(c.left, named(exp.decoder.display));
  await page.evaluate(() => window.attnviz.set({ view: 'matrix' }));
  const gd = await page.evaluate(() => window.attnviz.matrixGeometry('matrix-left'));
  assert.equal(gd.m, nt);
  assert.equal(gd.mk, nt);
  assert.equal(await page.$eval('#view-matrix canvas.mask-key', (k) => k.hidden), false, 'masked cells hatched');
  assert.deepEqual(log, []);
  await context.close();
});

test('a long target over a short source, and a link to a kind', async () => {
  const exp = expectations('encdec-long-target');
  const { page, context, log } = await open('encdec-long-target', { width: 600, hash: '#kind=cross&view=matrix' });
  const g = await page.evaluate(() => window.attnviz.matrixGeometry('matrix-left'));
  assert.equal(g.m, exp.cross.tokens.length);
  assert.equal(g.mk, exp.cross.key_tokens.length);
  assert.ok(g.plotH > g.plot, 'a tall matrix');
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 600, 'nothing overflows a 600 px window: ' + width);
  await page.screenshot({ path: join(SCREENS, 'encdec-long-target-matrix.png'), fullPage: true });
  await page.evaluate(() => window.attnviz.set({ view: 'head' }));
  const c = await columns(page);
  assert.equal(c.left.length, exp.cross.tokens.length);
  assert.equal(c.right.length, exp.cross.key_tokens.length);
  assert.deepEqual(log, []);
  await context.close();
});

test('T5: no 1/√d scaling, and the relative-position bias said', async () => {
  const { page, context, log } = await open('encdec-t5', { hash: '#kind=cross&view=neuron' });
  const diff = Number(await page.$eval('#neuron-canvas', (cv) => cv.dataset.maxDiff));
  assert.ok(diff < 2e-5, 'T5 cross-attention softmax (scale 1) off by ' + diff);
  assert.match(await page.textContent('#neuron-check'), /softmax\(q·k\)/);
  await switchKind(page, () => page.keyboard.press('e'));
  assert.match(await page.textContent('#neuron-check'), /relative-position bias/);
  assert.deepEqual(log, []);
  await context.close();
});

test('Firefox: the selector and the cross-attention columns', async () => {
  const exp = expectations('encdec-long-source');
  const ff = await puppeteer.launch({ browser: 'firefox', executablePath: process.env.FIREFOX || '/usr/bin/firefox-esr', headless: true });
  try {
    const page = await ff.newPage();
    const log = [];
    page.on('pageerror', (e) => log.push(e.message));
    page.on('console', (m) => { if (m.type() === 'error') log.push(m.text()); });
    await page.setViewport({ width: 1280, height: 900 });
    await page.goto(pathToFileURL(join(ART, 'encdec-long-source.html')).href);
    const wait = () => page.waitForFunction(() => document.documentElement.dataset.ready === 'true', { timeout: 20000 });
    await wait();
    const count = (sel) => page.$$eval(sel, (t) => t.length);
    assert.equal(await count('#hv-left .tok'), exp.cross.tokens.length);
    assert.equal(await count('#hv-right .tok'), exp.cross.key_tokens.length);
    await page.click('#kind-select button[data-kind="encoder"]');
    await wait();
    assert.equal(await count('#hv-left .tok'), exp.encoder.tokens.length);
    assert.equal(await count('#hv-right .tok'), exp.encoder.tokens.length);
    // In a notebook the page is an about:srcdoc frame, which Firefox cannot reload at a new
    // fragment: the switch happens in the page.
    const page2 = readFileSync(join(ART, 'encdec-long-source.html'), 'utf8').replace(/&/g, '&amp;').replace(/"/g, '&quot;');
    const wrapper = join(ART, 'encdec-frame.html');
    writeFileSync(wrapper, '<!DOCTYPE html><html><body><iframe sandbox="allow-scripts" style="width:1200px;height:800px" srcdoc="' + page2 + '"></iframe></body></html>');
    await page.goto(pathToFileURL(wrapper).href);
    const frame = async () => {
      for (let i = 0; i < 200; i++) {
        const f = page.frames().find((x) => x !== page.mainFrame());
        if (f && await f.evaluate(() => document.documentElement.dataset.ready === 'true').catch(() => false)) return f;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error('the framed report did not load');
    };
    let f = await frame();
    await f.evaluate(() => document.querySelector('#kind-select button[data-kind="decoder"]').click());
    f = await frame();
    const pressed = await f.evaluate(() => [...document.querySelectorAll('#kind-select button[aria-pressed="true"]')].map((b) => b.dataset.kind));
    assert.deepEqual(pressed, ['decoder']);
    assert.equal(await f.evaluate(() => document.querySelectorAll('#hv-left .tok').length), exp.decoder.tokens.length);
    assert.deepEqual(log, []);
  } finally {
    await ff.close();
  }
});
