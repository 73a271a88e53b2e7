/* attnviz report: the data. Reads the metadata block and the base64 payload written by
 * src/render/html.rs, decodes the attention once (quantised integers, never copied to floats), and
 * holds the page state and the units (tokens or merged words) every view draws.
 *
 * src/render/html.rs joins the files in assets/report/ into one script inside one function scope,
 * in this order: data, common, the five views, page. Layers and heads are numbered from 0.
 */

const $ = (id) => document.getElementById(id);
const META = JSON.parse($('attnviz-meta').textContent);
/** The page's place in the URL fragment: `#kind=cross&view=matrix` (kind and view). */
const HASH = new URLSearchParams(location.hash.replace(/^#/, ''));
/**
 * The kinds of a report of several (an encoder–decoder's encoder, decoder and cross-attention),
 * each with its own units, layers, heads and sections; null for a report of one. The page shows
 * one kind at a time: `meta` is the chosen kind laid over the shared fields, so every view reads
 * `meta` alone; switching kinds boots the page again for the new kind (see src/render/html.rs).
 */
const KINDS = Array.isArray(META.kinds) && META.kinds.length ? META.kinds : null;
/** The kind and view asked for: carried over from the kind switched from, else the fragment. */
const ASKED_KIND = carry.kind || HASH.get('kind');
const ASKED_VIEW = carry.view || HASH.get('view');
const meta = KINDS
  ? Object.assign({}, META, KINDS.find((k) => k.kind === ASKED_KIND) ||
    KINDS.find((k) => k.kind === META.open_kind) || KINDS[0])
  : META;
/** Whether keys are other units than the queries (cross-attention: decoder × encoder). */
const SQUARE = !meta.keys;
/** The key side's metadata (tokens, roles, …): the query side's unless the keys differ. */
const KMETA = SQUARE ? meta : Object.assign({ level: meta.level }, meta.keys);
/** Query units (rows) and key units (columns). */
const N = meta.tokens.length;
const NK = KMETA.tokens.length;
/** What the two sides are called: query/key, or for cross-attention decoder/encoder. */
const SIDE_NAMES = SQUARE ? ['query', 'key'] : ['decoder', 'encoder'];
/** How the page names a kind. */
const KIND_LABELS = { encoder: 'Encoder', decoder: 'Decoder', cross: 'Cross', self: 'Self' };
const SECTION_NAMES = meta.sections || { attention: 'attention', query: 'query', key: 'key' };
const L = meta.model.layers;
const H = meta.model.heads;
const D = meta.model.head_dim;
/** The model's number of each captured layer (`--layers` may capture some only). */
const LAYER_NUMBERS = meta.layer_numbers || Array.from({ length: L }, (_, l) => l);
/** How a layer is named on the page: its number in the model. */
const layerName = (l) => String(LAYER_NUMBERS[l]);
const isPair = meta.sentence_b_start !== null && meta.sentence_b_start !== undefined;
/** Whether token i is a special token, by its role (never by its label). */
const SPECIAL = meta.roles.map(isSpecialRole);
/**
 * The two sides of the attention: queries (rows) and keys (columns), one object when they are
 * the same units. Each holds its metadata, token count, special flags and its caches.
 */
const sideOf = (d, special) => ({
  data: d, n: d.tokens.length, special, generated: (d.generated || []).map(Boolean),
  // Display texts (src/attention/display.rs); a report without them shows its labels made visible.
  display: Array.isArray(d.display) && d.display.length === d.tokens.length ? d.display : d.tokens.map(visibleText),
  // Reaction arrows (`>>` in reaction SMILES): the views draw a divider before each.
  arrows: new Set(d.arrows || []),
  keptCache: null, unitsCache: null, namesCache: null,
});
const QSIDE = sideOf(meta, SPECIAL);
const KSIDE = SQUARE ? QSIDE : sideOf(KMETA, KMETA.roles.map(isSpecialRole));
/** A causal mask: query q cannot see a key after it (token positions). */
const CAUSAL = meta.mask === 'causal';
/** How many tokens at the start see each other in full (a prefix-LM mask); 0 for none. */
const PREFIX = meta.prefix_tokens || 0;
/** Each captured layer's sliding window (null: none): Mistral, Gemma, Qwen with windows. */
const WINDOWS = meta.windows || [];
/** The key/value head each query head reads; several share one under grouped-query attention. */
const KV = Array.isArray(meta.kv_head) && meta.kv_head.length === H ? meta.kv_head : Array.from({ length: H }, (_, h) => h);
const KVH = Math.max(...KV) + 1;
const GROUPED = KVH < H;
/** Rotary position embeddings: the query and key vectors are the rotated ones. */
const ROTARY = meta.positions === 'rotary';
/** Which units the model generated (they follow the prompt), and the first of them (-1: none). */
const GENERATED = (meta.generated || []).map(Boolean);
const FIRST_GEN = GENERATED.indexOf(true);
/** The attention sink of a causal model, the unit at the model's first position; null if none. */
const SINK = meta.sink === undefined ? null : meta.sink;
const analysis = meta.analysis || { stats: [], head_labels: null, matrices: [] };
const stats = analysis.stats || [];
const VIEWS = ['head', 'model', 'matrix', 'neuron', 'stats', 'image', 'lens', 'heads', 'speech', 'router', 'mixing'];

/* ------------------------------------------------------------------ data */

/** Decoded payload sections, by name: {values, lo, step, dtype, maxError}. */
const sections = {};
/** Quantised attention [L][H][N][N] and the value of one quantisation step. */
let att = null;
let attStep = 1;

function base64ToBytes(text) {
  text = text.trim();
  if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(text);
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

async function gunzip(bytes) {
  if (typeof DecompressionStream !== 'function') {
    throw new Error('This browser cannot decompress the report (it lacks DecompressionStream). ' +
      'Open it in a current Chromium, Firefox or Safari.');
  }
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** Undo the byte planes of one section (see src/render/html/payload.rs). */
function decodeSection(raw, s) {
  const n = s.length;
  const at = s.offset;
  let values;
  if (s.dtype === 'u8') {
    values = raw.subarray(at, at + n);
  } else if (s.dtype === 'u16') {
    values = new Uint16Array(n);
    const lo = raw.subarray(at, at + n);
    const hi = raw.subarray(at + n, at + 2 * n);
    for (let i = 0; i < n; i++) values[i] = lo[i] | (hi[i] << 8);
  } else if (s.dtype === 'f32') {
    const bytes = new Uint8Array(4 * n);
    for (let p = 0; p < 4; p++) {
      const plane = raw.subarray(at + p * n, at + (p + 1) * n);
      for (let i = 0; i < n; i++) bytes[4 * i + p] = plane[i];
    }
    values = new Float32Array(bytes.buffer);
  } else {
    throw new Error('unknown section type ' + s.dtype);
  }
  const levels = s.dtype === 'u8' ? 255 : s.dtype === 'u16' ? 65535 : 1;
  return { values, lo: s.lo, step: (s.hi - s.lo) / levels, dtype: s.dtype, maxError: s.max_error };
}

async function loadPayload() {
  if (META.format !== 2) throw new Error('This report has format ' + meta.format + '; this page reads format 2.');
  if (!RAW) {
    const el = $('attnviz-data');
    let raw = base64ToBytes(el.textContent);
    el.textContent = ''; // free the base64 text
    if (meta.payload.compression === 'gzip') raw = await gunzip(raw);
    if (raw.length !== meta.payload.raw_bytes) {
      throw new Error('The report data is damaged: ' + raw.length + ' bytes instead of ' + meta.payload.raw_bytes + '.');
    }
    RAW = raw;
  }
  const raw = RAW;
  // Only this kind's sections (a report of several kinds holds theirs too).
  const own = new Set([SECTION_NAMES.attention, SECTION_NAMES.query, SECTION_NAMES.key,
    SECTION_NAMES.sinks, SECTION_NAMES.router,
    ...((meta.analysis && meta.analysis.matrices) || []).map((m) => m.section)]);
  for (const s of META.payload.sections) {
    if (own.has(s.name)) sections[s.name.split(':')[0] === 'matrix' ? s.name : s.name.split(':')[0]] = decodeSection(raw, s);
  }
  att = sections.attention.values;
  attStep = sections.attention.step;
}

/* ----------------------------------------------------------------- state */

const state = {
  view: VIEWS.includes(ASKED_VIEW) ? ASKED_VIEW : VIEWS.includes(meta.initial.view) ? meta.initial.view : 'head',
  layer: Math.min(L - 1, Math.max(0, meta.initial.layer)),
  head: Math.min(H - 1, Math.max(0, meta.initial.head)),
  // No head is picked on load (the head view shows them all); a click, ← → or a head menu picks
  // one, and only then is it outlined.
  headPicked: false,
  shown: new Array(H).fill(true),
  hideSpecial: false,
  words: false,
  threshold: meta.initial.threshold,
  pair: 'all',
  hover: null, // {side: 'left' | 'right', unit}
  hoverHead: null, // the head under the pointer in the head view's legend
  thumbStyle: Math.max(N, NK) <= 64 ? 'lines' : 'heatmap',
  // The matrix view's colour scale: auto (square root over 64 units or when the first column
  // holds most of the attention, else linear), max (linear to the largest value), one, sqrt, log.
  matrixScale: 'auto',
  // One colour scale for both matrix panels (the largest value of either).
  matrixShared: false,
  matrixRight: 'mean',
  groupKv: false,
  // Label tokens by their raw vocabulary pieces (`Ġquick`) instead of their display texts.
  rawTokens: Boolean(meta.initial.raw_tokens),
  // The first ordinary token; under a causal mask the last, which sees every key.
  neuronQuery: CAUSAL ? Math.max(0, N - 1 - SPECIAL.slice().reverse().findIndex((s) => !s)) % N
    : Math.max(0, SPECIAL.findIndex((s) => !s)),
  stat: stats.length ? stats[0].id : null,
  theme: 'auto',
};

const canHideSpecial = !meta.special_excluded &&
  [QSIDE, KSIDE].some((sd) => sd.special.some(Boolean)) && QSIDE.special.some((s) => !s) && KSIDE.special.some((s) => !s);

/**
 * How the page names the special tokens: the labels of the start and end tokens (`[CLS]/[SEP]`,
 * `<s>/</s>`), else "special tokens".
 */
const SPECIAL_NAMES = (() => {
  const names = [];
  for (const role of ['start', 'end', 'pad', 'special']) {
    const labels = [];
    for (const d of SQUARE ? [meta] : [meta, KMETA]) {
      d.roles.forEach((r, i) => { if (r === role && !labels.includes(d.tokens[i])) labels.push(d.tokens[i]); });
    }
    if (labels.length) names.push(labels.join('/'));
  }
  return names.length && names.length <= 3 ? names.join('/') : 'special tokens';
})();
state.hideSpecial = Boolean(meta.initial.hide_special) && canHideSpecial;

/** A vision-language model's pictures (bands.js), each one band of the matrix views unless
 *  expanded; none for cross-attention. */
const PICTURES = SQUARE ? picturesOf(meta, N) : [];
/** Whether query token q and key token k are image tokens of one picture that sees itself in
 *  full (Gemma 3), whatever their order. */
function seeEachOther(q, k) {
  const p = pictureOfToken(PICTURES, q);
  return p >= 0 && PICTURES[p].bidirectional && pictureOfToken(PICTURES, k) === p;
}
state.expanded = PICTURES.map(() => false);

/** Tokens kept on a side (the query side unless given): all, or all but the special tokens
 *  when they are hidden. */
function keptTokens(side = QSIDE) {
  if (!side.keptCache || side.keptCache.hide !== state.hideSpecial) {
    const list = [];
    for (let i = 0; i < side.n; i++) if (!(state.hideSpecial && side.special[i])) list.push(i);
    side.keptCache = { hide: state.hideSpecial, list };
  }
  return side.keptCache.list;
}

/** Word key of token i (see words.js) on a side, or null for tokens that stand alone. */
function wordKey(i, side = QSIDE) { return wordKeyOf(side.data, i); }
const canMerge = (side) => side.data.tokens.some((_, i) => i > 0 && wordKey(i, side) !== null && wordKey(i, side) === wordKey(i - 1, side));
const canMergeWords = meta.level === 'token' && (canMerge(QSIDE) || canMerge(KSIDE));
state.words = Boolean(meta.initial.words) && canMergeWords;

/* New data drawn in place (window.attnviz.load, page.js) keeps the reader's place where it still
 * fits: layer and head (the heads shown where their number is the same), the toggles, the matrix
 * settings, the statistic, the theme. */
if (carry.keep) {
  const k = carry.keep;
  state.layer = Math.min(L - 1, Math.max(0, k.layer));
  state.head = Math.min(H - 1, Math.max(0, k.head));
  state.headPicked = k.headPicked;
  if (Array.isArray(k.shown) && k.shown.length === H) state.shown = k.shown.slice();
  state.hideSpecial = k.hideSpecial && canHideSpecial;
  state.words = k.words && canMergeWords;
  state.rawTokens = k.rawTokens;
  state.groupKv = k.groupKv && KVH < H;
  state.threshold = k.threshold;
  if (isPair) state.pair = k.pair;
  state.matrixScale = k.matrixScale;
  state.matrixShared = k.matrixShared;
  state.matrixRight = k.matrixRight;
  if (Array.isArray(k.expanded) && k.expanded.length === PICTURES.length) state.expanded = k.expanded.slice();
  if (stats.some((s) => s.id === k.stat)) state.stat = k.stat;
}

/**
 * The rows (query side, the default) or columns (key side) every view but the neuron view shows
 * ("units"): one per kept token, or, with word pieces merged, one per word. `ofToken[i]` is the
 * unit of token i (-1 if hidden).
 */
function units(side = QSIDE) {
  const c = side.unitsCache;
  const bands = String(state.expanded);
  if (!c || c.hide !== state.hideSpecial || c.words !== state.words || c.raw !== state.rawTokens || c.bands !== bands) {
    const d = side.data;
    const list = bandUnits(groupUnits(d, keptTokens(side), state.words), PICTURES, state.expanded);
    const ofToken = new Int32Array(side.n).fill(-1);
    // What each unit is called: its raw label or display text (a merged word's text made
    // visible), then, where that repeats on this side, its first token's number (`C₇`).
    const shown = { tokens: state.rawTokens ? d.tokens : side.display, surfaces: d.surfaces };
    list.forEach((u, a) => {
      const first = u.tokens[0];
      u.text = u.band ? u.label : state.words ? wordLabel(shown, u.tokens) : shown.tokens[first];
      if (state.words && !state.rawTokens) u.text = visibleText(u.text);
      u.special = side.special[first];
      u.seg = d.segments[first] === 0 ? 'A' : 'B';
      u.generated = Boolean(side.generated[first]);
      u.sink = side === QSIDE && SINK !== null && u.tokens.includes(SINK);
      u.arrow = u.tokens.some((i) => side.arrows.has(i));
      for (const i of u.tokens) ofToken[i] = a;
    });
    const names = positionedLabels(list.map((u) => u.text), list.map((u) => u.tokens[0]));
    list.forEach((u, a) => { u.label = names[a]; });
    const firstGen = list.findIndex((u) => u.generated);
    side.unitsCache = { hide: state.hideSpecial, words: state.words, raw: state.rawTokens, bands, list, ofToken, firstGen };
  }
  return side.unitsCache;
}

/** The key units (columns): the query units themselves unless the keys are other units. */
function keyUnits() { return units(KSIDE); }

/** Per-row factor turning a stored integer into the shown weight for head (l, h): the
 *  quantisation step, divided by the row's mass on kept keys when special tokens are hidden. */
const rowScaleCache = new Map();
function rowScale(l, h) {
  const key = l * H + h;
  let rs = rowScaleCache.get(key);
  if (rs) return rs;
  rs = new Float64Array(N);
  if (!state.hideSpecial) {
    rs.fill(attStep);
  } else {
    const kept = keptTokens(KSIDE);
    const base = key * N * NK;
    for (let q = 0; q < N; q++) {
      let sum = 0;
      const row = base + q * NK;
      for (const k of kept) sum += att[row + k];
      rs[q] = sum > 0 ? 1 / sum : 0;
    }
  }
  rowScaleCache.set(key, rs);
  return rs;
}

/** The shown token-level weight: how much token q attends to token k in layer l, head h. */
function weight(l, h, q, k) {
  return att[((l * H + h) * N + q) * NK + k] * rowScale(l, h)[q];
}

/**
 * A query units × key units matrix from token rows. `readRow(q, buf)` writes the shown weight of
 * token q to each kept key token k into buf[k]. Attention *to* a word is the sum over its pieces,
 * attention *from* a word the mean over its pieces (rows renormalised first when specials are
 * hidden).
 */
const rowBuf = new Float64Array(NK);
function unitsFromTokens(readRow) {
  const { list } = units();
  const { list: klist, ofToken } = keyUnits();
  const m = list.length;
  const mk = klist.length;
  const kept = keptTokens(KSIDE);
  const out = new Float32Array(m * mk);
  for (let a = 0; a < m; a++) {
    const u = list[a];
    const base = a * mk;
    for (const q of u.tokens) {
      readRow(q, rowBuf);
      for (const k of kept) out[base + ofToken[k]] += rowBuf[k];
    }
    if (u.tokens.length > 1) for (let b = 0; b < mk; b++) out[base + b] /= u.tokens.length;
  }
  return out;
}

/** Head (l, h) over the shown units, row = query unit, column = key unit (m × mk, row-major).
 *  Cached for the current layer. */
const unitCache = new Map();
function unitMatrix(l, h, cache = true) {
  const key = l * H + h;
  if (cache && unitCache.has(key)) return unitCache.get(key);
  const rs = rowScale(l, h);
  const base = key * N * NK;
  let out;
  if (!state.words && !bandsCollapsed()) {
    // Fast path: units are the kept tokens themselves.
    const kept = keptTokens();
    const keptK = keptTokens(KSIDE);
    const m = kept.length;
    const mk = keptK.length;
    out = new Float32Array(m * mk);
    for (let a = 0; a < m; a++) {
      const row = base + kept[a] * NK;
      const s = rs[kept[a]];
      const o = a * mk;
      for (let b = 0; b < mk; b++) out[o + b] = att[row + keptK[b]] * s;
    }
  } else {
    const kept = keptTokens(KSIDE);
    out = unitsFromTokens((q, buf) => {
      const row = base + q * NK;
      const s = rs[q];
      for (const k of kept) buf[k] = att[row + k] * s;
    });
  }
  if (cache) {
    for (const k of unitCache.keys()) if (Math.floor(k / H) !== l) unitCache.delete(k);
    unitCache.set(key, out);
  }
  return out;
}

/** Whether some picture is drawn as one band (its units are not the tokens themselves). */
function bandsCollapsed() { return state.expanded.some((e) => !e); }

function segmentOf(i, side = QSIDE) { return side.data.segments[i] === 0 ? 'A' : 'B'; }

/**
 * Whether query unit a could not see key unit b: under a causal mask, a key that starts after
 * the query ends (token positions). The views ask this rather than assume every cell is visible.
 */
function unitMasked(a, b, layer = null) {
  if (!CAUSAL) return false;
  const list = units().list;
  const q = list[a].tokens;
  const k = keyUnits().list[b].tokens;
  // A prefix-LM mask's prefix (its pictures and prompt) sees itself in full, whatever the window.
  if (PREFIX > 0 && q[0] < PREFIX && k[0] < PREFIX) return false;
  // A picture whose image tokens see each other in full (Gemma 3): its own later tokens too.
  if (k[0] > q[q.length - 1] && !seeEachOther(q[0], k[0])) return true;
  // A layer's sliding window: keys whose last token is `w` or more tokens before the query's
  // first are outside it.
  const w = layer === null ? null : WINDOWS[layer];
  return w !== null && w !== undefined && q[0] >= k[k.length - 1] + w;
}

/** The query heads that read key/value head g. */
function headsOfKv(g) { return KV.map((k, h) => (k === g ? h : -1)).filter((h) => h >= 0); }

/** How the page names head h's key/value head: "kv head 1, shared with heads 3, 5"; '' without
 *  grouped-query attention. */
function kvNote(h) {
  if (!GROUPED) return '';
  const others = headsOfKv(KV[h]).filter((o) => o !== h);
  return 'kv head ' + KV[h] + (others.length ? ', shared with head' + (others.length > 1 ? 's ' : ' ') + others.join(', ') : '');
}

/** Query and key units allowed by the pair filter. */
function pairSides() {
  const all = units().list.map((_, a) => a);
  if (!SQUARE) return [all, keyUnits().list.map((_, b) => b)];
  if (state.pair === 'all') return [all, all];
  const want = (s) => all.filter((a) => units().list[a].seg === s);
  return [want(state.pair[0]), want(state.pair[1])];
}
