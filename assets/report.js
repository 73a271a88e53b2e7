/* attnviz report script.
 *
 * Reads the metadata block and the base64 payload written by src/render/html.rs, decodes the
 * attention once (quantised integers, never copied to floats) and draws five views: head, model,
 * matrix, neuron and stats. No network, no libraries. Everything a user typed reaches the page
 * through textContent or canvas fillText, never through HTML parsing.
 *
 * Layers and heads are numbered from 0, as everywhere in attnviz.
 */
(function () {
  'use strict';

  const $ = (id) => document.getElementById(id);
  const meta = JSON.parse($('attnviz-meta').textContent);
  const N = meta.tokens.length;
  const L = meta.model.layers;
  const H = meta.model.heads;
  const D = meta.model.head_dim;
  const isPair = meta.sentence_b_start !== null && meta.sentence_b_start !== undefined;
  const analysis = meta.analysis || { stats: [], head_labels: null, matrices: [] };
  const stats = analysis.stats || [];
  const VIEWS = ['head', 'model', 'matrix', 'neuron', 'stats'];

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
    if (meta.format !== 1) throw new Error('This report has format ' + meta.format + '; this page reads format 1.');
    const el = $('attnviz-data');
    let raw = base64ToBytes(el.textContent);
    el.textContent = ''; // free the base64 text
    if (meta.payload.compression === 'gzip') raw = await gunzip(raw);
    if (raw.length !== meta.payload.raw_bytes) {
      throw new Error('The report data is damaged: ' + raw.length + ' bytes instead of ' + meta.payload.raw_bytes + '.');
    }
    for (const s of meta.payload.sections) sections[s.name] = decodeSection(raw, s);
    att = sections.attention.values;
    attStep = sections.attention.step;
  }

  /* ----------------------------------------------------------------- state */

  const state = {
    view: VIEWS.includes(meta.initial.view) ? meta.initial.view : 'head',
    layer: meta.initial.layer,
    head: meta.initial.head,
    shown: new Array(H).fill(true),
    hideSpecial: false,
    words: false,
    threshold: meta.initial.threshold,
    pair: 'all',
    hover: null, // {side: 'left' | 'right', unit}
    thumbStyle: N <= 64 ? 'lines' : 'heatmap',
    matrixScale: 'max',
    matrixRight: 'mean',
    neuronQuery: Math.max(0, meta.special.findIndex((s) => !s)),
    stat: stats.length ? stats[0].id : null,
    theme: 'auto',
  };

  const canHideSpecial = !meta.special_excluded && meta.special.some(Boolean) && meta.special.some((s) => !s);
  state.hideSpecial = Boolean(meta.initial.hide_special) && canHideSpecial;

  /** Tokens kept: all, or all but [CLS]/[SEP] when they are hidden. */
  let keptCache = null;
  function keptTokens() {
    if (!keptCache || keptCache.hide !== state.hideSpecial) {
      const list = [];
      for (let i = 0; i < N; i++) if (!(state.hideSpecial && meta.special[i])) list.push(i);
      keptCache = { hide: state.hideSpecial, list };
    }
    return keptCache.list;
  }

  /** Word key of token i (segment and word id), or null for tokens that stand alone. */
  function wordKey(i) {
    const w = meta.word_ids[i];
    return w === null || w === undefined || meta.special[i] ? null : meta.segments[i] + ':' + w;
  }
  const canMergeWords = meta.level === 'token' &&
    meta.tokens.some((_, i) => i > 0 && wordKey(i) !== null && wordKey(i) === wordKey(i - 1));
  state.words = Boolean(meta.initial.words) && canMergeWords;

  /**
   * The rows and columns every view but the neuron view shows ("units"): one per kept token, or,
   * with word pieces merged, one per word. `ofToken[i]` is the unit of token i (-1 if hidden).
   */
  let unitsCache = null;
  function units() {
    if (!unitsCache || unitsCache.hide !== state.hideSpecial || unitsCache.words !== state.words) {
      const list = [];
      const ofToken = new Int32Array(N).fill(-1);
      let prev = null;
      for (const i of keptTokens()) {
        const key = state.words ? wordKey(i) : null;
        if (key !== null && key === prev) {
          const u = list[list.length - 1];
          u.tokens.push(i);
          u.label += tokenLabel(i).replace(/^##/, '');
        } else {
          list.push({ label: tokenLabel(i), tokens: [i], special: meta.special[i], seg: segmentOf(i) });
        }
        ofToken[i] = list.length - 1;
        prev = key;
      }
      unitsCache = { hide: state.hideSpecial, words: state.words, list, ofToken };
    }
    return unitsCache;
  }

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
      const kept = keptTokens();
      const base = key * N * N;
      for (let q = 0; q < N; q++) {
        let sum = 0;
        const row = base + q * N;
        for (const k of kept) sum += att[row + k];
        rs[q] = sum > 0 ? 1 / sum : 0;
      }
    }
    rowScaleCache.set(key, rs);
    return rs;
  }

  /** The shown token-level weight: how much token q attends to token k in layer l, head h. */
  function weight(l, h, q, k) {
    return att[((l * H + h) * N + q) * N + k] * rowScale(l, h)[q];
  }

  /**
   * A units × units matrix from token rows. `readRow(q, buf)` writes the shown weight of token q
   * to each kept token k into buf[k]. Attention *to* a word is the sum over its pieces, attention
   * *from* a word the mean over its pieces (rows renormalised first when specials are hidden).
   */
  const rowBuf = new Float64Array(N);
  function unitsFromTokens(readRow) {
    const { list, ofToken } = units();
    const m = list.length;
    const kept = keptTokens();
    const out = new Float32Array(m * m);
    for (let a = 0; a < m; a++) {
      const u = list[a];
      const base = a * m;
      for (const q of u.tokens) {
        readRow(q, rowBuf);
        for (const k of kept) out[base + ofToken[k]] += rowBuf[k];
      }
      if (u.tokens.length > 1) for (let b = 0; b < m; b++) out[base + b] /= u.tokens.length;
    }
    return out;
  }

  /** Head (l, h) over the shown units, row = query. Cached for the current layer. */
  const unitCache = new Map();
  function unitMatrix(l, h, cache = true) {
    const key = l * H + h;
    if (cache && unitCache.has(key)) return unitCache.get(key);
    const rs = rowScale(l, h);
    const base = key * N * N;
    let out;
    if (!state.words) {
      // Fast path: units are the kept tokens themselves.
      const kept = keptTokens();
      const m = kept.length;
      out = new Float32Array(m * m);
      for (let a = 0; a < m; a++) {
        const row = base + kept[a] * N;
        const s = rs[kept[a]];
        const o = a * m;
        for (let b = 0; b < m; b++) out[o + b] = att[row + kept[b]] * s;
      }
    } else {
      const kept = keptTokens();
      out = unitsFromTokens((q, buf) => {
        const row = base + q * N;
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

  function segmentOf(i) { return meta.segments[i] === 0 ? 'A' : 'B'; }

  /** Query and key units allowed by the pair filter. */
  function pairSides() {
    const all = units().list.map((_, a) => a);
    if (state.pair === 'all') return [all, all];
    const want = (s) => all.filter((a) => units().list[a].seg === s);
    return [want(state.pair[0]), want(state.pair[1])];
  }

  /* ---------------------------------------------------------------- colours */

  const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948',
    '#b07aa1', '#ff9da7', '#9c755f', '#8f8a87', '#17a2b8', '#d37295'];
  function headColor(h) {
    if (h < PALETTE.length) return PALETTE[h];
    return 'hsl(' + ((h * 137.508) % 360).toFixed(1) + ', 62%, 55%)';
  }
  function hexToRgb(hex) {
    const v = parseInt(hex.slice(1), 16);
    return [(v >> 16) & 255, (v >> 8) & 255, v & 255];
  }
  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  // Viridis, 17 stops; linear interpolation between them is within 2/255 of the full table.
  const VIRIDIS = ['#440154', '#481a6c', '#472f7d', '#414487', '#39568c', '#31688e', '#2a788e',
    '#23888e', '#1f988b', '#22a884', '#35b779', '#54c568', '#7ad151', '#a5db36', '#d2e21b',
    '#fde725', '#fde725'].map(hexToRgb);
  const LUT = new Uint8Array(256 * 3);
  for (let i = 0; i < 256; i++) {
    const x = (i / 255) * 15;
    const a = Math.floor(x);
    const f = x - a;
    for (let c = 0; c < 3; c++) LUT[i * 3 + c] = Math.round(VIRIDIS[a][c] * (1 - f) + VIRIDIS[a + 1][c] * f);
  }
  function lutIndex(x) { return Math.max(0, Math.min(255, Math.round(x * 255))); }
  function lutCss(x) {
    const i = lutIndex(x) * 3;
    return 'rgb(' + LUT[i] + ',' + LUT[i + 1] + ',' + LUT[i + 2] + ')';
  }
  function drawColorbar(canvas) {
    const w = 160;
    canvas.width = w;
    canvas.height = 1;
    const ctx = canvas.getContext('2d');
    const img = ctx.createImageData(w, 1);
    for (let x = 0; x < w; x++) {
      const i = lutIndex(x / (w - 1)) * 3;
      img.data.set([LUT[i], LUT[i + 1], LUT[i + 2], 255], x * 4);
    }
    ctx.putImageData(img, 0, 0);
  }

  /* --------------------------------------------------------------- helpers */

  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (k === 'text') e.textContent = v;
        else if (k === 'class') e.className = v;
        else if (k === 'dataset') Object.assign(e.dataset, v);
        else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
        else e.setAttribute(k, v);
      }
    }
    for (const c of children) e.append(c);
    return e;
  }

  function fmtWeight(v) {
    return sections.attention.dtype === 'u8' ? v.toFixed(3) : v.toFixed(5);
  }
  function fmtNum(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return 'n/a';
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(2);
    return v.toFixed(digits === undefined ? 3 : digits);
  }
  function tokenLabel(i) { return meta.tokens[i]; }
  function describeToken(i) {
    return '"' + tokenLabel(i) + '" (#' + i + (isPair ? ', ' + segmentOf(i) : '') + ')';
  }
  /** A unit as text: its label and the token numbers it covers. */
  function describeUnit(a) {
    const u = units().list[a];
    const t = u.tokens;
    const where = t.length === 1 ? '#' + t[0] : 'tokens #' + t[0] + '–' + t[t.length - 1];
    return '"' + u.label + '" (' + where + (isPair ? ', ' + u.seg : '') + ')';
  }
  function fmtBytes(b) {
    if (b < 1024) return b + ' B';
    if (b < 1024 * 1024) return (b / 1024).toFixed(1) + ' KiB';
    return (b / 1024 / 1024).toFixed(1) + ' MiB';
  }

  /** Size a canvas for CSS size (w, h) at the device pixel ratio; returns its 2D context. */
  function sizeCanvas(canvas, w, h) {
    const dpr = Math.min(window.devicePixelRatio || 1, 2);
    const pw = Math.max(1, Math.round(w * dpr));
    const ph = Math.max(1, Math.round(h * dpr));
    // Reallocating the backing store (and restyling) on every frame is measurable at 512 tokens.
    if (canvas.width !== pw || canvas.height !== ph) {
      canvas.width = pw;
      canvas.height = ph;
      canvas.style.width = w + 'px';
      canvas.style.height = h + 'px';
    }
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.globalAlpha = 1;
    ctx.clearRect(0, 0, w, h);
    return ctx;
  }

  let measureCtx = null;
  function textWidth(text, font) {
    measureCtx = measureCtx || document.createElement('canvas').getContext('2d');
    measureCtx.font = font;
    return measureCtx.measureText(text).width;
  }
  const FONT_FAMILY = getComputedStyle(document.body).fontFamily;

  const tooltip = $('tooltip');
  function showTip(text, x, y) {
    tooltip.textContent = text;
    tooltip.hidden = false;
    const r = tooltip.getBoundingClientRect();
    const left = x + 14 + r.width > window.innerWidth ? x - r.width - 10 : x + 14;
    const top = y + 16 + r.height > window.innerHeight ? y - r.height - 10 : y + 16;
    tooltip.style.left = Math.max(0, left) + 'px';
    tooltip.style.top = Math.max(0, top) + 'px';
  }
  function hideTip() { tooltip.hidden = true; }

  /* ------------------------------------------------------------ scheduling */

  /** What the last render drew; read by the browser tests and the benchmark. */
  const drawn = { view: null, seq: 0, lines: 0, perHead: new Array(H).fill(0), ms: 0, thumbs: 0 };
  const timings = {};
  let pending = false;
  let settleWaiters = [];
  /** Render at the next animation frame (for scroll, resize and theme changes). */
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      if (pending) renderNow();
    });
  }
  /** Render now (for user actions: the result is in the very next frame). */
  function renderNow() {
    pending = false;
    render();
    const waiters = settleWaiters;
    settleWaiters = [];
    waiters.forEach((w) => w());
  }
  function settled() {
    return new Promise((resolve) => {
      if (!pending) resolve();
      else settleWaiters.push(resolve);
    });
  }

  function render() {
    const t0 = performance.now();
    syncControls();
    if (state.view === 'head') renderHead();
    else if (state.view === 'model') renderModel();
    else if (state.view === 'matrix') renderMatrix();
    else if (state.view === 'neuron') renderNeuron();
    else if (state.view === 'stats') renderStats();
    drawn.view = state.view;
    drawn.seq++;
    drawn.ms = performance.now() - t0;
  }

  function invalidateWeights() {
    rowScaleCache.clear();
    unitCache.clear();
    headLayout = null;
    modelGrid.dirty = true;
  }

  function set(patch) {
    const before = { ...state };
    Object.assign(state, patch);
    if (state.hideSpecial !== before.hideSpecial || state.words !== before.words) invalidateWeights();
    if (state.layer !== before.layer || state.words !== before.words || state.hideSpecial !== before.hideSpecial) {
      state.hover = null;
    }
    if (patch.theme !== undefined) applyTheme();
    if (['threshold', 'pair', 'thumbStyle', 'hideSpecial', 'words', 'theme'].some((k) => state[k] !== before[k])) {
      modelGrid.dirty = true;
    }
    renderNow();
  }

  /* --------------------------------------------------------------- controls */

  function setupControls() {
    const layerSel = $('layer-select');
    for (let l = 0; l < L; l++) layerSel.append(el('option', { value: String(l), text: String(l) }));
    layerSel.addEventListener('change', () => set({ layer: Number(layerSel.value) }));

    const headSel = $('head-select');
    for (let h = 0; h < H; h++) headSel.append(el('option', { value: String(h), text: String(h) }));
    headSel.addEventListener('change', () => set({ head: Number(headSel.value) }));

    const hide = $('hide-special');
    hide.disabled = !canHideSpecial;
    hide.addEventListener('change', () => set({ hideSpecial: hide.checked }));

    const words = $('merge-words');
    words.disabled = !canMergeWords;
    $('words-control').title += canMergeWords ? '' : meta.level === 'word'
      ? ' — this report is already at word level'
      : ' — no word in this input is split into pieces';
    words.addEventListener('change', () => set({ words: words.checked }));

    const thr = $('threshold');
    thr.value = String(state.threshold);
    thr.addEventListener('input', () => set({ threshold: Number(thr.value) }));

    const pairBox = $('pair-filter');
    pairBox.hidden = !isPair;
    pairBox.querySelectorAll('button').forEach((b) => {
      b.addEventListener('click', () => set({ pair: b.dataset.pair }));
    });

    document.querySelectorAll('.tab').forEach((t) => {
      t.addEventListener('click', () => set({ view: t.dataset.view }));
    });
    $('tab-stats').hidden = stats.length === 0;

    $('thumb-style').value = state.thumbStyle;
    $('thumb-style').addEventListener('change', (e) => set({ thumbStyle: e.target.value }));
    $('matrix-scale').addEventListener('change', (e) => set({ matrixScale: e.target.value }));

    const right = $('matrix-right-select');
    right.append(el('option', { value: 'mean', text: 'Mean over heads' }));
    for (const m of analysis.matrices || []) right.append(el('option', { value: m.id, text: m.label }));
    right.addEventListener('change', () => set({ matrixRight: right.value }));

    const nq = $('neuron-query');
    for (let i = 0; i < N; i++) nq.append(el('option', { value: String(i), text: i + ': ' + tokenLabel(i) }));
    nq.addEventListener('change', () => set({ neuronQuery: Number(nq.value) }));

    const statSel = $('stat-select');
    for (const s of stats) statSel.append(el('option', { value: s.id, text: s.label }));
    statSel.addEventListener('change', () => set({ stat: statSel.value }));

    $('theme-toggle').addEventListener('click', () => {
      const order = ['auto', 'light', 'dark'];
      set({ theme: order[(order.indexOf(state.theme) + 1) % 3] });
    });
    $('help-toggle').addEventListener('click', () => toggleHelp());
    window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => {
      if (state.theme === 'auto') { modelGrid.dirty = true; schedule(); }
    });
    document.addEventListener('keydown', onKey);
    window.addEventListener('scroll', () => {
      if (state.view === 'head' && headLayout && headLayout.virtual) schedule();
    }, { passive: true });
    let resizeTimer = 0;
    window.addEventListener('resize', () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(() => { modelGrid.built = false; modelGrid.dirty = true; headLayout = null; schedule(); }, 150);
    });
  }

  /** Bring every shared control in line with the state. */
  function syncControls() {
    $('layer-select').value = String(state.layer);
    $('head-select').value = String(state.head);
    $('hide-special').checked = state.hideSpecial;
    $('merge-words').checked = state.words;
    const wnote = $('words-note');
    wnote.hidden = !(state.words || meta.level === 'word');
    wnote.textContent = meta.level === 'word'
      ? 'Word pieces were merged into words when this report was written: attention to a word is the sum over its pieces, attention from a word the mean over its pieces.'
      : 'Word pieces merged into words: attention to a word is the sum over its pieces, attention from a word the mean over its pieces' +
        (state.hideSpecial ? ' (rows renormalised without [CLS]/[SEP] first)' : '') +
        '. The neuron view stays per token: query and key vectors exist only for tokens.';
    $('threshold').value = String(state.threshold);
    $('threshold-value').textContent = state.threshold.toFixed(3);
    $('pair-filter').querySelectorAll('button').forEach((b) => {
      b.setAttribute('aria-pressed', String(b.dataset.pair === state.pair));
    });
    document.querySelectorAll('.tab').forEach((t) => {
      t.setAttribute('aria-selected', String(t.dataset.view === state.view));
    });
    for (const v of VIEWS) $('view-' + v).hidden = v !== state.view;
    const v = state.view;
    $('head-control').hidden = !(v === 'matrix' || v === 'neuron');
    $('threshold-control').hidden = !(v === 'head' || (v === 'model' && state.thumbStyle === 'lines'));
    $('pair-filter').hidden = !isPair || !(v === 'head' || (v === 'model' && state.thumbStyle === 'lines'));
    $('layer-select').disabled = v === 'model' || v === 'stats';
    $('neuron-query').value = String(state.neuronQuery);
    $('theme-toggle').textContent = 'Theme: ' + state.theme;
    const note = $('special-note');
    if (meta.special_excluded) {
      note.hidden = false;
      note.textContent = '[CLS]/[SEP] were removed when this report was written, and every row was renormalised over the remaining tokens: weights are shares of the attention not given to special tokens.';
    } else if (state.hideSpecial) {
      note.hidden = false;
      note.textContent = '[CLS]/[SEP] hidden: every row is renormalised over the remaining tokens, so weights shown are shares of the attention not given to special tokens (rows that sum to 1 without them).';
    } else {
      note.hidden = true;
    }
  }

  function onKey(e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const tag = e.target && e.target.tagName;
    if (tag === 'INPUT' || tag === 'SELECT' || tag === 'TEXTAREA') {
      if (e.key === 'Escape') e.target.blur();
      return;
    }
    const k = e.key;
    let handled = true;
    if (k === 'ArrowUp' || k === 'k') set({ layer: (state.layer + L - 1) % L });
    else if (k === 'ArrowDown' || k === 'j') set({ layer: (state.layer + 1) % L });
    else if (k === 'ArrowLeft' || k === 'h') set({ head: (state.head + H - 1) % H });
    else if (k === 'ArrowRight' || k === 'l') set({ head: (state.head + 1) % H });
    else if (k === ' ' && !(tag === 'BUTTON')) toggleHead(state.head);
    else if (k === 'Enter' && !(tag === 'BUTTON')) soloHead(state.head);
    else if (k === 'o') soloHead(state.head);
    else if (k === 'a') set({ shown: new Array(H).fill(true) });
    else if (k >= '1' && k <= '5') {
      const v = VIEWS[Number(k) - 1];
      if (v !== 'stats' || stats.length) set({ view: v });
    } else if (k === 's' && canHideSpecial) set({ hideSpecial: !state.hideSpecial });
    else if (k === 'w' && canMergeWords) set({ words: !state.words });
    else if (k === 't') $('theme-toggle').click();
    else if (k === '?') toggleHelp();
    else if (k === 'Escape') toggleHelp(false);
    else handled = false;
    if (handled) e.preventDefault();
  }

  function toggleHelp(show) {
    const help = $('help');
    const open = show === undefined ? help.hidden : show;
    help.hidden = !open;
    $('help-toggle').setAttribute('aria-expanded', String(open));
  }

  function toggleHead(h) {
    const shown = state.shown.slice();
    shown[h] = !shown[h];
    set({ shown, head: h });
  }
  function soloHead(h) {
    set({ shown: state.shown.map((_, i) => i === h), head: h });
  }
  /** Open one head large: head view, that layer, only that head. */
  function openHead(l, h) {
    set({ view: 'head', layer: l, head: h, shown: state.shown.map((_, i) => i === h), hover: null });
    window.scrollTo({ top: 0 });
  }

  /* ------------------------------------------------------------ theme */

  function applyTheme() {
    document.documentElement.dataset.theme = state.theme;
    try { localStorage.setItem('attnviz-theme', state.theme); } catch (e) { /* storage may be off for file:// */ }
  }
  function loadTheme() {
    try {
      const t = localStorage.getItem('attnviz-theme');
      if (t === 'light' || t === 'dark' || t === 'auto') state.theme = t;
    } catch (e) { /* ignore */ }
    document.documentElement.dataset.theme = state.theme;
  }

  /* --------------------------------------------------------------- head view */

  let headLayout = null;
  const LINE_BUCKETS = 64;

  function buildLegend() {
    const legend = $('head-legend');
    legend.textContent = '';
    for (let h = 0; h < H; h++) {
      const sw = el('span', { class: 'swatch' });
      sw.style.background = headColor(h);
      const b = el('button', { type: 'button', title: 'Head ' + h + ': click to toggle, double-click to show only this head', dataset: { head: String(h) } }, sw, String(h));
      b.addEventListener('click', () => toggleHead(h));
      b.addEventListener('dblclick', () => soloHead(h));
      legend.append(b);
    }
  }

  function layoutHead() {
    const list = units().list;
    const m = list.length;
    const rh = m <= 40 ? 22 : m <= 128 ? 17 : 13;
    const fontPx = m <= 40 ? 14 : m <= 128 ? 12 : 10.5;
    const font = fontPx + 'px ' + FONT_FAMILY;
    let maxW = 20;
    for (const u of list) maxW = Math.max(maxW, textWidth(u.label, font));
    const colW = Math.ceil(Math.min(maxW, 260)) + 16;
    const pad = 6;
    const y = new Float64Array(m);
    for (let a = 0; a < m; a++) y[a] = pad + a * rh + rh / 2;
    const height = pad * 2 + m * rh;
    const width = m <= 128 ? 300 : 360;
    for (const side of ['left', 'right']) {
      const col = $('hv-' + side);
      col.textContent = '';
      col.style.width = colW + 'px';
      col.style.height = height + 'px';
      col.style.font = font;
      list.forEach((u, a) => {
        const t = el('div', {
          class: 'tok' + (u.special ? ' special' : '') + (u.seg === 'B' ? ' segB' : ''),
          text: u.label,
          dataset: { unit: String(a), token: String(u.tokens[0]) },
        });
        t.style.top = (y[a] - rh / 2) + 'px';
        t.style.height = rh + 'px';
        t.style.lineHeight = rh + 'px';
        t.title = describeUnit(a);
        t.addEventListener('mouseenter', () => set({ hover: { side, unit: a } }));
        t.addEventListener('mouseleave', () => {
          if (state.hover && state.hover.side === side && state.hover.unit === a) set({ hover: null });
        });
        col.append(t);
      });
    }
    $('hv-mid').style.width = width + 'px';
    $('hv-mid').style.height = height + 'px';
    headLayout = { y, width, height, rh, m };
  }

  /** Line buckets per head: buckets[h][b] holds (y_query, y_key) pairs of weight in bucket b. */
  const headBuckets = Array.from({ length: H }, () => Array.from({ length: LINE_BUCKETS }, () => []));

  function renderHead() {
    if (!headLayout) layoutHead();
    const { y, width, height, m } = headLayout;
    // A canvas no taller than the window, stuck below the top bar; `off` is the layout y of its top.
    const stickyTop = $('topbar').offsetHeight;
    const canvasH = Math.min(height, Math.max(240, window.innerHeight - stickyTop));
    const midTop = $('hv-mid').getBoundingClientRect().top;
    const off = Math.min(Math.max(0, stickyTop - midTop), height - canvasH);
    const canvas = $('hv-canvas');
    canvas.style.top = stickyTop + 'px';
    const ctx = sizeCanvas(canvas, width, canvasH);
    ctx.translate(0, -off);
    const top = off;
    const bottom = off + canvasH;
    headLayout.virtual = canvasH < height;

    const l = state.layer;
    let [qs, ks] = pairSides();
    const hv = state.hover;
    if (hv && hv.side === 'left') qs = qs.includes(hv.unit) ? [hv.unit] : [];
    if (hv && hv.side === 'right') ks = ks.includes(hv.unit) ? [hv.unit] : [];
    const thr = state.threshold;
    let total = 0;
    const opposite = hv ? new Float64Array(m) : null;
    const oppositeHead = hv ? new Int32Array(m).fill(-1) : null;
    for (let h = 0; h < H; h++) {
      const buckets = headBuckets[h];
      for (const b of buckets) b.length = 0;
      drawn.perHead[h] = 0;
      if (!state.shown[h]) continue;
      const M = unitMatrix(l, h);
      let count = 0;
      for (const a of qs) {
        const row = a * m;
        const ya = y[a];
        for (const b of ks) {
          const v = M[row + b];
          if (v <= 0 || v < thr) continue;
          count++;
          if (opposite) {
            const o = hv.side === 'left' ? b : a;
            if (v > opposite[o]) { opposite[o] = v; oppositeHead[o] = h; }
          }
          const yb = y[b];
          // Lines that never cross the visible band are counted but not drawn.
          if ((ya < top && yb < top) || (ya > bottom && yb > bottom)) continue;
          buckets[Math.min(LINE_BUCKETS - 1, (v * LINE_BUCKETS) | 0)].push(ya, yb);
        }
      }
      drawn.perHead[h] = count;
      total += count;
    }
    // bertviz draws 2 px lines. Software canvases draw one-device-pixel (hairline) lines many
    // times faster than anything wider, so busy views use those.
    const dpr = Math.min(window.devicePixelRatio || 1, 2);
    ctx.lineWidth = total <= 3000 ? 2 : 1 / dpr;
    const x0 = 2;
    const x1 = width - 2;
    for (let h = 0; h < H; h++) {
      if (!state.shown[h]) continue;
      ctx.strokeStyle = headColor(h);
      const buckets = headBuckets[h];
      for (let b = 0; b < LINE_BUCKETS; b++) {
        const ys = buckets[b];
        if (!ys.length) continue;
        ctx.globalAlpha = (b + 0.5) / LINE_BUCKETS;
        ctx.beginPath();
        for (let i = 0; i < ys.length; i += 2) {
          ctx.moveTo(x0, ys[i]);
          ctx.lineTo(x1, ys[i + 1]);
        }
        ctx.stroke();
      }
    }
    ctx.globalAlpha = 1;
    drawn.lines = total;
    canvas.dataset.lines = String(total);

    // Token highlights: the hovered unit, and on the other side each unit tinted by its
    // strongest shown weight, in that head's colour.
    const tint = Boolean(hv) || headLayout.tinted;
    headLayout.tinted = Boolean(hv);
    for (const side of tint ? ['left', 'right'] : []) {
      for (const t of $('hv-' + side).children) {
        const a = Number(t.dataset.unit);
        t.classList.toggle('hovered', Boolean(hv && hv.side === side && hv.unit === a));
        if (hv && hv.side !== side && oppositeHead[a] >= 0) {
          const c = headColor(oppositeHead[a]);
          const [r, g, b] = c.startsWith('#') ? hexToRgb(c) : [136, 136, 136];
          t.style.backgroundColor = 'rgba(' + r + ',' + g + ',' + b + ',' + Math.min(0.85, opposite[a]).toFixed(3) + ')';
        } else {
          t.style.backgroundColor = '';
        }
      }
    }
    document.querySelectorAll('#head-legend button').forEach((b) => {
      const h = Number(b.dataset.head);
      b.setAttribute('aria-pressed', String(state.shown[h]));
      b.classList.toggle('current', h === state.head);
    });
    const shownCount = state.shown.filter(Boolean).length;
    let info = 'Layer ' + l + ' · ' + shownCount + ' of ' + H + ' heads · ' + total.toLocaleString('en') +
      ' lines of weight ≥ ' + thr.toFixed(3) + ' (opacity = weight)';
    if (hv) info += ' · only ' + (hv.side === 'left' ? 'from ' : 'to ') + describeUnit(hv.unit);
    if (state.pair !== 'all') info += ' · ' + state.pair[0] + '→' + state.pair[1] + ' only';
    $('hv-info').textContent = info;
  }

  /* -------------------------------------------------------------- model view */

  const modelGrid = { built: false, dirty: true, job: 0, size: 80 };

  function buildModelGrid() {
    const grid = $('model-grid');
    grid.textContent = '';
    const avail = Math.max(320, window.innerWidth - 90);
    const size = Math.max(44, Math.min(112, Math.floor(avail / H) - 6));
    modelGrid.size = size;
    grid.style.gridTemplateColumns = '28px repeat(' + H + ', ' + (size + 2) + 'px)';
    grid.append(el('span', { class: 'axis', text: 'L \\ H' }));
    for (let h = 0; h < H; h++) grid.append(el('span', { class: 'axis', text: String(h) }));
    for (let l = 0; l < L; l++) {
      grid.append(el('span', { class: 'axis', text: String(l) }));
      for (let h = 0; h < H; h++) {
        const c = el('canvas');
        const b = el('button', { type: 'button', class: 'thumb', title: 'Layer ' + l + ', head ' + h + ': open in the head view', dataset: { layer: String(l), head: String(h) } }, c);
        b.addEventListener('click', () => openHead(l, h));
        grid.append(b);
      }
    }
    modelGrid.built = true;
    modelGrid.dirty = true;
  }

  function renderModel() {
    if (!modelGrid.built) buildModelGrid();
    document.querySelectorAll('#model-grid .thumb').forEach((b) => {
      b.classList.toggle('current', Number(b.dataset.layer) === state.layer && Number(b.dataset.head) === state.head);
    });
    if (!modelGrid.dirty) return;
    modelGrid.dirty = false;
    // Draw the thumbnails a few at a time so the page stays responsive at 512 tokens.
    const job = ++modelGrid.job;
    const thumbs = Array.from(document.querySelectorAll('#model-grid .thumb'));
    drawn.thumbs = 0;
    let next = 0;
    const step = () => {
      if (job !== modelGrid.job) return;
      const t0 = performance.now();
      while (next < thumbs.length && performance.now() - t0 < 30) {
        const b = thumbs[next++];
        drawThumb(b.firstChild, Number(b.dataset.layer), Number(b.dataset.head));
        drawn.thumbs++;
      }
      if (next < thumbs.length) setTimeout(step, 0);
      else $('model-grid').dataset.complete = String(job);
    };
    $('model-grid').dataset.complete = '';
    step();
  }

  function drawThumb(canvas, l, h) {
    const s = modelGrid.size;
    const ctx = sizeCanvas(canvas, s, s);
    ctx.fillStyle = cssVar('--bg');
    ctx.fillRect(0, 0, s, s);
    const m = units().list.length;
    const M = unitMatrix(l, h, false);
    if (state.thumbStyle === 'heatmap') {
      const px = Math.min(s, m);
      const img = new ImageData(px, px);
      const pooled = new Float64Array(px * px);
      let max = 0;
      // Max-pooled, so a sharp diagonal survives the shrinking.
      for (let a = 0; a < m; a++) {
        const r = Math.floor((a * px) / m) * px;
        for (let c = 0; c < m; c++) {
          const v = M[a * m + c];
          const idx = r + Math.floor((c * px) / m);
          if (v > pooled[idx]) pooled[idx] = v;
        }
      }
      for (const v of pooled) if (v > max) max = v;
      for (let i = 0; i < pooled.length; i++) {
        // √ scale: long inputs spread attention thin, and the square root keeps it visible.
        const j = lutIndex(max > 0 ? Math.sqrt(pooled[i] / max) : 0) * 3;
        img.data[i * 4] = LUT[j];
        img.data[i * 4 + 1] = LUT[j + 1];
        img.data[i * 4 + 2] = LUT[j + 2];
        img.data[i * 4 + 3] = 255;
      }
      const off = document.createElement('canvas');
      off.width = px;
      off.height = px;
      off.getContext('2d').putImageData(img, 0, 0);
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(off, 0, 0, s, s);
      return;
    }
    const [qs, ks] = pairSides();
    const pos = new Float64Array(m);
    const pad = 5;
    for (let a = 0; a < m; a++) pos[a] = pad + (m > 1 ? (a * (s - 2 * pad)) / (m - 1) : (s - 2 * pad) / 2);
    const nb = 32;
    const tb = Array.from({ length: nb }, () => []);
    const thr = state.threshold;
    for (const a of qs) {
      for (const b of ks) {
        const v = M[a * m + b];
        if (v <= 0 || v < thr) continue;
        tb[Math.min(nb - 1, (v * nb) | 0)].push(pos[a], pos[b]);
      }
    }
    ctx.strokeStyle = headColor(h);
    ctx.lineWidth = 1 / Math.min(window.devicePixelRatio || 1, 2);
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
  }

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

  /* -------------------------------------------------------------- stats view */

  function renderStats() {
    const grid = $('stats-grid');
    const stat = stats.find((s) => s.id === state.stat) || stats[0];
    if (!stat) { grid.textContent = ''; return; }
    $('stat-select').value = stat.id;
    $('stat-desc').textContent = stat.description + ' Click a cell to open that head.';
    let lo = Infinity;
    let hi = -Infinity;
    for (const row of stat.values) for (const v of row) if (v !== null && !Number.isNaN(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    if (!Number.isFinite(lo)) { lo = 0; hi = 1; }
    grid.textContent = '';
    grid.style.gridTemplateColumns = '28px repeat(' + H + ', auto)';
    grid.append(el('span', { class: 'axis', text: 'L \\ H' }));
    for (let h = 0; h < H; h++) grid.append(el('span', { class: 'axis', text: String(h) }));
    const labels = analysis.head_labels;
    for (let l = 0; l < L; l++) {
      grid.append(el('span', { class: 'axis', text: String(l) }));
      for (let h = 0; h < H; h++) {
        const v = stat.values[l][h];
        const tag = labels ? labels[l][h] : '';
        const cell = el('button', { type: 'button', class: 'stat-cell', dataset: { layer: String(l), head: String(h) } }, fmtNum(v, 3));
        if (tag) cell.append(el('span', { class: 'tag', text: tag }));
        const x = hi > lo ? (v - lo) / (hi - lo) : 0.5;
        if (v === null || Number.isNaN(v)) {
          cell.style.background = cssVar('--panel-2');
        } else {
          cell.style.background = lutCss(x);
          const i = lutIndex(x) * 3;
          const lum = 0.2126 * LUT[i] + 0.7152 * LUT[i + 1] + 0.0722 * LUT[i + 2];
          cell.style.color = lum > 140 ? '#111' : '#fff';
        }
        cell.classList.toggle('current', l === state.layer && h === state.head);
        cell.addEventListener('click', () => openHead(l, h));
        cell.addEventListener('mousemove', (e) => {
          let t = 'Layer ' + l + ', head ' + h + (tag ? ' — ' + tag : '');
          for (const s of stats) t += '\n' + s.label + ': ' + fmtNum(s.values[l][h], 4);
          showTip(t, e.clientX, e.clientY);
        });
        cell.addEventListener('mouseleave', hideTip);
        grid.append(cell);
      }
    }
    $('stat-min').textContent = fmtNum(lo, 3);
    $('stat-max').textContent = fmtNum(hi, 3);
    document.querySelectorAll('#view-stats .cbar').forEach(drawColorbar);
  }

  /* ----------------------------------------------------------- page furniture */

  function fillSummary() {
    const m = meta.model;
    $('model-name').textContent = m.id + (m.revision ? ' @ ' + m.revision : '');
    $('model-shape').textContent = m.layers + ' layers × ' + m.heads + ' heads · hidden ' + m.hidden_size +
      ' · head dim ' + m.head_dim + ' · ' + N + (meta.level === 'word' ? ' words' : ' tokens');
    $('sentence-a').textContent = meta.text;
    if (isPair || meta.pair) {
      $('sentence-a-label').textContent = 'Sentence A';
      $('sentence-b-line').hidden = false;
      $('sentence-b').textContent = meta.pair || '';
    }
    const s = sections.attention;
    const b64Len = Math.ceil(meta.payload.raw_bytes / 3) * 4;
    const rows = [
      ['Model', m.id + (m.revision ? ' (revision ' + m.revision + ')' : '')],
      ['Shape', m.layers + ' layers × ' + m.heads + ' heads, hidden size ' + m.hidden_size + ', head dim ' + m.head_dim],
      [isPair ? 'Sentence A' : 'Sentence', meta.text],
    ];
    if (meta.pair !== null && meta.pair !== undefined) rows.push(['Sentence B', meta.pair]);
    rows.push(
      ['Units', N + ' ' + (meta.level === 'word' ? 'words (word pieces merged: attention to a word sums its pieces, from a word averages them)' : 'tokens')],
      ['Tokens', meta.tokens.join(' ')],
      ['Special tokens', meta.special_excluded ? 'removed when the report was written; rows renormalised' : 'kept (the page can hide them)'],
      ['Numbering', 'layers and heads from 0'],
      ['Weights', (s.dtype === 'u8' ? '8-bit' : '16-bit') + ' fixed point, each within ' + s.maxError.toExponential(2) +
        ' of the model\'s f32, shown to ' + (s.dtype === 'u8' ? '3' : '5') + ' decimals; renormalising rows without [CLS]/[SEP] ' +
        'enlarges the error where little attention is left (the matrix view gives each value\'s bound)'],
      ['Storage', (meta.payload.compression === 'gzip' ? 'gzip-compressed, ' : '') + 'base64; ' + fmtBytes(meta.payload.raw_bytes) +
        ' decoded' + (meta.payload.compression === 'gzip' ? '' : ' (' + fmtBytes(b64Len) + ' of text)')],
      ['Query/key vectors', meta.neuron.available ? 'embedded (exact f32) for the neuron view' : 'not embedded: ' + meta.neuron.reason],
      ['Initial line threshold', String(meta.initial.threshold)],
      ['Generator', meta.generator],
    );
    for (const [k, v] of meta.settings) rows.push([k, v]);
    const table = $('about-table');
    for (const [k, v] of rows) table.append(el('tr', null, el('td', { text: k }), el('td', { text: v })));
  }

  function fail(err) {
    const status = $('status');
    status.hidden = false;
    status.classList.add('error');
    status.textContent = 'The report could not be shown: ' + (err && err.message ? err.message : String(err));
    console.error(err);
  }

  async function main() {
    loadTheme();
    timings.start = performance.now();
    await loadPayload();
    timings.decoded = performance.now();
    fillSummary();
    setupControls();
    buildLegend();
    setupMatrixHover('matrix-left', matrixTip(() => 'Layer ' + state.layer + ', head ' + state.head, () => 'head'));
    setupMatrixHover('matrix-right', matrixTip(() => $('matrix-right-select').selectedOptions[0].textContent + ', layer ' + state.layer,
      () => state.matrixRight));
    setupNeuronPointer();
    // The report's embedded font subsets (data: URIs, so this is quick) before the first
    // drawing, so canvas text and token columns never show fallback boxes.
    if (document.fonts) await Promise.all([...document.fonts].map((f) => f.load().catch(() => null)));
    $('status').hidden = true;
    render();
    timings.interactive = performance.now();
    document.documentElement.dataset.ready = 'true';
    // When the first drawing has been rasterised and shown.
    requestAnimationFrame(() => setTimeout(() => { timings.painted = performance.now(); }, 0));
  }

  /** Read-only window onto the page for the browser tests and the benchmark. */
  window.attnviz = {
    meta,
    state,
    drawn,
    timings,
    set,
    settled,
    neuronData,
    weight,
    matrixGeometry: (id) => {
      const p = matrixPanels[id];
      return p ? { margin: p.margin, cell: p.cell, m: p.m } : null;
    },
    neuronGeometry: () => (neuronLayout ? { y0: neuronLayout.y0, rh: neuronLayout.rh, cols: neuronLayout.cols } : null),
    ready: main().catch(fail),
  };
})();
