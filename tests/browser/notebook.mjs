// Opens an executed notebook's HTML (examples/quickstart.ipynb through nbconvert, written by
// python/tests/run.sh) in headless Chromium and checks what a reader sees:
//   - every attnviz output is an isolated frame (sandboxed srcdoc) whose report finished drawing:
//     the head view has lines, the model view thumbnails, the matrix view its canvas;
//   - the note for untrusted notebooks is covered by the frame (a reader of a trusted notebook
//     never sees it);
//   - nothing is requested from the network (every request is recorded, in every frame);
//   - no page or console error.
// Usage: node notebook.mjs EXECUTED.html [SCREENSHOT_DIR]. Exits non-zero on any failure.

import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const file = resolve(process.argv[2]);
const shots = process.argv[3] ? resolve(process.argv[3]) : null;
const url = pathToFileURL(file).href;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--no-first-run'],
});
try {
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page = await context.newPage();
  const requests = [];
  const errors = [];
  // Every request of the page and its frames; a network one is recorded and refused.
  await context.route('**/*', (route) => {
    const u = route.request().url();
    if (u === url || u.startsWith('data:') || u.startsWith('blob:') || u === 'about:srcdoc') {
      return route.continue();
    }
    requests.push(u);
    return route.abort();
  });
  page.on('pageerror', (e) => errors.push('pageerror: ' + e.message));
  page.on('console', (m) => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
  await page.goto(url, { waitUntil: 'load' });

  const frames = await page.$$('div.attnviz-inline > iframe');
  assert.ok(frames.length >= 4, `at least four inline views (got ${frames.length})`);
  const seen = { head: 0, model: 0, matrix: 0 };
  for (const [i, handle] of frames.entries()) {
    assert.equal(await handle.getAttribute('sandbox'), 'allow-scripts allow-downloads', 'sandboxed');
    await handle.scrollIntoViewIfNeeded();
    const frame = await handle.contentFrame();
    assert.ok(frame, `frame ${i} has a document`);
    await frame.waitForFunction(() => document.documentElement.dataset.ready === 'true' ||
      document.querySelector('#status.error'), null, { timeout: 20000 });
    const status = await frame.$eval('#status', (s) => (s.classList.contains('error') ? s.textContent : ''));
    assert.equal(status, '', `frame ${i}: the report drew without error`);
    await frame.evaluate(() => window.attnviz.settled());
    const view = await frame.evaluate(() => document.querySelector('.tab[aria-selected="true"]').dataset.view ||
      document.querySelector('.tab[aria-selected="true"]').textContent.trim().toLowerCase());
    if (view.startsWith('head')) {
      const lines = Number(await frame.$eval('#hv-canvas', (c) => c.dataset.lines));
      assert.ok(lines > 100, `frame ${i}: the head view draws lines (${lines})`);
      seen.head += 1;
    } else if (view.startsWith('model')) {
      const thumbs = await frame.$$eval('.thumb canvas', (cs) => cs.filter((c) => c.width > 0).length);
      assert.ok(thumbs >= 72, `frame ${i}: every layer × head thumbnail (${thumbs})`);
      seen.model += 1;
    } else if (view.startsWith('matrix')) {
      const drawn = await frame.$$eval('canvas', (cs) => cs.filter((c) => c.width > 0 && c.offsetParent).length);
      assert.ok(drawn >= 1, `frame ${i}: the matrix view draws`);
      seen.matrix += 1;
    }
    // The untrusted-notebook note sits behind the frame: what a reader sees there is the frame.
    const covered = await handle.evaluate((f) => {
      const note = f.previousElementSibling.getBoundingClientRect();
      const hit = document.elementFromPoint(note.left + 20, note.top + 8);
      return hit === f;
    });
    assert.ok(covered, `frame ${i}: the note for untrusted notebooks is hidden behind the view`);
    if (shots) {
      mkdirSync(shots, { recursive: true });
      await handle.screenshot({ path: join(shots, `notebook-view-${i}.png`) });
    }
  }
  assert.ok(seen.head >= 2 && seen.model >= 1 && seen.matrix >= 1, JSON.stringify(seen));
  assert.deepEqual(requests, [], 'nothing requested from the network');
  assert.deepEqual(errors, [], 'no page or console error');
  if (shots) await page.screenshot({ path: join(shots, 'notebook-page.png'), fullPage: false });
  console.log(`notebook: ${frames.length} inline views drawn (${JSON.stringify(seen)}), no network request`);
} finally {
  await browser.close();
}
