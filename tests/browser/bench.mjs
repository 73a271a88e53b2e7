// Measure attnviz HTML reports in headless Chromium: time to interactive, layer-switch latency,
// model-view build time and JS heap. Called by `cargo bench --bench html` with the report files
// as arguments; prints one JSON object per file on stdout.

import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const files = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--no-first-run', '--enable-precise-memory-info'],
});

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

for (const file of files) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const page = await context.newPage();
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(e.message));
  const wall0 = Date.now();
  await page.goto(pathToFileURL(file).href, { timeout: 120000 });
  await page.waitForFunction(() => window.attnviz && window.attnviz.timings.painted, null, { timeout: 120000 });
  const wall = Date.now() - wall0;
  const t = await page.evaluate(() => window.attnviz.timings);
  const sw = await page.evaluate(async () => {
    const a = window.attnviz;
    const L = a.meta.model.layers;
    const sel = document.getElementById('layer-select');
    const out = [];
    for (let i = 0; i < 2 * L; i++) {
      const l = (a.state.layer + 1) % L;
      const t0 = performance.now();
      sel.value = String(l);
      sel.dispatchEvent(new Event('change'));
      await a.settled();
      const t1 = performance.now();
      // Until the frame holding the new drawing has been produced.
      await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
      out.push({ render: a.drawn.ms, frame: performance.now() - t0, settled: t1 - t0, lines: a.drawn.lines });
    }
    return out;
  });
  const model = await page.evaluate(async () => {
    const t0 = performance.now();
    document.getElementById('tab-model').click();
    await window.attnviz.settled();
    while (!document.getElementById('model-grid').dataset.complete) await new Promise((r) => setTimeout(r, 5));
    return performance.now() - t0;
  });
  const heap = await page.evaluate(() => (performance.memory ? performance.memory.usedJSHeapSize : null));
  console.log(JSON.stringify({
    file,
    tti_ms: t.painted,
    drawn_ms: t.interactive,
    decoded_ms: t.decoded,
    wall_ms: wall,
    switch_render_ms: median(sw.map((s) => s.render)),
    switch_frame_ms: median(sw.map((s) => s.frame)),
    switch_frame_max_ms: Math.max(...sw.map((s) => s.frame)),
    lines_per_layer: median(sw.map((s) => s.lines)),
    model_view_ms: model,
    js_heap_mb: heap === null ? null : heap / 1048576,
    errors,
  }));
  await context.close();
}
await browser.close();
