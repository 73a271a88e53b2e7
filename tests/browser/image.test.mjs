// Browser tests of the image view of a vision model's report (tiny random DeiT: CLS, DIST and a
// 4 × 4 grid of patches over an 80 × 64 picture resized to 32 × 32): the picture with the
// attention of the hovered or clicked patch (or CLS) drawn over it, the special tokens beside
// it, every layer × head as small overlays, and the other views labelling patches r<row>c<col>.
//
// Run by `cargo test --release --test suite html_report:: -- --include-ignored`, which writes the
// report with the CLI into $ATTNVIZ_ARTIFACTS beside the CLI's JSON export of the same run
// (`--full-precision`): every expected weight and cell here comes from that JSON, not from the
// page.

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

/** The token of the patch at (row, col), from the JSON's cells. */
function patchToken(exp, row, col) {
  return exp.image.cells.findIndex((c) => c.kind === 'patch' && c.row === row && c.col === col);
}

function assertRow(got, want, what, tol = STEP + 1e-9) {
  assert.equal(got.length, want.length, what + ': one weight per token');
  for (let k = 0; k < want.length; k++) assert.ok(Math.abs(got[k] - want[k]) <= tol, what + ', key ' + k + ': ' + got[k] + ' vs ' + want[k]);
}

async function ready(page) {
  await page.waitForFunction(() => document.documentElement.dataset.ready === 'true' ||
    document.querySelector('#status.error'), null, { timeout: 20000 });
  const failure = await page.$eval('#status', (s) => (s.classList.contains('error') ? s.textContent : ''));
  assert.equal(failure, '', 'the page reported an error');
}

const drawn = (page) => page.evaluate(async () => { await window.attnviz.settled(); return window.attnviz.image(); });
/** The main canvas's pixels, as a short fingerprint, and its box on the page. */
const canvasState = (page) => page.evaluate(() => {
  const c = document.getElementById('image-canvas');
  // Read through a copy made for reading: getImageData on the page's own canvas again and again
  // makes Chromium warn (willReadFrequently), and the page itself never reads it back.
  const copy = document.createElement('canvas');
  copy.width = c.width;
  copy.height = c.height;
  const cx = copy.getContext('2d', { willReadFrequently: true });
  cx.drawImage(c, 0, 0);
  const d = cx.getImageData(0, 0, c.width, c.height).data;
  let hash = 0;
  for (let i = 0; i < d.length; i += 1) hash = (hash * 31 + d[i]) >>> 0;
  const r = c.getBoundingClientRect();
  return { hash, left: r.left, top: r.top, width: r.width, height: r.height };
});
/** The page point at the centre of patch (row, col), from the canvas box and the JSON's grid. */
function patchPoint(box, exp, row, col) {
  const [iw, ih] = exp.image.input;
  const p = exp.image.patch;
  return [box.left + ((col + 0.5) * p * box.width) / iw, box.top + ((row + 0.5) * p * box.height) / ih];
}

test('image view: CLS over the picture first, a hovered patch redraws the overlay, a click keeps it', async () => {
  const exp = expectations('image-deit');
  const [rows, cols] = exp.image.grid;
  assert.deepEqual([rows, cols], [4, 4]);
  const context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
  const page = await context.newPage();
  const log = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') log.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', (e) => log.push('pageerror: ' + e.message));
  page.on('request', (r) => { if (!r.url().startsWith('file:') && !r.url().startsWith('data:')) log.push('request: ' + r.url()); });
  await page.goto(pathToFileURL(join(ART, 'image-deit.html')).href);
  await ready(page);
  // Opens on the image view, its tab shown and selected.
  assert.equal(await page.getAttribute('#tab-image', 'aria-selected'), 'true');
  assert.equal(await page.isVisible('#view-image'), true);
  let d = await drawn(page);
  const cls = exp.image.cells.findIndex((c) => c.kind === 'class');
  const dist = exp.image.cells.findIndex((c) => c.kind === 'distillation');
  assert.equal(d.query, cls, 'CLS is the first query');
  assert.equal(d.blend, 'pixels', 'the picture was read back and blended as the PNG figures do');
  const layer = d.layer;
  assert.equal(layer, exp.attention.length - 1, 'the last layer, as the CLI selects');
  assertRow(d.row, exp.attention[layer][d.head][cls], 'CLS row');
  // The overlay's grid holds each patch's weight at its place.
  const t = patchToken(exp, 1, 2);
  assert.ok(Math.abs(d.grid[1 * cols + 2] - exp.attention[layer][d.head][cls][t]) <= STEP + 1e-9);
  // Beside the picture: CLS and DIST, with their shares of the row.
  assert.deepEqual(d.specials.map((s) => s.label), ['CLS', 'DIST']);
  assert.ok(Math.abs(d.specials[1].value - exp.attention[layer][d.head][cls][dist]) <= STEP + 1e-9);
  assert.deepEqual(await page.$$eval('#image-specials button', (b) => b.map((x) => x.textContent)), ['CLS', 'DIST']);
  // Every layer × head as a small overlay.
  assert.equal(d.thumbs, exp.attention.length * exp.attention[0].length);
  const before = await canvasState(page);

  // Hovering patch (2, 1) makes it the query: another row, another drawing, outlined there.
  const [x, y] = patchPoint(before, exp, 2, 1);
  await page.mouse.move(x, y);
  d = await drawn(page);
  const p21 = patchToken(exp, 2, 1);
  assert.equal(d.query, p21, 'the hovered patch is the query');
  assertRow(d.row, exp.attention[layer][d.head][p21], 'hovered patch row');
  const hovered = await canvasState(page);
  assert.notEqual(hovered.hash, before.hash, 'the overlay changed with the hovered patch');
  assert.match(await page.textContent('#image-caption'), /^Query r2c1 \(pointed at\)/);
  assert.match(await page.textContent('#tooltip'), /Query r2c1/);
  await page.screenshot({ path: join(SCREENS, 'image-deit-hover.png') });
  // Another patch, another overlay.
  const [x2, y2] = patchPoint(before, exp, 0, 3);
  await page.mouse.move(x2, y2);
  d = await drawn(page);
  assert.equal(d.query, patchToken(exp, 0, 3));
  assert.notEqual((await canvasState(page)).hash, hovered.hash);
  // Leaving the picture goes back to CLS, with CLS's very drawing.
  await page.mouse.move(5, 5);
  d = await drawn(page);
  assert.equal(d.query, cls);
  assert.equal((await canvasState(page)).hash, before.hash, 'back to the CLS overlay');
  // A click keeps the patch as the query after the pointer leaves.
  await page.mouse.click(x, y);
  await page.mouse.move(5, 5);
  d = await drawn(page);
  assert.equal(d.query, p21, 'the clicked patch stays the query');
  // The DIST button makes the distillation token the query.
  await page.click('#image-specials button[data-token="' + dist + '"]');
  await page.mouse.move(5, 5);
  d = await drawn(page);
  assert.equal(d.query, dist);
  assertRow(d.row, exp.attention[layer][d.head][dist], 'DIST row');
  // Layer and head: a thumbnail click chooses them.
  await page.click('#image-grid canvas[data-layer="0"][data-head="1"]');
  await page.mouse.move(5, 5);
  d = await drawn(page);
  assert.deepEqual([d.layer, d.head, d.source], [0, 1, 'head']);
  assertRow(d.row, exp.attention[0][1][dist], 'layer 0 head 1');
  assert.equal(await page.inputValue('#layer-select'), '0');
  assert.equal(await page.isVisible('#head-select'), true, 'the head menu shows for one head');
  // The mean over heads.
  await page.selectOption('#image-source', 'mean');
  d = await drawn(page);
  const heads = exp.attention[0].length;
  const mean = exp.attention[0][0][dist].map((_, k) => exp.attention[0].reduce((s, hh) => s + hh[dist][k], 0) / heads);
  assertRow(d.row, mean, 'mean over heads');
  assert.equal(await page.isVisible('#head-select'), false, 'no head to choose for the mean');
  // The tooltip names the map shown and gives its numbers: the mean over heads of the kept
  // query's (DIST's) weight on the pointed patch, and of the patch's own weight on itself.
  const meanOf = (q, k) => exp.attention[0].reduce((s, hh) => s + hh[q][k], 0) / heads;
  await page.mouse.move(x, y);
  let tip = await page.textContent('#tooltip');
  assert.match(tip, /mean over \d+ heads/);
  const number = (re) => Number(re.exec(tip)[1]);
  assert.ok(Math.abs(number(/DIST \(kept query\) → r2c1: ([\d.]+)/) - meanOf(dist, p21)) <= 1e-5, tip);
  assert.ok(Math.abs(number(/r2c1 → itself: ([\d.]+)/) - meanOf(p21, p21)) <= 1e-5, tip);
  await page.mouse.move(5, 5);
  // Rollout, from the analysis.
  const options = await page.$$eval('#image-source option', (o) => o.map((x) => x.value));
  assert.ok(options.includes('rollout'), options.join(','));
  await page.selectOption('#image-source', 'rollout');
  d = await drawn(page);
  assert.equal(d.source, 'rollout');
  assertRow(d.row, exp.rollout[0][dist], 'rollout through layer 0', 1e-5);
  await page.mouse.move(x, y);
  tip = await page.textContent('#tooltip');
  assert.match(tip, /Attention rollout, through layer/);
  assert.ok(Math.abs(number(/DIST \(kept query\) → r2c1: ([\d.]+)/) - exp.rollout[0][dist][p21]) <= 1e-5, tip);
  assert.ok(Math.abs(number(/r2c1 → itself: ([\d.]+)/) - exp.rollout[0][p21][p21]) <= 1e-5, tip);
  assert.match(await page.textContent('#image-caption'), /rollout weight on each patch/);
  await page.mouse.move(5, 5);
  await page.screenshot({ path: join(SCREENS, 'image-deit-rollout.png') });
  // The other views label patches by grid position.
  await page.keyboard.press('4');
  const menu = await page.$$eval('#neuron-query option', (o) => o.map((x) => x.textContent));
  assert.equal(menu[p21], p21 + ': r2c1');
  assert.equal(menu[cls], cls + ': CLS');
  // The stats view's token norms: one row per layer, CLS and DIST by name, from the JSON.
  await page.keyboard.press('5');
  assert.equal(await page.isVisible('#token-norms'), true);
  const norms = await page.$$eval('#token-norms tr', (rows) => rows.map((r) => [...r.children].map((c) => c.textContent)));
  assert.deepEqual(norms[0].slice(0, 3), ['Layer', 'CLS', 'DIST']);
  assert.equal(norms.length, 1 + exp.attention.length);
  for (let l = 0; l < exp.attention.length; l++) {
    assert.equal(norms[1 + l][1], exp.image.norms[l][cls].toFixed(2), 'CLS norm, layer ' + l);
    assert.equal(norms[1 + l][2], exp.image.norms[l][dist].toFixed(2), 'DIST norm, layer ' + l);
  }
  await page.screenshot({ path: join(SCREENS, 'image-deit-stats.png'), fullPage: true });
  await page.keyboard.press('6');
  assert.equal(await page.isVisible('#view-image'), true, 'key 6 opens the image view');
  const about = await page.textContent('#about-table');
  assert.match(about, /80×64 px as given, 32×32 px as the model saw it/);
  assert.match(about, /4 rows × 4 columns of 8×8 px/);
  assert.deepEqual(log, [], 'no error, warning or request');
  await context.close();
});

test('image view in Firefox: the picture drawn, a hovered patch is the query', async () => {
  const exp = expectations('image-deit');
  const ff = await puppeteer.launch({ browser: 'firefox', executablePath: process.env.FIREFOX || '/usr/bin/firefox-esr', headless: true });
  try {
    const page = await ff.newPage();
    const log = [];
    page.on('pageerror', (e) => log.push(e.message));
    page.on('console', (m) => { if (m.type() === 'error') log.push(m.text()); });
    await page.setViewport({ width: 1280, height: 1000 });
    await page.goto(pathToFileURL(join(ART, 'image-deit.html')).href);
    await page.waitForFunction(() => document.documentElement.dataset.ready === 'true', { timeout: 20000 });
    let d = await drawn(page);
    assert.equal(d.blend, 'pixels');
    const box = await canvasState(page);
    const [x, y] = patchPoint(box, exp, 3, 0);
    await page.mouse.move(x, y);
    d = await drawn(page);
    const t = patchToken(exp, 3, 0);
    assert.equal(d.query, t);
    assertRow(d.row, exp.attention[d.layer][d.head][t], 'Firefox: hovered patch row');
    assert.notEqual((await canvasState(page)).hash, box.hash);
    await page.screenshot({ path: join(SCREENS, 'image-deit-firefox.png') });
    assert.deepEqual(log, []);
  } finally {
    await ff.close();
  }
});

/** A vision-language model's report (tiny random LLaVA, token 30 asked for): opens on the
 *  image view with that token's row drawn over the picture's 16 image tokens, its shares on
 *  the picture, the sink and the text beside it, and each layer's (mean of heads) in a strip;
 *  another query token from the menu redraws it; hovering a patch keeps the query. Every number from the CLI's JSON of the same run. */
async function checkLlava(page, what) {
  const exp = expectations('image-llava');
  const pic = exp.pictures[0];
  const [rows, cols] = pic.image.grid;
  await page.goto(pathToFileURL(join(ART, 'image-llava.html')).href);
  await page.waitForFunction(() => document.documentElement.dataset.ready === 'true' ||
    document.querySelector('#status.error'), { timeout: 20000 });
  let d = await drawn(page);
  assert.equal(d.query, 30, what + ': the asked token is the query');
  assert.equal(d.blend, 'pixels', what + ': the picture was read back and blended');
  const layer = d.layer;
  const row = exp.attention[layer][d.head][30];
  assertRow(d.row, row, what + ': token 30 row');
  // Each patch's weight is that of its image token, the picture's first unit on.
  for (const [k, c] of pic.image.cells.entries()) {
    assert.ok(Math.abs(d.grid[c.row * cols + c.col] - row[pic.first + k]) <= STEP + 1e-9, what + ': cell ' + k);
  }
  let onPicture = 0;
  for (let k = 0; k < pic.count; k++) onPicture += row[pic.first + k];
  assert.ok(Math.abs(d.specials[0][1] - onPicture) <= pic.count * STEP + 1e-9, what + ': the picture\u2019s share');
  assert.ok(Math.abs(d.specials[1][1] - row[0]) <= STEP + 1e-9, what + ': the sink\u2019s share');
  assert.equal(d.thumbs, exp.attention.length * exp.attention[0].length);
  // Each layer's strip of shares: the mean over its heads of token 30's row on the picture, the
  // sink and the text.
  assert.equal(d.layerShares.length, exp.attention.length, what + ': a strip per layer');
  exp.attention.forEach((heads, l) => {
    const mean = (f) => heads.reduce((a, h) => a + f(h[30]), 0) / heads.length;
    const pictureShare = mean((r) => r.slice(pic.first, pic.first + pic.count).reduce((a, v) => a + v, 0));
    const sinkShare = mean((r) => r[0]);
    const textShare = mean((r) => r.reduce((a, v) => a + v, 0)) - pictureShare - sinkShare;
    const got = d.layerShares[l].map((p) => p[1]);
    assertRow(got, [pictureShare, sinkShare, textShare], what + ': layer ' + l + '\u2019s shares', exp.tokens.length * STEP + 1e-7);
  });
  // Hovering a patch keeps the query.
  const box = await canvasState(page);
  const [iw, ih] = pic.image.input;
  const p = pic.image.patch;
  await page.mouse.move(box.left + (1.5 * p * box.width) / iw, box.top + (2.5 * p * box.height) / ih);
  d = await drawn(page);
  assert.equal(d.query, 30, what + ': hovering keeps the query');
  // Another token from the menu: its row.
  const before = await canvasState(page);
  // Playwright's page chooses with selectOption, Puppeteer's with select.
  if (typeof page.selectOption === 'function') await page.selectOption('#image-query', '40');
  else await page.select('#image-query', '40');
  d = await drawn(page);
  assert.equal(d.query, 40, what + ': the chosen token is the query');
  assertRow(d.row, exp.attention[layer][d.head][40], what + ': token 40 row');
  assert.notEqual((await canvasState(page)).hash, before.hash, what + ': the overlay changed');
  // The menu offers no image token.
  const offered = await page.$$eval('#image-query option', (o) => o.map((x) => Number(x.value)));
  assert.equal(offered.length, exp.tokens.length - pic.count);
  assert.ok(offered.every((u) => u < pic.first || u >= pic.first + pic.count));
  assert.equal(rows * cols, pic.count);
}

test('image view of a vision-language model: a token\u2019s attention over its picture, in Chromium', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
  const page = await context.newPage();
  const log = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') log.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', (e) => log.push('pageerror: ' + e.message));
  await checkLlava(page, 'Chromium');
  await page.screenshot({ path: join(SCREENS, 'image-llava.png') });
  assert.deepEqual(log, []);
  await context.close();
});

test('image view of a vision-language model in Firefox', async () => {
  const ff = await puppeteer.launch({ browser: 'firefox', executablePath: process.env.FIREFOX || '/usr/bin/firefox-esr', headless: true });
  try {
    const page = await ff.newPage();
    const log = [];
    page.on('pageerror', (e) => log.push(e.message));
    page.on('console', (m) => { if (m.type() === 'error') log.push(m.text()); });
    await page.setViewport({ width: 1280, height: 1000 });
    await checkLlava(page, 'Firefox');
    await page.screenshot({ path: join(SCREENS, 'image-llava-firefox.png') });
    assert.deepEqual(log, []);
  } finally {
    await ff.close();
  }
});

/** A picture cut into tiles (tiny random SmolVLM, 2 × 2 tiles and the global view, each a run of
 *  image tokens): the image view draws the tiles put back together, each cell of the stitched
 *  grid the weight of its tile's token (the tile at row r, column c of the tiles moves its cells
 *  by r and c tile grids), the picture's share adding every run; the menu offers no token of any
 *  run. Every number from the CLI's JSON of the same run. */
async function checkTiles(page, what) {
  const exp = expectations('image-smolvlm');
  const tiles = exp.pictures.filter((p) => p.tile && p.tile.at);
  assert.equal(tiles.length, 4, what + ': four tiles');
  const [gr, gc] = tiles[0].image.grid;
  const cols = tiles[0].tile.of[1] * gc;
  await page.goto(pathToFileURL(join(ART, 'image-smolvlm.html')).href);
  // Either driver's signature: the options second (Puppeteer), an argument for Playwright.
  await page.waitForFunction(() => document.documentElement.dataset.ready === 'true' ||
    document.querySelector('#status.error'), { timeout: 20000 });
  assert.equal(await page.$eval('#status', (s) => (s.classList.contains('error') ? s.textContent : '')), '', what);
  const d = await drawn(page);
  const n = exp.tokens.length;
  assert.equal(d.query, 47, what + ': the asked token (the last) is the query');
  assert.equal(n, 48, what + ': 48 tokens');
  assert.equal(d.blend, 'pixels', what + ': the picture was read back and blended');
  assert.equal(d.grid.length, tiles[0].tile.of[0] * gr * cols, what + ': one cell per tile token');
  const row = exp.attention[d.layer][d.head][n - 1];
  for (const t of tiles) {
    const [tr, tc] = t.tile.at;
    for (const [k, c] of t.image.cells.entries()) {
      const at = (tr * gr + c.row) * cols + tc * gc + c.col;
      assert.ok(Math.abs(d.grid[at] - row[t.first + k]) <= STEP + 1e-9, what + ': tile ' + t.tile.at + ' cell ' + k);
    }
  }
  let onPicture = 0;
  for (const p of exp.pictures) for (let k = 0; k < p.count; k++) onPicture += row[p.first + k];
  assert.ok(Math.abs(d.specials[0][1] - onPicture) <= n * STEP + 1e-9, what + ': the picture\u2019s share, every run');
  const offered = await page.$$eval('#image-query option', (o) => o.map((x) => Number(x.value)));
  const inRun = (u) => exp.pictures.some((p) => u >= p.first && u < p.first + p.count);
  assert.equal(offered.length, n - exp.pictures.reduce((a, p) => a + p.count, 0), what + ': no image token offered');
  assert.ok(offered.every((u) => !inRun(u)));
  const info = await page.$eval('#image-info', (e) => e.textContent);
  assert.match(info, /2×2 tiles put back together/, what);
}

test('image view of a picture cut into tiles: the tiles put back together, in Chromium and Firefox', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
  const page = await context.newPage();
  const log = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') log.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', (e) => log.push('pageerror: ' + e.message));
  await checkTiles(page, 'Chromium');
  await page.screenshot({ path: join(SCREENS, 'image-smolvlm.png') });
  assert.deepEqual(log, []);
  await context.close();
  const ff = await puppeteer.launch({ browser: 'firefox', executablePath: process.env.FIREFOX || '/usr/bin/firefox-esr', headless: true });
  try {
    const fpage = await ff.newPage();
    const flog = [];
    fpage.on('pageerror', (e) => flog.push(e.message));
    fpage.on('console', (m) => { if (m.type() === 'error') flog.push(m.text()); });
    await fpage.setViewport({ width: 1280, height: 1000 });
    await checkTiles(fpage, 'Firefox');
    assert.deepEqual(flog, []);
  } finally {
    await ff.close();
  }
});

/** The matrix view of a vision-language model's report: its picture is one band labelled by the
 *  picture and its grid, whose column is the sum of each row's attention to the picture's image
 *  tokens and whose row the mean of their rows (every row still summing to 1); a click on the
 *  band's button shows the tokens one by one (the JSON's matrix itself, with the picture's own
 *  mask: causal for LLaVA, in full for Gemma 3), which stays so on another layer; a click on a
 *  token's label collapses them back. Every number from the CLI's JSON of the same run. */
async function checkBands(page, name, what) {
  const exp = expectations(name);
  const pic = exp.pictures[0];
  const [f, c] = [pic.first, pic.count];
  const n = exp.tokens.length;
  const label = 'picture 1 \u00b7 ' + pic.image.grid[0] + '\u00d7' + pic.image.grid[1];
  await page.goto(pathToFileURL(join(ART, name + '.html')).href + '#view=matrix');
  // Playwright's and Puppeteer's waitForFunction both take this form.
  await page.waitForFunction(() => document.documentElement.dataset.ready === 'true' ||
    document.querySelector('#status.error'), { timeout: 20000 });
  const panel = () => page.evaluate(async () => { await window.attnviz.settled(); return window.attnviz.matrix('matrix-left'); });
  const at = () => page.evaluate(() => ({ layer: window.attnviz.state.layer, head: window.attnviz.state.head }));
  let { layer, head } = await at();
  let A = exp.attention[layer][head];
  let d = await panel();
  // Collapsed: units are the text tokens before the picture, the band, the text after it.
  assert.equal(d.m, n - c + 1, what + ': one band for the picture\u2019s ' + c + ' tokens');
  assert.equal(d.rows[f], label, what + ': the band\u2019s label');
  assert.equal(d.cols[f], label, what + ': the band\u2019s column label');
  const tokensOf = (a) => (a < f ? [a] : a === f ? Array.from({ length: c }, (_, i) => f + i) : [a + c - 1]);
  for (let a = 0; a < d.m; a++) {
    let rowSum = 0;
    for (let b = 0; b < d.mk; b++) {
      let want = 0;
      for (const q of tokensOf(a)) for (const k of tokensOf(b)) want += A[q][k];
      want /= tokensOf(a).length;
      const got = d.values[a * d.mk + b];
      assert.ok(Math.abs(got - want) <= c * STEP + 1e-7, what + ': cell ' + a + ',' + b + ': ' + got + ' vs ' + want);
      rowSum += got;
      // Masked exactly where every key token comes after every query token.
      const masked = Math.min(...tokensOf(b)) > Math.max(...tokensOf(a));
      assert.equal(d.masked[a * d.mk + b], masked, what + ': mask of ' + a + ',' + b);
    }
    assert.ok(Math.abs(rowSum - 1) <= n * STEP + 1e-6, what + ': row ' + a + ' sums to ' + rowSum);
  }
  // Expanded: the tokens themselves, labelled by grid cell, with the picture's own mask.
  await page.click('#band-control button');
  d = await panel();
  assert.equal(d.m, n, what + ': expanded, one row per token');
  assert.ok(d.rows[f + 1].includes('0,1'), what + ': an image token is labelled by its grid cell: ' + d.rows[f + 1]);
  for (let q = 0; q < n; q++) for (let k = 0; k < n; k++) {
    assert.ok(Math.abs(d.values[q * n + k] - A[q][k]) <= STEP + 1e-9, what + ': expanded cell ' + q + ',' + k);
  }
  assert.equal(d.masked[f * n + f + 1], !pic.bidirectional, what + ': an image token sees the next one only in full pictures');
  assert.equal(d.masked[(f + c) * n + f + c + 1], true, what + ': text stays causal');
  // Another layer keeps it expanded.
  const other = (layer + 1) % exp.attention.length;
  await page.evaluate((l) => window.attnviz.set({ layer: l }), other);
  d = await panel();
  assert.equal(d.m, n, what + ': still expanded on layer ' + other);
  ({ layer, head } = await at());
  A = exp.attention[layer][head];
  assert.ok(Math.abs(d.values[(f + 1) * n + f] - A[f + 1][f]) <= STEP + 1e-9, what + ': layer ' + other + '\u2019s weights');
  // A click on an image token's label collapses the picture again.
  const g = await page.evaluate(() => window.attnviz.matrixGeometry('matrix-left'));
  assert.equal(g.labels, 'tokens', what + ': labels drawn');
  const box = await page.$eval('#matrix-left', (e) => { const r = e.getBoundingClientRect(); return { left: r.left, top: r.top }; });
  await page.mouse.click(box.left + g.margin - 8, box.top + g.margin + (f + 1 - g.oy + 0.5) * g.cell);
  d = await panel();
  assert.equal(d.m, n - c + 1, what + ': collapsed again by its label');
  assert.equal(d.rows[f], label);
}

test('matrix view of vision-language models: each picture one band, expanded and collapsed, in Chromium', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
  const page = await context.newPage();
  const log = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') log.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', (e) => log.push('pageerror: ' + e.message));
  await checkBands(page, 'image-llava', 'Chromium LLaVA');
  await page.screenshot({ path: join(SCREENS, 'bands-llava.png') });
  await checkBands(page, 'image-gemma3', 'Chromium Gemma 3');
  assert.deepEqual(log, []);
  await context.close();
});

test('matrix view of vision-language models: bands in Firefox', async () => {
  const ff = await puppeteer.launch({ browser: 'firefox', executablePath: process.env.FIREFOX || '/usr/bin/firefox-esr', headless: true });
  try {
    const page = await ff.newPage();
    const log = [];
    page.on('pageerror', (e) => log.push(e.message));
    page.on('console', (m) => { if (m.type() === 'error') log.push(m.text()); });
    await page.setViewport({ width: 1280, height: 1000 });
    await checkBands(page, 'image-llava', 'Firefox LLaVA');
    await checkBands(page, 'image-gemma3', 'Firefox Gemma 3');
    assert.deepEqual(log, []);
  } finally {
    await ff.close();
  }
});
