// The summarised report's script (templates/summary.html, written by src/html/summary.rs):
// decodes the payload, then draws the matrix view (pooled maps, zoomed down to single tokens
// where the detail layer stores them), the head view (top-key links) and the stats view. Every
// text from the input reaches the page through textContent or a canvas, never as markup.

const $ = (id) => document.getElementById(id);
const META = JSON.parse($('attnviz-meta').textContent);
const L = META.layers.length;
const H = META.heads;
const Q = META.queries;
const K = META.keys;
const DETAIL = META.detail;
/** A zoom window of at most this many tokens a side shows single tokens (detail layer). */
const TOKEN_SPAN = 256;
/** Queries the head view shows at once, and the most key rows it draws. */
const HEAD_WINDOW = 40;
const HEAD_ROWS = 120;

const state = {
  view: 'matrix',
  slot: DETAIL,
  head: Math.min(H - 1, META.head),
  win: { q0: 0, q1: Q, k0: 0, k1: K },
  from: Math.max(0, Q - HEAD_WINDOW),
  threshold: META.link_threshold > 0 ? META.link_threshold : 0.02,
  shown: new Array(H).fill(true),
  stat: 'sink',
  theme: 'auto',
  hoverQuery: null,
};
let S = null; // decoded sections
let linkStart = null; // Uint32Array: first link of each head × query of the detail layer
const rowOf = new Map(META.rows.map((q, i) => [q, i]));

/* ------------------------------------------------------------ decoding */

function base64ToBytes(text) {
  const bin = atob(text.trim());
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

async function gunzip(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** One section's values as floats (byte-planed, fixed point over [lo, hi] or exact f32). */
function decode(raw, s) {
  const n = s.length;
  const at = s.offset;
  if (s.dtype === 'f32') {
    const bytes = new Uint8Array(4 * n);
    for (let p = 0; p < 4; p++) {
      const plane = raw.subarray(at + p * n, at + (p + 1) * n);
      for (let i = 0; i < n; i++) bytes[4 * i + p] = plane[i];
    }
    return new Float32Array(bytes.buffer);
  }
  const levels = s.dtype === 'u8' ? 255 : 65535;
  const step = (s.hi - s.lo) / levels;
  const out = new Float32Array(n);
  const lo = raw.subarray(at, at + n);
  if (s.dtype === 'u8') {
    for (let i = 0; i < n; i++) out[i] = s.lo + lo[i] * step;
  } else {
    const hi = raw.subarray(at + n, at + 2 * n);
    for (let i = 0; i < n; i++) out[i] = s.lo + (lo[i] | (hi[i] << 8)) * step;
  }
  return out;
}

async function load() {
  const el = $('attnviz-data');
  let raw = base64ToBytes(el.textContent);
  el.textContent = '';
  if (META.payload.compression === 'gzip') raw = await gunzip(raw);
  if (raw.length !== META.payload.raw_bytes) {
    throw new Error('The report data is damaged: ' + raw.length + ' bytes instead of ' + META.payload.raw_bytes + '.');
  }
  S = {};
  for (const s of META.payload.sections) S[s.name] = decode(raw, s);
  linkStart = new Uint32Array(H * Q + 1);
  for (let i = 0; i < H * Q; i++) linkStart[i + 1] = linkStart[i] + S.counts[i];
}

/** Half a 16-bit step over [0, 1]: how far a stored share or weight may be from the model's. */
const STEP = 1 / 65535 / 2;

/* ------------------------------------------------------------ helpers */

const fmt = (v, d = 4) => (Number.isFinite(v) ? v.toFixed(d) : 'n/a');
const tok = (i) => META.tokens[i];
const ktok = (i) => META.key_tokens[i];
const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

/** Viridis, sampled at 9 stops; t in [0, 1]. */
const STOPS = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
  [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37]];
function colour(t) {
  t = Math.max(0, Math.min(1, t)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(t));
  const f = t - i;
  const a = STOPS[i];
  const b = STOPS[i + 1];
  return [0, 1, 2].map((c) => Math.round(a[c] + (b[c] - a[c]) * f));
}
const rgb = (c) => 'rgb(' + c.join(',') + ')';
const headColour = (h, alpha = 1) => 'hsla(' + Math.round((h * 360) / H + 10) % 360 + ',70%,48%,' + alpha + ')';

function fitCanvas(canvas, width, height) {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
  canvas.style.width = width + 'px';
  canvas.style.height = height + 'px';
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}

function drawColourbar(canvas) {
  const ctx = fitCanvas(canvas, 160, 10);
  for (let x = 0; x < 160; x++) {
    ctx.fillStyle = rgb(colour(x / 159));
    ctx.fillRect(x, 0, 1, 10);
  }
}

const tooltip = $('tooltip');
function showTip(text, ev) {
  tooltip.textContent = text;
  tooltip.hidden = false;
  const x = Math.min(window.innerWidth - tooltip.offsetWidth - 8, ev.clientX + 14);
  const y = Math.min(window.innerHeight - tooltip.offsetHeight - 8, ev.clientY + 14);
  tooltip.style.left = x + 'px';
  tooltip.style.top = y + 'px';
}
const hideTip = () => { tooltip.hidden = true; };

/** The stored links of query `q` in head `h` of the detail layer: [[key, weight], …]. */
function links(h, q) {
  const out = [];
  for (let i = linkStart[h * Q + q]; i < linkStart[h * Q + q + 1]; i++) out.push([S.link_keys[i], S.link_weights[i]]);
  return out;
}

/** Weight of `k` in query `q`'s full row (head `h`), if the row is stored. */
function rowWeight(h, q, k) {
  const r = rowOf.get(q);
  if (r === undefined) return undefined;
  return S.rows[((h * META.rows.length) + r) * K + k];
}

/* ------------------------------------------------------------ matrix view */

const matrix = $('matrix');
let overlay = null;
let matrixSize = 600;
/** Where the cells are drawn on the canvas: all of it, or beside the token labels. */
let plot = { x: 0, y: 0, w: 600, h: 600 };
/** What the last drawing showed: block size (0: tokens), the colour scale's maximum. */
let drawn = { block: 1, max: 1, tokens: false };

function mapOf(slot, h) {
  if (slot === DETAIL) {
    const nb = Math.ceil(Q / META.pool);
    const nk = Math.ceil(K / META.pool);
    return { values: S.pooled, offset: h * nb * nk, rows: nb, cols: nk, block: META.pool };
  }
  const nb = Math.ceil(Q / META.overview_pool);
  const nk = Math.ceil(K / META.overview_pool);
  return { values: S.overview, offset: (slot * H + h) * nb * nk, rows: nb, cols: nk, block: META.overview_pool };
}

function tokenMode() {
  const w = state.win;
  return state.slot === DETAIL && META.pool > 1 && Math.max(w.q1 - w.q0, w.k1 - w.k0) <= TOKEN_SPAN;
}

function drawMatrix() {
  const box = matrix.parentElement;
  matrixSize = Math.max(240, Math.min(760, document.documentElement.clientWidth - 48));
  const ctx = fitCanvas(matrix, matrixSize, matrixSize);
  if (!overlay) {
    overlay = document.createElement('canvas');
    overlay.style.position = 'absolute';
    overlay.style.left = '0';
    overlay.style.top = '0';
    overlay.style.pointerEvents = 'none';
    box.appendChild(overlay);
  }
  fitCanvas(overlay, matrixSize, matrixSize);
  const w = state.win;
  const tokens = tokenMode();
  plot = tokens ? { x: 110, y: 80, w: matrixSize - 110, h: matrixSize - 80 } : { x: 0, y: 0, w: matrixSize, h: matrixSize };
  const sx = plot.w / (w.k1 - w.k0);
  const sy = plot.h / (w.q1 - w.q0);
  ctx.fillStyle = css('--bg');
  ctx.fillRect(0, 0, matrixSize, matrixSize);
  const m = mapOf(state.slot, state.head);
  if (tokens) {
    ctx.save();
    ctx.translate(plot.x, plot.y);
    drawTokens(ctx, sx, sy);
    ctx.restore();
    drawLabels(ctx, sx, sy);
  } else {
    let max = 0;
    const r0 = Math.floor(w.q0 / m.block);
    const r1 = Math.ceil(w.q1 / m.block);
    const c0 = Math.floor(w.k0 / m.block);
    const c1 = Math.ceil(w.k1 / m.block);
    for (let r = r0; r < r1; r++) for (let c = c0; c < c1; c++) max = Math.max(max, m.values[m.offset + r * m.cols + c]);
    max = max || 1;
    for (let r = r0; r < r1; r++) {
      for (let c = c0; c < c1; c++) {
        const v = m.values[m.offset + r * m.cols + c];
        const x0 = (c * m.block - w.k0) * sx;
        const y0 = (r * m.block - w.q0) * sy;
        const x1 = (Math.min(K, (c + 1) * m.block) - w.k0) * sx;
        const y1 = (Math.min(Q, (r + 1) * m.block) - w.q0) * sy;
        ctx.fillStyle = rgb(colour(Math.sqrt(v / max)));
        ctx.fillRect(Math.floor(x0), Math.floor(y0), Math.ceil(x1) - Math.floor(x0), Math.ceil(y1) - Math.floor(y0));
      }
    }
    drawn = { block: m.block, max, tokens: false };
  }
  $('matrix-max').textContent = fmt(drawn.max, 4) + ' (square-root scale)';
  const level = drawn.tokens ? 'single tokens' : 'blocks of ' + drawn.block + ' token' + (drawn.block === 1 ? '' : 's');
  $('matrix-where').textContent = 'Layer ' + META.layers[state.slot] + ', head ' + state.head + ' · queries ' + w.q0 + '–' + (w.q1 - 1) +
    ' × keys ' + w.k0 + '–' + (w.k1 - 1) + ' · ' + level;
  $('matrix-exact').textContent = exactness();
}

/** What the matrix view's cells are, at the level drawn. */
function exactness() {
  const detailName = 'layer ' + META.layers[DETAIL];
  if (drawn.tokens) {
    return 'Single tokens: a coloured cell is a stored top key of its query (its weight, within ' + STEP.toExponential(1) +
      ')' + (META.rows.length ? ' or a cell of a full row kept for the queries asked for (' + META.rows.join(', ') + ', exact within the same step)' : '') +
      '. Hatched cells were not stored: each is at most its query\'s smallest stored weight' +
      (META.link_threshold > 0 ? ' and at most ' + fmt(META.link_threshold, 4) + ' (links below it were left out to keep the file small)' : '') + '.';
  }
  const base = 'Each cell is the exact sum of the attention over its block divided by its queries (within ' + STEP.toExponential(1) + ').';
  if (state.slot === DETAIL) {
    return base + (META.pool > 1 ? ' Zoom to ' + TOKEN_SPAN + ' tokens or fewer for single tokens.' : ' Blocks of one token: this is the full matrix.');
  }
  return base + ' This layer keeps its overview (blocks of ' + META.overview_pool + ' tokens); ' + detailName +
    ' keeps blocks of ' + META.pool + ' and single tokens (write the report with that layer chosen to see another).';
}

function drawTokens(ctx, sx, sy) {
  const w = state.win;
  const h = state.head;
  const cells = [];
  let max = 0;
  for (let q = w.q0; q < w.q1; q++) {
    const stored = rowOf.has(q);
    if (stored) {
      for (let k = w.k0; k < w.k1; k++) {
        const v = rowWeight(h, q, k);
        cells.push([q, k, v]);
        max = Math.max(max, v);
      }
    } else {
      for (const [k, v] of links(h, q)) {
        if (k >= w.k0 && k < w.k1) {
          cells.push([q, k, v]);
          max = Math.max(max, v);
        }
      }
    }
  }
  max = max || 1;
  // Not stored: hatched, unless a causal mask makes it 0 or the query's row is kept.
  const hatch = document.createElement('canvas');
  hatch.width = 6;
  hatch.height = 6;
  const hc = hatch.getContext('2d');
  hc.fillStyle = css('--panel-2');
  hc.fillRect(0, 0, 6, 6);
  hc.strokeStyle = css('--border');
  hc.beginPath();
  hc.moveTo(0, 6);
  hc.lineTo(6, 0);
  hc.stroke();
  const pattern = ctx.createPattern(hatch, 'repeat');
  for (let q = w.q0; q < w.q1; q++) {
    if (rowOf.has(q)) continue;
    const last = META.causal ? Math.min(w.k1, q + 1) : w.k1;
    if (last <= w.k0) continue;
    ctx.fillStyle = pattern;
    ctx.fillRect(0, (q - w.q0) * sy, (last - w.k0) * sx, sy);
  }
  for (const [q, k, v] of cells) {
    ctx.fillStyle = rgb(colour(Math.sqrt(v / max)));
    ctx.fillRect((k - w.k0) * sx, (q - w.q0) * sy, Math.max(1, sx), Math.max(1, sy));
  }
  if (sx >= 6 && sy >= 6) {
    ctx.strokeStyle = css('--grid-line');
    ctx.globalAlpha = 0.5;
    ctx.beginPath();
    for (let q = w.q0; q <= w.q1; q++) { ctx.moveTo(0, (q - w.q0) * sy); ctx.lineTo(plot.w, (q - w.q0) * sy); }
    for (let k = w.k0; k <= w.k1; k++) { ctx.moveTo((k - w.k0) * sx, 0); ctx.lineTo((k - w.k0) * sx, plot.h); }
    ctx.stroke();
    ctx.globalAlpha = 1;
  }
  drawn = { block: 1, max, tokens: true };
}

/** The query labels left of the cells and the key labels above them, where they fit. */
function drawLabels(ctx, sx, sy) {
  const w = state.win;
  const short = (i, t) => { const s = i + ' ' + t; return s.length > 16 ? s.slice(0, 15) + '…' : s; };
  ctx.fillStyle = css('--fg');
  ctx.font = Math.min(12, Math.max(8, sy - 2)) + 'px sans-serif';
  ctx.textBaseline = 'middle';
  ctx.textAlign = 'right';
  const qStep = Math.ceil(10 / sy);
  for (let q = w.q0; q < w.q1; q += qStep) ctx.fillText(short(q, tok(q)), plot.x - 4, plot.y + (q - w.q0 + 0.5) * sy);
  ctx.font = Math.min(12, Math.max(8, sx - 2)) + 'px sans-serif';
  ctx.textAlign = 'left';
  const kStep = Math.ceil(10 / sx);
  for (let k = w.k0; k < w.k1; k += kStep) {
    ctx.save();
    ctx.translate(plot.x + (k - w.k0 + 0.5) * sx, plot.y - 4);
    ctx.rotate(-Math.PI / 3);
    ctx.fillText(short(k, ktok(k)), 0, 0);
    ctx.restore();
  }
}

/** The cell under a pointer at canvas point (x, y): token coordinates. */
function cellAt(x, y) {
  const w = state.win;
  const fx = Math.max(0, Math.min(1, (x - plot.x) / plot.w));
  const fy = Math.max(0, Math.min(1, (y - plot.y) / plot.h));
  return {
    q: Math.min(w.q1 - 1, Math.max(w.q0, Math.floor(w.q0 + fy * (w.q1 - w.q0)))),
    k: Math.min(w.k1 - 1, Math.max(w.k0, Math.floor(w.k0 + fx * (w.k1 - w.k0)))),
  };
}

function describeCell(q, k) {
  const h = state.head;
  if (drawn.tokens) {
    const head = 'query ' + q + ' “' + tok(q) + '” → key ' + k + ' “' + ktok(k) + '”\n';
    const full = rowWeight(h, q, k);
    if (full !== undefined) return head + 'weight ' + fmt(full, 5) + ' (full row kept: exact)';
    if (META.causal && k > q) return head + 'weight 0 (causal mask)';
    const ls = links(h, q);
    const at = ls.findIndex(([key]) => key === k);
    if (at >= 0) return head + 'weight ' + fmt(ls[at][1], 5) + ' (top key ' + (at + 1) + ' of ' + ls.length + ' stored)';
    const least = ls.length ? ls[ls.length - 1][1] : META.link_threshold;
    return head + 'not stored: at most ' + fmt(least, 5);
  }
  const m = mapOf(state.slot, h);
  const r = Math.floor(q / m.block);
  const c = Math.floor(k / m.block);
  const v = m.values[m.offset + r * m.cols + c];
  const qa = r * m.block;
  const ka = c * m.block;
  return 'queries ' + qa + '–' + (Math.min(Q, qa + m.block) - 1) + ' (“' + tok(qa) + '” …) × keys ' + ka + '–' + (Math.min(K, ka + m.block) - 1) +
    ' (“' + ktok(ka) + '” …)\nshare of each query\'s attention on these keys, averaged: ' + fmt(v, 5);
}

function setWindow(q0, q1, k0, k1) {
  const minSpan = 4;
  const clamp = (a, b, n) => {
    let span = Math.max(minSpan, Math.min(n, b - a));
    a = Math.max(0, Math.min(n - span, Math.round(a)));
    span = Math.round(span);
    return [a, Math.min(n, a + span)];
  };
  [q0, q1] = clamp(q0, q1, Q);
  [k0, k1] = clamp(k0, k1, K);
  state.win = { q0, q1, k0, k1 };
  render();
}

function zoomAround(q, k, factor) {
  const w = state.win;
  const sq = (w.q1 - w.q0) * factor;
  const sk = (w.k1 - w.k0) * factor;
  const fq = (q - w.q0) / (w.q1 - w.q0);
  const fk = (k - w.k0) / (w.k1 - w.k0);
  setWindow(q - fq * sq, q - fq * sq + sq, k - fk * sk, k - fk * sk + sk);
}

let drag = null;
function pointerPoint(ev) {
  const r = matrix.getBoundingClientRect();
  return [ev.clientX - r.left, ev.clientY - r.top];
}
matrix.addEventListener('pointerdown', (ev) => {
  drag = pointerPoint(ev);
  matrix.setPointerCapture(ev.pointerId);
});
matrix.addEventListener('pointermove', (ev) => {
  const [x, y] = pointerPoint(ev);
  if (drag) {
    const ctx = overlay.getContext('2d');
    ctx.clearRect(0, 0, matrixSize, matrixSize);
    ctx.strokeStyle = '#e0245e';
    ctx.lineWidth = 2;
    ctx.strokeRect(drag[0], drag[1], x - drag[0], y - drag[1]);
    hideTip();
    return;
  }
  const { q, k } = cellAt(x, y);
  showTip(describeCell(q, k), ev);
});
matrix.addEventListener('pointerleave', hideTip);
matrix.addEventListener('pointerup', (ev) => {
  if (!drag) return;
  const [x, y] = pointerPoint(ev);
  const start = drag;
  drag = null;
  overlay.getContext('2d').clearRect(0, 0, matrixSize, matrixSize);
  if (Math.abs(x - start[0]) < 5 && Math.abs(y - start[1]) < 5) return;
  const a = cellAt(Math.min(x, start[0]), Math.min(y, start[1]));
  const b = cellAt(Math.max(x, start[0]), Math.max(y, start[1]));
  setWindow(a.q, b.q + 1, a.k, b.k + 1);
});
matrix.addEventListener('wheel', (ev) => {
  ev.preventDefault();
  const { q, k } = cellAt(...pointerPoint(ev));
  zoomAround(q + 0.5, k + 0.5, ev.deltaY < 0 ? 0.8 : 1.25);
}, { passive: false });
$('zoom-fit').addEventListener('click', () => setWindow(0, Q, 0, K));
$('zoom-out').addEventListener('click', () => {
  const w = state.win;
  zoomAround((w.q0 + w.q1) / 2, (w.k0 + w.k1) / 2, 2);
});

/* ------------------------------------------------------------ head view */

const headCanvas = $('headview');
let headRows = [];

function headLegend() {
  const legend = $('head-legend');
  legend.replaceChildren();
  for (let h = 0; h < H; h++) {
    const b = document.createElement('button');
    b.type = 'button';
    b.setAttribute('aria-pressed', String(state.shown[h]));
    const sw = document.createElement('span');
    sw.className = 'swatch';
    sw.style.background = headColour(h);
    b.append(sw, document.createTextNode(String(h)));
    b.addEventListener('click', () => { state.shown[h] = !state.shown[h]; render(); });
    b.addEventListener('dblclick', () => { state.shown.fill(false); state.shown[h] = true; render(); });
    legend.appendChild(b);
  }
}

function drawHead() {
  headLegend();
  $('head-from').value = state.from;
  $('head-threshold').value = state.threshold;
  $('head-threshold').min = META.link_threshold;
  $('head-threshold-value').textContent = fmt(state.threshold, 3);
  const info = $('head-info');
  if (state.slot !== DETAIL) {
    fitCanvas(headCanvas, 10, 10);
    info.textContent = 'Top keys are stored for layer ' + META.layers[DETAIL] + ' only (the layer the report was written for); pick it above, or see this layer in the matrix and stats views.';
    return;
  }
  const q0 = state.from;
  const q1 = Math.min(Q, q0 + HEAD_WINDOW);
  const weightTo = new Map();
  const lines = [];
  for (let h = 0; h < H; h++) {
    if (!state.shown[h]) continue;
    for (let q = q0; q < q1; q++) {
      for (const [k, v] of links(h, q)) {
        if (v < state.threshold) continue;
        lines.push([h, q, k, v]);
        if (k < q0 || k >= q1) weightTo.set(k, (weightTo.get(k) || 0) + v);
      }
    }
  }
  const far = [...weightTo.entries()].sort((a, b) => b[1] - a[1]);
  const keptFar = far.slice(0, HEAD_ROWS - (q1 - q0)).map(([k]) => k);
  const keys = [...new Set([...keptFar, ...Array.from({ length: q1 - q0 }, (_, i) => q0 + i)])].sort((a, b) => a - b);
  // Rows: keys in order, a gap row wherever positions are skipped.
  headRows = [];
  for (let i = 0; i < keys.length; i++) {
    if (i > 0 && keys[i] > keys[i - 1] + 1) headRows.push(null);
    headRows.push(keys[i]);
  }
  const rowY = new Map();
  const ROW = 17;
  headRows.forEach((k, i) => { if (k !== null) rowY.set(k, 10 + i * ROW + ROW / 2); });
  const width = Math.max(480, Math.min(900, document.documentElement.clientWidth - 48));
  const height = 20 + headRows.length * ROW;
  const ctx = fitCanvas(headCanvas, width, height);
  const colW = 170;
  ctx.font = '12px ' + (css('--attnviz-fonts') || 'sans-serif');
  ctx.textBaseline = 'middle';
  const label = (i, t) => {
    const s = i + ' ' + t;
    return s.length > 24 ? s.slice(0, 23) + '…' : s;
  };
  ctx.fillStyle = css('--fg');
  for (let q = q0; q < q1; q++) {
    ctx.textAlign = 'right';
    ctx.globalAlpha = state.hoverQuery === null || state.hoverQuery === q ? 1 : 0.4;
    ctx.fillText(label(q, tok(q)), colW - 8, rowY.get(q));
  }
  ctx.globalAlpha = 1;
  headRows.forEach((k, i) => {
    const y = 10 + i * ROW + ROW / 2;
    ctx.textAlign = 'left';
    ctx.fillStyle = k === null ? css('--muted') : css('--fg');
    ctx.fillText(k === null ? '⋯' : label(k, ktok(k)), width - colW + 8, y);
  });
  let drawnLines = 0;
  let hidden = 0;
  for (const [h, q, k, v] of lines) {
    if (state.hoverQuery !== null && state.hoverQuery !== q) continue;
    const y1 = rowY.get(k);
    if (y1 === undefined) { hidden++; continue; }
    ctx.strokeStyle = headColour(h, Math.min(1, 0.15 + v));
    ctx.lineWidth = 1 + 2 * v;
    ctx.beginPath();
    ctx.moveTo(colW, rowY.get(q));
    ctx.lineTo(width - colW, y1);
    ctx.stroke();
    drawnLines++;
  }
  info.textContent = lines.length + ' links of weight ≥ ' + fmt(state.threshold, 3) + ' from queries ' + q0 + '–' + (q1 - 1) +
    (state.hoverQuery !== null ? ' (' + drawnLines + ' of query ' + state.hoverQuery + ' drawn)' : '') +
    (hidden ? '; ' + hidden + ' to ' + (far.length - keptFar.length) + ' far keys not drawn (the ' + keptFar.length + ' far keys with the most weight are)' : '') +
    '. Stored: the top ' + META.top_k + ' keys of every query' +
    (META.link_threshold > 0 ? ' of weight above ' + fmt(META.link_threshold, 4) + ' (' + META.links_kept + ' of ' + META.links_total + ' links)' : '') + '.';
}

headCanvas.addEventListener('mousemove', (ev) => {
  const r = headCanvas.getBoundingClientRect();
  const x = ev.clientX - r.left;
  const row = headRows[Math.floor((ev.clientY - r.top - 10) / 17)];
  const q = x < r.width / 2 && row !== undefined && row !== null && row >= state.from && row < state.from + HEAD_WINDOW ? row : null;
  if (q !== state.hoverQuery) { state.hoverQuery = q; drawHead(); }
});
headCanvas.addEventListener('mouseleave', () => { if (state.hoverQuery !== null) { state.hoverQuery = null; drawHead(); } });
$('head-from').addEventListener('change', (ev) => {
  state.from = Math.max(0, Math.min(Q - 1, Number(ev.target.value) | 0));
  render();
});
$('head-prev').addEventListener('click', () => { state.from = Math.max(0, state.from - HEAD_WINDOW); render(); });
$('head-next').addEventListener('click', () => { state.from = Math.min(Math.max(0, Q - HEAD_WINDOW), state.from + HEAD_WINDOW); render(); });
$('head-threshold').addEventListener('input', (ev) => { state.threshold = Number(ev.target.value); render(); });

/* ------------------------------------------------------------ stats view */

const BINS = META.distance_bins;
const binName = (b) => {
  if (b + 1 >= BINS.length) return BINS[b] + '+';
  return BINS[b + 1] - 1 === BINS[b] ? String(BINS[b]) : BINS[b] + '–' + (BINS[b + 1] - 1);
};
function distance(slot, h) {
  const n = BINS.length;
  return S.distance.subarray((slot * H + h) * n, (slot * H + h + 1) * n);
}
const STATS = [
  { id: 'sink', label: 'Sink mass', desc: 'The mean over queries of the weight on the first token (exact).', value: (s, h) => S.means[(s * H + h) * 3] },
  { id: 'entropy', label: 'Entropy (nats)', desc: 'The mean over queries of −Σ p ln p (exact): 0 is all on one key.', value: (s, h) => S.means[(s * H + h) * 3 + 1] },
  { id: 'local', label: 'Share within 7 tokens', desc: 'The mean share of the attention on keys at most 7 positions away, the query itself included (exact, from the distance profile).', value: (s, h) => distance(s, h).slice(0, 4).reduce((a, b) => a + b, 0) },
  { id: 'median', label: 'Median distance bin', desc: 'The distance bin within which half of the attention lies (the lower edge shown; exact to the bin).', value: (s, h) => { let acc = 0; const d = distance(s, h); for (let b = 0; b < d.length; b++) { acc += d[b]; if (acc >= 0.5) return BINS[b]; } return BINS[d.length - 1]; } },
];
if (META.learned_sink) {
  STATS.push({ id: 'learned', label: 'Learned sink share', desc: 'The mean share each query leaves to the learned attention sink (exact).', value: (s, h) => S.means[(s * H + h) * 3 + 2] });
}

function drawStats() {
  const sel = $('stat-select');
  if (!sel.options.length) {
    for (const s of STATS) sel.add(new Option(s.label, s.id));
    sel.addEventListener('change', () => { state.stat = sel.value; render(); });
  }
  sel.value = state.stat;
  const stat = STATS.find((s) => s.id === state.stat);
  $('stat-desc').textContent = stat.desc;
  const grid = $('stats-grid');
  grid.replaceChildren();
  grid.style.gridTemplateColumns = 'auto repeat(' + H + ', minmax(34px, 1fr))';
  let lo = Infinity;
  let hi = -Infinity;
  for (let s = 0; s < L; s++) for (let h = 0; h < H; h++) { const v = stat.value(s, h); lo = Math.min(lo, v); hi = Math.max(hi, v); }
  const corner = document.createElement('span');
  corner.className = 'rowname';
  corner.textContent = 'layer \\ head';
  grid.appendChild(corner);
  for (let h = 0; h < H; h++) {
    const c = document.createElement('span');
    c.className = 'colname';
    c.textContent = String(h);
    grid.appendChild(c);
  }
  for (let s = 0; s < L; s++) {
    const name = document.createElement('span');
    name.className = 'rowname';
    name.textContent = String(META.layers[s]) + (s === DETAIL ? ' ★' : '');
    grid.appendChild(name);
    for (let h = 0; h < H; h++) {
      const v = stat.value(s, h);
      const t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
      const c = document.createElement('span');
      c.className = 'cell' + (s === state.slot && h === state.head ? ' picked' : '');
      const col = colour(t);
      c.style.background = rgb(col);
      c.style.color = col[0] * 0.3 + col[1] * 0.59 + col[2] * 0.11 > 140 ? '#111' : '#fff';
      c.textContent = stat.id === 'median' ? String(v) : v.toFixed(2);
      c.dataset.layer = String(s);
      c.dataset.head = String(h);
      c.title = 'layer ' + META.layers[s] + ', head ' + h + ': ' + stat.label + ' ' + fmt(v, 4);
      c.addEventListener('click', () => { state.slot = s; state.head = h; render(); });
      grid.appendChild(c);
    }
  }
  $('stat-min').textContent = fmt(lo, 3);
  $('stat-max').textContent = fmt(hi, 3);
  drawProfiles();
}

function drawProfiles() {
  const s = state.slot;
  const h = state.head;
  $('profile-title').textContent = 'Layer ' + META.layers[s] + ', head ' + h;
  const d = distance(s, h);
  const W = Math.min(520, document.documentElement.clientWidth - 48);
  let ctx = fitCanvas($('distance-chart'), W, 180);
  ctx.font = '10px sans-serif';
  const bw = (W - 40) / d.length;
  const max = Math.max(...d, 1e-9);
  ctx.fillStyle = css('--muted');
  ctx.fillText(fmt(max, 3), 0, 10);
  for (let b = 0; b < d.length; b++) {
    const bh = (d[b] / max) * 130;
    ctx.fillStyle = css('--accent');
    ctx.fillRect(36 + b * bw + 1, 150 - bh, bw - 2, bh);
    ctx.save();
    ctx.fillStyle = css('--muted');
    ctx.translate(36 + b * bw + bw / 2, 156);
    ctx.rotate(Math.PI / 4);
    ctx.fillText(binName(b), 0, 0);
    ctx.restore();
  }
  const nb = Math.ceil(Q / META.pool);
  const sink = S.sink_blocks.subarray((s * H + h) * nb, (s * H + h + 1) * nb);
  const ent = S.entropy_blocks.subarray((s * H + h) * nb, (s * H + h + 1) * nb);
  ctx = fitCanvas($('along-chart'), W, 180);
  ctx.strokeStyle = css('--border');
  ctx.strokeRect(30, 10, W - 40, 140);
  ctx.fillStyle = css('--muted');
  ctx.font = '10px sans-serif';
  ctx.fillText('1', 18, 14);
  ctx.fillText('0', 18, 150);
  ctx.fillText('token 0', 30, 164);
  ctx.textAlign = 'right';
  ctx.fillText('token ' + (Q - 1), W - 10, 164);
  const lnN = Math.log(Math.max(2, K));
  for (const [values, col, scale] of [[sink, '#d6604d', 1], [ent, '#4393c3', 1 / lnN]]) {
    ctx.strokeStyle = col;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    for (let i = 0; i < nb; i++) {
      const x = 30 + ((i + 0.5) / nb) * (W - 40);
      const y = 150 - Math.min(1, values[i] * scale) * 140;
      if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
    }
    ctx.stroke();
  }
}

/* ------------------------------------------------------------ page */

function setupControls() {
  const ls = $('layer-select');
  META.layers.forEach((n, s) => ls.add(new Option(String(n) + (s === DETAIL ? ' (detail)' : ''), String(s))));
  ls.addEventListener('change', () => { state.slot = Number(ls.value); render(); });
  const hs = $('head-select');
  for (let h = 0; h < H; h++) hs.add(new Option(String(h), String(h)));
  hs.addEventListener('change', () => { state.head = Number(hs.value); render(); });
  for (const tab of document.querySelectorAll('.tab')) tab.addEventListener('click', () => { state.view = tab.dataset.view; render(); });
  $('theme-toggle').addEventListener('click', cycleTheme);
  document.addEventListener('keydown', (ev) => {
    if (ev.target instanceof HTMLInputElement || ev.target instanceof HTMLSelectElement || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const views = { 1: 'matrix', 2: 'head', 3: 'stats' };
    if (views[ev.key]) { state.view = views[ev.key]; render(); } else if (ev.key === '0') setWindow(0, Q, 0, K);
    else if (ev.key === '-') $('zoom-out').click();
    else if (ev.key === 't') cycleTheme();
  });
  window.addEventListener('resize', () => render());
}

function cycleTheme() {
  const order = ['auto', 'light', 'dark'];
  state.theme = order[(order.indexOf(state.theme) + 1) % 3];
  document.documentElement.dataset.theme = state.theme;
  $('theme-name').textContent = state.theme;
  render();
}

function fillSummary() {
  $('model-name').textContent = META.model;
  $('model-shape').textContent = H + ' heads per layer';
  const text = META.text.length > 400 ? META.text.slice(0, 400) + '…' : META.text;
  $('input-text').textContent = text;
  $('input-text').title = text;
  const links = META.link_threshold > 0
    ? 'its ' + META.links_kept + ' strongest top-key links of ' + META.links_total + ' (every one above ' + fmt(META.link_threshold, 4) + ')'
    : 'the top ' + META.top_k + ' keys of every query';
  $('kept').textContent = Q + ' tokens · ' + L + ' summarised layer' + (L === 1 ? '' : 's') + ' × ' + H +
    ' heads, each with its sink mass, entropy, distance profile and a map of blocks of ' + META.overview_pool +
    ' tokens · layer ' + META.layers[DETAIL] + ' (detail): blocks of ' + META.pool + ', ' + links +
    (META.rows.length ? ', the full rows of queries ' + META.rows.join(', ') : '') +
    (META.rows_left_out.length ? ' (rows of ' + META.rows_left_out.join(', ') + ' left out: too large for the file)' : '');
  const table = $('about-table');
  const rows = [
    ['Model', META.model_id],
    ['Tokens', String(Q)],
    ['Summarised layers', META.layers.join(', ')],
    ['Top keys per query', String(META.top_k)],
    ['Pooled blocks', META.pool + ' tokens (layer ' + META.layers[DETAIL] + '), ' + META.overview_pool + ' tokens (overview of every layer)'],
    ['Links stored', META.links_kept + ' of ' + META.links_total],
    ['Storage', 'shares and weights in 16-bit fixed point (within ' + STEP.toExponential(2) + '), statistics as f32; ' + META.payload.raw_bytes + ' bytes before compression'],
    ['Generator', META.generator],
    ...META.settings,
  ];
  for (const [k, v] of rows) {
    const tr = table.insertRow();
    tr.insertCell().textContent = k;
    tr.insertCell().textContent = v;
  }
}

function render() {
  for (const tab of document.querySelectorAll('.tab')) tab.setAttribute('aria-selected', String(tab.dataset.view === state.view));
  for (const v of ['matrix', 'head', 'stats']) $('view-' + v).hidden = v !== state.view;
  $('layer-select').value = String(state.slot);
  $('head-select').value = String(state.head);
  $('head-control').hidden = state.view === 'head';
  const note = $('layer-note');
  note.hidden = state.slot === DETAIL;
  note.textContent = 'Layer ' + META.layers[state.slot] + ' keeps its overview and statistics; single tokens and top-key links are stored for layer ' + META.layers[DETAIL] + '.';
  if (state.view === 'matrix') drawMatrix();
  else if (state.view === 'head') drawHead();
  else drawStats();
}

async function main() {
  try {
    await load();
    fillSummary();
    setupControls();
    drawColourbar($('matrix-cbar'));
    drawColourbar($('stat-cbar'));
    $('status').hidden = true;
    render();
    document.documentElement.dataset.ready = 'true';
  } catch (e) {
    const status = $('status');
    status.classList.add('error');
    status.textContent = 'This report could not be drawn: ' + e.message;
  }
}

window.attnviz = {
  state, META, render, setWindow, describeCell, links,
  sections: () => S,
  drawn: () => drawn,
};
main();
