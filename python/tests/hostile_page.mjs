// Opens the page python/tests/hostile_page.py writes (attnviz's inline views over tokens that
// carry script end tags, markup, quotes and bidirectional controls) in headless Chromium and
// Firefox, and checks what a reader gets (issue 20, requirement 19):
//   - the outer page holds exactly the views' frames and nothing the tokens tried to add: no
//     element but the wrappers, no script, no image; each frame is sandboxed;
//   - every frame drew its report without error, and no marker ran (`data-pwned`, set by the
//     tokens' scripts and handlers if they ever ran, in the page or in a frame);
//   - the head view shows every hostile token as text (its label's textContent holds the
//     characters, with no element inside it), and the page title is the text it was given;
//   - nothing is requested from the network, and no console error.
// Usage (from tests/browser, for its node_modules): node ../../python/tests/hostile_page.mjs
// PAGE.html [SCREENSHOT_DIR]. Exits non-zero on any failure.

import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const require = createRequire(join(process.cwd(), 'package.json'));
const { chromium } = require('playwright-core');
const puppeteer = require('puppeteer-core');

const file = resolve(process.argv[2]);
const shots = process.argv[3] ? resolve(process.argv[3]) : null;
const url = pathToFileURL(file).href;

/** What every frame must show: the hostile strings, as text. */
const MUST_SHOW = ['</script><script>', '<img src=x onerror=', '" onmouseover="', "'single' &amp; &lt;b&gt;",
  '</iframe><img'];

/** Checks in the outer page, given `evaluate` (in the page) and `frames` (each frame's evaluate). */
async function check(name, evaluate, frames) {
  const outer = await evaluate(() => ({
    pwned: document.documentElement.dataset.pwned || document.body.dataset.pwned || null,
    scripts: document.querySelectorAll('script').length,
    images: document.querySelectorAll('img').length,
    iframes: [...document.querySelectorAll('iframe')].map((f) => f.getAttribute('sandbox')),
    tags: [...new Set([...document.body.querySelectorAll('*')].map((e) => e.tagName.toLowerCase()))].sort(),
  }));
  assert.equal(outer.pwned, null, `${name}: a token ran in the notebook page`);
  assert.equal(outer.scripts, 0, `${name}: no script outside the frames`);
  assert.equal(outer.images, 0, `${name}: no image outside the frames`);
  assert.deepEqual(outer.tags, ['code', 'div', 'h2', 'iframe', 'section'], `${name}: only the views' wrappers`);
  assert.equal(outer.iframes.length, 4, `${name}: one frame a view`);
  for (const s of outer.iframes) assert.equal(s, 'allow-scripts allow-downloads', `${name}: sandboxed`);
  assert.equal(frames.length, 4, `${name}: four frames`);
  for (const [i, frame] of frames.entries()) {
    const got = await frame(() => new Promise((done) => {
      const ready = () => document.documentElement.dataset.ready === 'true' || document.querySelector('#status.error');
      const wait = () => (ready() ? done() : setTimeout(wait, 50));
      wait();
    }).then(async () => {
      if (window.attnviz && window.attnviz.settled) await window.attnviz.settled();
      const status = document.querySelector('#status');
      const labels = [...document.querySelectorAll('#hv-left .tok, #hv-right .tok')];
      return {
        error: status && status.classList.contains('error') ? status.textContent : '',
        pwned: document.documentElement.dataset.pwned || document.body.dataset.pwned || null,
        title: document.title,
        // Images, scripts from elsewhere, and any script but the report's own (one without a
        // type; its data blocks are typed).
        injected: document.querySelectorAll('img, script[src]').length
          + Math.max(0, document.querySelectorAll('script:not([type])').length - 1),
        labels: labels.map((l) => l.textContent),
        labelChildren: labels.reduce((n, l) => n + l.querySelectorAll('*:not(.tag)').length, 0),
        text: document.body.innerText,
      };
    }));
    assert.equal(got.error, '', `${name} frame ${i}: the report drew`);
    assert.equal(got.pwned, null, `${name} frame ${i}: a token ran in the report`);
    assert.equal(got.injected, 0, `${name} frame ${i}: no element from a token`);
    assert.equal(got.labelChildren, 0, `${name} frame ${i}: labels are text only`);
    if (got.labels.length) {
      for (const s of MUST_SHOW) {
        assert.ok(got.labels.some((l) => l.includes(s)), `${name} frame ${i}: a label shows ${JSON.stringify(s)}`);
      }
    }
    if (i === 3) {
      assert.ok(got.title.includes("</title><script>document.documentElement.dataset.pwned='title'</script>"),
        `${name}: the report's title is its text: ${got.title}`);
    }
  }
}

const requests = [];
const errors = [];

// Chromium (playwright-core).
{
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--no-first-run'],
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    await context.route('**/*', (route) => {
      const u = route.request().url();
      if (u === url || u.startsWith('data:') || u.startsWith('blob:') || u === 'about:srcdoc') return route.continue();
      requests.push('chromium: ' + u);
      return route.abort();
    });
    page.on('pageerror', (e) => errors.push('chromium pageerror: ' + e.message));
    page.on('console', (m) => { if (m.type() === 'error') errors.push('chromium console: ' + m.text()); });
    page.on('dialog', (d) => { errors.push('chromium dialog: ' + d.message()); d.dismiss(); });
    await page.goto(url, { waitUntil: 'load' });
    const handles = await page.$$('iframe');
    const frames = [];
    for (const h of handles) {
      const f = await h.contentFrame();
      frames.push((fn) => f.evaluate(fn));
    }
    await check('chromium', (fn) => page.evaluate(fn), frames);
    if (shots) {
      mkdirSync(shots, { recursive: true });
      for (const [i, h] of handles.entries()) {
        await h.scrollIntoViewIfNeeded();
        await h.screenshot({ path: join(shots, `hostile-chromium-${i}.png`) });
      }
    }
  } finally {
    await browser.close();
  }
}

// Firefox (puppeteer-core over WebDriver BiDi).
{
  const browser = await puppeteer.launch({
    browser: 'firefox', executablePath: process.env.FIREFOX || '/usr/bin/firefox-esr', headless: true,
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1200, height: 900 });
    page.on('console', (m) => { if (m.type() === 'error') errors.push('firefox console: ' + m.text()); });
    page.on('pageerror', (e) => errors.push('firefox pageerror: ' + e.message));
    page.on('dialog', async (d) => { errors.push('firefox dialog: ' + d.message()); await d.dismiss(); });
    page.on('request', (r) => {
      const u = r.url();
      if (u !== url && !u.startsWith('data:') && !u.startsWith('blob:') && u !== 'about:srcdoc') {
        requests.push('firefox: ' + u);
      }
    });
    await page.goto(url);
    const handles = await page.$$('iframe');
    const frames = [];
    for (const h of handles) {
      const f = await h.contentFrame();
      frames.push((fn) => f.evaluate(fn));
    }
    await check('firefox', (fn) => page.evaluate(fn), frames);
    if (shots) {
      for (const [i, h] of handles.entries()) {
        await h.scrollIntoView();
        await h.screenshot({ path: join(shots, `hostile-firefox-${i}.png`) });
      }
    }
  } finally {
    await browser.close();
  }
}

assert.deepEqual(requests, [], 'nothing requested from the network');
assert.deepEqual(errors, [], 'no page or console error');
console.log('hostile tokens: 4 inline views drawn in Chromium and Firefox; no token ran as markup or script');
