/* attnviz report: the model view, every layer x head as a thumbnail (lines or heatmap). */

/* -------------------------------------------------------------- model view */

const modelGrid = { built: false, dirty: true, job: 0, size: 0, heat: new Map() };

/** Thumbnail side (CSS px) that fits every head of a layer across the window: 36 to 112. */
function thumbSize() {
  const avail = contentWidth() - 28 - 4 * H;
  return Math.max(36, Math.min(112, Math.floor(avail / H) - 2));
}

function buildModelGrid() {
  const grid = $('model-grid');
  grid.textContent = '';
  if (GROUPED) {
    // A band over each run of neighbouring heads that read one key/value head.
    grid.append(el('span', { class: 'axis' }));
    for (let h = 0; h < H;) {
      let end = h;
      while (end + 1 < H && KV[end + 1] === KV[h]) end++;
      const band = el('span', { class: 'axis kv-band', text: 'kv ' + KV[h], title: 'Heads ' + h + '–' + end + ' read key/value head ' + KV[h] });
      band.style.gridColumn = 'span ' + (end - h + 1);
      grid.append(band);
      h = end + 1;
    }
  }
  grid.append(el('span', { class: 'axis', text: 'L \\ H' }));
  for (let h = 0; h < H; h++) grid.append(el('span', { class: 'axis', text: String(h) }));
  for (let l = 0; l < L; l++) {
    grid.append(el('span', { class: 'axis', text: layerName(l) }));
    for (let h = 0; h < H; h++) {
      const c = el('canvas');
      const b = el('button', { type: 'button', class: 'thumb', title: 'Layer ' + layerName(l) + ', head ' + h + (GROUPED ? ' (kv head ' + KV[h] + ')' : '') + ': open in the head view', dataset: { layer: String(l), head: String(h) } }, c);
      b.addEventListener('click', () => openHead(l, h));
      grid.append(b);
    }
  }
  modelGrid.built = true;
  modelGrid.size = 0;
  fitModelGrid();
}

/**
 * Size the grid for the window. The thumbnails keep their drawing, stretched, until they are
 * redrawn at the new size (a few frames later, visible ones first), so a resize never shows empty
 * boxes. Returns whether the size changed.
 */
function fitModelGrid() {
  const size = thumbSize();
  if (!modelGrid.built || size === modelGrid.size) return false;
  modelGrid.size = size;
  const grid = $('model-grid');
  grid.style.gridTemplateColumns = '28px repeat(' + H + ', ' + (size + 2) + 'px)';
  const [w, h] = thumbDims(size);
  for (const c of grid.querySelectorAll('.thumb canvas')) {
    c.style.width = w + 'px';
    c.style.height = h + 'px';
  }
  modelGrid.dirty = true;
  return true;
}

function renderModel() {
  if (!modelGrid.built) buildModelGrid();
  document.querySelectorAll('#model-grid .thumb').forEach((b) => {
    b.classList.toggle('current', state.headPicked && Number(b.dataset.layer) === state.layer && Number(b.dataset.head) === state.head);
  });
  if (!modelGrid.dirty) return;
  modelGrid.dirty = false;
  // Draw the thumbnails a few at a time so the page stays responsive at 512 tokens, those in the
  // window first.
  const job = ++modelGrid.job;
  const all = Array.from(document.querySelectorAll('#model-grid .thumb'));
  const bottom = window.innerHeight;
  const inView = (b) => { const r = b.getBoundingClientRect(); return r.bottom > 0 && r.top < bottom; };
  const thumbs = all.filter(inView).concat(all.filter((b) => !inView(b)));
  const bg = cssVar('--bg');
  drawn.thumbs = 0;
  let next = 0;
  const step = () => {
    if (job !== modelGrid.job || ABORT.signal.aborted) return;
    const t0 = performance.now();
    while (next < thumbs.length && performance.now() - t0 < 30) {
      const b = thumbs[next++];
      drawThumb(b.firstChild, Number(b.dataset.layer), Number(b.dataset.head), bg);
      drawn.thumbs++;
    }
    if (next < thumbs.length) setTimeout(step, 0);
    else $('model-grid').dataset.complete = String(job);
  };
  $('model-grid').dataset.complete = '';
  step();
}

/**
 * Widest thumbnail line (CSS px): bertviz's 2.2 px. Lines are at most 45 % of the token spacing,
 * so neighbouring rows stay apart, and at least one device pixel.
 */
const THUMB_LINE_MAX = 2.2;

/**
 * A thumbnail's width and height (CSS px) in a grid of side s: square, except a heatmap of
 * cross-attention, which keeps the matrix's shape (columns: encoder units, rows: decoder units;
 * the longer side s, the shorter at least a fifth of it).
 */
function thumbDims(s) {
  if (SQUARE || state.thumbStyle !== 'heatmap') return [s, s];
  const m = units().list.length;
  const mk = keyUnits().list.length;
  const short = (a, b) => Math.max(Math.round(s / 5), Math.round((s * a) / b));
  return mk >= m ? [s, short(m, mk)] : [short(mk, m), s];
}

/** Evenly spaced positions of n units along a side of s px, 5 px in from each end. */
function thumbPositions(n, s, pad) {
  const pos = new Float64Array(n);
  const spacing = n > 1 ? (s - 2 * pad) / (n - 1) : s;
  for (let a = 0; a < n; a++) pos[a] = pad + (n > 1 ? a * spacing : (s - 2 * pad) / 2);
  return { pos, spacing };
}

function drawThumb(canvas, l, h, bg) {
  const s = modelGrid.size;
  const [w, ht] = thumbDims(s);
  const ctx = sizeCanvas(canvas, w, ht);
  ctx.fillStyle = bg;
  ctx.fillRect(0, 0, w, ht);
  const m = units().list.length;
  const mk = keyUnits().list.length;
  if (state.thumbStyle === 'heatmap') {
    if (CAUSAL) hatchRect(ctx, 0, 0, w, ht);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(heatThumb(l, h, Math.min(w, mk), Math.min(ht, m)), 0, 0, w, ht);
    generatedEdges(ctx, ht, (a) => (a * ht) / m, ht / m, true, w);
    return;
  }
  const M = unitMatrix(l, h, false);
  const [qs, ks] = pairSides();
  const pad = 5;
  // Queries on the left edge, keys on the right: the same units unless the keys are other units.
  const { pos, spacing } = thumbPositions(m, s, pad);
  const kpos = SQUARE ? pos : thumbPositions(mk, s, pad).pos;
  const nb = 32;
  const tb = Array.from({ length: nb }, () => []);
  const thr = state.threshold;
  for (const a of qs) {
    for (const b of ks) {
      const v = M[a * mk + b];
      if (v <= 0 || v < thr || (CAUSAL && unitMasked(a, b, l))) continue;
      tb[Math.min(nb - 1, (v * nb) | 0)].push(pos[a], kpos[b]);
    }
  }
  const dpr = Math.min(window.devicePixelRatio || 1, 2);
  ctx.lineWidth = Math.max(1 / dpr, Math.min(THUMB_LINE_MAX, 0.45 * spacing));
  drawn.thumbLineWidth = ctx.lineWidth;
  ctx.strokeStyle = headColor(h);
  // Opacity is the weight, as in the head view and bertviz.
  for (let b = 0; b < nb; b++) {
    const ys = tb[b];
    if (!ys.length) continue;
    ctx.globalAlpha = (b + 0.5) / nb;
    ctx.beginPath();
    for (let i = 0; i < ys.length; i += 2) {
      ctx.moveTo(pad, ys[i]);
      ctx.lineTo(s - pad, ys[i + 1]);
    }
    ctx.stroke();
  }
  ctx.globalAlpha = 1;
  generatedEdges(ctx, s, (a) => pos[a] - spacing / 2, spacing, false, s);
}

/**
 * Mark the generated units on a thumbnail of side s: an orange bar along the left edge over their
 * rows, and along the top (heatmap: their columns) or the right edge (lines: the keys).
 * `start(a)` is where unit a's band begins, `size` its width.
 */
function generatedEdges(ctx, s, start, size, heatmap, w) {
  const g = units().firstGen;
  if (g < 0) return;
  const m = units().list.length;
  const from = Math.max(0, start(g));
  const to = Math.min(s, start(m - 1) + size);
  ctx.fillStyle = cssVar('--generated');
  ctx.fillRect(0, from, 2, to - from);
  // The keys are the generated units too only when they are the query units.
  if (!SQUARE) return;
  if (heatmap) ctx.fillRect(from, 0, to - from, 2);
  else ctx.fillRect(w - 2, from, 2, to - from);
}

/**
 * Head (l, h) as a px × px image, max-pooled so a sharp diagonal survives the shrinking, on a
 * square-root scale: long inputs spread attention thin, and the root keeps it visible. Cached until
 * the weights change (a resize only scales it).
 */
function heatThumb(l, h, px, py) {
  const key = l * H + h;
  const hit = modelGrid.heat.get(key);
  if (hit && hit.width === px && hit.height === py) return hit;
  const m = units().list.length;
  const mk = keyUnits().list.length;
  const M = unitMatrix(l, h, false);
  const img = new ImageData(px, py);
  const pooled = new Float64Array(px * py);
  // Pixels every cell of which is masked (a causal model's future) stay transparent: the
  // thumbnail's hatch shows through them.
  const seen = new Uint8Array(px * py);
  let max = 0;
  for (let a = 0; a < m; a++) {
    const r = Math.floor((a * py) / m) * px;
    for (let c = 0; c < mk; c++) {
      if (CAUSAL && unitMasked(a, c, l)) continue;
      const v = M[a * mk + c];
      const idx = r + Math.floor((c * px) / mk);
      seen[idx] = 1;
      if (v > pooled[idx]) pooled[idx] = v;
    }
  }
  for (const v of pooled) if (v > max) max = v;
  for (let i = 0; i < pooled.length; i++) {
    const j = lutIndex(max > 0 ? Math.sqrt(pooled[i] / max) : 0) * 3;
    img.data[i * 4] = LUT[j];
    img.data[i * 4 + 1] = LUT[j + 1];
    img.data[i * 4 + 2] = LUT[j + 2];
    img.data[i * 4 + 3] = seen[i] ? 255 : 0;
  }
  const off = document.createElement('canvas');
  off.width = px;
  off.height = py;
  off.getContext('2d').putImageData(img, 0, 0);
  modelGrid.heat.set(key, off);
  return off;
}
