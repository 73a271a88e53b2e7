// Functions the browser tests run inside the report page (through playwright's or puppeteer's
// `evaluate`, so each is self-contained). They read what is on screen: pixels and layout, not the
// page's own state. Pixels are read through a scratch canvas made for reading (willReadFrequently),
// which keeps Chromium from warning about repeated readbacks of the page's own canvases.

/** Every model-view thumbnail: its CSS and bitmap size, whether it is blank (one colour), and the
 *  highest WCAG contrast of any of its pixels against its background (pixel (1, 1)). */
export function thumbnails() {
  const lum = ([r, g, b]) => {
    const ch = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * ch(r) + 0.7152 * ch(g) + 0.0722 * ch(b);
  };
  return Array.from(document.querySelectorAll('#model-grid .thumb')).map((b) => {
    const c = b.querySelector('canvas');
    const out = { layer: Number(b.dataset.layer), head: Number(b.dataset.head), cssWidth: c.getBoundingClientRect().width, width: c.width, blank: true, maxContrast: 1 };
    if (!c.width || !c.height) return out;
    const scratch = document.createElement('canvas');
    scratch.width = c.width;
    scratch.height = c.height;
    const sctx = scratch.getContext('2d', { willReadFrequently: true });
    sctx.drawImage(c, 0, 0);
    const px = sctx.getImageData(0, 0, c.width, c.height).data;
    const bgAt = 4 * (c.width + 1);
    const bg = [px[bgAt], px[bgAt + 1], px[bgAt + 2]];
    const lb = lum(bg);
    for (let i = 0; i < px.length; i += 4) {
      if (px[i] === bg[0] && px[i + 1] === bg[1] && px[i + 2] === bg[2]) continue;
      out.blank = false;
      const l = lum([px[i], px[i + 1], px[i + 2]]);
      out.maxContrast = Math.max(out.maxContrast, (Math.max(l, lb) + 0.05) / (Math.min(l, lb) + 0.05));
    }
    return out;
  });
}

/** Start counting, every animation frame, the model-view thumbnails that show nothing (a
 *  zero-size or one-colour canvas). `stopThumbWatch` ends it and returns the counts. */
export function startThumbWatch() {
  const w = { frames: 0, worst: 0, stop: false };
  window.__thumbWatch = w;
  const scratch = document.createElement('canvas');
  const sctx = scratch.getContext('2d', { willReadFrequently: true });
  const blank = (c) => {
    if (!c.width || !c.height) return true;
    scratch.width = c.width;
    scratch.height = c.height;
    sctx.drawImage(c, 0, 0);
    const px = sctx.getImageData(0, 0, c.width, c.height).data;
    for (let i = 4; i < px.length; i += 4) {
      if (px[i] !== px[0] || px[i + 1] !== px[1] || px[i + 2] !== px[2]) return false;
    }
    return true;
  };
  const frame = () => {
    if (w.stop) return;
    w.frames++;
    let n = 0;
    for (const c of document.querySelectorAll('#model-grid .thumb canvas')) if (blank(c)) n++;
    w.worst = Math.max(w.worst, n);
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}
export function stopThumbWatch() {
  window.__thumbWatch.stop = true;
  return { frames: window.__thumbWatch.frames, worst: window.__thumbWatch.worst };
}

/** The colour shown at CSS point (x, y) of the neuron canvas: its pixel over the page background
 *  (the canvas is transparent where nothing is drawn). */
export function neuronPixel([x, y]) {
  const c = document.getElementById('neuron-canvas');
  const s = c.width / c.getBoundingClientRect().width;
  const scratch = document.createElement('canvas');
  const sctx = scratch.getContext('2d', { willReadFrequently: true });
  scratch.width = 1;
  scratch.height = 1;
  sctx.fillStyle = getComputedStyle(document.body).backgroundColor;
  sctx.fillRect(0, 0, 1, 1);
  sctx.drawImage(c, Math.floor(x * s), Math.floor(y * s), 1, 1, 0, 0, 1, 1);
  return Array.from(sctx.getImageData(0, 0, 1, 1).data.slice(0, 3));
}

/** Layout of the top bar: the top of every visible tab, the bar's height, and the right edge of
 *  its last button. */
export function topbarLayout() {
  const tabs = Array.from(document.querySelectorAll('.tab')).filter((t) => !t.hidden);
  const bar = document.getElementById('topbar').getBoundingClientRect();
  return {
    tabTops: tabs.map((t) => Math.round(t.getBoundingClientRect().top)),
    height: bar.height,
    right: document.getElementById('help-toggle').getBoundingClientRect().right,
    width: document.documentElement.clientWidth,
  };
}

/** Height of the sentence line and whether its text is cut off. */
export function sentenceLayout() {
  const s = document.getElementById('sentence-a');
  return {
    height: s.getBoundingClientRect().height,
    lineHeight: parseFloat(getComputedStyle(s).lineHeight) || 20,
    cut: s.scrollWidth > s.clientWidth + 1,
    toggle: !document.getElementById('summary-toggle').hidden,
    expanded: document.getElementById('summary-toggle').getAttribute('aria-expanded'),
  };
}

/** The width views have (main's content box). */
export function contentWidth() {
  const m = document.querySelector('main');
  const cs = getComputedStyle(m);
  return m.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
}

/** The distinct colours ("r,g,b") inside matrix cell (row a, column c) of panel `id`, 2 CSS px in
 *  from its edges (so the hover outline and neighbours stay out), as the canvas shows them. */
export function matrixCellColours([id, a, c]) {
  const canvas = document.getElementById(id);
  const g = window.attnviz.matrixGeometry(id);
  const s = canvas.width / canvas.getBoundingClientRect().width;
  const x0 = Math.ceil((g.margin + (c - g.ox) * g.cell + 2) * s);
  const y0 = Math.ceil((g.margin + (a - g.oy) * g.cell + 2) * s);
  const w = Math.max(1, Math.floor((g.cell - 4) * s));
  const scratch = document.createElement('canvas');
  scratch.width = w;
  scratch.height = w;
  const sctx = scratch.getContext('2d', { willReadFrequently: true });
  sctx.fillStyle = getComputedStyle(document.body).backgroundColor;
  sctx.fillRect(0, 0, w, w);
  sctx.drawImage(canvas, x0, y0, w, w, 0, 0, w, w);
  const px = sctx.getImageData(0, 0, w, w).data;
  const out = new Set();
  for (let i = 0; i < px.length; i += 4) out.add(px[i] + ',' + px[i + 1] + ',' + px[i + 2]);
  return Array.from(out);
}

/** The colours ("r,g,b") of the label of matrix row a (left of the plot) of panel `id`. */
export function matrixRowLabelColours([id, a]) {
  const canvas = document.getElementById(id);
  const g = window.attnviz.matrixGeometry(id);
  const s = canvas.width / canvas.getBoundingClientRect().width;
  const y0 = Math.floor((g.margin + (a - g.oy) * g.cell + g.cell / 2 - 5) * s);
  const h = Math.ceil(10 * s);
  const w = Math.floor((g.margin - 4) * s);
  const scratch = document.createElement('canvas');
  scratch.width = w;
  scratch.height = h;
  const sctx = scratch.getContext('2d', { willReadFrequently: true });
  sctx.drawImage(canvas, 0, y0, w, h, 0, 0, w, h);
  const px = sctx.getImageData(0, 0, w, h).data;
  const out = new Set();
  // Un-premultiplied: an edge pixel of a glyph keeps the text colour at a lower alpha.
  for (let i = 0; i < px.length; i += 4) if (px[i + 3] >= 64) out.add(px[i] + ',' + px[i + 1] + ',' + px[i + 2]);
  return Array.from(out);
}

/** The colours ("r,g,b") of a strip of a model-view thumbnail's canvas: `edge` 'left' (x 0–1),
 *  'top' (y 0–1) or 'corner' (the 6 × 6 CSS px square 6 px in from the top-right corner), over its
 *  height or width from fraction `from` to `to`. */
export function thumbStrip([layer, head, edge, from, to]) {
  const c = document.querySelector('.thumb[data-layer="' + layer + '"][data-head="' + head + '"] canvas');
  const s = c.width / c.getBoundingClientRect().width;
  const side = c.width;
  const rect = edge === 'left' ? [0, Math.ceil(from * side), Math.max(1, Math.floor(s)), Math.floor((to - from) * side)]
    : edge === 'top' ? [Math.ceil(from * side), 0, Math.floor((to - from) * side), Math.max(1, Math.floor(s))]
      : [side - Math.ceil(12 * s), Math.ceil(6 * s), Math.floor(6 * s), Math.floor(6 * s)];
  const scratch = document.createElement('canvas');
  scratch.width = rect[2];
  scratch.height = rect[3];
  const sctx = scratch.getContext('2d', { willReadFrequently: true });
  sctx.drawImage(c, rect[0], rect[1], rect[2], rect[3], 0, 0, rect[2], rect[3]);
  const px = sctx.getImageData(0, 0, rect[2], rect[3]).data;
  const out = new Set();
  for (let i = 0; i < px.length; i += 4) out.add(px[i] + ',' + px[i + 1] + ',' + px[i + 2]);
  return Array.from(out);
}
