/* attnviz report: shared parts. Colours, DOM and canvas helpers, the tooltip, and the render
 * scheduler every view goes through. Everything a user typed reaches the page through textContent
 * or canvas fillText, never through HTML parsing.
 */

/* ---------------------------------------------------------------- colours */

const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948',
  '#b07aa1', '#ff9da7', '#9c755f', '#8f8a87', '#17a2b8', '#d37295'];
function headColor(h) {
  if (h < PALETTE.length) return PALETTE[h];
  return 'hsl(' + ((h * 137.508) % 360).toFixed(1) + ', 62%, 55%)';
}
function hexToRgb(hex) {
  const v = parseInt(hex.slice(1), 16);
  return [(v >> 16) & 255, (v >> 8) & 255, v & 255];
}
function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

// Viridis, 17 stops; linear interpolation between them is within 2/255 of the full table.
const VIRIDIS = ['#440154', '#481a6c', '#472f7d', '#414487', '#39568c', '#31688e', '#2a788e',
  '#23888e', '#1f988b', '#22a884', '#35b779', '#54c568', '#7ad151', '#a5db36', '#d2e21b',
  '#fde725', '#fde725'].map(hexToRgb);
const LUT = new Uint8Array(256 * 3);
for (let i = 0; i < 256; i++) {
  const x = (i / 255) * 15;
  const a = Math.floor(x);
  const f = x - a;
  for (let c = 0; c < 3; c++) LUT[i * 3 + c] = Math.round(VIRIDIS[a][c] * (1 - f) + VIRIDIS[a + 1][c] * f);
}
function lutIndex(x) { return Math.max(0, Math.min(255, Math.round(x * 255))); }
function lutCss(x) {
  const i = lutIndex(x) * 3;
  return 'rgb(' + LUT[i] + ',' + LUT[i + 1] + ',' + LUT[i + 2] + ')';
}
function drawColorbar(canvas) {
  const w = 160;
  canvas.width = w;
  canvas.height = 1;
  const ctx = canvas.getContext('2d');
  const img = ctx.createImageData(w, 1);
  for (let x = 0; x < w; x++) {
    const i = lutIndex(x / (w - 1)) * 3;
    img.data.set([LUT[i], LUT[i + 1], LUT[i + 2], 255], x * 4);
  }
  ctx.putImageData(img, 0, 0);
}

/* --------------------------------------------------------------- helpers */

function el(tag, props, ...children) {
  const e = document.createElement(tag);
  if (props) {
    for (const [k, v] of Object.entries(props)) {
      if (k === 'text') e.textContent = v;
      else if (k === 'class') e.className = v;
      else if (k === 'dataset') Object.assign(e.dataset, v);
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
  }
  for (const c of children) e.append(c);
  return e;
}

function fmtWeight(v) {
  return sections.attention.dtype === 'u8' ? v.toFixed(3) : v.toFixed(5);
}
function fmtNum(v, digits) {
  if (v === null || v === undefined || Number.isNaN(v)) return 'n/a';
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(2);
  return v.toFixed(digits === undefined ? 3 : digits);
}
function tokenLabel(i) { return meta.tokens[i]; }
function describeToken(i) {
  return '"' + tokenLabel(i) + '" (#' + i + (isPair ? ', ' + segmentOf(i) : '') + ')';
}
/** A unit as text: its label and the token numbers it covers. */
function describeUnit(a) {
  const u = units().list[a];
  const t = u.tokens;
  const where = t.length === 1 ? '#' + t[0] : 'tokens #' + t[0] + '–' + t[t.length - 1];
  return '"' + u.label + '" (' + where + (isPair ? ', ' + u.seg : '') + ')';
}
function fmtBytes(b) {
  if (b < 1024) return b + ' B';
  if (b < 1024 * 1024) return (b / 1024).toFixed(1) + ' KiB';
  return (b / 1024 / 1024).toFixed(1) + ' MiB';
}

/** Size a canvas for CSS size (w, h) at the device pixel ratio; returns its 2D context. */
function sizeCanvas(canvas, w, h) {
  const dpr = Math.min(window.devicePixelRatio || 1, 2);
  const pw = Math.max(1, Math.round(w * dpr));
  const ph = Math.max(1, Math.round(h * dpr));
  // Reallocating the backing store (and restyling) on every frame is measurable at 512 tokens.
  if (canvas.width !== pw || canvas.height !== ph) {
    canvas.width = pw;
    canvas.height = ph;
    canvas.style.width = w + 'px';
    canvas.style.height = h + 'px';
  }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.globalAlpha = 1;
  ctx.clearRect(0, 0, w, h);
  return ctx;
}

let measureCtx = null;
function textWidth(text, font) {
  measureCtx = measureCtx || document.createElement('canvas').getContext('2d');
  measureCtx.font = font;
  return measureCtx.measureText(text).width;
}
const FONT_FAMILY = getComputedStyle(document.body).fontFamily;

const tooltip = $('tooltip');
function showTip(text, x, y) {
  tooltip.textContent = text;
  tooltip.hidden = false;
  const r = tooltip.getBoundingClientRect();
  const left = x + 14 + r.width > window.innerWidth ? x - r.width - 10 : x + 14;
  const top = y + 16 + r.height > window.innerHeight ? y - r.height - 10 : y + 16;
  tooltip.style.left = Math.max(0, left) + 'px';
  tooltip.style.top = Math.max(0, top) + 'px';
}
function hideTip() { tooltip.hidden = true; }

/* ------------------------------------------------------------ scheduling */

/** What the last render drew; read by the browser tests and the benchmark. */
const drawn = { view: null, seq: 0, lines: 0, perHead: new Array(H).fill(0), ms: 0, thumbs: 0 };
const timings = {};
let pending = false;
let settleWaiters = [];
/** Render at the next animation frame (for scroll, resize and theme changes). */
function schedule() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    if (pending) renderNow();
  });
}
/** Render now (for user actions: the result is in the very next frame). */
function renderNow() {
  pending = false;
  render();
  const waiters = settleWaiters;
  settleWaiters = [];
  waiters.forEach((w) => w());
}
function settled() {
  return new Promise((resolve) => {
    if (!pending) resolve();
    else settleWaiters.push(resolve);
  });
}

function render() {
  const t0 = performance.now();
  syncControls();
  if (state.view === 'head') renderHead();
  else if (state.view === 'model') renderModel();
  else if (state.view === 'matrix') renderMatrix();
  else if (state.view === 'neuron') renderNeuron();
  else if (state.view === 'stats') renderStats();
  drawn.view = state.view;
  drawn.seq++;
  drawn.ms = performance.now() - t0;
}

function invalidateWeights() {
  rowScaleCache.clear();
  unitCache.clear();
  headLayout = null;
  modelGrid.dirty = true;
}

function set(patch) {
  const before = { ...state };
  Object.assign(state, patch);
  if (state.hideSpecial !== before.hideSpecial || state.words !== before.words) invalidateWeights();
  if (state.layer !== before.layer || state.words !== before.words || state.hideSpecial !== before.hideSpecial) {
    state.hover = null;
  }
  if (patch.theme !== undefined) applyTheme();
  if (['threshold', 'pair', 'thumbStyle', 'hideSpecial', 'words', 'theme'].some((k) => state[k] !== before[k])) {
    modelGrid.dirty = true;
  }
  renderNow();
}
