// Screenshot every view of attnviz reports in Chromium and Firefox, light and dark, wide and
// narrow, for a person to look at (no assertions: the test files assert).
//
//   node look.mjs OUT_DIR report.html [more.html …]
//
// Writes OUT_DIR/<browser>-<report>-<theme>-<width>-<view>.png (the window, 900 px tall).
// Options through the environment: LOOK_BROWSERS=chromium,firefox LOOK_WIDTHS=1400,600
// LOOK_THEMES=light,dark LOOK_VIEWS=head,model,matrix,neuron,stats,image; LOOK_KINDS=encoder,decoder,cross
// opens each kind of an encoder–decoder report (its `#kind=` fragment; <report>-<kind> in the name).

import { mkdirSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';

const [out, ...files] = process.argv.slice(2);
if (!out || !files.length) {
  console.error('usage: node look.mjs OUT_DIR report.html [more.html …]');
  process.exit(2);
}
mkdirSync(out, { recursive: true });
const list = (name, dflt) => (process.env[name] || dflt).split(',').filter(Boolean);
const browsers = list('LOOK_BROWSERS', 'chromium,firefox');
const widths = list('LOOK_WIDTHS', '1400,600').map(Number);
const themes = list('LOOK_THEMES', 'light,dark');
const views = list('LOOK_VIEWS', 'head,model,matrix,neuron,stats,image');
const kinds = list('LOOK_KINDS', '');
const HEIGHT = 900;

async function shoot(page, file, errors, kind) {
  const stem = basename(file, '.html') + (kind ? '-' + kind : '');
  for (const theme of themes) {
    for (const width of widths) {
      await page.setViewport({ width, height: HEIGHT });
      // A fresh load per kind: about:blank first, as a changed fragment alone does not reload.
      await page.goto('about:blank');
      await page.goto(pathToFileURL(resolve(file)).href + (kind ? '#kind=' + kind : ''));
      await page.waitForFunction(() => document.documentElement.dataset.ready === 'true' ||
        document.querySelector('#status.error'), { timeout: 60000 });
      for (const view of views) {
        const has = await page.evaluate((v) => (v !== 'stats' || !document.getElementById('tab-stats').hidden) &&
          (v !== 'image' || !document.getElementById('tab-image').hidden), view);
        if (!has) continue;
        await page.evaluate(async ({ t, v }) => {
          window.attnviz.set({ theme: t, view: v });
          await window.attnviz.settled();
          const grid = document.getElementById('model-grid');
          while (v === 'model' && !grid.dataset.complete) await new Promise((r) => setTimeout(r, 10));
        }, { t: theme, v: view });
        await page.screenshot({ path: join(out, [page.browserName, stem, theme, width, view].join('-') + '.png') });
      }
      await page.evaluate(() => window.attnviz.set({ theme: 'auto' }));
    }
  }
  if (errors.length) console.log(stem + ': ' + errors.join('\n'));
}

for (const name of browsers) {
  const errors = [];
  if (name === 'chromium') {
    const browser = await chromium.launch({
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
    });
    const page = await browser.newPage();
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    const p = {
      browserName: name,
      setViewport: (v) => page.setViewportSize(v),
      goto: (u) => page.goto(u),
      waitForFunction: (f, o) => page.waitForFunction(f, null, o),
      evaluate: (f, a) => page.evaluate(f, a),
      screenshot: (o) => page.screenshot(o),
    };
    for (const f of files) for (const k of kinds.length ? kinds : ['']) await shoot(p, f, errors, k);
    await browser.close();
  } else {
    const browser = await puppeteer.launch({
      browser: 'firefox', executablePath: process.env.FIREFOX || '/usr/bin/firefox-esr', headless: true,
    });
    const page = await browser.newPage();
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    const p = {
      browserName: name,
      setViewport: (v) => page.setViewport(v),
      goto: (u) => page.goto(u),
      waitForFunction: (f, o) => page.waitForFunction(f, o),
      evaluate: (f, a) => page.evaluate(f, a),
      screenshot: (o) => page.screenshot(o),
    };
    for (const f of files) for (const k of kinds.length ? kinds : ['']) await shoot(p, f, errors, k);
    await browser.close();
  }
}
