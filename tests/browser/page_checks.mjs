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
