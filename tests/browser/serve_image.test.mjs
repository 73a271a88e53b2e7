// `attnviz serve` with a vision model, in headless Chromium (playwright-core) and Firefox
// (puppeteer-core over WebDriver BiDi), against a server the Rust test started with a text model
// (0) and a vision model (1): choose the vision model (the text box gives way to a picker and a
// note that links carry no picture), pick a picture in the file box, see the image view drawn,
// switch layer, head and map (the mean over heads), save (the bytes `attnviz -m MODEL --image
// FILE --html` wrote for that picture, which the Rust test wrote beside the case); drop a second
// picture on the page (drawn in place, the view, layer, head and map kept); open the address (model and view, no picture: the
// picker asks for one); and go back to the text model.
//
// A vision-language model (2) takes both: the prompt runs alone until a picture is chosen, then
// with it (Save report is `-m MODEL --image FILE PROMPT --html`'s bytes), and generates with it.
//
// Run by `cargo test --release --test suite serve::the_picture_upload_in_chromium_and_firefox --
// --include-ignored`, which writes $ATTNVIZ_SERVE_IMAGE/case.json: { url, picture, second (two
// files), expected (a file), screens (a folder), text, prompt, expected_vlm (a file) }.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync, mkdirSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';

const DIR = resolve(process.env.ATTNVIZ_SERVE_IMAGE || '../artifacts/serve-image');
const CASE = JSON.parse(readFileSync(join(DIR, 'case.json'), 'utf8'));
mkdirSync(CASE.screens, { recursive: true });
const ORIGIN = new URL(CASE.url).origin;

/** One browser behind one small interface (the two drivers differ in argument order and in how
 * a file box is filled). */
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
        pick: (page, selector, file) => page.setInputFiles(selector, file),
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
        pick: async (page, selector, file) => (await page.$(selector)).uploadFile(file),
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

/** Wait until the page has drawn the report of the picture named `name`. */
async function drawnPicture(b, page, name) {
  await b.wait(page, (n) => {
    const runs = window.attnvizServe && window.attnvizServe.runs;
    const last = runs && runs[runs.length - 1];
    return Boolean(last && last.picture && last.text === n && last.drawn);
  }, name);
}

/** Wait until the page has drawn the report of what the text box holds now. */
async function drawnText(b, page) {
  await b.wait(page, () => {
    const runs = window.attnvizServe && window.attnvizServe.runs;
    const last = runs && runs[runs.length - 1];
    return Boolean(last && !last.picture && last.text === document.getElementById('text').value && last.drawn);
  });
}

/** What the frame shows: its view, the image view's drawing, layer and head, the picture's
 * name. */
function frame(page) {
  return page.evaluate(async () => {
    const win = document.getElementById('report').contentWindow;
    const a = win.attnviz;
    await a.settled();
    const image = a.image();
    return {
      view: a.drawn.view,
      layer: a.state.layer,
      head: a.state.head,
      heads: a.meta.model.heads,
      source: a.meta.image ? a.meta.image.source : null,
      tokens: a.meta.tokens.length,
      imageSeq: image.seq,
      imageLayer: image.layer,
      imageHead: image.head,
      imageMax: image.max,
      imageSource: a.state.imageSource,
      marker: win.attnvizMarker,
    };
  });
}

/** Whether these elements are shown (not hidden, with a box). */
function shown(page, ids) {
  return page.evaluate((all) => Object.fromEntries(all.map((id) => {
    const e = document.getElementById(id);
    return [id, Boolean(e && !e.closest('[hidden]') && e.getClientRects().length > 0)];
  })), ids);
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

/** Drop the file `file` on the page, as a person dragging it from a file manager would: a
 * dragover, then the drop, carrying the file. */
async function drop(page, file) {
  const b64 = readFileSync(file).toString('base64');
  await page.evaluate(([data, name]) => {
    const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
    const dt = new DataTransfer();
    dt.items.add(new File([bytes], name, { type: 'image/jpeg' }));
    const target = document.getElementById('input');
    target.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
    target.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, [b64, basename(file)]);
}

/** Drop a file made in the page: `size` zero bytes, or `text`. */
async function dropMade(page, name, size, text) {
  await page.evaluate(([n, k, t]) => {
    const dt = new DataTransfer();
    dt.items.add(new File([t === null ? new Uint8Array(k) : t], n, { type: 'image/png' }));
    const target = document.getElementById('input');
    target.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
    target.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, [name, size, text === undefined ? null : text]);
}

for (const [name, driver] of Object.entries(drivers)) {
  test(`${name}: pick a picture, its image view is drawn, layer and head follow, Save report is --image --html's bytes`, async (t) => {
    const b = await driver.launch();
    t.after(() => b.close());
    const page = await b.page();
    const log = watch(page);
    await page.goto(CASE.url);
    await b.wait(page, () => document.documentElement.dataset.ready === 'true');

    // A text on the text model first.
    await page.type('#text', CASE.text);
    await drawnText(b, page);
    assert.equal((await frame(page)).view, 'head');

    // The vision model: a picker and the note in place of the text box; no comparing.
    await b.select(page, '#model', '1');
    await b.wait(page, () => !document.getElementById('picture-line').hidden);
    assert.deepEqual(await shown(page, ['text', 'picture', 'picture-note', 'compare']),
      { text: false, picture: true, 'picture-note': true, compare: false });
    const note = await page.$eval('#picture-note', (e) => e.textContent);
    assert.match(note, /not the picture/);
    assert.match(note, /20 MiB/);
    assert.match(await page.$eval('#status', (s) => s.textContent), /Choose a picture/);
    // The text model's report is not left on screen as if it were this model's.
    assert.deepEqual(await shown(page, ['report', 'drop-zone']), { report: false, 'drop-zone': true });
    assert.equal(await page.$eval('#save', (a) => a.getAttribute('aria-disabled')), 'true');
    await page.screenshot({ path: join(CASE.screens, `serve-image-picker-${name}.png`) });

    // Pick one: its report, on the image view (the frame's view was the text's head view).
    const pictureName = basename(CASE.picture);
    await b.pick(page, '#picture', CASE.picture);
    await drawnPicture(b, page, pictureName);
    const first = await frame(page);
    assert.deepEqual(await shown(page, ['report', 'drop-zone']), { report: true, 'drop-zone': false });
    assert.equal(first.view, 'image', 'a picture\'s report opens on its image view');
    assert.equal(first.source, pictureName);
    assert.ok(first.imageSeq >= 1 && first.imageMax > 0, 'the image view is drawn');
    assert.match(await page.$eval('#status', (s) => s.textContent), new RegExp('^' + pictureName.replace('.', '\\.') + ' · \\d+ tokens · \\d+ ms'));

    // Another layer and head, and the mean over heads: the image view follows, the address
    // keeps them, not the picture.
    const wanted = { layer: 0, head: first.heads - 1, imageSource: 'mean' };
    await page.evaluate((w) => {
      const win = document.getElementById('report').contentWindow;
      win.attnvizMarker = 'kept';
      win.attnviz.set(w);
      win.document.body.click();
    }, wanted);
    await b.wait(page, (w) => {
      const p = new URLSearchParams(location.search);
      return p.get('layer') === String(w.layer) && p.get('head') === String(w.head);
    }, wanted);
    await b.wait(page, () => new URLSearchParams(location.search).get('source') === 'mean');
    const turned = await frame(page);
    assert.deepEqual([turned.imageLayer, turned.imageHead], [wanted.layer, wanted.head]);
    assert.ok(turned.imageSeq > first.imageSeq, 'the image view was drawn again');
    const address = new URL(page.url());
    assert.equal(address.searchParams.get('model'), '1');
    assert.equal(address.searchParams.get('view'), 'image');
    assert.equal(address.searchParams.get('text'), null, 'no text in a vision model\'s address');
    await page.screenshot({ path: join(CASE.screens, `serve-image-${name}.png`) });

    // Save report: the bytes `attnviz -m MODEL --image FILE --html` wrote, named after it.
    const expected = readFileSync(CASE.expected);
    const saved = await savedBytes(page);
    assert.ok(saved.equals(expected), `saved ${saved.length} bytes, --image --html wrote ${expected.length}`);
    const stem = pictureName.replace(/\.[^.]*$/, '');
    assert.equal(await page.$eval('#save', (a) => a.download), `attnviz-report-${stem}.html`);
    if (name === 'chromium') {
      const [download] = await Promise.all([page.waitForEvent('download'), page.click('#save')]);
      assert.equal(download.suggestedFilename(), `attnviz-report-${stem}.html`);
      assert.ok(readFileSync(await download.path()).equals(expected), 'the downloaded file is --image --html\'s');
    }

    // A second picture dropped on the page: drawn in place (the same frame window), on the
    // view, layer and head on screen.
    const secondName = basename(CASE.second);
    await drop(page, CASE.second);
    await drawnPicture(b, page, secondName);
    const second = await frame(page);
    assert.equal(second.marker, 'kept', 'the frame was not reloaded');
    assert.equal(second.view, 'image');
    assert.equal(second.source, secondName);
    assert.deepEqual([second.imageLayer, second.imageHead], [wanted.layer, wanted.head]);
    assert.equal(second.imageSource, 'mean', 'the second picture keeps the mean over heads');
    const last = await page.evaluate(() => window.attnvizServe.runs[window.attnvizServe.runs.length - 1]);
    assert.ok(last.inPlace, 'the second picture was drawn in place');
    assert.equal(await page.$eval('#picture', (i) => i.files.length && i.files[0].name), secondName,
      'the file box shows the dropped picture');

    // Too large for the server: told at once, nothing sent. Not a picture: the server's one
    // line, in the status; the report on screen stays.
    const posted = await page.evaluate(() => window.attnvizServe.runs.length);
    await dropMade(page, 'huge.png', 20 * 1048576 + 1);
    assert.match(await page.$eval('#status', (s) => s.textContent), /^huge\.png is 20\.0 MiB; this server takes pictures up to 20\.0 MiB/);
    await dropMade(page, 'notes.png', 0, 'not a picture at all');
    await b.wait(page, () => /not a readable image/.test(document.getElementById('status').textContent));
    assert.equal(await page.$eval('#status', (s) => s.className), 'error');
    assert.equal(await page.evaluate(() => window.attnvizServe.runs.length), posted);
    assert.equal((await frame(page)).source, secondName, 'the last report stays');

    // A colleague opens the address: the model and the view, and the picker asks for the picture.
    const other = await b.page();
    const otherLog = watch(other);
    await other.goto(address.href);
    await b.wait(other, () => document.documentElement.dataset.ready === 'true');
    assert.match(await other.$eval('#status', (s) => s.textContent), /links do not carry pictures/);
    assert.deepEqual(await shown(other, ['text', 'picture']), { text: false, picture: true });
    await b.pick(other, '#picture', CASE.picture);
    await drawnPicture(b, other, pictureName);
    const opened = await frame(other);
    assert.equal(opened.view, 'image');
    assert.deepEqual([opened.layer, opened.head], [wanted.layer, wanted.head]);
    assert.equal(opened.imageSource, 'mean', 'the address keeps the map');

    // Back to the text model: the text box, and the text's report on its own first view.
    await b.select(page, '#model', '0');
    await drawnText(b, page);
    assert.deepEqual(await shown(page, ['text', 'picture', 'compare']), { text: true, picture: false, compare: true });
    assert.equal((await frame(page)).view, 'head');
    assert.equal(new URL(page.url()).searchParams.get('text'), CASE.text);

    // A picture dropped on the text model is not run (and the page stays).
    const runsBefore = await page.evaluate(() => window.attnvizServe.runs.length);
    await drop(page, CASE.second);
    assert.match(await page.$eval('#status', (s) => s.textContent), /reads text, not pictures/);
    assert.equal(await page.evaluate(() => window.attnvizServe.runs.length), runsBefore);
    assert.equal(new URL(page.url()).origin, ORIGIN);

    // Chromium logs the refused picture's 400 as a console error; nothing else may appear.
    const refused = 'console: Failed to load resource: the server responded with a status of 400 (Bad Request)';
    assert.ok(log.filter((l) => l === refused).length <= 1, log.join('\n'));
    assert.deepEqual(log.filter((l) => l !== refused), [], 'no console error, no request off the server');
    assert.deepEqual(otherLog, []);
  });
}

for (const [name, driver] of Object.entries(drivers)) {
  test(`${name}: a vision-language model takes the prompt and the picture together`, async (t) => {
    const b = await driver.launch();
    t.after(() => b.close());
    const page = await b.page();
    const log = watch(page);
    await page.goto(CASE.url + (CASE.url.includes('?') ? '&' : '?') + 'model=2');
    await b.wait(page, () => document.documentElement.dataset.ready === 'true');
    // The prompt box and the picker side by side; generation as a decoder's; no comparing.
    assert.deepEqual(await shown(page, ['text', 'picture', 'picture-note', 'generate', 'compare']),
      { text: true, picture: true, 'picture-note': true, generate: true, compare: false });
    assert.match(await page.$eval('#picture-note', (e) => e.textContent), /goes with the prompt/);
    assert.match(await page.$eval('#status', (s) => s.textContent), /Type a prompt, and choose a picture/);

    // The prompt alone first: a decoder's run of the text.
    await page.type('#text', CASE.prompt);
    await drawnText(b, page);
    assert.ok(!(await frame(page)).tokens.toString().includes('img1'));

    // With the picture: its image tokens in the sequence, the report --image PROMPT --html wrote.
    const pictureName = basename(CASE.picture);
    await b.pick(page, '#picture', CASE.picture);
    await drawnPicture(b, page, pictureName);
    const tokens = await page.evaluate(() => document.getElementById('report').contentWindow.attnviz.meta.tokens);
    assert.ok(tokens.includes('<img1 0,0>'), tokens.join(' '));
    const last = await page.evaluate(() => window.attnvizServe.runs[window.attnvizServe.runs.length - 1]);
    assert.equal(last.prompt, CASE.prompt);
    const saved = await savedBytes(page);
    const expected = readFileSync(CASE.expected_vlm);
    assert.ok(saved.equals(expected), `saved ${saved.length} bytes, --image PROMPT --html wrote ${expected.length}`);
    await page.screenshot({ path: join(CASE.screens, `serve-vlm-${name}.png`) });
    // The address keeps the model and the prompt, not the picture.
    const address = new URL(page.url());
    assert.equal(address.searchParams.get('model'), '2');
    assert.equal(address.searchParams.get('text'), CASE.prompt);

    // Generation with the picture in the prompt: the generated words in the status.
    const before = await page.evaluate(() => window.attnvizServe.runs.length);
    await page.$eval('#generate', (g) => { g.value = '2'; g.dispatchEvent(new Event('input', { bubbles: true })); });
    await b.wait(page, (n) => {
      const runs = window.attnvizServe.runs;
      return runs.length > n && runs[runs.length - 1].picture && runs[runs.length - 1].drawn;
    }, before);
    assert.match(await page.$eval('#status', (s) => s.textContent), /generated: /);
    const grown = await page.evaluate(() => document.getElementById('report').contentWindow.attnviz.meta.tokens.length);
    assert.equal(grown, tokens.length + 2);
    assert.deepEqual(log, [], 'no console error, no request off the server');
  });
}
