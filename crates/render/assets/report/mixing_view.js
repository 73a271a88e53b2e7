/* attnviz report: the token-mixing view of a hybrid model (Qwen3-Next's gated delta layers).
 * For the layer and head picked (or the heads' mean), output tokens (rows) × source tokens
 * (columns) of the layer's exact mixing matrix, out_t = Σ_s A[t, s] · v_s, on a diverging scale
 * centred at 0 (red above, blue below). Not attention probabilities: rows need not sum to 1 and
 * entries may be negative; the legend says so. Per token: words are not merged here. */

/* ------------------------------------------------------------- mixing view */

/** meta.mixing: {kind, legend, heads, tokens, layers: [{layer, weights: [heads·n·n]}]}. */
const MIXING = meta.mixing || null;
if (state.view === 'mixing' && !MIXING) state.view = 'head';

/** The layer shown (an index into MIXING.layers) and the head (-1: the mean). */
let mixingAt = 0;
let mixingHead = -1;

/** How a mixing row is labelled: the report's token label when its tokens are the report's. */
function mixingToken(t) {
  return MIXING.tokens.length === N ? tokenLabel(t) : visibleText(MIXING.tokens[t]);
}

/** The shown matrix, [n·n]: one head's, or the heads' mean. */
function mixingMatrix() {
  const n = MIXING.tokens.length;
  const w = MIXING.layers[mixingAt].weights;
  if (mixingHead >= 0) return w.slice(mixingHead * n * n, (mixingHead + 1) * n * n);
  const out = new Array(n * n).fill(0);
  for (let h = 0; h < MIXING.heads; h++) for (let i = 0; i < n * n; i++) out[i] += w[h * n * n + i] / MIXING.heads;
  return out;
}

function setupMixing() {
  if (!MIXING) return;
  const pick = $('mixing-layer');
  pick.textContent = '';
  MIXING.layers.forEach((l, i) => pick.append(el('option', { value: String(i), text: 'layer ' + l.layer + ' (' + MIXING.kind + ')' })));
  pick.addEventListener('change', () => { mixingAt = Number(pick.value); renderMixing(); });
  const head = $('mixing-head');
  head.textContent = '';
  head.append(el('option', { value: '-1', text: 'mean of ' + MIXING.heads + ' heads' }));
  for (let h = 0; h < MIXING.heads; h++) head.append(el('option', { value: String(h), text: 'head ' + h }));
  head.addEventListener('change', () => { mixingHead = Number(head.value); renderMixing(); });
}

function renderMixing() {
  if (!MIXING) return;
  const n = MIXING.tokens.length;
  const l = MIXING.layers[mixingAt];
  $('mixing-layer').value = String(mixingAt);
  $('mixing-head').value = String(mixingHead);
  $('mixing-desc').textContent = 'Layer ' + l.layer + ' mixes the tokens without a softmax: each output token is a signed sum of the earlier tokens\' values, with these weights. Rows: output token; columns: source token.';
  $('mixing-legend').textContent = MIXING.legend;
  $('mixing-note').textContent = MIXING.legend + ': rows need not sum to 1 and weights may be negative (red > 0, blue < 0). Statistics that assume probabilities leave these layers out.';
  const m = mixingMatrix();
  let maxAbs = 1e-6;
  for (const v of m) maxAbs = Math.max(maxAbs, Math.abs(v));
  const bgRgb = parseRgb(cssVar('--bg'));
  const wide = n <= 24;
  const cellW = wide ? 38 : n <= 64 ? 14 : 8;
  const grid = $('mixing-grid');
  grid.textContent = '';
  grid.style.gridTemplateColumns = 'max-content repeat(' + n + ', ' + cellW + 'px)';
  grid.append(el('span', { class: 'axis', text: 'out \\ src' }));
  for (let s = 0; s < n; s++) grid.append(el('span', { class: 'axis', text: wide || s % 4 === 0 ? String(s) : '', title: 'source token ' + s + ' ' + mixingToken(s) }));
  for (let t = 0; t < n; t++) {
    grid.append(el('span', { class: 'axis router-token', text: t + ' ' + mixingToken(t) }));
    for (let s = 0; s < n; s++) {
      const v = m[t * n + s];
      const above = s > t;
      const cell = el('span', { class: 'router-cell mixing-cell' + (above ? ' off' : ''), dataset: { token: String(t), source: String(s), value: String(v) } },
        wide && !above ? (v >= 0 ? '+' : '') + v.toFixed(2) : '');
      if (!above) {
        const bg = divergingColor(v, maxAbs, bgRgb);
        cell.style.background = bg;
        const rgb = parseRgb(bg);
        cell.style.color = contrast(rgb, [17, 17, 17]) >= contrast(rgb, [255, 255, 255]) ? '#111' : '#fff';
      }
      cell.title = 'layer ' + l.layer + ' · output ' + t + ' ' + mixingToken(t) + ' ← source ' + s + ' ' + mixingToken(s) +
        (above ? ': later token, never read (causal)' : ': weight ' + v.toFixed(4) + ' (' + MIXING.legend + ')');
      grid.append(cell);
    }
  }
  const canvas = $('mixing-cbar');
  const w = 160;
  canvas.width = w;
  canvas.height = 1;
  const ctx = canvas.getContext('2d');
  for (let x = 0; x < w; x++) {
    ctx.fillStyle = divergingColor(((x + 0.5) / w * 2 - 1) * maxAbs, maxAbs, bgRgb);
    ctx.fillRect(x, 0, 1, 1);
  }
  $('mixing-min').textContent = (-maxAbs).toFixed(3);
  $('mixing-max').textContent = '+' + maxAbs.toFixed(3);
}
