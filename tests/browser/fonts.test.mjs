// The fonts attnviz embeds in SVG figures and HTML reports, in headless Chromium (playwright-core)
// and Firefox (puppeteer-core over WebDriver BiDi): every @font-face must load (a browser's font
// sanitizer rejects a malformed font silently, and the text would then fall back to whatever the
// system has), and each script's sample must be covered by its embedded family.
//
// Run by `cargo test --release --test suite fonts_in_browsers:: -- --include-ignored`, which writes
// the files into tests/artifacts/fonts/ first.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';

const ART = resolve(process.env.ATTNVIZ_FONT_ARTIFACTS || '../artifacts/fonts');
// family → a character it must draw (written by the Rust side, from the same fonts)
const SAMPLES = () => JSON.parse(readFileSync(join(ART, 'samples.json'), 'utf8'));

let chrome;
let firefox;
before(async () => {
  chrome = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--no-first-run'],
  });
  firefox = await puppeteer.launch({
    browser: 'firefox',
    executablePath: process.env.FIREFOX || '/usr/bin/firefox-esr',
    headless: true,
  });
});
after(async () => {
  if (chrome) await chrome.close();
  if (firefox) await firefox.close();
});

/** In the page: load every declared face; report each one's family, weight and status, and
 * whether each sample character is covered by its family. */
async function fontReport(samples) {
  const faces = [...document.fonts];
  await Promise.all(faces.map((f) => f.load().catch(() => null)));
  const covered = {};
  for (const [family, ch] of Object.entries(samples)) {
    covered[family] = document.fonts.check('16px "' + family + '"', ch);
  }
  return {
    faces: faces.map((f) => ({ family: f.family.replace(/"/g, ''), weight: f.weight, status: f.status })),
    covered,
  };
}

function checkReport(what, report, samples) {
  const failed = report.faces.filter((f) => f.status !== 'loaded');
  assert.deepEqual(failed, [], what + ': faces that did not load');
  const families = new Set(report.faces.map((f) => f.family));
  for (const family of Object.keys(samples)) {
    assert.ok(families.has(family), what + ': no face for ' + family);
    assert.ok(report.covered[family], what + ': ' + family + ' does not cover ' + samples[family]);
  }
}

for (const file of ['scripts.svg', 'scripts.html']) {
  test('chromium: every embedded font of ' + file + ' loads and covers its script', async () => {
    const path = join(ART, file);
    assert.ok(existsSync(path), path + ' missing');
    const page = await chrome.newPage();
    await page.goto(pathToFileURL(path).href);
    const samples = SAMPLES();
    checkReport('chromium ' + file, await page.evaluate(fontReport, samples), samples);
    await page.screenshot({ path: join(ART, 'chromium-' + file + '.png') });
    await page.close();
  });

  test('firefox: every embedded font of ' + file + ' loads and covers its script', async () => {
    const path = join(ART, file);
    const page = await firefox.newPage();
    await page.goto(pathToFileURL(path).href);
    const samples = SAMPLES();
    checkReport('firefox ' + file, await page.evaluate(fontReport, samples), samples);
    await page.screenshot({ path: join(ART, 'firefox-' + file + '.png') });
    await page.close();
  });
}
