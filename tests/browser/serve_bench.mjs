// Keystroke to drawn view in `attnviz serve`, measured in headless Chromium: the page's own
// record (window.attnvizServe.runs, performance.now() of the page) from the input event of one
// typed key to the report frame's next paint after it has drawn the view. After the first run
// the booted report draws each new run's data in place (window.attnviz.load); `in_place` says
// whether a round was drawn so (the frame's parts are then null: no document was loaded). Called by
// `cargo bench --bench serve` with a JSON job as argument:
//   { url, model, text, rounds, warmup }
// It types the text's last character into the text box holding the rest, `warmup + rounds`
// times, each after the previous one was drawn, and prints one JSON object on stdout.

import { chromium } from 'playwright-core';

const job = JSON.parse(process.argv[2]);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--no-first-run'],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
const page = await context.newPage();
const errors = [];
page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
page.on('pageerror', (e) => errors.push(e.message));
const url = new URL(job.url);
url.searchParams.set('model', String(job.model));
await page.goto(url.href);
await page.waitForFunction(() => document.documentElement.dataset.ready === 'true', null, { timeout: 60000 });

const head = job.text.slice(0, -1);
const key = job.text.slice(-1);
const rows = [];
for (let i = 0; i < job.warmup + job.rounds; i++) {
  const before = await page.evaluate((h) => {
    const t = document.getElementById('text');
    t.value = h; // no input event: only the typed key below runs
    t.focus();
    t.setSelectionRange(h.length, h.length);
    return window.attnvizServe.runs.length;
  }, head);
  await page.keyboard.type(key);
  await page.waitForFunction((n) => window.attnvizServe.runs.length > n, before, { timeout: 60000 });
  const r = await page.evaluate(() => window.attnvizServe.runs[window.attnvizServe.runs.length - 1]);
  if (r.text !== job.text) throw new Error('drew ' + JSON.stringify(r.text) + ', not the typed text');
  if (i >= job.warmup) {
    rows.push({
      tokens: r.tokens,
      in_place: Boolean(r.inPlace),
      keystroke_to_drawn: r.drawn - r.input,
      keystroke_to_answer: r.answered - r.input,
      page_draw: r.drawn - r.answered,
      // The frame's parts: its document's fetch, parse (HTML and inline data up to DOM
      // interactive), scripts and fonts up to the load event, then booting and drawing the view.
      frame_fetch: r.frame ? r.frame.fetched - r.answered : null,
      frame_parse: r.frame ? r.frame.parsed - r.frame.fetched : null,
      frame_load: r.frame ? r.frame.loaded - r.frame.parsed : null,
      frame_boot_draw: r.frame ? r.drawn - r.frame.loaded : null,
      report_kib: r.frame ? r.frame.bytes / 1024 : null,
      // The run's metadata and payload as handed to the frame (characters).
      data_kib: r.dataBytes ? r.dataBytes / 1024 : null,
      server_total: r.server.total,
      library_run: r.server.run,
      library_report: r.server.report,
    });
  }
}
await browser.close();
console.log(JSON.stringify({ rows, errors }));
