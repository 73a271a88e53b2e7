/* attnviz report: the matrix view, query x key heatmaps of a head and of the mean over heads (or
 * an analysis matrix), with each value and its storage error on hover.
 */

/* ------------------------------------------------------------- matrix view */

/** The shown matrix (query units × key units) for the matrix view: a head, the mean, or an
 *  analysis matrix. */
function matrixValues(kind, l, h) {
  const m = units().list.length;
  const mk = keyUnits().list.length;
  if (kind === 'head') return unitMatrix(l, h);
  if (kind === 'mean') {
    const out = new Float64Array(m * mk);
    for (let hh = 0; hh < H; hh++) {
      const M = unitMatrix(l, hh);
      for (let i = 0; i < out.length; i++) out[i] += M[i];
    }
    for (let i = 0; i < out.length; i++) out[i] /= H;
    return out;
  }
  // An analysis matrix, given per token: treated like attention (rows renormalised over kept
  // tokens when the special tokens are hidden, word pieces merged the same way).
  const info = (analysis.matrices || []).find((x) => x.id === kind);
  const sec = sections[info.section];
  const base = info.per_layer ? l * N * NK : 0;
  const kept = keptTokens(KSIDE);
  return unitsFromTokens((q, buf) => {
    let sum = 0;
    for (const k of kept) {
      buf[k] = sec.lo + sec.values[base + q * NK + k] * sec.step;
      sum += buf[k];
    }
    if (state.hideSpecial && sum > 0) for (const k of kept) buf[k] /= sum;
  });
}

const matrixPanels = {};

/** The learned-sink column beside a panel (gpt-oss): its width and its gap from the plot, CSS px. */
const SINK_W = 14;
const SINK_GAP = 8;

/**
 * Each row's share on the learned attention sink (gpt-oss's per-head sink in the softmax
 * denominator), per query unit: the mean of its tokens' shares (as a merged row is the mean of
 * its pieces' rows), of head `h` or the mean over the heads. Null without sinks, for an analysis
 * matrix, or while the special tokens are hidden (renormalised rows leave nothing to explain).
 */
function sinkColumn(kind, l, h) {
  const s = sections.sinks;
  if (!s || state.hideSpecial || (kind !== 'head' && kind !== 'mean')) return null;
  const heads = kind === 'head' ? [h] : Array.from({ length: H }, (_, i) => i);
  return Float64Array.from(units().list, (u) => {
    let sum = 0;
    for (const hh of heads) for (const q of u.tokens) sum += s.lo + s.values[(l * H + hh) * N + q] * s.step;
    return sum / (heads.length * u.tokens.length);
  });
}

/**
 * Zoom and pan, shared by both panels so they stay aligned: `z` scales the fitted cell size,
 * (`ox`, `oy`) is the key (column) and query (row) at the plot's top-left corner, in cells.
 */
const matrixZoom = { z: 1, ox: 0, oy: 0 };
/** Largest zoom: cells up to 48 px. Token labels need cells of 9 px or more. */
const MATRIX_MAX_CELL = 48;
const MATRIX_LABEL_CELL = 9;

/**
 * Lay one panel out for the space the view has: side by side when two panels of 360 px fit, else
 * stacked; no taller than the window. Cells are square: an m × mk matrix (cross-attention) is a
 * plot of mk × m cells, its longer side fitted to the space. The label margin is sized for the
 * longest label even while the labels are hidden (too many to read), so zooming in does not move
 * the plot.
 */
function matrixLayout(m, mk, us) {
  const width = contentWidth();
  const twoUp = width >= 2 * 360 + 24;
  const panelW = twoUp ? Math.floor((width - 24) / 2) : width;
  const side = Math.max(200, Math.min(panelW, Math.max(320, window.innerHeight - 120)));
  const labelFont = '12px ' + FONT_FAMILY;
  let margin = 34;
  for (const u of us) margin = Math.max(margin, textWidth(u.label, labelFont) + 10);
  margin = Math.ceil(Math.min(margin, 130, Math.max(34, 0.22 * side)));
  // Room for the learned-sink column beside the plot (gpt-oss), so two panels still fit side by side.
  const box = Math.max(40, side - margin - 4 - (sections.sinks ? SINK_GAP + SINK_W + 2 : 0));
  const cell0 = box / Math.max(m, mk);
  // The plot's width (columns, keys) and height (rows, queries), CSS px.
  return { side, margin, plot: cell0 * mk, plotH: cell0 * m, cell0 };
}

/** The largest of `values` (0 when empty). */
function maxOf(values) {
  let max = 0;
  for (const v of values) if (v > max) max = v;
  return max;
}

/** Above this many rows or columns the automatic colour scale is a square root (as in the
 *  PNG figures: src/render/image/scale.rs). */
const AUTO_SQRT_UNITS = 64;
/** … and when the first column holds more than this share of the rows' attention on average. */
const AUTO_SQRT_FIRST_SHARE = 0.5;

/**
 * The colour scale the matrix panels use now: `kind` (linear, sqrt, log or one) and, when the
 * automatic choice picked a square root, why. `panels` are the value arrays it is chosen for
 * (both panels when they share one scale).
 */
function matrixScaleOf(panels, m, mk) {
  const asked = state.matrixScale;
  if (asked === 'max') return { kind: 'linear', why: '' };
  if (asked !== 'auto') return { kind: asked, why: '' };
  const unit = unitWord().replace(/s$/, '');
  if (Math.max(m, mk) > AUTO_SQRT_UNITS) return { kind: 'sqrt', why: 'over ' + AUTO_SQRT_UNITS + ' ' + unit + 's' };
  let sum = 0;
  let rows = 0;
  for (const values of panels) {
    for (let a = 0; a < m; a++) { sum += values[a * mk]; rows++; }
  }
  const share = rows ? sum / rows : 0;
  if (share > AUTO_SQRT_FIRST_SHARE) {
    return { kind: 'sqrt', why: 'the first ' + unit + ' holds ' + Math.round(share * 100) + '% of each row on average' };
  }
  return { kind: 'linear', why: '' };
}

/** Decades a log scale spans below its top (as the PNG figures' `--scale log`). */
const MATRIX_LOG_DECADES = 3;

/** The colour bars' length and their tick numbers' font (report.css: .cbar, .cbar-tick). */
const COLORBAR_PX = 160;
const TICK_FONT = '10px ' + FONT_FAMILY;

/**
 * The ticks between the ends of a square-root or log colour bar up to `top`, as the PNG figures
 * choose them (src/render/image/scale.rs, `spread_ticks`): 1-2-5 numbers down to the scale's
 * floor, powers of ten first, then 5s, then 2s; `map` puts a value on the bar (0 to 1). The
 * numbers sit side by side under the bar, so each keeps 6 px clear of its neighbours' (the
 * figures' upright bars keep a tenth of the bar), and a tick keeps clear of the bar's ends,
 * which are labelled beside it. Linear scales get none (their colours are proportional).
 */
function colorbarTicks(kind, top, map) {
  if (kind !== 'sqrt' && kind !== 'log' || !(top > 0)) return [];
  const floor = kind === 'log' ? top / 10 ** MATRIX_LOG_DECADES : 0;
  const high = Math.floor(Math.log10(top));
  const candidates = [];
  for (let e = high; e >= high - MATRIX_LOG_DECADES - 1; e--) {
    for (const m of [5, 2, 1]) {
      const v = m * 10 ** e;
      if (v <= top * (1 + 1e-9) && v >= floor * (1 - 1e-9)) candidates.push({ v, decimals: Math.max(0, -e) });
    }
  }
  const rank = (v) => { const m = Math.round(v / 10 ** Math.floor(Math.log10(v))); return m === 1 ? 0 : m === 5 ? 1 : 2; };
  candidates.sort((a, b) => rank(a.v) - rank(b.v) || b.v - a.v);
  const chosen = [];
  for (const c of candidates) {
    const at = map(c.v);
    const label = c.v.toFixed(c.decimals);
    const half = textWidth(label, TICK_FONT) / 2;
    const clear = at >= 0.04 && at <= 0.96 && chosen.every((t) => Math.abs(t.at - at) * COLORBAR_PX >= t.half + half + 6);
    if (clear) chosen.push({ value: c.v, at, label, half });
  }
  return chosen.sort((a, b) => a.value - b.value);
}

function drawMatrixPanel(id, values, caption, scale, sharedMax, layer = null, shares = false) {
  const us = units().list;
  const ks = keyUnits().list;
  const m = us.length;
  const mk = ks.length;
  const max = sharedMax === null ? maxOf(values) : sharedMax;
  const top = scale.kind === 'one' ? 1 : max || 1;
  const map = scale.kind === 'sqrt' ? (v) => Math.sqrt(Math.max(0, v) / top)
    : scale.kind === 'log' ? (v) => (v <= 0 ? 0 : Math.min(1, Math.max(0, 1 + Math.log10(v / top) / MATRIX_LOG_DECADES)))
      : (v) => v / top;
  // One colour per cell, as the 32-bit RGBA the image buffer holds.
  const rgba = new Uint32Array(m * mk);
  const bytes = new Uint8Array(rgba.buffer);
  for (let i = 0; i < m * mk; i++) {
    const j = lutIndex(map(values[i])) * 3;
    bytes[i * 4] = LUT[j];
    bytes[i * 4 + 1] = LUT[j + 1];
    bytes[i * 4 + 2] = LUT[j + 2];
    // A cell the query could not see shows the page behind it, unlike a weight of 0.
    bytes[i * 4 + 3] = CAUSAL && unitMasked(Math.floor(i / mk), i % mk, layer) ? 0 : 255;
  }
  if (matrixPanels[id] && (matrixPanels[id].m !== m || matrixPanels[id].mk !== mk)) Object.assign(matrixZoom, { z: 1, ox: 0, oy: 0 });
  const panel = { id, values, m, mk, us, ks, rgba, max, top, map, sink: null, scale: scale.kind, ...matrixLayout(m, mk, us.concat(SQUARE ? [] : ks)) };
  matrixPanels[id] = panel;
  $(id + '-min').textContent = scale.kind === 'log' ? scaleNumber(top / 10 ** MATRIX_LOG_DECADES) : '0';
  $(id + '-max').textContent = scaleNumber(top);
  const ticks = $(id + '-ticks');
  ticks.textContent = '';
  for (const t of colorbarTicks(scale.kind, top, map)) {
    const mark = el('span', { class: 'cbar-tick', text: t.label, dataset: { value: String(t.value) } });
    mark.style.left = (100 * t.at).toFixed(2) + '%';
    ticks.append(mark);
  }
  ticks.parentElement.classList.toggle('ticked', ticks.childElementCount > 0);
  // Worded as the PNG/SVG colour bars are: "attention weight (square-root scale)".
  const name = { linear: '', one: '0 to 1', sqrt: 'square-root scale', log: 'log scale, ' + MATRIX_LOG_DECADES + ' decades' }[scale.kind];
  const notes = [name && scale.why ? name + ': ' + scale.why : name, sharedMax !== null ? 'one scale for both panels' : ''].filter(Boolean);
  // ALTI's and value zeroing's rows are each token's shares from its inputs, not attention; so
  // are value-weighted and norm-aware weights (meta.shares).
  $(id + '-scale').textContent = (shares || meta.shares ? SHARE_CAPTION : WEIGHT_CAPTION) + (notes.length ? ' (' + notes.join('; ') + ')' : '');
  if (caption !== null) $(id + '-caption').textContent = caption;
}

/** Cell size (CSS px) and visible cells of a panel at the current zoom. */
function matrixCell(p) { return p.cell0 * matrixZoom.z; }

function clampMatrixZoom(p) {
  const zMax = Math.max(1, MATRIX_MAX_CELL / p.cell0);
  matrixZoom.z = Math.min(zMax, Math.max(1, matrixZoom.z));
  // cells in view: the zoom divides both sides alike
  matrixZoom.ox = Math.min(p.mk - p.mk / matrixZoom.z, Math.max(0, matrixZoom.ox));
  matrixZoom.oy = Math.min(p.m - p.m / matrixZoom.z, Math.max(0, matrixZoom.oy));
}

/**
 * The plot's pixels: device pixel i (from the plot's left) shows column floor(ox + (i + ½) / cell
 * in device px), and the pointer over pixel i reports that same column, so hover is exact at
 * every zoom.
 */
function matrixIndex(p, dpr, n, offset, count) {
  const cellDev = matrixCell(p) * dpr;
  const idx = new Int32Array(n);
  for (let i = 0; i < n; i++) idx[i] = Math.min(count - 1, Math.floor(offset + (i + 0.5) / cellDev));
  return idx;
}

function paintMatrix(p, hoverCell) {
  const canvas = $(p.id);
  const dpr = Math.min(window.devicePixelRatio || 1, 2);
  const x0 = Math.round(p.margin * dpr); // plot origin, device px
  const n = Math.max(1, Math.round(p.plot * dpr));
  const nh = Math.max(1, Math.round(p.plotH * dpr));
  // As wide as the plot and its labels; as tall (a short cross-attention matrix leaves no gap).
  const sinkRoom = p.sink ? SINK_GAP + SINK_W + 2 : 0;
  const ctx = sizeCanvas(canvas, Math.ceil(p.margin + p.plot + 4 + sinkRoom), Math.ceil(p.margin + p.plotH + 4));
  const key = [matrixZoom.z, matrixZoom.ox, matrixZoom.oy, n, nh].join();
  if (!p.image || p.imageKey !== key) {
    const cols = matrixIndex(p, dpr, n, matrixZoom.ox, p.mk);
    const rows = matrixIndex(p, dpr, nh, matrixZoom.oy, p.m);
    const img = new ImageData(n, nh);
    const out = new Uint32Array(img.data.buffer);
    for (let y = 0; y < nh; y++) {
      const r = rows[y] * p.mk;
      const o = y * n;
      for (let x = 0; x < n; x++) out[o + x] = p.rgba[r + cols[x]];
    }
    p.image = img;
    p.imageKey = key;
    p.cols = cols;
    p.rows = rows;
  }
  ctx.putImageData(p.image, x0, x0);
  p.x0 = x0 / dpr;
  p.dpr = dpr;
  if (CAUSAL) {
    // Masked cells were left transparent: hatch them (lines, then the background, both drawn
    // under what is there).
    ctx.save();
    ctx.globalCompositeOperation = 'destination-over';
    hatchRect(ctx, p.x0, p.x0, p.plot, p.plotH);
    ctx.fillStyle = cssVar('--bg');
    ctx.fillRect(p.x0, p.x0, p.plot, p.plotH);
    ctx.restore();
  }

  const cell = matrixCell(p);
  const { ox, oy } = matrixZoom;
  const plotEnd = p.x0 + p.plot;
  const plotBottom = p.x0 + p.plotH;
  const at = (a, o) => p.x0 + (a - o + 0.5) * cell; // centre of row/column a, CSS px
  const first = (o) => Math.floor(o);
  const lastRow = (o) => Math.min(p.m - 1, Math.floor(o + p.plotH / cell));
  const lastCol = (o) => Math.min(p.mk - 1, Math.floor(o + p.plot / cell));
  const fg = cssVar('--fg');
  const muted = cssVar('--muted');
  const generated = cssVar('--generated');
  const labelColor = (u, hot) => (hot ? fg : u.generated ? generated : u.special ? muted : fg);
  ctx.textBaseline = 'middle';
  if (cell >= MATRIX_LABEL_CELL) {
    // Every visible row and column named, in a font that fits the cell (8 to 12 px); the hovered
    // cell's row and column in bold.
    p.labels = 'tokens';
    p.labelPx = Math.min(12, Math.floor(cell) - 1);
    const px = p.labelPx + 'px ' + FONT_FAMILY;
    const inside = (x, end) => x >= p.x0 && x <= end;
    for (let a = first(oy); a <= lastRow(oy); a++) {
      const u = p.us[a];
      const hot = hoverCell && hoverCell[0] === a;
      if (!inside(at(a, oy), plotBottom)) continue;
      ctx.font = (hot ? 'bold ' : '') + px;
      ctx.fillStyle = labelColor(u, hot);
      ctx.textAlign = 'right';
      ctx.fillText(u.label, p.x0 - 4, at(a, oy), p.margin - 6);
    }
    for (let c = first(ox); c <= lastCol(ox); c++) {
      const u = p.ks[c];
      const hot = hoverCell && hoverCell[1] === c;
      if (!inside(at(c, ox), plotEnd)) continue;
      ctx.save();
      ctx.translate(at(c, ox), p.x0 - 4);
      ctx.rotate(-Math.PI / 2);
      ctx.textAlign = 'left';
      ctx.font = (hot ? 'bold ' : '') + px;
      ctx.fillStyle = labelColor(u, hot);
      ctx.fillText(u.label, 0, 0, p.margin - 6);
      ctx.restore();
    }
  } else {
    // Too small to name: number the rows and columns at a step 28 px or more apart.
    p.labels = 'numbers';
    p.labelPx = 10;
    ctx.font = '10px ' + FONT_FAMILY;
    ctx.fillStyle = muted;
    const every = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000].find((e) => e * cell >= 28) || 2000;
    for (let a = Math.ceil(oy / every) * every; a <= lastRow(oy); a += every) {
      ctx.textAlign = 'right';
      ctx.fillText(String(a), p.x0 - 4, at(a, oy));
    }
    ctx.textBaseline = 'bottom';
    for (let c = Math.ceil(ox / every) * every; c <= lastCol(ox); c += every) {
      ctx.textAlign = 'center';
      ctx.fillText(String(c), at(c, ox), p.x0 - 3);
    }
    if (p.cell0 * Math.max(1, MATRIX_MAX_CELL / p.cell0) >= MATRIX_LABEL_CELL) {
      ctx.textAlign = 'left';
      ctx.textBaseline = 'middle';
      ctx.fillText('Zoom in (+) to read the tokens', p.x0, p.x0 - 21);
    }
  }
  ctx.save();
  ctx.beginPath();
  ctx.rect(p.x0, p.x0, p.plot, p.plotH);
  ctx.clip();
  // A line before a unit, across the plot (down before a column, across before a row): sentence
  // B's first (solid), the first generated unit (dashed). Rows and columns are the same units
  // unless the keys are other units (cross-attention: only the decoder's rows were generated).
  // White with a dark halo, as the PNG figures draw them: visible on every colour of the map and
  // on either theme's background.
  const divide = (u, dash, rows, cols) => {
    for (const [color, width] of [['rgba(0,0,0,0.8)', 3.5], ['#ffffff', 1.5]]) {
      ctx.strokeStyle = color;
      ctx.lineWidth = width;
      ctx.setLineDash(dash);
      ctx.beginPath();
      if (cols) {
        ctx.moveTo(p.x0 + (u - ox) * cell, p.x0);
        ctx.lineTo(p.x0 + (u - ox) * cell, plotBottom);
      }
      if (rows) {
        ctx.moveTo(p.x0, p.x0 + (u - oy) * cell);
        ctx.lineTo(plotEnd, p.x0 + (u - oy) * cell);
      }
      ctx.stroke();
    }
    ctx.setLineDash([]);
  };
  const b = isPair ? p.us.findIndex((u) => u.seg === 'B') : -1;
  if (b > 0) divide(b, [], true, SQUARE);
  // Reaction arrows (`>>`): a divider before each, on the side whose units they are.
  p.us.forEach((u, a) => { if (u.arrow && a > 0) divide(a, [], true, false); });
  p.ks.forEach((u, c) => { if (u.arrow && c > 0) divide(c, [], false, true); });
  const g = units().firstGen;
  if (g > 0) divide(g, [4, 3], true, SQUARE);
  if (hoverCell && hoverCell[1] !== 'sink') {
    // The hovered cell, outlined (at least 3 px, so tiny cells still show).
    ctx.strokeStyle = '#ff3b30';
    ctx.lineWidth = 1.5;
    const c = Math.max(cell, 3);
    ctx.strokeRect(p.x0 + (hoverCell[1] - ox) * cell - (c - cell) / 2, p.x0 + (hoverCell[0] - oy) * cell - (c - cell) / 2, c, c);
  }
  ctx.restore();
  ctx.strokeStyle = cssVar('--border');
  ctx.lineWidth = 1;
  ctx.strokeRect(p.x0 - 0.5, p.x0 - 0.5, p.plot + 1, p.plotH + 1);
  if (p.sink) paintSinkColumn(ctx, p, hoverCell);
  canvas.style.touchAction = matrixZoom.z > 1 ? 'none' : 'pan-x pan-y';
}

/**
 * The learned-sink column of panel p: one cell per visible row, apart from the plot (a gap and
 * its own dashed frame), on the panel's colour scale, labelled "sink" over it.
 */
function paintSinkColumn(ctx, p, hoverCell) {
  const cell = matrixCell(p);
  const oy = matrixZoom.oy;
  const sx = p.x0 + p.plot + SINK_GAP;
  ctx.save();
  ctx.beginPath();
  ctx.rect(sx, p.x0, SINK_W, p.plotH);
  ctx.clip();
  for (let a = Math.floor(oy); a <= Math.min(p.m - 1, Math.floor(oy + p.plotH / cell)); a++) {
    const j = lutIndex(p.map(p.sink[a])) * 3;
    ctx.fillStyle = 'rgb(' + LUT[j] + ',' + LUT[j + 1] + ',' + LUT[j + 2] + ')';
    ctx.fillRect(sx, p.x0 + (a - oy) * cell, SINK_W, Math.max(cell, 1));
  }
  if (hoverCell && hoverCell[1] === 'sink') {
    ctx.strokeStyle = '#ff3b30';
    ctx.lineWidth = 1.5;
    ctx.strokeRect(sx, p.x0 + (hoverCell[0] - oy) * cell, SINK_W, Math.max(cell, 3));
  }
  ctx.restore();
  ctx.strokeStyle = cssVar('--fg');
  ctx.lineWidth = 1;
  ctx.setLineDash([3, 2]);
  ctx.strokeRect(sx - 0.5, p.x0 - 0.5, SINK_W + 1, p.plotH + 1);
  ctx.setLineDash([]);
  ctx.save();
  ctx.translate(sx + SINK_W / 2, p.x0 - 4);
  ctx.rotate(-Math.PI / 2);
  ctx.textAlign = 'left';
  ctx.textBaseline = 'middle';
  ctx.font = 'italic bold 11px ' + FONT_FAMILY;
  ctx.fillStyle = cssVar('--fg');
  ctx.fillText('sink', 0, 0);
  ctx.restore();
}

/** The row of panel p's sink column under client point (x, y), or null. */
function sinkRowAt(p, x, y) {
  if (!p.sink) return null;
  const r = $(p.id).getBoundingClientRect();
  const cx = x - r.left - p.x0 - p.plot - SINK_GAP;
  const cy = y - r.top - p.x0;
  if (cx < 0 || cx >= SINK_W || cy < 0 || cy >= p.plotH) return null;
  return Math.min(p.m - 1, Math.floor(matrixZoom.oy + cy / matrixCell(p)));
}

/** The cell under client point (x, y) of panel p, or null outside the plot. */
function matrixCellAt(p, x, y) {
  const r = $(p.id).getBoundingClientRect();
  const i = Math.floor((x - r.left) * p.dpr - p.x0 * p.dpr);
  const j = Math.floor((y - r.top) * p.dpr - p.x0 * p.dpr);
  if (!p.cols || i < 0 || j < 0 || i >= p.cols.length || j >= p.rows.length) return null;
  return [p.rows[j], p.cols[i]];
}

function repaintMatrices() {
  for (const p of Object.values(matrixPanels)) {
    clampMatrixZoom(p);
    paintMatrix(p, null);
  }
  const out = $('matrix-zoom-level');
  out.textContent = matrixZoom.z < 10 ? '×' + matrixZoom.z.toFixed(1) : '×' + Math.round(matrixZoom.z);
  $('matrix-zoom-out').disabled = matrixZoom.z <= 1;
  $('matrix-zoom-reset').disabled = matrixZoom.z <= 1;
  const p = matrixPanels['matrix-left'];
  $('matrix-zoom-in').disabled = Boolean(p) && matrixZoom.z >= MATRIX_MAX_CELL / p.cell0 - 1e-9;
}

/** Zoom by `factor` keeping the cell under plot point (px, py) (CSS px from the plot's corner) fixed. */
function zoomMatrix(factor, px, py) {
  const p = matrixPanels['matrix-left'];
  if (!p) return;
  const before = matrixCell(p);
  const cx = matrixZoom.ox + px / before;
  const cy = matrixZoom.oy + py / before;
  matrixZoom.z *= factor;
  clampMatrixZoom(p);
  const after = matrixCell(p);
  matrixZoom.ox = cx - px / after;
  matrixZoom.oy = cy - py / after;
  repaintMatrices();
}
function zoomMatrixCentre(factor) {
  const p = matrixPanels['matrix-left'];
  if (p) zoomMatrix(factor, p.plot / 2, p.plotH / 2);
}
function resetMatrixZoom() {
  Object.assign(matrixZoom, { z: 1, ox: 0, oy: 0 });
  repaintMatrices();
}

function setupMatrixZoom() {
  $('matrix-zoom-in').addEventListener('click', () => zoomMatrixCentre(2));
  $('matrix-zoom-out').addEventListener('click', () => zoomMatrixCentre(0.5));
  $('matrix-zoom-reset').addEventListener('click', resetMatrixZoom);
}

function setupMatrixHover(id, describe) {
  const canvas = $(id);
  let hovered = null;
  const hover = (e) => {
    const p = matrixPanels[id];
    if (!p) return;
    const at = matrixCellAt(p, e.clientX, e.clientY);
    const sinkRow = at ? null : sinkRowAt(p, e.clientX, e.clientY);
    if (sinkRow !== null) {
      hovered = [sinkRow, 'sink'];
      paintMatrix(p, hovered);
      const v = p.sink[sinkRow];
      showTip('learned attention sink\nquery  ' + describeUnit(sinkRow) + '\nshare on the sink ' + fmtWeight(v) +
        '\nthe row\'s weights over the keys sum to ' + fmtWeight(1 - v) + ': together 1', e.clientX, e.clientY);
      return;
    }
    if (!at) { hideTip(); if (hovered) paintMatrix(p, null); hovered = null; return; }
    hovered = at;
    paintMatrix(p, at);
    showTip(describe(p, at[0], at[1]), e.clientX, e.clientY);
  };
  const plotPoint = (p, e) => {
    const r = canvas.getBoundingClientRect();
    return [e.clientX - r.left - p.x0, e.clientY - r.top - p.x0];
  };
  // Ctrl/⌘ + wheel (and a trackpad pinch, which browsers send as one) zooms at the pointer; a plain
  // wheel pans a zoomed matrix, and scrolls the page at its edges or when not zoomed.
  canvas.addEventListener('wheel', (e) => {
    const p = matrixPanels[id];
    if (!p) return;
    const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? p.plot : 1;
    if (e.ctrlKey || e.metaKey) {
      e.preventDefault();
      const [px, py] = plotPoint(p, e);
      zoomMatrix(Math.exp(-Math.max(-100, Math.min(100, e.deltaY * unit)) * 0.01), px, py);
    } else if (matrixZoom.z > 1) {
      const cell = matrixCell(p);
      const before = [matrixZoom.ox, matrixZoom.oy];
      const dx = e.shiftKey && !e.deltaX ? e.deltaY : e.deltaX;
      const dy = e.shiftKey && !e.deltaX ? 0 : e.deltaY;
      matrixZoom.ox += (dx * unit) / cell;
      matrixZoom.oy += (dy * unit) / cell;
      clampMatrixZoom(p);
      if (matrixZoom.ox === before[0] && matrixZoom.oy === before[1]) return;
      e.preventDefault();
      repaintMatrices();
    } else {
      return;
    }
    hideTip();
  }, { passive: false });
  // Drag (mouse or one finger) pans; two fingers pinch.
  const pointers = new Map();
  let pinch = null;
  canvas.addEventListener('pointerdown', (e) => {
    if (e.pointerType === 'mouse' && e.button !== 0) return;
    pointers.set(e.pointerId, [e.clientX, e.clientY]);
    try { canvas.setPointerCapture(e.pointerId); } catch (err) { /* a pointer already gone */ }
    if (pointers.size === 2) {
      const [[x1, y1], [x2, y2]] = [...pointers.values()];
      pinch = { d: Math.hypot(x2 - x1, y2 - y1) || 1 };
    }
  });
  const release = (e) => {
    pointers.delete(e.pointerId);
    if (pointers.size < 2) pinch = null;
    canvas.classList.remove('panning');
  };
  canvas.addEventListener('pointerup', release);
  canvas.addEventListener('pointercancel', release);
  canvas.addEventListener('pointermove', (e) => {
    const p = matrixPanels[id];
    const prev = pointers.get(e.pointerId);
    if (!p || !prev) { hover(e); return; }
    pointers.set(e.pointerId, [e.clientX, e.clientY]);
    if (pinch && pointers.size === 2) {
      const [[x1, y1], [x2, y2]] = [...pointers.values()];
      const d = Math.hypot(x2 - x1, y2 - y1) || 1;
      const r = canvas.getBoundingClientRect();
      zoomMatrix(d / pinch.d, (x1 + x2) / 2 - r.left - p.x0, (y1 + y2) / 2 - r.top - p.x0);
      pinch.d = d;
      hideTip();
      return;
    }
    if (matrixZoom.z <= 1) { hover(e); return; }
    const cell = matrixCell(p);
    const dx = e.clientX - prev[0];
    const dy = e.clientY - prev[1];
    if (!dx && !dy) return;
    canvas.classList.add('panning');
    matrixZoom.ox -= dx / cell;
    matrixZoom.oy -= dy / cell;
    repaintMatrices();
    hideTip();
  });
  // A click on a picture's label (a band, or one of its image tokens) expands or collapses it.
  canvas.addEventListener('click', (e) => {
    const p = matrixPanels[id];
    if (!p || p.labels !== 'tokens' || !PICTURES.length) return;
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left;
    const y = e.clientY - r.top;
    const cell = matrixCell(p);
    let u = null;
    if (x < p.x0 && y >= p.x0 && y < p.x0 + p.plotH) u = p.us[Math.floor(matrixZoom.oy + (y - p.x0) / cell)];
    else if (y < p.x0 && x >= p.x0 && x < p.x0 + p.plot) u = p.ks[Math.floor(matrixZoom.ox + (x - p.x0) / cell)];
    if (u && u.picture !== undefined) toggleBand(u.picture);
  });
  canvas.addEventListener('mouseleave', () => {
    hideTip();
    hovered = null;
    const p = matrixPanels[id];
    if (p) paintMatrix(p, null);
  });
}

function storageNote() {
  const s = sections.attention;
  return s.dtype === 'u8' ? 'stored in 8 bits: ±' + s.maxError.toExponential(1) : 'stored in 16 bits: ±' + s.maxError.toExponential(1);
}

/**
 * Largest possible |shown − exact| of matrix cell (a, c): half a storage step per stored value;
 * with the special tokens hidden, amplified by the renormalisation (a row that keeps little attention
 * divides the storage error by that small mass); summed over merged key pieces, averaged over
 * query pieces.
 */
function cellBound(kind, l, h, a, c) {
  const { list } = units();
  const klist = keyUnits().list;
  const kept = keptTokens(KSIDE);
  const nk = kept.length;
  const tokenBound = (e, r, S) => {
    if (!state.hideSpecial) return e;
    const den = S - nk * e;
    return den > 0 ? (e + r * nk * e) / den : Infinity;
  };
  const headBound = (hh) => {
    const base = (l * H + hh) * N * NK;
    const rs = rowScale(l, hh);
    const e = sections.attention.maxError;
    let sum = 0;
    for (const q of list[a].tokens) {
      const S = state.hideSpecial ? attStep / rs[q] : 1;
      for (const k of klist[c].tokens) sum += tokenBound(e, att[base + q * NK + k] * rs[q], S);
    }
    return sum / list[a].tokens.length;
  };
  if (kind === 'head') return headBound(h);
  if (kind === 'mean') {
    let sum = 0;
    for (let hh = 0; hh < H; hh++) sum += headBound(hh);
    return sum / H;
  }
  const info = (analysis.matrices || []).find((x) => x.id === kind);
  const sec = sections[info.section];
  const base = info.per_layer ? l * N * NK : 0;
  const value = (q, k) => sec.lo + sec.values[base + q * NK + k] * sec.step;
  let sum = 0;
  for (const q of list[a].tokens) {
    let S = 0;
    for (const k of kept) S += value(q, k);
    for (const k of klist[c].tokens) sum += tokenBound(sec.maxError, state.hideSpecial ? value(q, k) / S : 0, S);
  }
  return sum / list[a].tokens.length;
}

function matrixTip(label, kindOf) {
  return (p, a, c) => {
    if (CAUSAL && unitMasked(a, c)) {
      return label() + '\nquery  ' + describeUnit(a) + '\nkey    ' + describeUnit(c, KSIDE) +
        '\nmasked: the key comes after the query, which cannot see it (causal mask); not a weight of 0';
    }
    const bound = cellBound(kindOf(), state.layer, state.head, a, c);
    const bits = sections.attention.dtype === 'u8' ? '8' : '16';
    let t = label() + '\nquery  ' + describeUnit(a) + '\nkey    ' + describeUnit(c, KSIDE) +
      '\nweight ' + fmtWeight(p.values[a * p.mk + c]) + '  (±' +
      (Number.isFinite(bound) ? bound.toExponential(1) : '∞') + ': stored in ' + bits + ' bits)';
    if (state.hideSpecial) {
      t += '\nrow renormalised without ' + SPECIAL_NAMES + ' (the storage error grows as the share a row keeps shrinks)';
    }
    if (state.words) t += '\nword pieces merged: sum over key pieces, mean over query pieces';
    if (units().list[a].band || keyUnits().list[c].band) {
      t += '\npicture band: sum over its image tokens as the key, mean over them as the query';
    }
    return t;
  };
}

/** What a unit is called on the page. */
function unitWord() { return state.words || meta.level === 'word' ? 'words' : 'tokens'; }

function renderMatrix() {
  const l = state.layer;
  const h = state.head;
  const m = units().list.length;
  const mk = keyUnits().list.length;
  const kind = state.matrixRight;
  const left = matrixValues('head', l, h);
  const right = matrixValues(kind, l, h);
  // One scale for both panels (their largest value), or one each.
  const shared = state.matrixShared ? Math.max(maxOf(left), maxOf(right)) : null;
  const scaleBoth = matrixScaleOf([left, right], m, mk);
  const scaleOf = (values) => (state.matrixShared ? scaleBoth : matrixScaleOf([values], m, mk));
  drawMatrixPanel('matrix-left', left, 'Layer ' + layerName(l) + ' · head ' + h + (GROUPED ? ' · ' + kvNote(h) : ''), scaleOf(left), shared, l);
  matrixPanels['matrix-left'].sink = sinkColumn('head', l, h);
  const axes = $('matrix-axes');
  const decoderRows = meta.kind === 'cross' || meta.kind === 'decoder';
  axes.hidden = SQUARE && !decoderRows;
  const shifted = ' Rows are the decoder\'s inputs, the target shifted right by one: row i reads ' + unitWord().replace(/s$/, '') +
    ' i and predicts the next.';
  if (!SQUARE) {
    axes.textContent = 'Cross-attention: rows are the ' + m + ' decoder (target) ' + unitWord() +
      ', the queries; columns the ' + mk + ' encoder (source) ' + unitWord() + ', the keys.' + shifted;
  } else if (decoderRows) {
    axes.textContent = shifted.trim();
  }
  if (sections.sinks) {
    // gpt-oss: each head's learned sink takes a share of every row, which the keys' weights leave.
    axes.hidden = false;
    axes.textContent = (SQUARE && !decoderRows ? '' : axes.textContent + ' ') + (state.hideSpecial
      ? 'Learned attention sinks: the sink column is hidden while the rows are renormalised without ' + SPECIAL_NAMES + '.'
      : 'Learned attention sinks: the separate "sink" column right of each heatmap is each row\'s share on the head\'s learned sink, ' +
        'which the weights over the keys leave (a row\'s weights and its sink share sum to 1).');
  }
  $('matrix-right-select').value = kind;
  const info = (analysis.matrices || []).find((x) => x.id === kind);
  $('matrix-right-desc').textContent = kind === 'mean'
    ? 'Mean over the ' + H + ' heads of layer ' + layerName(l) + '.'
    : info.description + (info.per_layer ? ' (layer ' + layerName(l) + ')' : '');
  // A per-layer matrix has that layer's window; one over layers (rollout) only the causal mask.
  const rightLayer = kind === 'mean' || (info && info.per_layer) ? l : null;
  drawMatrixPanel('matrix-right', right, null, scaleOf(right), shared, rightLayer, Boolean(info && info.shares));
  matrixPanels['matrix-right'].sink = sinkColumn(kind, l, h);
  repaintMatrices();
  document.querySelectorAll('.colorbar .cbar').forEach(drawColorbar);
  document.querySelectorAll('#view-matrix .mask-key, #view-matrix .mask-key-label').forEach((k) => { k.hidden = !CAUSAL; });
  if (CAUSAL) document.querySelectorAll('#view-matrix canvas.mask-key').forEach(drawMaskKey);
}
