// Expected values for the browser tests, computed from a report's `*.expect.json` sidecar (the
// exact f32 weights written by tests/html_report.rs), independently of the page's own decoding and
// drawing code. Shared by report.test.mjs (Chromium) and firefox.test.mjs.

export function rawWeight(exp, l, h, q, k) { return exp.weights[((l * exp.heads + h) * exp.n + q) * exp.n + k]; }

/** The weight the page should show: renormalised over non-special keys when they are hidden. */
export function shownWeight(exp, l, h, q, k, hide) {
  const w = rawWeight(exp, l, h, q, k);
  if (!hide) return w;
  let sum = 0;
  for (let j = 0; j < exp.n; j++) if (!exp.special[j]) sum += rawWeight(exp, l, h, q, j);
  return sum > 0 ? w / sum : 0;
}

/** How the page names units with labels `labels` whose first tokens are `positions`: a label
 *  that occurs more than once is followed by its position in subscript digits (`C₇`), as
 *  tests/display_label_cases.json says. */
export function named(labels, positions = labels.map((_, i) => i)) {
  const sub = (n) => String(n).split('').map((d) => '₀₁₂₃₄₅₆₇₈₉'[Number(d)]).join('');
  const count = (l) => labels.filter((x) => x === l).length;
  return labels.map((l, i) => (count(l) > 1 ? l + sub(positions[i]) : l));
}

/** The units the page should show: token indices per row, pieces merged into words if asked. */
export function expectedUnits(exp, { hide = false, words = false } = {}) {
  const list = [];
  let prev = null;
  for (let i = 0; i < exp.n; i++) {
    if (hide && exp.special[i]) continue;
    const w = exp.word_ids[i];
    const key = words && w !== null && !exp.special[i] ? exp.segments[i] + ':' + w : null;
    if (key !== null && key === prev) list[list.length - 1].push(i);
    else list.push([i]);
    prev = key;
  }
  return list;
}

/** Head (l, h) over the units: attention to a word sums its pieces, from a word averages them.
 *  B bounds how far the page's value may be from M: half a 16-bit step per stored weight, grown by
 *  renormalisation when [CLS]/[SEP] are hidden (a row keeping mass S of n kept weights:
 *  (e + r·n·e) / (S − n·e)), summed over key pieces and averaged over query pieces. */
export function expectedMatrix(exp, l, h, opts = {}, e = 0.5 / 65535) {
  const us = expectedUnits(exp, opts);
  const m = us.length;
  const kept = range(exp.n).filter((i) => !(opts.hide && exp.special[i]));
  const M = new Float64Array(m * m);
  const B = new Float64Array(m * m);
  const mass = (q) => kept.reduce((s, k) => s + rawWeight(exp, l, h, q, k), 0);
  for (let a = 0; a < m; a++) {
    const S = us[a].map(mass);
    for (let b = 0; b < m; b++) {
      let sum = 0;
      let bound = 0;
      us[a].forEach((q, qi) => {
        for (const k of us[b]) {
          const r = shownWeight(exp, l, h, q, k, opts.hide);
          sum += r;
          const den = S[qi] - kept.length * e;
          bound += !opts.hide ? e : den > 0 ? (e + r * kept.length * e) / den : Infinity;
        }
      });
      M[a * m + b] = sum / us[a].length;
      B[a * m + b] = bound / us[a].length;
    }
  }
  return { us, m, M, B };
}

/** Whether the report's attention is causal and key unit `kb` starts after query unit `qa` ends
 *  (units as token lists): a cell no view may draw as a weight. */
export function isMasked(exp, qa, kb) {
  return exp.mask === 'causal' && kb[0] > qa[qa.length - 1];
}

/** Number of lines the head view should draw (fromQ/toK: hovered unit). */
export function expectedLines(exp, { layer, heads, thr, pair = 'all', hide = false, words = false, fromQ = null, toK = null }) {
  const seg = (u) => (exp.segments[u[0]] === 0 ? 'A' : 'B');
  let count = 0;
  for (const h of heads) {
    const { us, m, M } = expectedMatrix(exp, layer, h, { hide, words });
    for (let a = 0; a < m; a++) {
      if (fromQ !== null && a !== fromQ) continue;
      if (pair !== 'all' && seg(us[a]) !== pair[0]) continue;
      for (let b = 0; b < m; b++) {
        if (toK !== null && b !== toK) continue;
        if (pair !== 'all' && seg(us[b]) !== pair[1]) continue;
        const w = M[a * m + b];
        if (w > 0 && w >= thr && !isMasked(exp, us[a], us[b])) count++;
      }
    }
  }
  return count;
}

/** A slider-reachable threshold (multiple of 0.001) at or above `target` that no shown weight can
 *  cross through storage error (see expectedMatrix's B; `e` is the storage error of one weight),
 *  over all heads or only the [layer, head] pairs in `only`. */
export function safeThreshold(exp, target, opts = {}, e = 0.5 / 65535, only = null) {
  const all = [];
  for (let l = 0; l < exp.layers; l++) for (let h = 0; h < exp.heads; h++) {
    if (!only || only.some(([ol, oh]) => ol === l && (oh === null || oh === h))) all.push(expectedMatrix(exp, l, h, opts, e));
  }
  for (let t = Math.round(target * 1000); t < 500; t++) {
    const thr = t / 1000;
    if (all.every(({ M, B }) => M.every((w, i) => Math.abs(w - thr) > B[i] + 1e-6))) return thr;
  }
  throw new Error('no safe threshold');
}

export const range = (n) => Array.from({ length: n }, (_, i) => i);

/* ------------------------------------------------------------- colours and geometry */

/** An `rgb(…)`/`rgba(…)` or `#rrggbb` CSS colour as [r, g, b, a]. */
export function parseColor(css) {
  if (css.startsWith('#')) {
    const v = parseInt(css.slice(1), 16);
    return [(v >> 16) & 255, (v >> 8) & 255, v & 255, 1];
  }
  const m = css.match(/[\d.]+/g).map(Number);
  return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1];
}

/** WCAG 2.1 relative luminance and contrast ratio (https://www.w3.org/TR/WCAG21/#dfn-contrast-ratio). */
export function relativeLuminance([r, g, b]) {
  const ch = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
  return 0.2126 * ch(r) + 0.7152 * ch(g) + 0.0722 * ch(b);
}
export function contrastRatio(a, b) {
  const x = relativeLuminance(a);
  const y = relativeLuminance(b);
  return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05);
}

/** WCAG's minimum contrast for graphical objects needed to understand content (SC 1.4.11). */
export const MIN_GRAPHIC_CONTRAST = 3;

/** Offsets of head (l, h)'s query and key vectors of token t in the vectors sidecar: queries are
 *  [layers, heads, n, d], keys [layers, kv heads, n, d], head h reading key/value head kv_head[h]. */
function vectorOffsets(exp, l, h) {
  const d = exp.head_dim;
  const kv = exp.kv_head || range(exp.heads);
  const kvHeads = Math.max(...kv) + 1;
  return {
    q: (t) => ((l * exp.heads + h) * exp.n + t) * d,
    k: (t) => ((l * kvHeads + kv[h]) * exp.n + t) * d,
  };
}

/** q·k/√d of query q against every key of head (l, h), from the vectors sidecar (f64 sums). */
export function expectedScores(exp, vec, l, h, q) {
  const d = exp.head_dim;
  const off = vectorOffsets(exp, l, h);
  const scores = [];
  for (let k = 0; k < exp.n; k++) {
    let s = 0;
    for (let i = 0; i < d; i++) s += vec.queries[off.q(q) + i] * vec.keys[off.k(k) + i];
    scores.push(s / Math.sqrt(d));
  }
  return scores;
}

/** softmax(q·k/√d) of query q over the keys it sees (all, or under a causal mask keys 0..q), from
 *  the vectors sidecar; masked keys get null. */
export function expectedSoftmax(exp, vec, l, h, q) {
  const scores = expectedScores(exp, vec, l, h, q);
  const seen = scores.map((_, k) => !(exp.mask === 'causal' && k > q));
  const top = Math.max(...scores.filter((_, k) => seen[k]));
  const ex = scores.map((s, k) => (seen[k] ? Math.exp(s - top) : 0));
  const z = ex.reduce((a, b) => a + b, 0);
  return ex.map((e, k) => (seen[k] ? e / z : null));
}

/** Largest |entry| of q and of every key of head (l, h) (the neuron view's vector colour scale),
 *  and of q∘k (its product scale). */
export function expectedVectorScales(exp, vec, l, h, q) {
  const d = exp.head_dim;
  const o = vectorOffsets(exp, l, h);
  const off = (t) => o.q(t);
  const offK = (t) => o.k(t);
  let v = 0;
  let p = 0;
  for (let i = 0; i < d; i++) v = Math.max(v, Math.abs(vec.queries[off(q) + i]));
  for (let k = 0; k < exp.n; k++) {
    for (let i = 0; i < d; i++) {
      const x = vec.keys[offK(k) + i];
      v = Math.max(v, Math.abs(x));
      // A masked key (causal: after the query) has no product in the view.
      if (!(exp.mask === 'causal' && k > q)) p = Math.max(p, Math.abs(x * vec.queries[off(q) + i]));
    }
  }
  return { vector: v, product: p };
}

/** Head (l, h)'s largest weight (to find thumbnails that must show a near-opaque line). */
export function maxWeight(exp, l, h) {
  let m = 0;
  for (let q = 0; q < exp.n; q++) for (let k = 0; k < exp.n; k++) m = Math.max(m, rawWeight(exp, l, h, q, k));
  return m;
}

/** OKLab hue angle (radians) of an sRGB colour (Ottosson 2020). */
export function oklabHue([r, g, b]) {
  const lin = (c) => { c /= 255; return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
  const [R, G, B] = [lin(r), lin(g), lin(b)];
  const l = Math.cbrt(0.4122214708 * R + 0.5363325363 * G + 0.0514459929 * B);
  const m = Math.cbrt(0.2119034982 * R + 0.6806995451 * G + 0.1073969566 * B);
  const s = Math.cbrt(0.0883024619 * R + 0.2817188376 * G + 0.6299787005 * B);
  const a = 1.9779984951 * l - 2.4285922050 * m + 0.4505937099 * s;
  const bb = 0.0259040371 * l + 0.7827717662 * m - 0.8086757660 * s;
  return Math.atan2(bb, a);
}

/** Angle between two hues, 0…π. */
export function hueDistance(x, y) {
  const d = Math.abs(x - y) % (2 * Math.PI);
  return d > Math.PI ? 2 * Math.PI - d : d;
}
