// The HTML report in headless Firefox (Debian's firefox-esr, driven over WebDriver BiDi by
// puppeteer-core): it must open from file:// with no console error and no network request, and
// draw what the data says, as in Chromium (report.test.mjs covers every interaction there).
//
// Run by `cargo test --release --test suite html_report:: -- --include-ignored` after it has written the reports.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import puppeteer from 'puppeteer-core';
import { expectedLines, safeThreshold, range } from './expect.mjs';

const ART = resolve(process.env.ATTNVIZ_ARTIFACTS || '../artifacts/html');
const SCREENS = join(ART, 'screens');
mkdirSync(SCREENS, { recursive: true });
const FIREFOX = process.env.FIREFOX || '/usr/bin/firefox-esr';

let browser;
before(async () => {
  assert.ok(existsSync(FIREFOX), FIREFOX + ' missing: apt-get install -y firefox-esr');
  browser = await puppeteer.launch({ browser: 'firefox', executablePath: FIREFOX, headless: true });
});
after(async () => { if (browser) await browser.close(); });

async function open(name) {
  const file = join(ART, name + '.html');
  assert.ok(existsSync(file), file + ' missing: run `cargo test --release --test suite html_report:: -- --include-ignored`');
  const exp = JSON.parse(readFileSync(join(ART, name + '.expect.json'), 'utf8'));
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  const url = pathToFileURL(file).href;
  const log = { errors: [], requests: [], dialogs: [] };
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warn') log.errors.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', (e) => log.errors.push('pageerror: ' + e.message));
  page.on('dialog', async (d) => { log.dialogs.push(d.message()); await d.dismiss(); });
  // data: URLs never reach the network (Firefox loads one of its own, a font, in every page).
  page.on('request', (r) => { if (r.url() !== url && !r.url().startsWith('data:')) log.requests.push(r.url()); });
  await page.goto(url);
  await page.waitForFunction(() => document.documentElement.dataset.ready === 'true' ||
    document.querySelector('#status.error'), { timeout: 20000 });
  const failure = await page.$eval('#status', (s) => (s.classList.contains('error') ? s.textContent : ''));
  assert.equal(failure, '', 'the page reported an error');
  return { page, exp, log };
}

async function settle(page) { await page.evaluate(() => window.attnviz.settled()); }
async function lines(page) { await settle(page); return Number(await page.$eval('#hv-canvas', (c) => c.dataset.lines)); }

async function setThreshold(page, thr) {
  await page.$eval('#threshold', (el, v) => { el.value = String(v); el.dispatchEvent(new Event('input')); }, thr);
  await settle(page);
  assert.equal(await page.evaluate(() => window.attnviz.state.threshold), thr);
}

for (const name of ['single', 'pair', 'injection']) {
  test('firefox ' + name + ': loads clean from file:// and draws the expected lines', async () => {
    const { page, exp, log } = await open(name);
    await page.click('#tab-head');
    await settle(page);
    assert.equal(await page.$eval('#sentence-a', (e) => e.textContent), exp.text);
    assert.equal(await page.$$eval('#hv-left .tok', (ts) => ts.length), exp.n);
    const thr = safeThreshold(exp, 0.03);
    await setThreshold(page, thr);
    const all = range(exp.heads);
    assert.equal(await lines(page), expectedLines(exp, { layer: 0, heads: all, thr }));
    await page.select('#layer-select', String(exp.layers - 1));
    assert.equal(await lines(page), expectedLines(exp, { layer: exp.layers - 1, heads: all, thr }));
    await page.click('#tab-model');
    await settle(page);
    assert.equal(await page.$$eval('#model-grid .thumb', (ts) => ts.length), exp.layers * exp.heads);
    await page.screenshot({ path: join(SCREENS, 'firefox-' + name + '.png') });
    assert.deepEqual(log.dialogs, [], 'no alert ran');
    assert.deepEqual(log.errors, []);
    assert.deepEqual(log.requests, []);
    await page.close();
  });
}
