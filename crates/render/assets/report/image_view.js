/* attnviz report: the image view of a vision model's report (ViT, DeiT, DINOv2, CLIP, SigLIP).
 * The picture the model read (its preprocessed pixels, embedded as a data: PNG) with the attention
 * of one query drawn over its patches: the hovered patch, else the clicked one, else the class
 * token; one head, the mean over heads, or a matrix of the analysis (rollout). The special tokens
 * (CLS, DIST, registers) are listed beside it with their share of the row, and every layer × head
 * is drawn below as a small overlay of the same query. The blend is the PNG figures' one
 * (src/render/image/picture.rs): the picture in grey at 85 %, each patch mixed with its colour at
 * opacity 0.25 + 0.5 t (t: the weight over the row's largest patch weight).
 */

/* -------------------------------------------------------------- image view */

/** The maps the image view offers (its Attention menu): one head, the mean over heads, the
 *  attention-pooling head's (SigLIP), and the analysis matrices (rollout). */
function imageSources() {
  return ['head', 'mean'].concat(IMAGE && IMAGE.pooling ? ['pool', 'pool-mean'] : [], (analysis.matrices || []).map((m) => m.id));
}

/** A vision-language model's report: the unit of its picture's first image token (its tokens
 *  follow, one per cell); null for a vision model, whose tokens are the cells. */
const IMG_FIRST = Number.isInteger(meta.image_first) ? meta.image_first : null;
const VLM = IMG_FIRST !== null;
/** A picture cut into tiles or crops, drawn as its parts put back together: the unit of each
 *  of its cells (they are several runs); null otherwise. */
const IMG_UNITS = VLM && Array.isArray(meta.image_units) &&
  meta.image && Array.isArray(meta.image.cells) && meta.image_units.length === meta.image.cells.length &&
  meta.image_units.every((u) => Number.isInteger(u) && u >= 0 && u < N) ? meta.image_units : null;
/** The picture of a vision model's report, when the report's tokens are its cells, or a
 *  vision-language model's first picture, when its tokens are among the report's. */
const IMAGE = meta.image && Array.isArray(meta.image.cells) && SQUARE &&
  (IMG_UNITS ? true : VLM ? IMG_FIRST + meta.image.cells.length <= N : meta.image.cells.length === N) ? meta.image : null;
/** The unit of the picture's cell i. */
const cellUnit = (i) => (IMG_UNITS ? IMG_UNITS[i] : VLM ? IMG_FIRST + i : i);
/** The cell of unit u of a vision-language model's picture, or -1. */
const unitCell = (u) => (IMG_UNITS ? IMG_UNITS.indexOf(u) : u - IMG_FIRST);
const IMG_ROWS = IMAGE ? IMAGE.grid[0] : 0;
const IMG_COLS = IMAGE ? IMAGE.grid[1] : 0;
/** The token of each patch, row-major over the grid (-1: none). */
const PATCH_TOKEN = new Int32Array(IMG_ROWS * IMG_COLS).fill(-1);
/** The tokens that are not patches (CLS, DIST, registers), in the model's order. */
const IMG_SPECIALS = [];
if (IMAGE) {
  IMAGE.cells.forEach((c, i) => {
    if (c.kind === 'patch') PATCH_TOKEN[c.row * IMG_COLS + c.col] = cellUnit(i);
    else if (!VLM) IMG_SPECIALS.push(i);
  });
}
/** How the page names a vision token: r3c5 for the patch at row 3, column 5; CLS, DIST, REG0;
 *  a vision-language model's other tokens by their label and number. */
function cellName(i) {
  if (VLM) {
    const k = unitCell(i);
    if (k < 0 || k >= IMAGE.cells.length) return '#' + i + ' \u201c' + tokenLabel(i).trim() + '\u201d';
    i = k;
  }
  const c = IMAGE.cells[i];
  if (c.kind === 'patch') return 'r' + c.row + 'c' + c.col;
  return c.kind === 'class' ? 'CLS' : c.kind === 'distillation' ? 'DIST' : c.kind === 'register' ? 'REG' + c.index : c.kind;
}
if (IMAGE) {
  const cls = IMAGE.cells.findIndex((c) => c.kind === 'class');
  const centre = PATCH_TOKEN[Math.floor(IMG_ROWS / 2) * IMG_COLS + Math.floor(IMG_COLS / 2)];
  const asked = meta.initial.query;
  Object.assign(state, {
    // A vision-language model's query is a token of its text, by default the last.
    imageQuery: Number.isInteger(asked) && asked >= 0 && asked < N ? asked : VLM ? N - 1 : cls >= 0 ? cls : Math.max(0, centre),
    imageHover: null,
    // A model without a class token that has an attention-pooling head (SigLIP) opens on it.
    imageSource: IMAGE.pooling && cls < 0 && !Number.isInteger(asked) ? 'pool' : 'head',
    imageOpacity: 1,
  });
  // Another picture drawn in place (attnviz serve) keeps the choice of map (one head, the mean,
  // the pooling head, rollout) where this report offers it, and the overlay's strength.
  const k = carry.keep;
  if (k) {
    if (imageSources().includes(k.imageSource)) state.imageSource = k.imageSource;
    if (Number.isFinite(k.imageOpacity)) state.imageOpacity = k.imageOpacity;
  }
} else if (state.view === 'image') {
  state.view = 'head';
}

/** The picture, decoded before the first drawing (main awaits this). */
const imagePicture = IMAGE && IMAGE.picture ? new Image() : null;
const imageLoaded = imagePicture
  ? new Promise((resolve) => {
    imagePicture.onload = () => resolve(true);
    imagePicture.onerror = () => resolve(false);
    imagePicture.src = IMAGE.picture;
  })
  : Promise.resolve(false);

/** What the image view drew last; read by the browser tests. */
const imageDrawn = { seq: 0, query: null, layer: null, head: null, source: null, grid: null, max: 0, specials: [], side: 0, thumbs: 0, blend: 'none' };

/** The picture in grey (85 %), `w` × `h` device pixels, cached per size; null when the
 *  browser will not hand back the pixels (the overlay then falls back to plain compositing). */
const greyCache = new Map();
function greyPicture(w, h) {
  const key = w + 'x' + h;
  if (greyCache.has(key)) return greyCache.get(key);
  let out = null;
  try {
    const c = document.createElement('canvas');
    c.width = w;
    c.height = h;
    const ctx = c.getContext('2d');
    ctx.imageSmoothingQuality = 'high';
    ctx.drawImage(imagePicture, 0, 0, w, h);
    const d = ctx.getImageData(0, 0, w, h).data;
    out = new Float32Array(w * h);
    for (let i = 0; i < w * h; i++) out[i] = (d[4 * i] * 0.3 + d[4 * i + 1] * 0.59 + d[4 * i + 2] * 0.11) * 0.85;
  } catch (e) {
    out = null;
  }
  greyCache.set(key, out);
  return out;
}

/** Query q's row over the tokens in layer l: head h, the mean over heads, or an analysis
 *  matrix (its id), as the shown weights (renormalised when special tokens are hidden). */
function imageRow(l, h, q, source) {
  const row = new Float64Array(N);
  if (source === 'pool' || source === 'pool-mean') {
    // The pooling head's probe is no token: its row does not depend on q or l.
    const p = IMAGE.pooling;
    const heads = source === 'pool' ? [Math.min(h, p.heads - 1)] : [...Array(p.heads).keys()];
    for (const hh of heads) for (let k = 0; k < N; k++) row[k] += (p.weights[hh][k] || 0) / heads.length;
  } else if (source === 'head') {
    for (let k = 0; k < N; k++) row[k] = weight(l, h, q, k);
  } else if (source === 'mean') {
    for (let hh = 0; hh < H; hh++) for (let k = 0; k < N; k++) row[k] += weight(l, hh, q, k) / H;
  } else {
    const m = (analysis.matrices || []).find((x) => x.id === source);
    const s = m && sections[m.section];
    if (s) {
      const base = (m.per_layer ? l * N * N : 0) + q * N;
      for (let k = 0; k < N; k++) row[k] = s.lo + s.values[base + k] * s.step;
    }
  }
  return row;
}

/** The row's weight on each patch, row-major over the grid, and the largest of them. */
function onGrid(row) {
  const grid = new Float64Array(IMG_ROWS * IMG_COLS);
  let max = 0;
  for (let p = 0; p < grid.length; p++) {
    const k = PATCH_TOKEN[p];
    grid[p] = k >= 0 ? row[k] : 0;
    if (grid[p] > max) max = grid[p];
  }
  return { grid, max };
}

/** Draw the picture `w` × `h` CSS px into canvas with the patch weights `grid` (over `max`)
 *  blended on, the query patch outlined; returns how it blended. */
function drawOverlay(canvas, w, h, grid, max, queryToken) {
  const ctx = sizeCanvas(canvas, w, h);
  const dpr = canvas.width / w;
  const pw = canvas.width;
  const ph = canvas.height;
  const [iw, ih] = IMAGE.input;
  // Device pixels per model pixel, and the patch side in device pixels.
  const sx = pw / iw;
  const sy = ph / ih;
  const patch = IMAGE.patch;
  const top = max > 0 ? max : 1e-12;
  const alpha = (t) => Math.min(1, (0.25 + 0.5 * t) * state.imageOpacity);
  const grey = imagePicture && imagePicture.complete ? greyPicture(pw, ph) : null;
  let blend;
  if (grey) {
    const img = ctx.createImageData(pw, ph);
    const d = img.data;
    for (let y = 0; y < ph; y++) {
      const r = Math.floor(y / sy / patch);
      for (let x = 0; x < pw; x++) {
        const c = Math.floor(x / sx / patch);
        const i = y * pw + x;
        const g = grey[i];
        let v0 = g;
        let v1 = g;
        let v2 = g;
        if (r >= IMG_ROWS || c >= IMG_COLS) {
          // Pixels no patch covers (a side not a multiple of the patch): dimmed, as in the PNG.
          v0 = v1 = v2 = g / 3;
        } else {
          const t = grid[r * IMG_COLS + c] / top;
          const a = alpha(t);
          const li = lutIndex(t) * 3;
          v0 = g * (1 - a) + LUT[li] * a;
          v1 = g * (1 - a) + LUT[li + 1] * a;
          v2 = g * (1 - a) + LUT[li + 2] * a;
        }
        d[4 * i] = v0;
        d[4 * i + 1] = v1;
        d[4 * i + 2] = v2;
        d[4 * i + 3] = 255;
      }
    }
    ctx.putImageData(img, 0, 0);
    blend = 'pixels';
  } else {
    // No pixels to read back: the picture (if any) under translucent patches.
    if (imagePicture && imagePicture.complete) ctx.drawImage(imagePicture, 0, 0, w, h);
    else { ctx.fillStyle = cssVar('--panel-2') || '#888'; ctx.fillRect(0, 0, w, h); }
    const cw = (w / iw) * patch;
    const chh = (h / ih) * patch;
    for (let r = 0; r < IMG_ROWS; r++) {
      for (let c = 0; c < IMG_COLS; c++) {
        const t = grid[r * IMG_COLS + c] / top;
        ctx.globalAlpha = alpha(t);
        ctx.fillStyle = lutCss(t);
        ctx.fillRect(c * cw, r * chh, cw, chh);
      }
    }
    ctx.globalAlpha = 1;
    blend = 'composite';
  }
  const q = VLM ? null : IMAGE.cells[queryToken];
  if (q && q.kind === 'patch') {
    const cw = (w / iw) * patch;
    const chh = (h / ih) * patch;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.lineWidth = Math.max(1, Math.min(3, cw / 8));
    ctx.strokeStyle = '#000';
    ctx.strokeRect(q.col * cw + 0.5, q.row * chh + 0.5, cw - 1, chh - 1);
    ctx.strokeStyle = '#fff';
    ctx.strokeRect(q.col * cw + 0.5 + ctx.lineWidth, q.row * chh + 0.5 + ctx.lineWidth, cw - 1 - 2 * ctx.lineWidth, chh - 1 - 2 * ctx.lineWidth);
  }
  return blend;
}

/** The query drawn now: the hovered patch, else the chosen token. */
function imageQueryNow() { return state.imageHover !== null ? state.imageHover : state.imageQuery; }

/** How the view names where the colours come from. */
function imageSourceName(source, l, h) {
  if (source === 'pool') return 'attention-pooling head (after the last layer), head ' + Math.min(h, IMAGE.pooling.heads - 1);
  if (source === 'pool-mean') return 'attention-pooling head (after the last layer), mean over ' + IMAGE.pooling.heads + ' heads';
  if (source === 'head') return 'layer ' + layerName(l) + ', head ' + h;
  if (source === 'mean') return 'layer ' + layerName(l) + ', mean over ' + H + ' heads';
  const m = (analysis.matrices || []).find((x) => x.id === source);
  return (m ? m.label : source) + (m && m.per_layer ? ', through layer ' + layerName(l) : '');
}

/** What the values of a map are: attention (one head, the mean, the pooling head), or the
 *  analysis matrix's own (rollout weight). */
function imageValueName(source) {
  if (['head', 'mean', 'pool', 'pool-mean'].includes(source)) return meta.shares ? SHARE_CAPTION : WEIGHT_CAPTION;
  const m = (analysis.matrices || []).find((x) => x.id === source);
  return m && m.shares ? SHARE_CAPTION : (m ? m.label.replace(/^Attention /, '').toLowerCase() : source) + ' weight';
}

/** The size (CSS px) of the picture shown: its longer side, from the room there is. */
function imageSide() {
  const room = contentWidth();
  const side = room >= 900 ? Math.min(512, room - 360) : Math.min(512, room - 8);
  return Math.max(160, Math.floor(side));
}

let imageSetUp = false;
function setupImageView() {
  if (imageSetUp || !IMAGE) return;
  imageSetUp = true;
  const src = $('image-source');
  src.append(el('option', { value: 'head', text: 'one head (choose above)' }));
  src.append(el('option', { value: 'mean', text: 'mean over heads' }));
  if (IMAGE.pooling) {
    src.append(el('option', { value: 'pool', text: 'attention-pooling head (choose the head above)' }));
    src.append(el('option', { value: 'pool-mean', text: 'attention-pooling head, mean over heads' }));
  }
  for (const m of analysis.matrices || []) src.append(el('option', { value: m.id, text: m.label }));
  src.addEventListener('change', () => set({ imageSource: src.value }));
  const op = $('image-opacity');
  op.value = String(state.imageOpacity);
  op.addEventListener('input', () => set({ imageOpacity: Number(op.value) }));
  const canvas = $('image-canvas');
  const patchAt = (e) => {
    const r = canvas.getBoundingClientRect();
    const [iw, ih] = IMAGE.input;
    const x = ((e.clientX - r.left) / r.width) * iw;
    const y = ((e.clientY - r.top) / r.height) * ih;
    const row = Math.floor(y / IMAGE.patch);
    const col = Math.floor(x / IMAGE.patch);
    if (row < 0 || col < 0 || row >= IMG_ROWS || col >= IMG_COLS) return -1;
    return PATCH_TOKEN[row * IMG_COLS + col];
  };
  canvas.addEventListener('mousemove', (e) => {
    const t = patchAt(e);
    if (t < 0) {
      hideTip();
      if (state.imageHover !== null) set({ imageHover: null });
      return;
    }
    // The numbers are the map's on screen (one head, the mean over heads, rollout, the pooling
    // head), named as the caption names it.
    const source = state.imageSource;
    const map = imageSourceName(source, state.layer, state.head);
    const rowOf = (q) => imageRow(state.layer, state.head, q, source);
    if (source === 'pool' || source === 'pool-mean') {
      // The probe is the query whatever the pointer is on: the patch's share of its map.
      showTip(cellName(t) + ' · ' + map + '\nthe probe → ' + cellName(t) + ': ' + fmtWeight(rowOf(t)[t]), e.clientX, e.clientY);
      return;
    }
    if (VLM) {
      // The query is a token of the text: the patch's share of its row, nothing changes.
      const kept = state.imageQuery;
      showTip(cellName(t) + ' · ' + map + '\n' + cellName(kept) + ' \u2192 ' + cellName(t) + ': ' + fmtWeight(rowOf(kept)[t]), e.clientX, e.clientY);
      return;
    }
    if (t !== state.imageHover) set({ imageHover: t });
    const kept = state.imageQuery;
    showTip('Query ' + cellName(t) + ' (pointed at; click to keep it) · ' + map +
      (kept !== t ? '\n' + cellName(kept) + ' (kept query) → ' + cellName(t) + ': ' + fmtWeight(rowOf(kept)[t]) : '') +
      '\n' + cellName(t) + ' → itself: ' + fmtWeight(rowOf(t)[t]), e.clientX, e.clientY);
  });
  canvas.addEventListener('mouseleave', () => { hideTip(); if (state.imageHover !== null) set({ imageHover: null }); });
  canvas.addEventListener('click', (e) => {
    const t = patchAt(e);
    if (t >= 0 && !VLM) set({ imageQuery: t, imageHover: null });
  });
  if (VLM) {
    // The query: any token that is not one of a picture's (the text, and what was generated).
    const inPicture = (u) => PICTURES.length
      ? PICTURES.some((p) => u >= p.first && u < p.first + p.count)
      : unitCell(u) >= 0 && unitCell(u) < IMAGE.cells.length;
    const pick = el('select', { id: 'image-query', title: 'The token whose attention is drawn over the picture' });
    for (let u = 0; u < N; u++) {
      if (inPicture(u)) continue;
      pick.append(el('option', { value: String(u), text: '#' + u + ' ' + tokenLabel(u).trim() + (QSIDE.generated[u] ? ' (generated)' : '') }));
    }
    pick.value = String(state.imageQuery);
    pick.addEventListener('change', () => set({ imageQuery: Number(pick.value), imageHover: null }));
    $('image-info').before(el('label', null, 'Query token ', pick));
  }
}

/** Fill the summary and the About panel for a picture (called after fillSummary). */
function imageSummary() {
  if (!IMAGE) return;
  if (!VLM) $('sentence-a-label').textContent = 'Image';
  const p = IMAGE.preprocessing || {};
  const steps = ['decoded ' + IMAGE.original[0] + '×' + IMAGE.original[1] + ' (' + p.color + '), converted to RGB'];
  if (p.resize) steps.push('resized to ' + p.resize.width + '×' + p.resize.height + ' (' + p.resize.filter + ')');
  if (p.crop) steps.push('centre-cropped to ' + p.crop[0] + '×' + p.crop[1]);
  if (p.rescale) steps.push('rescaled by ' + fmtNum(p.rescale, 6));
  if (p.normalize) steps.push('normalised (mean ' + p.normalize[0].join(', ') + '; std ' + p.normalize[1].join(', ') + ')');
  if (p.positions_from) steps.push('position embeddings interpolated from the trained ' + p.positions_from[0] + '×' + p.positions_from[1] + ' grid');
  const table = $('about-table');
  const rows = [
    ['Image', IMAGE.source + ': ' + IMAGE.original[0] + '×' + IMAGE.original[1] + ' px as given, ' + IMAGE.input[0] + '×' + IMAGE.input[1] + ' px as the model saw it (shown in the image view)'],
    ['Patches', IMG_ROWS + ' rows × ' + IMG_COLS + ' columns of ' + IMAGE.patch + '×' + IMAGE.patch + ' px, labelled r<row>c<column> from the top left (from 0)' +
      (IMG_SPECIALS.length ? '; special tokens: ' + IMG_SPECIALS.map(cellName).join(', ') : '; no special tokens')],
    ['Preprocessing', steps.join('; ')],
  ];
  for (const [k, v] of rows) table.append(el('tr', null, el('td', { text: k }), el('td', { text: v })));
}

function renderImage() {
  if (!IMAGE) return;
  setupImageView();
  const l = state.layer;
  const h = state.head;
  const source = state.imageSource;
  const q = imageQueryNow();
  $('image-source').value = source;
  const [iw, ih] = IMAGE.input;
  const side = imageSide();
  const w = iw >= ih ? side : Math.round((side * iw) / ih);
  const hh = iw >= ih ? Math.round((side * ih) / iw) : side;
  const row = imageRow(l, h, q, source);
  const { grid, max } = onGrid(row);
  const pooled = source === 'pool' || source === 'pool-mean';
  const blend = drawOverlay($('image-canvas'), w, hh, grid, max, pooled ? -1 : q);
  $('image-caption').textContent = (pooled ? 'Query: the probe' : 'Query ' + cellName(q) + (state.imageHover !== null ? ' (pointed at)' : '')) +
    ' · ' + imageSourceName(source, l, h) + ' · colour: ' + (pooled ? 'the probe\u2019s' : 'its') + ' ' + imageValueName(source) + ' on each patch (key), 0 to the largest patch weight';
  $('image-min').textContent = '0';
  $('image-max').textContent = scaleNumber(max);
  document.querySelectorAll('#view-image .cbar').forEach(drawColorbar);

  // The query menu of special tokens, and every special token's share of the row.
  const box = $('image-specials');
  box.textContent = '';
  let patchSum = 0;
  for (let p = 0; p < grid.length; p++) patchSum += grid[p];
  if (VLM) {
    const parts = shareParts(row);
    for (const [label, value] of parts) {
      const bar = el('span', { class: 'image-bar' });
      bar.style.width = Math.round(120 * Math.min(1, Math.max(0, value))) + 'px';
      box.append(el('div', { class: 'image-special-row' }, el('span', { class: 'small', text: label }), bar, el('span', { class: 'small', text: fmtWeight(value) })));
    }
    $('image-specials-title').textContent = 'Where ' + cellName(q) + '\u2019s attention goes';
    const partsNote = IMG_UNITS && typeof meta.image_parts === 'string' ? ' ' + meta.image_parts : '';
    $('image-info').textContent = 'Choose the query token; hover a patch for its weight. Grid ' + IMG_ROWS + '×' + IMG_COLS +
      ' of ' + IMAGE.patch + ' px patches over the ' + iw + '×' + ih + ' px input: ' + IMAGE.source + ', ' + IMAGE.original[0] + '×' + IMAGE.original[1] + ' px' +
      ((IMAGE.framing || []).length ? ', ' + IMAGE.framing.join('; ') : '') + '.' + partsNote;
    if ($('image-query')) $('image-query').value = String(state.imageQuery);
    renderImageGrid(q);
    Object.assign(imageDrawn, { seq: imageDrawn.seq + 1, query: q, layer: l, head: h, source, grid: Array.from(grid), max, specials: parts, side, blend, row: Array.from(row) });
    return;
  }
  const specials = IMG_SPECIALS.map((k) => ({ token: k, label: cellName(k), value: row[k] }));
  for (const s of specials) {
    const b = el('button', { type: 'button', class: 'image-special', dataset: { token: String(s.token) },
      title: 'Make ' + s.label + ' the query' }, s.label);
    b.setAttribute('aria-pressed', String(s.token === q));
    b.addEventListener('click', () => set({ imageQuery: s.token, imageHover: null }));
    const bar = el('span', { class: 'image-bar' });
    bar.style.width = Math.round(120 * Math.min(1, Math.max(0, s.value))) + 'px';
    box.append(el('div', { class: 'image-special-row' }, b, bar, el('span', { class: 'small', text: fmtWeight(s.value) })));
  }
  box.append(el('div', { class: 'image-special-row small muted', text: 'all ' + (IMG_ROWS * IMG_COLS) + ' patches: ' + fmtWeight(patchSum) }));
  $('image-specials-title').textContent = IMG_SPECIALS.length
    ? 'Share of ' + cellName(q) + '\u2019s attention on the special tokens (click one to make it the query)'
    : 'This model has no special tokens: every token is a patch';
  $('image-info').textContent = 'Hover a patch to see its attention, click to keep it as the query' +
    (state.imageQuery !== q ? ' (kept: ' + cellName(state.imageQuery) + ')' : '') + '. Grid ' + IMG_ROWS + '×' + IMG_COLS +
    ' of ' + IMAGE.patch + ' px patches over the ' + iw + '×' + ih + ' px input: ' + IMAGE.source + ', ' + IMAGE.original[0] + '×' + IMAGE.original[1] + ' px' +
    ((IMAGE.framing || []).length ? ', ' + IMAGE.framing.join('; ') : '') + '.';

  renderImageGrid(q);
  Object.assign(imageDrawn, { seq: imageDrawn.seq + 1, query: q, layer: l, head: h, source, grid: Array.from(grid), max, specials, side, blend, row: Array.from(row) });
}

/** Where a vision-language model's row over the tokens went, as the figures' titles say it
 *  (src/render/image/on_picture.rs, `Shares`): each picture's share, the sink's, and the rest,
 *  the text's; [label, share] each, in that order. */
function shareParts(row) {
  const runs = PICTURES.length ? PICTURES : [{ first: IMG_FIRST, count: IMAGE.cells.length }];
  // Per picture: a tiled picture's runs (its tiles and global view) together.
  const byPicture = [];
  runs.forEach((p, i) => {
    const k = Number.isInteger(p.picture) ? p.picture : i;
    const into = byPicture[k] || (byPicture[k] = { sum: 0, count: 0 });
    for (let t = p.first; t < p.first + p.count; t++) into.sum += row[t];
    into.count += p.count;
  });
  const pics = byPicture.filter(Boolean);
  const parts = pics.map((p, i) => {
    const name = pics.length > 1 ? 'picture ' + (i + 1) : 'the picture';
    return [name + ' (' + p.count + ' image tokens)', p.sum];
  });
  let total = 0;
  for (let k = 0; k < N; k++) total += row[k];
  let taken = parts.reduce((a, p) => a + p[1], 0);
  // A sink that is a picture's own token (PaliGemma's prompt starts with its picture) is in
  // that picture's share already.
  const sinkInPicture = runs.some((p) => SINK >= p.first && SINK < p.first + p.count);
  if (Number.isInteger(SINK) && SINK >= 0 && SINK < N && !sinkInPicture) {
    parts.push(['the sink ' + cellName(SINK), row[SINK]]);
    taken += row[SINK];
  }
  parts.push(['the text', Math.max(0, total - taken)]);
  return parts;
}

/** The colour of share part i of `parts` in a strip: pictures from the bright end of the colour
 *  map, the sink muted, the text from its dark end (as the figures draw them). */
function shareColour(parts, i) {
  if (i === parts.length - 1) return lutCss(0.3);
  if (parts[i][0].startsWith('the sink')) return cssVar('--muted');
  return lutCss(0.9 - 0.2 * (i % 3));
}

/** Every layer × head as a small overlay of query q (always per head, whatever the source). */
function renderImageGrid(q) {
  const box = $('image-grid');
  const room = contentWidth();
  const t = Math.max(40, Math.min(96, Math.floor((room - 40) / H) - 6));
  const [iw, ih] = IMAGE.input;
  const tw = iw >= ih ? t : Math.round((t * iw) / ih);
  const th = iw >= ih ? Math.round((t * ih) / iw) : t;
  if (box.dataset.size !== t + 'x' + L + 'x' + H) {
    box.textContent = '';
    box.dataset.size = t + 'x' + L + 'x' + H;
    // A vision-language model: each layer's strip of shares (mean of heads) beside its row.
    box.style.gridTemplateColumns = '32px repeat(' + H + ', ' + tw + 'px)' + (VLM ? ' 170px' : '');
    box.append(el('span', { class: 'axis', text: 'L \\ H' }));
    for (let hh = 0; hh < H; hh++) box.append(el('span', { class: 'axis', text: String(hh) }));
    if (VLM) box.append(el('span', { class: 'axis', text: 'mean of heads: where it went' }));
    for (let l = 0; l < L; l++) {
      box.append(el('span', { class: 'axis', text: layerName(l) }));
      for (let hh = 0; hh < H; hh++) {
        const c = el('canvas', { class: 'image-thumb', dataset: { layer: String(l), head: String(hh) },
          title: 'Layer ' + layerName(l) + ', head ' + hh + ': click to choose it' });
        c.addEventListener('click', () => set({ layer: l, head: hh, imageSource: 'head' }));
        box.append(c);
      }
      if (VLM) box.append(el('div', { class: 'image-shares', dataset: { layer: String(l) } }));
    }
  }
  // Each layer's shares of the row, the mean over its heads.
  const layerShares = [];
  box.querySelectorAll('.image-shares').forEach((d) => {
    const l = Number(d.dataset.layer);
    const parts = shareParts(imageRow(l, 0, q, 'mean'));
    layerShares[l] = parts;
    d.textContent = '';
    const strip = el('div', { class: 'share-strip' });
    parts.forEach((p, i) => {
      const seg = el('span', { title: p[0] + ': ' + fmtWeight(p[1]) });
      seg.style.width = (100 * Math.min(1, Math.max(0, p[1]))).toFixed(2) + '%';
      seg.style.background = shareColour(parts, i);
      strip.append(seg);
    });
    d.title = 'Layer ' + layerName(l) + ', mean of heads: ' + parts.map((p) => p[0] + ' ' + Math.round(p[1] * 100) + '%').join(' · ');
    d.append(strip, el('span', { class: 'small', text: parts.map((p) => Math.round(p[1] * 100) + '%').join(' · ') }));
  });
  imageDrawn.layerShares = layerShares;
  let n = 0;
  box.querySelectorAll('canvas.image-thumb').forEach((c) => {
    const l = Number(c.dataset.layer);
    const hh = Number(c.dataset.head);
    const { grid, max } = onGrid(imageRow(l, hh, q, 'head'));
    drawOverlay(c, tw, th, grid, max, q);
    c.classList.toggle('current', state.imageSource === 'head' && l === state.layer && hh === state.head);
    n++;
  });
  imageDrawn.thumbs = n;
  $('image-grid-title').textContent = 'Every layer × head: where ' + cellName(q) + ' attends (each on its own scale, 0 to its largest patch weight; click one to choose it)';
}

/** The stats view's table of token output norms (a vision model's report): for each layer, the
 *  L2 norm of each special token's output and the patches' median and largest, coloured on one
 *  scale, so registers' and high-norm patches' artifacts (Darcet et al. 2023) stand out. */
function renderImageNorms() {
  const box = $('token-norms');
  const norms = IMAGE && Array.isArray(IMAGE.norms) && IMAGE.norms.length === L ? IMAGE.norms : null;
  box.hidden = !norms;
  if (!norms) return;
  box.textContent = '';
  let top = 0;
  for (const row of norms) for (const v of row) top = Math.max(top, v);
  const cellOf = (v, text) => {
    const c = el('td', { class: 'norm-cell', text });
    const x = top > 0 ? v / top : 0;
    c.style.background = lutCss(x);
    const i = lutIndex(x) * 3;
    c.style.color = 0.2126 * LUT[i] + 0.7152 * LUT[i + 1] + 0.0722 * LUT[i + 2] > 140 ? '#111' : '#fff';
    return c;
  };
  const table = el('table', { class: 'norm-table' });
  const head = el('tr', null, el('th', { text: 'Layer' }));
  for (const k of IMG_SPECIALS) head.append(el('th', { text: cellName(k) }));
  head.append(el('th', { text: 'patches: median' }), el('th', { text: 'largest' }), el('th', { text: 'patches over 2× median' }));
  table.append(head);
  norms.forEach((row, l) => {
    const tr = el('tr', null, el('th', { text: layerName(l) }));
    for (const k of IMG_SPECIALS) tr.append(cellOf(row[k], fmtNum(row[k], 2)));
    const patches = [];
    for (let p = 0; p < PATCH_TOKEN.length; p++) if (PATCH_TOKEN[p] >= 0) patches.push([row[PATCH_TOKEN[p]], PATCH_TOKEN[p]]);
    const sorted = patches.map((x) => x[0]).sort((a, b) => a - b);
    const median = sorted.length ? sorted[Math.floor((sorted.length - 1) / 2)] : 0;
    const [mx, at] = patches.reduce((b, x) => (x[0] > b[0] ? x : b), [0, -1]);
    const high = patches.filter((x) => x[0] > 2 * median).length;
    tr.append(cellOf(median, fmtNum(median, 2)), cellOf(mx, fmtNum(mx, 2) + (at >= 0 ? ' (' + cellName(at) + ')' : '')),
      el('td', { class: 'norm-count', text: String(high) }));
    table.append(tr);
  });
  box.append(el('p', { class: 'small', text: 'Output norm of each token after each layer (L2, the residual stream before the final LayerNorm). ' +
    'Registers and the few high-norm patches of large ViTs stand out here (Darcet et al. 2023). Colour: 0 to the largest norm, ' + fmtNum(top, 2) + '.' }), table);
}
