// Browser tests of a mixture-of-experts model's Router tab (tiny random Qwen3-MoE, whose layer 1
// is dense, and gpt-oss) and of gpt-oss's learned-sink column beside the matrix heatmaps.
//
// Run by `cargo test --release --test suite html_report:: -- --include-ignored`, which writes
// each report with the CLI into $ATTNVIZ_ARTIFACTS beside the CLI's JSON export of the same run:
// every expected choice, weight, probability, load and sink share here comes from that JSON
// (`router`, `sink_shares`), not from the page.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const ART = resolve(process.env.ATTNVIZ_ARTIFACTS || '../artifacts/html');
const SCREENS = join(ART, 'screens');
mkdirSync(SCREENS, { recursive: true });

function doc(name) {
  const file = join(ART, name + '.json');
  assert.ok(existsSync(file), file + ' missing: run `cargo test --release --test suite html_report:: -- --include-ignored`');
  return JSON.parse(readFileSync(file, 'utf8'));
}

async function ready(page) {
  await page.waitForFunction(() => document.documentElement.dataset.ready === 'true' || document.querySelector('#status.error'), null, { timeout: 20000 });
  const failure = await page.$eval('#status', (s) => (s.classList.contains('error') ? s.textContent : ''));
  assert.equal(failure, '', 'the page reported an error');
}

/** What the Router tab shows: the layer picker, every cell (its text, whether outlined, the
 *  probability in its tooltip), which token rows are dimmed, the load cells and the note. */
const shown = (page) => page.evaluate(async () => {
  await window.attnviz.settled();
  const grid = document.getElementById('router-grid');
  return {
    view: window.attnviz.state.view,
    tab: !document.getElementById('tab-router').hidden,
    layers: [...document.querySelectorAll('#router-layer option')].map((o) => o.textContent),
    picked: document.getElementById('router-layer').selectedOptions[0].textContent,
    cells: [...grid.querySelectorAll('.router-cell')].map((c) => ({
      t: Number(c.dataset.token), e: Number(c.dataset.expert), text: c.textContent,
      chosen: c.classList.contains('chosen'), bg: getComputedStyle(c).backgroundColor,
      prob: Number(/probability ([0-9.]+)/.exec(c.title)[1]),
    })),
    dimmed: [...grid.querySelectorAll('.router-token')].filter((r) => r.classList.contains('off')).map((r) => Number(r.dataset.token)),
    load: [...document.querySelectorAll('#router-load .router-cell')].map((c) => ({ layer: Number(c.dataset.layer), e: Number(c.dataset.expert), n: Number(c.dataset.load) })),
    note: document.getElementById('router-note').textContent,
    width: document.documentElement.scrollWidth,
    viewport: window.innerWidth,
  };
});

/** The Router tab against the JSON's `router` at routed layer index `i`. */
function checkLayer(got, router, i, what) {
  const l = router.layers[i];
  const n = router.tokens.length;
  const E = router.experts;
  assert.equal(got.view, 'router', what);
  assert.deepEqual(got.layers, router.layers.map((x) => 'layer ' + x.layer), what + ': the picker lists the routed layers only');
  assert.equal(got.picked, 'layer ' + l.layer, what + ': the picked layer');
  assert.equal(got.cells.length, n * E, what + ': one cell per token and expert');
  for (const c of got.cells) {
    const rank = l.chosen[c.t].indexOf(c.e);
    assert.equal(c.chosen, rank >= 0, what + ': token ' + c.t + ' expert ' + c.e + ' outlined iff chosen');
    assert.equal(c.text, rank >= 0 ? l.weights[c.t][rank].toFixed(2) : '', what + ': a chosen cell shows its weight');
    // Stored in 16 bits (±7.7e-6), shown to 4 decimals.
    assert.ok(Math.abs(c.prob - l.probs[c.t][c.e]) <= 5e-5 + 7.7e-6, what + ': probability of ' + c.t + ',' + c.e + ': ' + c.prob + ' vs ' + l.probs[c.t][c.e]);
  }
  const byProb = got.cells.slice().sort((a, b) => l.probs[a.t][a.e] - l.probs[b.t][b.e]);
  assert.notEqual(byProb[0].bg, byProb[byProb.length - 1].bg, what + ': cells are coloured by probability');
  const want = router.layers.flatMap((x) => x.load.map((count, e) => ({ layer: x.layer, e, n: count })));
  assert.deepEqual(got.load, want, what + ': the load of every routed layer, per expert');
  assert.ok(got.width <= got.viewport + 1, what + ': the page does not overflow sideways');
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

for (const name of ['router-qwen3_moe', 'router-gpt_oss']) {
  test('chromium: the Router tab of ' + name + ' shows the JSON\'s router', async () => {
    const { router } = doc(name);
    assert.ok(router && router.layers.length, name + ': the JSON has a router');
    const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(pathToFileURL(join(ART, name + '.html')).href);
    await ready(page);
    assert.equal(await page.evaluate(() => window.attnviz.state.view), 'head', 'opens on the head view');
    // Key x opens the router view.
    await page.keyboard.press('x');
    let got = await shown(page);
    assert.ok(got.tab, 'the Router tab is shown');
    const at = router.layers.findIndex((x) => 'layer ' + x.layer === got.picked);
    assert.ok(at >= 0, 'a routed layer is picked: ' + got.picked);
    checkLayer(got, router, at, name + ' opened');
    // Another routed layer from the picker.
    const other = (at + 1) % router.layers.length;
    await page.selectOption('#router-layer', String(other));
    got = await shown(page);
    checkLayer(got, router, other, name + ' layer ' + router.layers[other].layer);
    // Click an expert: the tokens not routed to it are dimmed, and the note lists those that are.
    const l = router.layers[other];
    const expert = l.chosen[0][0];
    await page.click('#router-grid .router-expert[data-expert="' + expert + '"]');
    got = await shown(page);
    const to = l.chosen.map((c, t) => (c.includes(expert) ? t : -1)).filter((t) => t >= 0);
    const off = router.tokens.map((_, t) => t).filter((t) => !to.includes(t));
    assert.deepEqual(got.dimmed, off, 'the tokens not routed to expert ' + expert + ' are dimmed');
    assert.ok(got.note.startsWith('Expert ' + expert + ', layer ' + l.layer + ': ' + to.length + ' of ' + router.tokens.length + ' tokens'), got.note);
    assert.equal(to.length, l.load[expert], 'the JSON\'s load counts the same tokens');
    await page.screenshot({ path: join(SCREENS, name + '-chromium.png'), fullPage: true });
    // A second click clears it.
    await page.click('#router-grid .router-expert[data-expert="' + expert + '"]');
    assert.deepEqual((await shown(page)).dimmed, [], 'a second click clears the highlight');
    // A click on a load cell picks that layer and expert.
    const back = router.layers[at];
    await page.click('#router-load .router-cell[data-layer="' + back.layer + '"][data-expert="1"]');
    got = await shown(page);
    assert.equal(got.picked, 'layer ' + back.layer);
    assert.ok(got.note.startsWith('Expert 1, layer ' + back.layer + ': ' + back.load[1] + ' of '), got.note);
    assert.deepEqual(errors, [], 'no script errors');
    await page.close();
  });
}

test('chromium: gpt-oss\'s matrix panels carry the learned-sink column, the JSON\'s sink_shares', async () => {
  const d = doc('router-gpt_oss');
  assert.ok(Array.isArray(d.sink_shares), 'the JSON has sink_shares');
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(pathToFileURL(join(ART, 'router-gpt_oss.html')).href + '#view=matrix');
  await ready(page);
  const H = d.model.heads;
  for (const [layer, head] of [[0, 0], [d.layer_numbers.length - 1, H - 1]]) {
    await page.evaluate(([l, h]) => window.attnviz.set({ layer: l, head: h }), [layer, head]);
    const got = await page.evaluate(async () => {
      await window.attnviz.settled();
      return { left: window.attnviz.matrixSink('matrix-left'), right: window.attnviz.matrixSink('matrix-right'), axes: document.getElementById('matrix-axes').textContent };
    });
    const want = d.sink_shares[layer][head];
    assert.equal(got.left.length, want.length, 'one sink share per row');
    got.left.forEach((v, q) => assert.ok(Math.abs(v - want[q]) <= 7.7e-6, 'layer ' + layer + ' head ' + head + ' row ' + q + ': ' + v + ' vs ' + want[q]));
    // The mean panel: the heads' mean share.
    got.right.forEach((v, q) => {
      const mean = d.sink_shares[layer].reduce((s, h) => s + h[q], 0) / H;
      assert.ok(Math.abs(v - mean) <= 7.7e-6, 'mean row ' + q);
    });
    // Each row's weights and its sink share sum to 1 (the JSON's attention is full precision).
    d.attention[layer][head].forEach((row, q) => {
      assert.ok(Math.abs(row.reduce((s, w) => s + w, 0) + want[q] - 1) <= 1e-5, 'row ' + q + ' and its sink share make 1');
    });
    assert.match(got.axes, /"sink" column/, 'the page says what the column is');
  }
  // Hovering the column names the share and what the row leaves.
  const geo = await page.evaluate(() => window.attnviz.matrixGeometry('matrix-left'));
  const box = await page.locator('#matrix-left').boundingBox();
  await page.mouse.move(box.x + geo.margin + geo.plot + 8 + 7, box.y + geo.margin + geo.cell * 0.5);
  const tip = await page.evaluate(() => document.getElementById('tooltip').textContent);
  assert.match(tip, /share on the sink/, tip);
  await page.screenshot({ path: join(SCREENS, 'sink-gpt_oss-chromium.png') });
  // Hiding the special tokens renormalises rows: no sink column then.
  const canHide = await page.evaluate(() => !document.getElementById('hide-special').disabled);
  if (canHide) {
    await page.evaluate(() => window.attnviz.set({ hideSpecial: true }));
    assert.equal(await page.evaluate(async () => { await window.attnviz.settled(); return window.attnviz.matrixSink('matrix-left'); }), null);
  }
  assert.deepEqual(errors, [], 'no script errors');
  await page.close();
});

test('chromium: Qwen3-Next\'s Token mixing tab draws the JSON\'s gated delta matrices, signed, under their legend', async () => {
  const { non_softmax: ns } = doc('mixing-qwen3_next');
  assert.ok(ns && ns.mixing && ns.mixing.layers.length, 'the JSON has the mixing matrices');
  const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(pathToFileURL(join(ART, 'mixing-qwen3_next.html')).href);
  await ready(page);
  await page.keyboard.press('m');
  const read = () => page.evaluate(async () => {
    await window.attnviz.settled();
    return {
      view: window.attnviz.state.view,
      tab: !document.getElementById('tab-mixing').hidden,
      layers: [...document.querySelectorAll('#mixing-layer option')].map((o) => o.textContent),
      legend: document.getElementById('mixing-legend').textContent,
      note: document.getElementById('mixing-note').textContent,
      cells: [...document.querySelectorAll('#mixing-grid .mixing-cell')].map((c) => ({
        t: Number(c.dataset.token), s: Number(c.dataset.source), v: Number(c.dataset.value),
        off: c.classList.contains('off'), bg: getComputedStyle(c).backgroundColor })),
    };
  });
  let got = await read();
  assert.equal(got.view, 'mixing');
  assert.ok(got.tab, 'the Token mixing tab is shown');
  assert.deepEqual(got.layers, ns.mixing.layers.map((l) => 'layer ' + l.layer + ' (gated delta)'));
  assert.equal(got.legend, 'token mixing (gated delta), not attention probabilities');
  assert.equal(ns.legend, got.legend, 'the JSON and the page say the same');
  assert.ok(got.note.includes('rows need not sum to 1'), got.note);
  const n = ns.mixing.tokens.length;
  const H = ns.mixing.heads;
  // The mean of the heads of the first layer, then one head of the last.
  const check = (l, head, what) => {
    assert.equal(got.cells.length, n * n, what);
    let neg = false;
    for (const c of got.cells) {
      const w = ns.mixing.layers[l].weights;
      const want = head < 0 ? w.reduce((a, m) => a + m[c.t][c.s], 0) / H : w[head][c.t][c.s];
      assert.ok(Math.abs(c.v - want) <= 1e-6, what + ' ' + c.t + ',' + c.s + ': ' + c.v + ' vs ' + want);
      assert.equal(c.off, c.s > c.t, what + ': above the diagonal is blank');
      neg = neg || (!c.off && c.v < 0);
    }
    assert.ok(neg, what + ': some weight is negative');
    const pos = got.cells.find((c) => !c.off && c.v > 0.01);
    const nego = got.cells.find((c) => !c.off && c.v < -0.01);
    assert.notEqual(pos.bg, nego.bg, what + ': positive and negative cells differ in colour');
  };
  check(0, -1, 'layer ' + ns.mixing.layers[0].layer + ' mean');
  const last = ns.mixing.layers.length - 1;
  await page.selectOption('#mixing-layer', String(last));
  await page.selectOption('#mixing-head', String(H - 1));
  got = await read();
  check(last, H - 1, 'layer ' + ns.mixing.layers[last].layer + ' head ' + (H - 1));
  await page.screenshot({ path: join(SCREENS, 'mixing-qwen3_next-chromium.png'), fullPage: true });
  assert.deepEqual(errors, [], 'no script errors');
  await page.close();
});

test('chromium: a dense model has no Router tab and no sink column; #view=router falls back', async () => {
  const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
  await page.goto(pathToFileURL(join(ART, 'lens-gpt2-none.html')).href + '#view=router');
  await ready(page);
  const got = await page.evaluate(async () => {
    await window.attnviz.settled();
    const view = window.attnviz.state.view;
    window.attnviz.set({ view: 'matrix' });
    await window.attnviz.settled();
    return { hidden: document.getElementById('tab-router').hidden, view, sink: window.attnviz.matrixSink('matrix-left') };
  });
  assert.deepEqual(got, { hidden: true, view: 'head', sink: null });
  await page.close();
});
