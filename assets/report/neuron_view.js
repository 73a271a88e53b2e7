/* attnviz report: the neuron view, for one layer, head and query token: q, each k, q∘k,
 * q·k/√d and its softmax, recomputed from the embedded vectors.
 */

/* ------------------------------------------------------------- neuron view */

let neuronLayout = null;

/** Everything the neuron view shows for the current layer, head and query token. */
function neuronData(l = state.layer, h = state.head, q = state.neuronQuery) {
  if (!sections.query) return null;
  const T = N; // vectors exist per token only (never at word level)
  const off = (t) => ((l * H + h) * T + t) * D;
  const Q = sections.query.values;
  const K = sections.key.values;
  const qv = Q.subarray(off(q), off(q) + D);
  const keys = keptTokens();
  const inv = 1 / Math.sqrt(D);
  const kv = keys.map((k) => K.subarray(off(k), off(k) + D));
  const scores = kv.map((k) => { let s = 0; for (let i = 0; i < D; i++) s += qv[i] * k[i]; return s * inv; });
  const top = Math.max(...scores);
  const ex = scores.map((s) => Math.exp(s - top));
  const z = ex.reduce((a, b) => a + b, 0);
  const softmax = ex.map((e) => e / z);
  const stored = keys.map((k) => weight(l, h, q, k));
  let maxDiff = 0;
  softmax.forEach((p, i) => { maxDiff = Math.max(maxDiff, Math.abs(p - stored[i])); });
  return { layer: l, head: h, query: q, keys, q: Array.from(qv), k: kv.map((v) => Array.from(v)), scores, softmax, stored, maxDiff };
}

function divergingColor(x, maxAbs, bgRgb) {
  const t = maxAbs > 0 ? Math.min(1, Math.abs(x) / maxAbs) : 0;
  const c = x >= 0 ? [214, 73, 51] : [45, 108, 211];
  return 'rgb(' + [0, 1, 2].map((i) => Math.round(bgRgb[i] + (c[i] - bgRgb[i]) * t)).join(',') + ')';
}

function parseRgb(css) {
  if (css.startsWith('#')) return hexToRgb(css.length === 4 ? '#' + css[1] + css[1] + css[2] + css[2] + css[3] + css[3] : css);
  const m = css.match(/\d+/g);
  return m ? m.slice(0, 3).map(Number) : [255, 255, 255];
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
  if (state.hideSpecial && meta.special[state.neuronQuery]) {
    state.neuronQuery = keptTokens()[0];
  }
  const d = neuronData();
  const rh = N <= 64 ? 17 : 14;
  const fontPx = N <= 64 ? 12 : 11;
  const font = fontPx + 'px ' + FONT_FAMILY;
  const cw = D <= 32 ? 8 : D <= 64 ? 5 : 3;
  let tw = 40;
  for (const i of d.keys) tw = Math.max(tw, textWidth(tokenLabel(i), font) + 12);
  tw = Math.min(tw, 150);
  const vecW = cw * D;
  const gap = 16;
  const barW = 90;
  const cols = {
    token: 0,
    k: tw,
    qk: tw + vecW + gap,
    score: tw + 2 * (vecW + gap),
    soft: tw + 2 * (vecW + gap) + barW + 44 + gap,
    stored: tw + 2 * (vecW + gap) + 2 * (barW + 52 + gap),
    delta: tw + 2 * (vecW + gap) + 2 * (barW + 52 + gap) + 84,
  };
  const width = cols.delta + 80;
  const headerH = 2 * rh + 26;
  const height = headerH + d.keys.length * rh + 8;
  const ctx = sizeCanvas(canvas, width, height);
  const bg = cssVar('--bg');
  const bgRgb = parseRgb(bg);
  const fg = cssVar('--fg');
  const muted = cssVar('--muted');
  ctx.clearRect(0, 0, width, height);
  ctx.font = font;
  ctx.textBaseline = 'middle';

  let vmax = 0;
  for (const x of d.q) vmax = Math.max(vmax, Math.abs(x));
  for (const k of d.k) for (const x of k) vmax = Math.max(vmax, Math.abs(x));
  let pmax = 0;
  for (const k of d.k) for (let i = 0; i < D; i++) pmax = Math.max(pmax, Math.abs(d.q[i] * k[i]));
  const smin = Math.min(...d.scores);
  const smax = Math.max(...d.scores);
  const softMax = Math.max(...d.softmax);

  // Column titles.
  ctx.fillStyle = muted;
  ctx.textAlign = 'left';
  const titleY = 9;
  ctx.fillText('key', cols.token, titleY);
  ctx.fillText('k (key vector, d = ' + D + ')', cols.k, titleY);
  ctx.fillText('q ∘ k (elementwise)', cols.qk, titleY);
  ctx.fillText('q · k / √d', cols.score, titleY);
  ctx.fillText('softmax', cols.soft, titleY);
  ctx.fillText('attention', cols.stored, titleY);
  ctx.fillText('|Δ|', cols.delta, titleY);

  // The query vector, aligned with the key vectors.
  const qy = 22;
  ctx.fillStyle = fg;
  ctx.textAlign = 'right';
  ctx.fillText('q: ' + tokenLabel(d.query), cols.k - 6, qy + rh / 2, tw - 8);
  for (let i = 0; i < D; i++) {
    ctx.fillStyle = divergingColor(d.q[i], vmax, bgRgb);
    ctx.fillRect(cols.k + i * cw, qy + 1, cw - 1, rh - 2);
  }
  ctx.textAlign = 'left';
  ctx.fillStyle = muted;
  ctx.fillText('query of layer ' + d.layer + ', head ' + d.head, cols.qk, qy + rh / 2);

  const y0 = headerH;
  d.keys.forEach((k, r) => {
    const y = y0 + r * rh;
    if (k === d.query) {
      ctx.fillStyle = cssVar('--token-hover');
      ctx.fillRect(0, y, width, rh);
    }
    ctx.fillStyle = meta.special[k] ? muted : fg;
    ctx.textAlign = 'right';
    ctx.fillText(tokenLabel(k), cols.k - 6, y + rh / 2, tw - 8);
    const kv = d.k[r];
    for (let i = 0; i < D; i++) {
      ctx.fillStyle = divergingColor(kv[i], vmax, bgRgb);
      ctx.fillRect(cols.k + i * cw, y + 1, cw - 1, rh - 2);
      ctx.fillStyle = divergingColor(d.q[i] * kv[i], pmax, bgRgb);
      ctx.fillRect(cols.qk + i * cw, y + 1, cw - 1, rh - 2);
    }
    const s = d.scores[r];
    const frac = smax > smin ? (s - smin) / (smax - smin) : 1;
    ctx.fillStyle = headColor(d.head);
    ctx.globalAlpha = 0.35;
    ctx.fillRect(cols.score, y + 2, Math.max(1, frac * barW), rh - 4);
    ctx.globalAlpha = Math.max(0.15, d.softmax[r] / (softMax || 1));
    ctx.fillRect(cols.soft, y + 2, Math.max(1, (d.softmax[r] / (softMax || 1)) * barW), rh - 4);
    ctx.globalAlpha = 1;
    ctx.fillStyle = fg;
    ctx.textAlign = 'right';
    ctx.fillText(s.toFixed(3), cols.score + barW + 40, y + rh / 2);
    ctx.fillText(d.softmax[r].toFixed(6), cols.soft + barW + 52, y + rh / 2);
    ctx.fillText(fmtWeight(d.stored[r]), cols.stored + 70, y + rh / 2);
    ctx.fillStyle = muted;
    ctx.fillText(Math.abs(d.softmax[r] - d.stored[r]).toExponential(1), cols.delta + 48, y + rh / 2);
  });
  neuronLayout = { cols, y0, rh, cw, keys: d.keys, data: d, qy, width };
  $('neuron-check').textContent = 'Layer ' + d.layer + ', head ' + d.head + ', query ' + describeToken(d.query) +
    ': softmax(q·k/√d), recomputed here from the captured vectors (exact f32), equals the attention row to within ' +
    d.maxDiff.toExponential(2) + '; the row is ' + storageNote() +
    (state.hideSpecial ? '; with [CLS]/[SEP] hidden both are taken over the remaining keys.' : '.');
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
    if (at.inQ && dim >= 0 && dim < D) {
      text = 'q[' + dim + '] of ' + describeToken(d.query) + ' = ' + d.q[dim].toFixed(5);
    } else if (at.row >= 0) {
      const k = p.keys[at.row];
      if (dim >= 0 && dim < D) text = 'k[' + dim + '] of ' + describeToken(k) + ' = ' + d.k[at.row][dim].toFixed(5);
      else if (dim2 >= 0 && dim2 < D) text = 'q[' + dim2 + '] × k[' + dim2 + '] for ' + describeToken(k) + ' = ' + (d.q[dim2] * d.k[at.row][dim2]).toFixed(5);
      else text = describeToken(d.query) + ' → ' + describeToken(k) + '\nq·k/√d   ' + d.scores[at.row].toFixed(5) +
        '\nsoftmax  ' + d.softmax[at.row].toFixed(6) + '\nstored   ' + fmtWeight(d.stored[at.row]) + '  (' + storageNote() + ')\nclick to make this token the query';
    }
    if (text) showTip(text, e.clientX, e.clientY);
    else hideTip();
  });
  canvas.addEventListener('mouseleave', hideTip);
  canvas.addEventListener('click', (e) => {
    const at = locate(e);
    if (at && at.row >= 0) set({ neuronQuery: neuronLayout.keys[at.row] });
  });
}
