/* attnviz report: the matrix view, query x key heatmaps of a head and of the mean over heads (or
 * an analysis matrix), with each value and its storage error on hover.
 */

/* ------------------------------------------------------------- matrix view */

/** The shown matrix (units × units) for the matrix view: a head, the mean, or an analysis matrix. */
function matrixValues(kind, l, h) {
  const m = units().list.length;
  if (kind === 'head') return unitMatrix(l, h);
  if (kind === 'mean') {
    const out = new Float64Array(m * m);
    for (let hh = 0; hh < H; hh++) {
      const M = unitMatrix(l, hh);
      for (let i = 0; i < out.length; i++) out[i] += M[i];
    }
    for (let i = 0; i < out.length; i++) out[i] /= H;
    return out;
  }
  // An analysis matrix, given per token: treated like attention (rows renormalised over kept
  // tokens when [CLS]/[SEP] are hidden, word pieces merged the same way).
  const info = (analysis.matrices || []).find((x) => x.id === kind);
  const sec = sections[info.section];
  const base = info.per_layer ? l * N * N : 0;
  const kept = keptTokens();
  return unitsFromTokens((q, buf) => {
    let sum = 0;
    for (const k of kept) {
      buf[k] = sec.lo + sec.values[base + q * N + k] * sec.step;
      sum += buf[k];
    }
    if (state.hideSpecial && sum > 0) for (const k of kept) buf[k] /= sum;
  });
}

const matrixPanels = {};

function drawMatrixPanel(id, values, caption) {
  const us = units().list;
  const m = us.length;
  let max = 0;
  for (const v of values) if (v > max) max = v;
  const scale = state.matrixScale;
  const top = scale === 'one' ? 1 : max || 1;
  const map = scale === 'sqrt' ? (v) => Math.sqrt(Math.max(0, v) / top) : (v) => v / top;
  // 1 pixel per cell, then scaled up without smoothing.
  const img = new ImageData(m, m);
  for (let i = 0; i < m * m; i++) {
    const j = lutIndex(map(values[i])) * 3;
    img.data[i * 4] = LUT[j];
    img.data[i * 4 + 1] = LUT[j + 1];
    img.data[i * 4 + 2] = LUT[j + 2];
    img.data[i * 4 + 3] = 255;
  }
  const off = document.createElement('canvas');
  off.width = m;
  off.height = m;
  off.getContext('2d').putImageData(img, 0, 0);
  const avail = Math.max(220, Math.min(600, (window.innerWidth - 120) / 2));
  const labelled = m <= 80;
  const fontPx = m <= 24 ? 12 : 10;
  const font = fontPx + 'px ' + FONT_FAMILY;
  // Too many units for labels: number the axes instead (hover names every cell).
  let margin = 30;
  if (labelled) {
    for (const u of us) margin = Math.max(margin, textWidth(u.label, font) + 8);
    margin = Math.min(margin, 130);
  }
  const cell = Math.max(1, Math.min(36, Math.floor((avail - margin) / m)));
  const side = cell * m;
  const panel = { id, values, m, us, cell, margin, off, side, labelled, font, max };
  matrixPanels[id] = panel;
  paintMatrix(panel, null);
  $(id + '-min').textContent = '0';
  $(id + '-max').textContent = scale === 'one' ? '1' : (scale === 'sqrt' ? '√ ' : '') + fmtWeight(max);
  if (caption !== null) $(id + '-caption').textContent = caption;
}

function paintMatrix(p, hoverCell) {
  const canvas = $(p.id);
  const w = p.margin + p.side + 4;
  const ctx = sizeCanvas(canvas, w, w);
  ctx.clearRect(0, 0, w, w);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(p.off, p.margin, p.margin, p.side, p.side);
  const fg = cssVar('--fg');
  const muted = cssVar('--muted');
  if (p.labelled) {
    ctx.font = p.font;
    ctx.textBaseline = 'middle';
    for (let a = 0; a < p.m; a++) {
      const u = p.us[a];
      const mid = p.margin + a * p.cell + p.cell / 2;
      const hot = hoverCell && (hoverCell[0] === a);
      ctx.fillStyle = hot ? fg : (u.special ? muted : fg);
      ctx.textAlign = 'right';
      ctx.fillText(u.label, p.margin - 4, mid, p.margin - 6);
      ctx.save();
      ctx.translate(mid, p.margin - 4);
      ctx.rotate(-Math.PI / 2);
      ctx.textAlign = 'left';
      ctx.fillStyle = hoverCell && hoverCell[1] === a ? fg : (u.special ? muted : fg);
      ctx.fillText(u.label, 0, 0, p.margin - 6);
      ctx.restore();
    }
  }
  if (!p.labelled) {
    ctx.font = '10px ' + FONT_FAMILY;
    ctx.fillStyle = muted;
    const every = [10, 20, 25, 50, 100, 200].find((e) => e * p.cell >= 36) || 500;
    for (let a = 0; a < p.m; a += every) {
      const mid = p.margin + a * p.cell + p.cell / 2;
      ctx.textAlign = 'right';
      ctx.textBaseline = 'middle';
      ctx.fillText(String(a), p.margin - 4, mid);
      ctx.textAlign = 'center';
      ctx.textBaseline = 'bottom';
      ctx.fillText(String(a), mid, p.margin - 3);
    }
  }
  if (isPair && meta.sentence_b_start !== null) {
    const b = p.us.findIndex((u) => u.seg === 'B');
    if (b > 0) {
      ctx.strokeStyle = cssVar('--bg');
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      ctx.moveTo(p.margin + b * p.cell, p.margin);
      ctx.lineTo(p.margin + b * p.cell, p.margin + p.side);
      ctx.moveTo(p.margin, p.margin + b * p.cell);
      ctx.lineTo(p.margin + p.side, p.margin + b * p.cell);
      ctx.stroke();
    }
  }
  if (hoverCell) {
    ctx.strokeStyle = '#ff3b30';
    ctx.lineWidth = 1.5;
    const c = Math.max(p.cell, 3);
    ctx.strokeRect(p.margin + hoverCell[1] * p.cell - (c - p.cell) / 2, p.margin + hoverCell[0] * p.cell - (c - p.cell) / 2, c, c);
  }
}

function setupMatrixHover(id, describe) {
  const canvas = $(id);
  canvas.addEventListener('mousemove', (e) => {
    const p = matrixPanels[id];
    if (!p) return;
    const r = canvas.getBoundingClientRect();
    const a = Math.floor((e.clientY - r.top - p.margin) / p.cell);
    const c = Math.floor((e.clientX - r.left - p.margin) / p.cell);
    if (a < 0 || c < 0 || a >= p.m || c >= p.m) { hideTip(); paintMatrix(p, null); return; }
    paintMatrix(p, [a, c]);
    showTip(describe(p, a, c), e.clientX, e.clientY);
  });
  canvas.addEventListener('mouseleave', () => {
    hideTip();
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
 * with [CLS]/[SEP] hidden, amplified by the renormalisation (a row that keeps little attention
 * divides the storage error by that small mass); summed over merged key pieces, averaged over
 * query pieces.
 */
function cellBound(kind, l, h, a, c) {
  const { list } = units();
  const kept = keptTokens();
  const nk = kept.length;
  const tokenBound = (e, r, S) => {
    if (!state.hideSpecial) return e;
    const den = S - nk * e;
    return den > 0 ? (e + r * nk * e) / den : Infinity;
  };
  const headBound = (hh) => {
    const base = (l * H + hh) * N * N;
    const rs = rowScale(l, hh);
    const e = sections.attention.maxError;
    let sum = 0;
    for (const q of list[a].tokens) {
      const S = state.hideSpecial ? attStep / rs[q] : 1;
      for (const k of list[c].tokens) sum += tokenBound(e, att[base + q * N + k] * rs[q], S);
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
  const base = info.per_layer ? l * N * N : 0;
  const value = (q, k) => sec.lo + sec.values[base + q * N + k] * sec.step;
  let sum = 0;
  for (const q of list[a].tokens) {
    let S = 0;
    for (const k of kept) S += value(q, k);
    for (const k of list[c].tokens) sum += tokenBound(sec.maxError, state.hideSpecial ? value(q, k) / S : 0, S);
  }
  return sum / list[a].tokens.length;
}

function matrixTip(label, kindOf) {
  return (p, a, c) => {
    const bound = cellBound(kindOf(), state.layer, state.head, a, c);
    const bits = sections.attention.dtype === 'u8' ? '8' : '16';
    let t = label() + '\nquery  ' + describeUnit(a) + '\nkey    ' + describeUnit(c) +
      '\nweight ' + fmtWeight(p.values[a * p.m + c]) + '  (±' +
      (Number.isFinite(bound) ? bound.toExponential(1) : '∞') + ': stored in ' + bits + ' bits)';
    if (state.hideSpecial) {
      t += '\nrow renormalised without [CLS]/[SEP] (the storage error grows as the share a row keeps shrinks)';
    }
    if (state.words) t += '\nword pieces merged: sum over key pieces, mean over query pieces';
    return t;
  };
}

function renderMatrix() {
  const l = state.layer;
  const h = state.head;
  drawMatrixPanel('matrix-left', matrixValues('head', l, h), 'Layer ' + l + ' · head ' + h);
  const kind = state.matrixRight;
  $('matrix-right-select').value = kind;
  const info = (analysis.matrices || []).find((x) => x.id === kind);
  $('matrix-right-desc').textContent = kind === 'mean'
    ? 'Mean over the ' + H + ' heads of layer ' + l + '.'
    : info.description + (info.per_layer ? ' (layer ' + l + ')' : '');
  drawMatrixPanel('matrix-right', matrixValues(kind, l, h), null);
  document.querySelectorAll('.colorbar .cbar').forEach(drawColorbar);
}
