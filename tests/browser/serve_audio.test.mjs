// `attnviz serve` with a speech model, in headless Chromium (playwright-core) and Firefox
// (puppeteer-core over WebDriver BiDi), against a server the Rust test started with a text model
// (0) and Whisper tiny.en (1): choose Whisper (the text box gives way to a recording picker and
// its note; no comparing), pick beckett.wav, see the report open on its Speech tab with the
// words the CLI's JSON export holds (the Rust test wrote it beside the case), the recording in
// its player, and the cursor lighting the word under it when the player seeks; Save report is
// the bytes `attnviz -m MODEL --audio FILE --html` wrote; tick Timestamps and the run is made
// again; a file that is no recording gets the server's one line.
//
// Run by `cargo test --release --test suite serve_audio::the_audio_upload_in_chromium_and_firefox
// -- --include-ignored`, which writes $ATTNVIZ_SERVE_AUDIO/case.json: { url, recording,
// expected (the --html file), words (the JSON's cross.speech.words), transcript, screens }.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync, mkdirSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';

const DIR = resolve(process.env.ATTNVIZ_SERVE_AUDIO || '../artifacts/serve-audio');
const CASE = JSON.parse(readFileSync(join(DIR, 'case.json'), 'utf8'));
mkdirSync(CASE.screens, { recursive: true });
const ORIGIN = new URL(CASE.url).origin;

const drivers = {
  chromium: {
    async launch() {
      const b = await chromium.launch({
        executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
          '--disable-component-update', '--no-first-run', '--autoplay-policy=no-user-gesture-required'],
      });
      return {
        close: () => b.close(),
        async page() {
          const context = await b.newContext({ viewport: { width: 1280, height: 1000 } });
          return context.newPage();
        },
        wait: (page, fn, arg) => page.waitForFunction(fn, arg, { timeout: 60000 }),
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
          await page.setViewport({ width: 1280, height: 1000 });
          return page;
        },
        wait: (page, fn, arg) => page.waitForFunction(fn, { timeout: 60000 }, arg),
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

/** Wait until the page has drawn its `count`th run, a recording's. */
async function drawnRecording(b, page, count) {
  await b.wait(page, (k) => {
    const runs = window.attnvizServe && window.attnvizServe.runs;
    const last = runs && runs[runs.length - 1];
    return Boolean(runs.length >= k && last.audio && last.drawn);
  }, count);
}

/** Whether these elements are shown (not hidden, with a box). */
function shown(page, ids) {
  return page.evaluate((all) => Object.fromEntries(all.map((id) => {
    const e = document.getElementById(id);
    return [id, Boolean(e && !e.closest('[hidden]') && e.getClientRects().length > 0)];
  })), ids);
}

/** What the frame's Speech tab shows. */
function speechTab(page) {
  return page.evaluate(async () => {
    const win = document.getElementById('report').contentWindow;
    await win.attnviz.settled();
    const d = win.document;
    return {
      view: win.attnviz.state.view,
      tab: !d.getElementById('tab-speech').hidden,
      drawn: win.attnviz.speech(),
      buttons: [...d.querySelectorAll('#speech-words .speech-word')].map((x) => x.textContent),
      name: d.getElementById('speech-name').textContent,
      audio: d.getElementById('speech-audio').src.slice(0, 21),
    };
  });
}

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
  test(`${name}: upload a recording to Whisper, its Speech tab shows the CLI's words and plays it`, async (t) => {
    const b = await driver.launch();
    t.after(() => b.close());
    const page = await b.page();
    const log = watch(page);
    await page.goto(CASE.url);
    await b.wait(page, () => document.documentElement.dataset.ready === 'true');

    // Whisper: a recording picker and its note in place of the text box; no comparing.
    await b.select(page, '#model', '1');
    await b.wait(page, () => !document.getElementById('audio-line').hidden);
    assert.deepEqual(await shown(page, ['text', 'picture', 'audio', 'audio-note', 'timestamps', 'compare']),
      { text: false, picture: false, audio: true, 'audio-note': true, timestamps: true, compare: false });
    assert.match(await page.$eval('#audio-note', (e) => e.textContent), /WAV, FLAC, MP3 or OGG up to 32 MiB/);
    assert.match(await page.$eval('#status', (s) => s.textContent), /Choose a recording/);
    assert.deepEqual(await shown(page, ['report', 'drop-zone']), { report: false, 'drop-zone': true });

    // Pick the recording: the report opens on its Speech tab with the CLI's words.
    const recordingName = basename(CASE.recording);
    await b.pick(page, '#audio', CASE.recording);
    await drawnRecording(b, page, 1);
    const first = await speechTab(page);
    assert.equal(first.view, 'speech', 'a recording\'s report opens on the Speech tab');
    assert.ok(first.tab);
    assert.deepEqual(first.buttons, CASE.words.map((w) => w.word.trim()));
    assert.equal(first.drawn.boxes.length, CASE.words.length);
    assert.ok(first.drawn.max > 0, 'the words × time matrix has weight');
    assert.equal(first.name.startsWith(recordingName), true, first.name);
    assert.equal(first.audio, 'data:audio/wav;base64');
    const statusText = await page.$eval('#status', (s) => s.textContent);
    assert.ok(statusText.startsWith(recordingName + ' · '), statusText);
    assert.ok(statusText.includes(CASE.transcript), statusText);

    // Seek into the middle of a word: the cursor lights it.
    const w = Math.floor(CASE.words.length / 2);
    const mid = (CASE.words[w].start + CASE.words[w].end) / 2;
    const after = await page.evaluate((tm) => new Promise((done) => {
      const win = document.getElementById('report').contentWindow;
      const a = win.document.getElementById('speech-audio');
      const seek = () => {
        a.addEventListener('seeked', () => win.requestAnimationFrame(() => done({
          current: win.attnviz.speech().current,
          lit: [...win.document.querySelectorAll('#speech-words .speech-word.current')].map((x) => Number(x.dataset.word)),
        })), { once: true });
        a.currentTime = tm;
      };
      if (a.readyState >= 1) seek(); else a.addEventListener('loadedmetadata', seek, { once: true });
    }), mid);
    assert.equal(after.current, w, 'the word being said');
    assert.deepEqual(after.lit, [w]);
    await page.screenshot({ path: join(CASE.screens, `serve-audio-${name}.png`) });

    // Save report: the bytes `attnviz -m MODEL --audio FILE --html` wrote.
    const expected = readFileSync(CASE.expected);
    const saved = await savedBytes(page);
    assert.ok(saved.equals(expected), `saved ${saved.length} bytes, --audio --html wrote ${expected.length}`);
    assert.equal(await page.$eval('#save', (a) => a.download), 'attnviz-report-beckett.html');

    // Timestamps: run again, the address keeps the box.
    await page.click('#timestamps');
    await drawnRecording(b, page, 2);
    assert.equal(new URL(page.url()).searchParams.get('timestamps'), '1');
    assert.equal((await speechTab(page)).view, 'speech');

    // Not a recording: the server's one line in the status, the report on screen stays.
    await page.evaluate(() => {
      const dt = new DataTransfer();
      dt.items.add(new File(['not a recording at all'], 'notes.wav', { type: 'audio/wav' }));
      const target = document.getElementById('input');
      target.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
      target.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    });
    await b.wait(page, () => document.getElementById('status').className === 'error');
    assert.match(await page.$eval('#status', (s) => s.textContent), /notes\.wav/);
    assert.equal((await speechTab(page)).view, 'speech', 'the last report stays');

    const refused = 'console: Failed to load resource: the server responded with a status of 400 (Bad Request)';
    assert.deepEqual(log.filter((l) => l !== refused), [], 'no console error, no request off the server');
  });
}
