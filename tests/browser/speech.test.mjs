// Browser test of a speech run's report (the tiny random Whisper on a synthetic recording whose
// file name carries markup), in headless Chromium (playwright-core) and headless Firefox ESR
// (puppeteer-core over WebDriver BiDi), as firefox.test.mjs drives the other reports: the Speech
// tab opens first, its words and their boxes are the JSON export's, the recording plays from the
// page, and while it plays the cursor runs over the word being said and lights it.
//
// Run by `cargo test --release --test suite html_report:: -- --include-ignored`, which writes the
// report with the CLI into $ATTNVIZ_ARTIFACTS beside the CLI's JSON export of the same run: every
// expected word and time here comes from that JSON (`cross.speech.words`).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';

const ART = resolve(process.env.ATTNVIZ_ARTIFACTS || '../artifacts/html');
const SCREENS = join(ART, 'screens');
mkdirSync(SCREENS, { recursive: true });

/** One browser behind one small interface (the two drivers differ in argument order and in how
 * a select is set). */
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
        page: () => b.newPage({ viewport: { width: 1200, height: 900 } }),
        wait: (page, fn) => page.waitForFunction(fn, null, { timeout: 20000 }),
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
          await page.setViewport({ width: 1200, height: 900 });
          return page;
        },
        wait: (page, fn) => page.waitForFunction(fn, { timeout: 20000 }),
        select: (page, selector, value) => page.select(selector, value),
      };
    },
  },
};

function expectations(name) {
  const file = join(ART, name + '.json');
  assert.ok(existsSync(file), file + ' missing: run `cargo test --release --test suite html_report:: -- --include-ignored`');
  return JSON.parse(readFileSync(file, 'utf8'));
}

async function ready(b, page) {
  await b.wait(page, () => document.documentElement.dataset.ready === 'true' || document.querySelector('#status.error'));
  const failure = await page.$eval('#status', (s) => (s.classList.contains('error') ? s.textContent : ''));
  assert.equal(failure, '', 'the page reported an error');
}

for (const [name, driver] of Object.entries(drivers)) test(`${name}: a speech report draws the words over the recording and follows the player`, async (t) => {
  const b = await driver.launch();
  t.after(() => b.close());
  const doc = expectations('speech-whisper');
  const words = doc.cross.speech.words;
  assert.ok(words.length > 0, 'the run found words');
  const page = await b.page();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
  await page.goto(pathToFileURL(join(ART, 'speech-whisper.html')).href);
  await ready(b, page);
  const first = await page.evaluate(async () => {
    await window.attnviz.settled();
    return {
      view: window.attnviz.state.view,
      tab: !document.getElementById('tab-speech').hidden,
      drawn: window.attnviz.speech(),
      buttons: [...document.querySelectorAll('#speech-words .speech-word')].map((b) => b.textContent),
      name: document.getElementById('speech-name').textContent,
      injected: document.querySelectorAll('#typed').length,
      audio: document.getElementById('speech-audio').src.slice(0, 21),
    };
  });
  assert.equal(first.view, 'speech', 'a speech report opens on the Speech tab');
  assert.ok(first.tab);
  assert.deepEqual(first.buttons, words.map((w) => w.word.trim()));
  assert.equal(first.drawn.words, words.length);
  assert.equal(first.drawn.boxes.length, words.length);
  assert.equal(first.drawn.source, 'alignment');
  assert.ok(first.drawn.max > 0, 'the words × time matrix has weight');
  assert.ok(first.name.startsWith('a<b id="typed">x.wav'), 'the file name is text: ' + first.name);
  assert.equal(first.injected, 0, 'no markup from the file name');
  assert.equal(first.audio, 'data:audio/wav;base64');
  // The boxes stand in time order, each word's box to the right of the last's start.
  for (let i = 1; i < words.length; i++) assert.ok(first.drawn.boxes[i][0] >= first.drawn.boxes[i - 1][0]);
  // The recording decodes: its duration is the window's.
  const duration = await page.evaluate(() => new Promise((resolve) => {
    const a = document.getElementById('speech-audio');
    if (a.readyState >= 1) resolve(a.duration);
    else a.addEventListener('loadedmetadata', () => resolve(a.duration));
  }));
  assert.ok(Math.abs(duration - doc.cross.speech.window_seconds) < 0.01, 'duration ' + duration);
  // Seek into the middle of the longest word: the cursor stands inside its box and it is lit.
  const w = words.reduce((b, x, i) => (x.end - x.start > words[b].end - words[b].start ? i : b), 0);
  const mid = (words[w].start + words[w].end) / 2;
  const after = await page.evaluate((t) => new Promise((resolve) => {
    const a = document.getElementById('speech-audio');
    a.addEventListener('seeked', () => requestAnimationFrame(() => resolve({
      drawn: window.attnviz.speech(),
      lit: [...document.querySelectorAll('#speech-words .speech-word.current')].map((b) => Number(b.dataset.word)),
    })), { once: true });
    a.currentTime = t;
  }), mid);
  assert.equal(after.drawn.current, w, 'the word being said');
  assert.deepEqual(after.lit, [w]);
  const box = after.drawn.boxes[w];
  assert.ok(after.drawn.cursorX >= box[0] - 1 && after.drawn.cursorX <= box[2] + 1, 'cursor ' + after.drawn.cursorX + ' in ' + box);
  // Another source: one head of the cross-attention.
  await b.select(page, '#speech-source', 'head:0:1');
  const head = await page.evaluate(async () => { await window.attnviz.settled(); return window.attnviz.speech().source; });
  assert.equal(head, 'head:0:1');
  await page.screenshot({ path: join(SCREENS, `speech-whisper-${name}.png`), fullPage: true });
  assert.deepEqual(errors, []);
});
