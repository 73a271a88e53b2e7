/* attnviz report: the neuron view, for one layer, head and query token: q, each k, q∘k,
 * q·k/√d and its softmax, recomputed from the embedded vectors.
 */

/* ------------------------------------------------------------- neuron view */

let neuronLayout = null;
/** The factor on q·k before the softmax: the report's (T5: 1), else 1/√d. */
const SCALE = typeof meta.scale === 'number' ? meta.scale : 1 / Math.sqrt(D);
const USUAL_SCALE = Math.abs(SCALE * Math.sqrt(D) - 1) < 1e-6;
/** How the page writes the score. */
const SCORE_NAME = USUAL_SCALE ? 'q·k/√d' : SCALE === 1 ? 'q·k' : 'q·k×' + SCALE.toPrecision(4);
const SCALE_NOTE = USUAL_SCALE ? '' : SCALE === 1 ? 'this model does not scale q·k by 1/√d' : 'this model scales q·k by ' + SCALE.toPrecision(6);
/** A learned relative-position bias is added to the scores (T5's self-attention). */
const BIASED = meta.positions === 'relative';

/**
 * Everything the neuron view shows for the current layer, head and query token. Queries are laid
 * out [layers, heads, tokens, D], keys [layers, kv heads, tokens, D]: head h reads the keys of its
 * key/value head KV[h] (grouped-query attention). Under a causal mask the keys after the query
 * are masked: no score, no share of the softmax (`masked[i]`; their scores are null).
 */
function neuronData(l = state.layer, h = state.head, q = state.neuronQuery) {
  if (!sections.query) return null;
  // Vectors exist per token only (never at word level): N query tokens, NK key tokens.
  const offQ = (t) => ((l * H + h) * N + t) * D;
  const offK = (t) => ((l * KVH + KV[h]) * NK + t) * D;
  const Q = sections.query.values;
  const K = sections.key.values;
  const qv = Q.subarray(offQ(q), offQ(q) + D);
  const keys = keptTokens(KSIDE);
  const inv = SCALE;
  const kv = keys.map((k) => K.subarray(offK(k), offK(k) + D));
  const masked = keys.map((k) => CAUSAL && k > q);
  const scores = kv.map((k, i) => {
    if (masked[i]) return null;
    let s = 0;
    for (let j = 0; j < D; j++) s += qv[j] * k[j];
    return s * inv;
  });
  const top = Math.max(...scores.filter((s) => s !== null));
  const ex = scores.map((s) => (s === null ? 0 : Math.exp(s - top)));
  const z = ex.reduce((a, b) => a + b, 0);
  const softmax = ex.map((e) => e / z);
  const stored = keys.map((k) => weight(l, h, q, k));
  let maxDiff = 0;
  softmax.forEach((p, i) => { if (!masked[i]) maxDiff = Math.max(maxDiff, Math.abs(p - stored[i])); });
  return { layer: l, head: h, kvHead: KV[h], query: q, keys, masked, q: Array.from(qv), k: kv.map((v) => Array.from(v)), scores, softmax, stored, maxDiff };
}

/** Vector entries: red for positive, blue for negative, deeper for larger magnitudes, fading to
 *  the background at zero (the legend above each vector column gives the scale). */
const POSITIVE = [214, 73, 51];
const NEGATIVE = [45, 108, 211];
const POSITIVE_CSS = rgbCss(POSITIVE);
const NEGATIVE_CSS = rgbCss(NEGATIVE);
function divergingColor(x, maxAbs, bgRgb) {
  const t = maxAbs > 0 ? Math.min(1, Math.abs(x) / maxAbs) : 0;
  const c = x >= 0 ? POSITIVE : NEGATIVE;
  return 'rgb(' + [0, 1, 2].map((i) => Math.round(bgRgb[i] + (c[i] - bgRgb[i]) * t)).join(',') + ')';
}

function renderNeuron() {
  const missing = $('neuron-missing');
  const canvas = $('neuron-canvas');
  if (!sections.query) {
    missing.hidden = false;
    missing.textContent = 'No neuron view in this report: ' + (meta.neuron.reason || 'query/key vectors are missing') + '.';
    canvas.hidden = true;
    $('neuron-check').textContent = '';
    neuronLayout = null;
    return;
  }
  missing.hidden = true;
  canvas.hidden = false;
  if (state.hideSpecial && SPECIAL[state.neuronQuery]) {
    state.neuronQuery = keptTokens()[0];
  }
  const d = neuronData();
  const rh = NK <= 64 ? 17 : 14;
  const fontPx = NK <= 64 ? 12 : 11;
  const font = fontPx + 'px ' + FONT_FAMILY;
  // Wide enough cells that a short vector (a small head) still leaves room for its column's
  // title and colour scale.
  const cw = D <= 32 ? Math.min(20, Math.max(8, Math.ceil(160 / D))) : D <= 64 ? 5 : 3;
  let tw = 40;
  for (const i of d.keys) tw = Math.max(tw, textWidth(tokenName(i, KSIDE), font) + 12);
  tw = Math.min(tw, 150);
  const vecW = cw * D;
  const gap = 18;
  const barW = 120;
  const numW = 62; // right-aligned numbers after each bar, in a column of their own
  const cols = { token: 0, k: tw, qk: tw + vecW + gap };
  cols.score = cols.qk + vecW + gap;
  cols.scoreNum = cols.score + barW + numW; // right edge
  cols.soft = cols.scoreNum + gap;
  cols.softNum = cols.soft + barW + numW;
  cols.stored = cols.softNum + gap;
  cols.delta = cols.stored + 70 + gap;
  const width = cols.delta + 56;
  // Header: what the vectors are (RoPE, the shared key/value head), column titles, the query
  // vector, then the scales (colour legends and bar axes).
  const banner = [];
  if (ROTARY) banner.push('q and k after the rotary position embedding (RoPE): each rotated by its position, the vectors whose dot product the softmax saw');
  if (GROUPED) banner.push('Head ' + d.head + ' reads the keys of ' + kvNote(d.head) + ' (grouped-query attention)');
  if (CAUSAL) banner.push('Causal mask: keys after the query are masked, with no score and no share of the softmax');
  if (!SQUARE) banner.push('Cross-attention: the query is a decoder (target) token, the keys are the encoder (source) tokens');
  if (BIASED) banner.push('This attention adds a relative-position bias to the scores (T5), in neither q nor k: the recomputed softmax leaves it out');
  const bannerH = banner.length * 15;
  const titleY = 9 + bannerH;
  const qy = 20 + bannerH;
  const legendY = qy + rh + 6;
  const y0 = legendY + 22;
  const height = y0 + d.keys.length * rh + 8;
  const ctx = sizeCanvas(canvas, width, height);
  const bg = cssVar('--bg');
  const bgRgb = parseRgb(bg);
  const fg = cssVar('--fg');
  const muted = cssVar('--muted');
  ctx.font = font;
  ctx.textBaseline = 'middle';

  let vmax = 0;
  for (const x of d.q) vmax = Math.max(vmax, Math.abs(x));
  for (const k of d.k) for (const x of k) vmax = Math.max(vmax, Math.abs(x));
  let pmax = 0;
  d.k.forEach((k, r) => { if (!d.masked[r]) for (let i = 0; i < D; i++) pmax = Math.max(pmax, Math.abs(d.q[i] * k[i])); });
  // q·k/√d bars grow from a zero axis, right for positive and left for negative scores.
  const seen = d.scores.filter((v) => v !== null);
  const lo = Math.min(0, ...seen);
  const hi = Math.max(0, ...seen);
  const scoreX = (v) => cols.score + (hi > lo ? ((v - lo) / (hi - lo)) * barW : 0);
  const axisX = scoreX(0);
  const softMax = Math.max(...d.softmax);

  ctx.fillStyle = muted;
  ctx.textAlign = 'left';
  banner.forEach((line, i) => ctx.fillText(line, cols.token, 9 + i * 15));
  ctx.fillText('key', cols.token, titleY);
  ctx.fillText('k (key vector, d = ' + D + ')', cols.k, titleY);
  ctx.fillText('q ∘ k (elementwise)', cols.qk, titleY);
  ctx.fillText(SCORE_NAME.replace(/·/g, ' · ').replace('/', ' / '), cols.score, titleY);
  ctx.fillText('softmax', cols.soft, titleY);
  ctx.textAlign = 'right';
  ctx.fillText('attention', cols.stored + 70, titleY);
  ctx.fillText('|Δ|', cols.delta + 48, titleY);

  // The query vector, aligned with the key vectors.
  ctx.fillStyle = fg;
  ctx.textAlign = 'right';
  ctx.fillText('q: ' + tokenLabel(d.query), cols.k - 6, qy + rh / 2, tw - 8);
  for (let i = 0; i < D; i++) {
    ctx.fillStyle = divergingColor(d.q[i], vmax, bgRgb);
    ctx.fillRect(cols.k + i * cw, qy + 1, cw - 1, rh - 2);
  }
  ctx.textAlign = 'left';
  ctx.fillStyle = muted;
  ctx.fillText('query of layer ' + layerName(d.layer) + ', head ' + d.head + (ROTARY ? ', after RoPE' : '') +
    (GROUPED ? ' · keys of kv head ' + d.kvHead : ''), cols.qk, qy + rh / 2);

  // Scales: what the vector colours mean, and the bars' axes.
  const small = (fontPx - 1) + 'px ' + FONT_FAMILY;
  const legendH = 8;
  const ly = legendY + 6; // middle of the legend row
  const legends = [];
  const ticks = [];
  const legend = (x, w, maxAbs) => {
    const lw = Math.max(40, w - 84);
    const lx = x + (w - lw) / 2;
    legends.push({ x: lx, w: lw, y: ly, scale: maxAbs });
    for (let i = 0; i < lw; i++) {
      ctx.fillStyle = divergingColor(((i + 0.5) / lw * 2 - 1) * maxAbs, maxAbs, bgRgb);
      ctx.fillRect(lx + i, ly - legendH / 2, 1, legendH);
    }
    ctx.strokeStyle = muted;
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(lx + lw / 2 + 0.5, ly - legendH / 2 - 2);
    ctx.lineTo(lx + lw / 2 + 0.5, ly + legendH / 2 + 2);
    ctx.stroke();
    ctx.font = small;
    ctx.fillStyle = muted;
    ctx.textAlign = 'right';
    ctx.fillText('−' + fmtNum(maxAbs, 2), lx - 4, ly);
    ctx.textAlign = 'left';
    ctx.fillText('+' + fmtNum(maxAbs, 2), lx + lw + 4, ly);
  };
  legend(cols.k, vecW, vmax);
  legend(cols.qk, vecW, pmax);
  // Axis labels of the two bar columns: the ends and zero.
  ctx.font = small;
  ctx.fillStyle = muted;
  const tick = (x, text, align) => {
    ticks.push({ x, text });
    ctx.textAlign = align;
    ctx.fillText(text, x, ly);
    ctx.fillRect(Math.round(x) - (align === 'right' ? 1 : 0), ly + 6, 1, 4);
  };
  // "0" at the axis always; the ends where they do not run into it.
  const zeroAlign = axisX - cols.score < 10 ? 'left' : axisX > cols.score + barW - 10 ? 'right' : 'center';
  tick(axisX, '0', zeroAlign);
  const zw = ctx.measureText('0').width;
  const zeroLeft = zeroAlign === 'left' ? axisX : zeroAlign === 'right' ? axisX - zw : axisX - zw / 2;
  const loText = fmtNum(lo, 2);
  const hiText = fmtNum(hi, 2);
  if (lo < 0 && cols.score + ctx.measureText(loText).width + 6 < zeroLeft) tick(cols.score, loText, 'left');
  if (hi > 0 && cols.score + barW - ctx.measureText(hiText).width - 6 > zeroLeft + zw) tick(cols.score + barW, hiText, 'right');
  tick(cols.soft, '0', 'left');
  tick(cols.soft + barW, fmtNum(softMax, 3), 'right');
  ctx.font = font;

  const hoverRgb = parseRgb(cssVar('--token-hover'));
  d.keys.forEach((k, r) => {
    const y = y0 + r * rh;
    // The query's own row, highlighted; its vector colours fade to the highlight, not the page.
    const base = k === d.query ? hoverRgb : bgRgb;
    if (k === d.query) {
      ctx.fillStyle = rgbCss(hoverRgb);
      ctx.fillRect(0, y, width, rh);
    }
    ctx.fillStyle = KSIDE.generated[k] ? cssVar('--generated') : KSIDE.special[k] || d.masked[r] ? muted : fg;
    ctx.textAlign = 'right';
    ctx.fillText(tokenName(k, KSIDE), cols.k - 6, y + rh / 2, tw - 8);
    const kv = d.k[r];
    if (d.masked[r]) {
      // A key after the query: its vector, faint; nothing the attention computed.
      ctx.globalAlpha = 0.3;
      for (let i = 0; i < D; i++) {
        ctx.fillStyle = divergingColor(kv[i], vmax, base);
        ctx.fillRect(cols.k + i * cw, y + 1, cw - 1, rh - 2);
      }
      ctx.globalAlpha = 1;
      hatchRect(ctx, cols.qk, y + 1, vecW, rh - 2);
      ctx.fillStyle = muted;
      ctx.textAlign = 'left';
      ctx.fillText('masked: after the query', cols.score, y + rh / 2);
      return;
    }
    for (let i = 0; i < D; i++) {
      ctx.fillStyle = divergingColor(kv[i], vmax, base);
      ctx.fillRect(cols.k + i * cw, y + 1, cw - 1, rh - 2);
      ctx.fillStyle = divergingColor(d.q[i] * kv[i], pmax, base);
      ctx.fillRect(cols.qk + i * cw, y + 1, cw - 1, rh - 2);
    }
    const s = d.scores[r];
    const sx = scoreX(s);
    ctx.fillStyle = s >= 0 ? POSITIVE_CSS : NEGATIVE_CSS;
    ctx.globalAlpha = 0.8;
    ctx.fillRect(Math.min(sx, axisX), y + 2, Math.max(1, Math.abs(sx - axisX)), rh - 4);
    ctx.fillStyle = headColor(d.head);
    ctx.globalAlpha = Math.max(0.2, d.softmax[r] / (softMax || 1));
    ctx.fillRect(cols.soft, y + 2, Math.max(1, (d.softmax[r] / (softMax || 1)) * barW), rh - 4);
    ctx.globalAlpha = 1;
    ctx.fillStyle = fg;
    ctx.textAlign = 'right';
    ctx.fillText(s.toFixed(3), cols.scoreNum, y + rh / 2);
    ctx.fillText(d.softmax[r].toFixed(6), cols.softNum, y + rh / 2);
    ctx.fillText(fmtWeight(d.stored[r]), cols.stored + 70, y + rh / 2);
    ctx.fillStyle = muted;
    ctx.fillText(Math.abs(d.softmax[r] - d.stored[r]).toExponential(1), cols.delta + 48, y + rh / 2);
  });
  // The zero axis of the score bars, over every row.
  ctx.fillStyle = fg;
  ctx.fillRect(Math.round(axisX), y0 - 2, 1, d.keys.length * rh + 4);
  neuronLayout = { cols, y0, rh, cw, keys: d.keys, data: d, qy, width, barW, font, axisX, ticks, legends };
  $('neuron-check').textContent = 'Layer ' + layerName(d.layer) + ', head ' + d.head + (GROUPED ? ' (' + kvNote(d.head) + ')' : '') +
    ', query ' + describeToken(d.query) +
    ': softmax(' + SCORE_NAME + '), recomputed here from the captured vectors (exact f32' + (ROTARY ? ', after the rotary position embedding' : '') +
    (SCALE_NOTE ? '; ' + SCALE_NOTE : '') + '), ' + (BIASED
      ? 'differs from the attention row by up to ' + d.maxDiff.toExponential(2) + ': this attention adds a learned relative-position bias to the scores (T5), which is in neither vector, so the recomputation leaves it out; the row is '
      : 'equals the attention row to within ' + d.maxDiff.toExponential(2) + '; the row is ') + storageNote() +
    (CAUSAL ? '; keys after the query are masked and take no part' : '') +
    (state.hideSpecial ? '; with ' + SPECIAL_NAMES + ' hidden both are taken over the remaining keys.' : '.');
  canvas.dataset.maxDiff = String(d.maxDiff);
}

function setupNeuronPointer() {
  const canvas = $('neuron-canvas');
  const locate = (e) => {
    const p = neuronLayout;
    if (!p) return null;
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left;
    const y = e.clientY - r.top;
    const row = Math.floor((y - p.y0) / p.rh);
    const inQ = y >= p.qy && y < p.qy + p.rh;
    return { x, row: row >= 0 && row < p.keys.length ? row : -1, inQ };
  };
  canvas.addEventListener('mousemove', (e) => {
    const at = locate(e);
    if (!at) return;
    const p = neuronLayout;
    const d = p.data;
    const dim = Math.floor((at.x - p.cols.k) / p.cw);
    const dim2 = Math.floor((at.x - p.cols.qk) / p.cw);
    let text = null;
    const rope = ROTARY ? ' (after RoPE)' : '';
    if (at.inQ && dim >= 0 && dim < D) {
      text = 'q[' + dim + '] of ' + describeToken(d.query) + rope + ' = ' + d.q[dim].toFixed(5);
    } else if (at.row >= 0 && d.masked[at.row]) {
      text = describeToken(p.keys[at.row], KSIDE) + ' comes after the query: masked (causal), no score' +
        (dim >= 0 && dim < D ? '\nk[' + dim + ']' + rope + ' = ' + d.k[at.row][dim].toFixed(5) : '');
    } else if (at.row >= 0) {
      const k = p.keys[at.row];
      if (dim >= 0 && dim < D) text = 'k[' + dim + '] of ' + describeToken(k, KSIDE) + rope + (GROUPED ? ', kv head ' + d.kvHead : '') + ' = ' + d.k[at.row][dim].toFixed(5);
      else if (dim2 >= 0 && dim2 < D) text = 'q[' + dim2 + '] × k[' + dim2 + '] for ' + describeToken(k, KSIDE) + ' = ' + (d.q[dim2] * d.k[at.row][dim2]).toFixed(5);
      else text = describeToken(d.query) + ' → ' + describeToken(k, KSIDE) + '\n' + SCORE_NAME + '   ' + d.scores[at.row].toFixed(5) +
        '\nsoftmax  ' + d.softmax[at.row].toFixed(6) + '\nstored   ' + fmtWeight(d.stored[at.row]) + '  (' + storageNote() + ')' +
        (SQUARE ? '\nclick to make this token the query' : '');
    }
    if (text) showTip(text, e.clientX, e.clientY);
    else hideTip();
  });
  canvas.addEventListener('mouseleave', hideTip);
  canvas.addEventListener('click', (e) => {
    const at = locate(e);
    // A key is a query too only when keys and queries are the same tokens.
    if (SQUARE && at && at.row >= 0) set({ neuronQuery: neuronLayout.keys[at.row] });
  });
}
