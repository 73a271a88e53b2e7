// `attnviz serve` in headless Chromium (playwright-core) and Firefox (puppeteer-core over WebDriver
// BiDi), against a server the Rust test started: type a text and see every view follow, keep the
// view while typing, share the address, save the report (the bytes the CLI's --html wrote for the
// same text, which the Rust test wrote beside the case); then switch to compare, type sentence B,
// see the difference view change, and save the comparison (the bytes `attnviz diff A.json
// B.json --html` wrote for the two sentences); model B starts as model A, and a causal model B
// is compared over what both can attend, each side with its own mask.
//
// Run by `cargo test --release --test suite serve::the_app_in_chromium_and_firefox -- --include-ignored`,
// which writes $ATTNVIZ_SERVE/case.json: { url, text, expected (a file), screens (a folder),
// text_b, compare_expected (a file) }.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';

const DIR = resolve(process.env.ATTNVIZ_SERVE || '../artifacts/serve');
const CASE = JSON.parse(readFileSync(join(DIR, 'case.json'), 'utf8'));
mkdirSync(CASE.screens, { recursive: true });
const ORIGIN = new URL(CASE.url).origin;

/** One browser behind one small interface (the two drivers differ in argument order). */
const drivers = {
  chromium: {
    async launch() {
      const b = await chromium.launch({
        executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
          '--disable-component-update', '--no-first-run'],
      });
      return {
        close: () => b.close(),
        async page() {
          const context = await b.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
          return context.newPage();
        },
        wait: (page, fn, arg) => page.waitForFunction(fn, arg, { timeout: 30000 }),
        select: (page, selector, value) => page.selectOption(selector, value),
      };
    },
  },
  firefox: {
    async launch() {
      const exe = process.env.FIREFOX || '/usr/bin/firefox-esr';
      assert.ok(existsSync(exe), exe + ' missing: apt-get install -y firefox-esr');
      const b = await puppeteer.launch({ browser: 'firefox', executablePath: exe, headless: true });
      return {
        close: () => b.close(),
        async page() {
          const page = await b.newPage();
          await page.setViewport({ width: 1280, height: 900 });
          return page;
        },
        wait: (page, fn, arg) => page.waitForFunction(fn, { timeout: 30000 }, arg),
        select: (page, selector, value) => page.select(selector, value),
      };
    },
  },
};

/** Console errors, page errors and any request that leaves the server. */
function watch(page) {
  const log = [];
  page.on('console', (m) => { if (m.type() === 'error') log.push('console: ' + m.text()); });
  page.on('pageerror', (e) => log.push('pageerror: ' + e.message));
  page.on('request', (r) => {
    const url = r.url();
    if (!url.startsWith(ORIGIN) && !url.startsWith('data:') && !url.startsWith('about:')) log.push('request: ' + url);
  });
  return log;
}

/** Wait until the page has drawn the report of what the text box holds now. */
async function drawnCurrent(b, page) {
  await b.wait(page, () => {
    const runs = window.attnvizServe && window.attnvizServe.runs;
    const last = runs && runs[runs.length - 1];
    return Boolean(last && last.text === document.getElementById('text').value && last.drawn);
  });
}

/** Wait until the page has drawn the comparison of what the two text boxes hold now. */
async function drawnCompare(b, page) {
  await b.wait(page, () => {
    const runs = window.attnvizServe && window.attnvizServe.runs;
    const last = runs && runs[runs.length - 1];
    return Boolean(last && last.compare && last.drawn && last.text === document.getElementById('text').value
      && last.textB === document.getElementById('text-b').value);
  });
}

/** What the comparison frame shows: the ranking, the notes, and how many A − B pixels are not
 * blank. */
function compareFrame(page) {
  return page.evaluate(() => {
    const doc = document.getElementById('report').contentDocument;
    const canvas = doc.getElementById('matrix-d');
    // Read through a copy (a canvas read back directly makes Chromium warn).
    const copy = document.createElement('canvas');
    copy.width = canvas.width;
    copy.height = canvas.height;
    const g = copy.getContext('2d');
    g.drawImage(canvas, 0, 0);
    const px = g.getImageData(0, 0, copy.width, copy.height).data;
    let diffPixels = 0;
    for (let i = 3; i < px.length; i += 4) if (px[i] > 0) diffPixels++;
    return {
      ranked: [...doc.querySelectorAll('#ranked button')].map((x) => x.textContent),
      notes: doc.getElementById('notes').textContent,
      diffPixels,
    };
  });
}

/** What the frame shows: its tokens, view and drawing count. */
function frame(page) {
  return page.evaluate(() => {
    const a = document.getElementById('report').contentWindow.attnviz;
    return {
      tokens: a.meta.tokens,
      view: a.drawn.view,
      seq: a.drawn.seq,
      layer: a.state.layer,
      head: a.state.head,
      // Set on the frame's window after the first run: still there when nothing reloaded it.
      marker: document.getElementById('report').contentWindow.attnvizMarker,
      // The head view's query column, as drawn.
      column: [...document.getElementById('report').contentDocument.querySelectorAll('#hv-left .tok')]
        .map((t) => t.textContent),
    };
  });
}

/** The bytes behind the Save report link. */
async function savedBytes(page) {
  const b64 = await page.evaluate(async () => {
    const r = await fetch(document.getElementById('save').href);
    const bytes = new Uint8Array(await r.arrayBuffer());
    let s = '';
    for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    return btoa(s);
  });
  return Buffer.from(b64, 'base64');
}

for (const [name, driver] of Object.entries(drivers)) {
  let b;
  test(`${name}: type, every view follows, the address is shareable, Save report is --html's bytes`, async (t) => {
    b = await driver.launch();
    t.after(() => b.close());
    const page = await b.page();
    const log = watch(page);
    await page.goto(CASE.url);
    await b.wait(page, () => document.documentElement.dataset.ready === 'true');
    assert.equal(await page.evaluate(() => document.getElementById('save').getAttribute('aria-disabled')), 'true');

    // Type the first half, as a person does (one key at a time).
    const half = CASE.text.slice(0, CASE.text.indexOf(' on '));
    await page.type('#text', half);
    await drawnCurrent(b, page);
    const first = await frame(page);
    assert.equal(first.view, 'head');
    assert.ok(first.seq >= 1, 'the head view was drawn');
    assert.ok(first.tokens.includes('cat') && !first.tokens.includes('mat'), first.tokens.join(' '));
    assert.ok(first.column.some((c) => c.includes('cat')), first.column.join(' '));

    // Another view, layer and head, then more text: the booted report draws the new run in
    // place (the same window: the marker set on it survives), on that view, layer and head.
    const lastHead = await page.evaluate(() => {
      const win = document.getElementById('report').contentWindow;
      win.attnvizMarker = 'kept';
      win.document.getElementById('tab-matrix').click();
      // Neither the layer nor the head a new report opens on (the last layer, head 0).
      win.attnviz.set({ layer: 0, head: win.attnviz.meta.model.heads - 1 });
      return win.attnviz.meta.model.heads - 1;
    });
    await b.wait(page, () => new URLSearchParams(location.search).get('view') === 'matrix');
    const firstSrc = await page.$eval('#report', (f) => f.src);
    await page.type('#text', CASE.text.slice(half.length));
    await drawnCurrent(b, page);
    const second = await frame(page);
    assert.equal(second.view, 'matrix', 'the view is kept while typing');
    assert.equal(second.marker, 'kept', 'the frame was not reloaded');
    assert.equal(await page.$eval('#report', (f) => f.src), firstSrc, 'the frame still shows its first document');
    assert.ok(lastHead > 0, 'the model has more than one head');
    assert.deepEqual([second.layer, second.head], [0, lastHead], 'layer and head are kept');
    const inPlace = await page.evaluate(() => window.attnvizServe.runs.slice(1).map((r) => Boolean(r.inPlace)));
    assert.ok(inPlace.length >= 1 && inPlace.every(Boolean), 'every run after the first is drawn in place: ' + inPlace);
    assert.ok(second.tokens.includes('mat'), second.tokens.join(' '));
    assert.notDeepEqual(second.tokens, first.tokens);
    const runs = await page.evaluate(() => window.attnvizServe.runs.map((r) => r.text));
    assert.ok(runs.length >= 2, 'one run per pause at least');
    assert.ok(runs.length <= CASE.text.length, 'never more runs than keystrokes');
    const status = await page.$eval('#status', (s) => s.textContent);
    assert.match(status, /^\d+ tokens · \d+ ms/);

    // The address holds the state.
    const address = new URL(page.url());
    assert.equal(address.searchParams.get('text'), CASE.text);
    assert.equal(address.searchParams.get('view'), 'matrix');
    await page.screenshot({ path: join(CASE.screens, `serve-${name}.png`) });

    // Save report: the same bytes as `attnviz --html` for this text.
    const expected = readFileSync(CASE.expected);
    const saved = await savedBytes(page);
    assert.ok(saved.equals(expected), `saved ${saved.length} bytes, --html wrote ${expected.length}`);
    if (name === 'chromium') {
      // The real download, through the link.
      const [download] = await Promise.all([page.waitForEvent('download'), page.click('#save')]);
      assert.equal(download.suggestedFilename(), 'attnviz-report.html');
      assert.ok(readFileSync(await download.path()).equals(expected), 'the downloaded file is --html\'s');
    }

    // A colleague opens the link: same text, same view, same tokens.
    const other = await b.page();
    const otherLog = watch(other);
    await other.goto(address.href);
    await drawnCurrent(b, other);
    assert.equal(await other.$eval('#text', (e) => e.value), CASE.text);
    const shared = await frame(other);
    assert.equal(shared.view, 'matrix');
    assert.deepEqual(shared.tokens, second.tokens);

    assert.deepEqual(log, [], 'no console error, no request off the server');
    assert.deepEqual(otherLog, []);

    // Compare: the same text on the same model first (nothing differs), then sentence B typed.
    await page.click('#compare');
    await drawnCompare(b, page);
    // Model B starts as model A (not the server's second model, which has other layers).
    assert.equal(await page.$eval('#model-b', (s) => s.value), await page.$eval('#model', (s) => s.value));
    const same = await compareFrame(page);
    assert.ok(same.ranked.length > 0, 'the ranking is drawn');
    assert.ok(same.ranked.every((r) => r.endsWith('· 0.0000')), same.ranked.join(' | '));
    assert.match(await page.$eval('#status', (s) => s.textContent), /^compared \d+ and \d+ tokens at token level/);
    await page.type('#text-b', CASE.text_b);
    await drawnCompare(b, page);
    const diff = await compareFrame(page);
    assert.notDeepEqual(diff.ranked, same.ranked, 'the difference view follows text B');
    assert.ok(diff.ranked.some((r) => !r.endsWith('· 0.0000')), diff.ranked.join(' | '));
    assert.ok(diff.notes.includes('Only in'), diff.notes);
    assert.ok(diff.diffPixels > 0, 'the A − B canvas is drawn');
    const there = new URL(page.url());
    assert.equal(there.searchParams.get('compare'), '1');
    assert.equal(there.searchParams.get('textb'), CASE.text_b);
    await page.screenshot({ path: join(CASE.screens, `serve-compare-${name}.png`) });
    const compared = await savedBytes(page);
    const wanted = readFileSync(CASE.compare_expected);
    assert.ok(compared.equals(wanted), `saved ${compared.length} bytes, diff --html wrote ${wanted.length}`);
    // Saved under a name that says what was compared (the link's and the server's name agree).
    const slug = (t) => t.split(/[^A-Za-z0-9]+/).filter(Boolean).reduce((out, w) =>
      (out.done || out.s.length + w.length > 24 ? { s: out.s, done: true } : { s: out.s ? out.s + '-' + w.toLowerCase() : w.toLowerCase() }), { s: '' }).s;
    const compareName = `attnviz-compare-${slug(CASE.text)}-vs-${slug(CASE.text_b)}.html`;
    assert.equal(await page.$eval('#save', (a) => a.download), compareName);
    if (name === 'chromium') {
      const [download] = await Promise.all([page.waitForEvent('download'), page.click('#save')]);
      assert.equal(download.suggestedFilename(), compareName);
      assert.ok(readFileSync(await download.path()).equals(wanted), 'the downloaded comparison is diff --html\'s');
    }

    // The compare link opens the same comparison.
    const third = await b.page();
    const thirdLog = watch(third);
    await third.goto(there.href);
    await drawnCompare(b, third);
    assert.deepEqual((await compareFrame(third)).ranked, diff.ranked);
    // Back to the first page's tab: a tab in the background gets no animation frames in Firefox,
    // so its report would not draw until a person looked at it again.
    await third.close();
    await page.bringToFront();

    // Model B: the causal decoder (other layers: Shared layers). Each side is drawn with its own
    // mask (A's bidirectional matrix has nothing hatched, B's causal one and A − B have), and the
    // page says that the masks differ.
    await page.click('#shared');
    await b.select(page, '#model-b', '1');
    await b.wait(page, () => {
      const doc = document.getElementById('report').contentDocument;
      const note = doc && doc.getElementById('mask-notes');
      return Boolean(note && /Masks differ/.test(note.textContent) && doc.body.dataset.hatched !== undefined);
    }).catch(async (e) => {
      // What the page shows instead: its status, the runs it drew, the frame's address and notes.
      const seen = await page.evaluate(() => {
        const frame = document.getElementById('report');
        const doc = frame.contentDocument;
        return {
          status: document.getElementById('status').textContent,
          modelB: document.getElementById('model-b').value,
          shared: document.getElementById('shared').checked,
          runs: document.documentElement.dataset.runs,
          frame: frame.getAttribute('src'),
          masks: doc && doc.getElementById('mask-notes') ? doc.getElementById('mask-notes').textContent : null,
        };
      });
      throw new Error(e.message + '; the page shows ' + JSON.stringify(seen));
    });
    const mixed = await page.evaluate(() => {
      const doc = document.getElementById('report').contentDocument;
      return { masks: doc.getElementById('mask-notes').textContent, hatched: doc.body.dataset.hatched, notes: doc.getElementById('notes').textContent };
    });
    assert.match(mixed.masks, /A is bidirectional, B causal/);
    assert.match(mixed.masks, /only the cells both can attend/);
    assert.equal(mixed.hatched, 'b,d');
    assert.match(mixed.notes, /Only the shared layers/);
    assert.equal(new URL(page.url()).searchParams.get('modelb'), '1');
    await page.screenshot({ path: join(CASE.screens, `serve-compare-masks-${name}.png`) });
    assert.deepEqual(log, [], 'no console error in compare mode');
    assert.deepEqual(thirdLog, []);
  });
}
