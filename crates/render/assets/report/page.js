/* attnviz report: the page. Controls, keyboard, theme, the summary and About panel, and main(),
 * which decodes the payload and draws the first view. Last of the joined files.
 */

/* --------------------------------------------------------------- controls */

/** The Encoder / Decoder / Cross selector of a report of several kinds. A choice reloads the
 *  page at `#kind=…&view=…` (the fragment keeps it across reloads and in links). */
function setupKinds() {
  const box = $('kind-select');
  if (!KINDS) return;
  box.hidden = false;
  $('help-kinds').hidden = false;
  for (const k of KINDS) {
    const what = k.kind === 'cross' ? 'cross-attention: decoder tokens (queries) × encoder tokens (keys)'
      : k.kind + ' self-attention' + (k.mask === 'causal' ? ' (causal)' : '');
    const b = el('button', {
      type: 'button', dataset: { kind: k.kind },
      title: KIND_LABELS[k.kind] + ': ' + what + ' (' + k.kind[0].toUpperCase() + ')',
    }, KIND_LABELS[k.kind] || k.kind);
    b.setAttribute('aria-pressed', String(k.kind === meta.kind));
    b.addEventListener('click', () => switchKind(k.kind));
    box.append(b);
  }
}
function switchKind(kind) {
  if (!KINDS || kind === meta.kind || !KINDS.some((k) => k.kind === kind)) return;
  const p = new URLSearchParams();
  p.set('kind', kind);
  p.set('view', state.view);
  // The fragment keeps the choice for a reload or a link; a notebook's about:srcdoc frame has
  // no address to keep it in.
  if (location.protocol !== 'about:') {
    try { history.replaceState(null, '', '#' + p.toString()); } catch (e) { /* no history: keep going */ }
  }
  const view = state.view;
  const focusKind = document.activeElement && document.activeElement.dataset && document.activeElement.dataset.kind;
  // This run's listeners go, the markup is the page's as loaded, and the page boots again.
  ABORT.abort();
  hideTip();
  document.documentElement.dataset.ready = 'false';
  document.body.innerHTML = SHELL;
  boot({ kind, view, focus: Boolean(focusKind) });
}

function setupControls() {
  setupKinds();
  const layerSel = $('layer-select');
  for (let l = 0; l < L; l++) layerSel.append(el('option', { value: String(l), text: layerName(l) }));
  layerSel.addEventListener('change', () => set({ layer: Number(layerSel.value) }));

  const headSel = $('head-select');
  for (let h = 0; h < H; h++) headSel.append(el('option', { value: String(h), text: String(h) }));
  headSel.addEventListener('change', () => set({ head: Number(headSel.value) }));

  const hide = $('hide-special');
  hide.disabled = !canHideSpecial;
  $('hide-special-name').textContent = 'Hide ' + SPECIAL_NAMES;
  hide.addEventListener('change', () => set({ hideSpecial: hide.checked }));

  const words = $('merge-words');
  words.disabled = !canMergeWords;
  $('words-control').title += canMergeWords ? '' : meta.level === 'word'
    ? ' — this report is already at word level'
    : ' — no word in this input is split into pieces';
  words.addEventListener('change', () => set({ words: words.checked }));

  setupBands();

  const raw = $('raw-tokens');
  raw.disabled = !canToggleRaw;
  if (!canToggleRaw) $('raw-control').title += ' — every token here reads the same either way';
  raw.addEventListener('change', () => set({ rawTokens: raw.checked }));

  const groupKv = $('group-kv');
  groupKv.addEventListener('change', () => set({ groupKv: groupKv.checked }));
  $('head-causal-hint').hidden = !CAUSAL;
  const extra = [];
  if (CAUSAL) extra.push('Hatched: masked cells, keys after the query (causal mask).');
  if (PREFIX > 0) extra.push('The first ' + PREFIX + ' tokens, the prompt with its pictures, see each other in full (a prefix-LM mask).');
  if (FIRST_GEN >= 0) extra.push('Orange edges mark the tokens the model generated.');
  if (GROUPED) extra.push('Heads sharing a key/value head are bracketed above the columns.');
  $('model-extra-hint').textContent = extra.length ? ' ' + extra.join(' ') : '';

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
  $('tab-image').hidden = !IMAGE;
  $('tab-lens').hidden = !LENS;
  $('tab-heads').hidden = !HEAD_PARTS.length;
  $('tab-router').hidden = !ROUTER;
  setupRouter();
  $('tab-mixing').hidden = !MIXING;
  setupMixing();
  setupSpeech();

  $('thumb-style').value = state.thumbStyle;
  $('thumb-style').addEventListener('change', (e) => set({ thumbStyle: e.target.value }));
  $('matrix-scale').value = state.matrixScale;
  $('matrix-scale').addEventListener('change', (e) => set({ matrixScale: e.target.value }));
  $('matrix-shared').addEventListener('change', (e) => set({ matrixShared: e.target.checked }));

  const right = $('matrix-right-select');
  right.append(el('option', { value: 'mean', text: 'Mean over heads' }));
  for (const m of analysis.matrices || []) right.append(el('option', { value: m.id, text: m.label }));
  right.addEventListener('change', () => set({ matrixRight: right.value }));

  const nq = $('neuron-query');
  for (let i = 0; i < N; i++) nq.append(el('option', { value: String(i) }));
  refreshTokenMenus();
  nq.addEventListener('change', () => set({ neuronQuery: Number(nq.value) }));
  if (!SQUARE) $('neuron-query-label').textContent = 'Query token (decoder)';
  if (!USUAL_SCALE) {
    $('neuron-hint').textContent = 'How one head turns a query and the keys into attention: q, each k, q∘k (elementwise), ' +
      SCORE_NAME + ' (' + SCALE_NOTE + ') and its softmax.' + (SQUARE ? ' Click a key row to make that token the query.' : '');
  } else if (!SQUARE) {
    $('neuron-hint').textContent = 'How one head turns a decoder query and the encoder keys into attention: q, each k, q∘k (elementwise), q·k/√d and its softmax.';
  }

  const statSel = $('stat-select');
  for (const s of stats) statSel.append(el('option', { value: s.id, text: s.label }));
  statSel.addEventListener('change', () => set({ stat: statSel.value }));

  $('theme-toggle').addEventListener('click', () => {
    const order = ['auto', 'light', 'dark'];
    set({ theme: order[(order.indexOf(state.theme) + 1) % 3] });
  });
  $('help-toggle').addEventListener('click', () => toggleHelp());
  $('summary-toggle').addEventListener('click', () => {
    const open = $('summary').classList.toggle('collapsed') === false;
    $('summary-toggle').setAttribute('aria-expanded', String(open));
    $('summary-toggle').textContent = open ? 'Show less' : 'Show all';
    fitSummary();
    schedule();
  });
  const signal = ABORT.signal;
  window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => {
    if (state.theme === 'auto') { resetThemeColors(); modelGrid.dirty = true; schedule(); }
  }, { signal });
  document.addEventListener('keydown', onKey, { signal });
  window.addEventListener('scroll', () => {
    if (state.view === 'head' && headLayout && headLayout.virtual) schedule();
  }, { passive: true, signal });
  // A resize stretches what is drawn at once (the model grid refits its thumbnails) and redraws
  // at the new size 100 ms after the last resize event. The head view's token columns do not
  // depend on the window (only its canvas does, redrawn on every render), so they stay.
  let resizeTimer = 0;
  window.addEventListener('resize', () => {
    fitSummary();
    fitModelGrid();
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => { modelGrid.dirty = true; schedule(); }, 100);
  }, { signal });
}

/** A button per picture of a vision-language model: its band's label; a click shows its image
 *  tokens one by one in the matrix views, another collapses them back into the band. */
function setupBands() {
  const box = $('band-control');
  PICTURES.forEach((p, i) => {
    const b = el('button', { type: 'button', text: p.label });
    b.dataset.picture = String(i);
    b.title = 'Show the ' + p.count + ' image tokens of ' + p.label.replace(/ ·.*/, '') +
      ' one by one, or collapse them into one band (click its label in the matrix too)';
    b.addEventListener('click', () => toggleBand(i));
    box.append(b);
  });
}

/** Expand picture i's band into its tokens, or collapse them back. */
function toggleBand(i) {
  const expanded = state.expanded.slice();
  expanded[i] = !expanded[i];
  set({ expanded });
}

/** Bring every shared control in line with the state. */
function syncControls() {
  $('layer-select').value = String(state.layer);
  $('head-select').value = String(state.head);
  $('hide-special').checked = state.hideSpecial;
  $('merge-words').checked = state.words;
  $('raw-tokens').checked = state.rawTokens;
  $('group-kv').checked = state.groupKv;
  const wnote = $('words-note');
  wnote.hidden = !(state.words || meta.level === 'word');
  wnote.textContent = meta.level === 'word'
    ? 'Word pieces were merged into words when this report was written: attention to a word is the sum over its pieces, attention from a word the mean over its pieces.'
    : 'Word pieces merged into words: attention to a word is the sum over its pieces, attention from a word the mean over its pieces' +
      (state.hideSpecial ? ' (rows renormalised without ' + SPECIAL_NAMES + ' first)' : '') +
      '. The neuron view stays per token: query and key vectors exist only for tokens.';
  const bandViews = state.view === 'head' || state.view === 'model' || state.view === 'matrix';
  $('band-control').hidden = !PICTURES.length || !bandViews;
  $('band-control').querySelectorAll('button').forEach((b) => {
    const open = Boolean(state.expanded[Number(b.dataset.picture)]);
    b.setAttribute('aria-pressed', String(open));
    b.textContent = PICTURES[Number(b.dataset.picture)].label + (open ? ' ▾' : ' ▸');
  });
  const bnote = $('band-note');
  const collapsed = PICTURES.filter((_, i) => !state.expanded[i]).map((p) => p.label);
  bnote.hidden = !collapsed.length || !bandViews;
  bnote.textContent = collapsed.join(', ') + ': each picture\'s image tokens as one band, its column ' +
    'the sum of a row\'s attention to them, its row the mean of their rows (every row still sums to 1). ' +
    'Its button here, or its label in the matrix view, shows its tokens one by one.';
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
  $('head-control').hidden = !(v === 'matrix' || v === 'neuron' || (v === 'image' && (state.imageSource === 'head' || state.imageSource === 'pool')));
  $('threshold-control').hidden = !(v === 'head' || (v === 'model' && state.thumbStyle === 'lines'));
  $('kv-control').hidden = !GROUPED || !(v === 'head' || v === 'model');
  $('pair-filter').hidden = !isPair || !(v === 'head' || (v === 'model' && state.thumbStyle === 'lines'));
  // The model and stats views show every layer at once: no layer to choose there.
  $('layer-control').hidden = v === 'model' || v === 'stats' || v === 'lens' || v === 'heads' || v === 'speech' || v === 'router' || v === 'mixing';
  $('neuron-query').value = String(state.neuronQuery);
  $('theme-name').textContent = state.theme;
  const note = $('special-note');
  if (meta.special_excluded) {
    note.hidden = false;
    note.textContent = 'The special tokens were removed when this report was written, and every row was renormalised over the remaining tokens: weights are shares of the attention not given to special tokens.';
  } else if (state.hideSpecial) {
    note.hidden = false;
    note.textContent = SPECIAL_NAMES + ' hidden: every row is renormalised over the remaining tokens, so weights shown are shares of the attention not given to special tokens (rows that sum to 1 without them).';
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
  else if ((k === ' ' || k === 'Enter' || k === 'o') && tag === 'BUTTON' && k !== 'o') handled = false;
  else if ((k === ' ' || k === 'Enter' || k === 'o') && !state.headPicked) set({ headPicked: true }); // first show which head
  else if (k === ' ') toggleHead(state.head);
  else if (k === 'Enter' || k === 'o') soloHead(state.head);
  else if (k === 'a') set({ shown: new Array(H).fill(true) });
  else if (k >= '1' && k <= '9') {
    const v = VIEWS[Number(k) - 1];
    if ((v !== 'stats' || stats.length) && (v !== 'image' || IMAGE) && (v !== 'lens' || LENS) && (v !== 'heads' || HEAD_PARTS.length) && (v !== 'speech' || SPEECH)) set({ view: v });
  } else if (k === 'x' && ROUTER) set({ view: 'router' });
  else if (k === 'm' && MIXING) set({ view: 'mixing' });
  else if (k === 's' && canHideSpecial) set({ hideSpecial: !state.hideSpecial });
  else if (k === 'w' && canMergeWords) set({ words: !state.words });
  else if (k === 'r' && canToggleRaw) set({ rawTokens: !state.rawTokens });
  else if (k === 'g' && GROUPED) set({ groupKv: !state.groupKv });
  else if (k === 't') $('theme-toggle').click();
  else if (KINDS && (k === 'e' || k === 'd' || k === 'c')) switchKind({ e: 'encoder', d: 'decoder', c: 'cross' }[k]);
  else if (state.view === 'matrix' && (k === '+' || k === '=')) zoomMatrixCentre(2);
  else if (state.view === 'matrix' && k === '-') zoomMatrixCentre(0.5);
  else if (state.view === 'matrix' && k === '0') resetMatrixZoom();
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
  resetThemeColors();
  try { localStorage.setItem('attnviz-theme', state.theme); } catch (e) { /* storage may be off for file:// */ }
}
function loadTheme() {
  try {
    const t = localStorage.getItem('attnviz-theme');
    if (t === 'light' || t === 'dark' || t === 'auto') state.theme = t;
  } catch (e) { /* ignore */ }
  document.documentElement.dataset.theme = state.theme;
}

/* ----------------------------------------------------------- page furniture */

function fillSummary() {
  const m = meta.model;
  // The model's name (a hub id, or a local folder's or file's name), never a whole local path.
  $('model-name').textContent = (m.name || m.id) + (m.revision ? ' @ ' + m.revision : '');
  const subset = LAYER_NUMBERS.some((n, l) => n !== l);
  const layersText = subset ? 'layers ' + LAYER_NUMBERS.join(', ') : m.layers + ' layers';
  // Attention drawn from a file or arrays has no hidden size or head dim (0): say nothing of them.
  const dims = m.hidden_size ? ' · hidden ' + m.hidden_size + ' · head dim ' + m.head_dim : '';
  const unitName = meta.level === 'word' ? ' words' : ' tokens';
  $('model-shape').textContent = (KINDS ? kindName(meta.kind) + ': ' : '') + layersText + ' × ' + m.heads + ' heads' + (GROUPED ? ' over ' + KVH + ' key/value heads' : '') +
    dims + ' · ' + (SQUARE ? N + unitName : N + ' decoder × ' + NK + ' encoder' + unitName) + (CAUSAL ? ' · causal' : '');
  const target = targetText();
  if (target !== null && FIRST_GEN < 0 && typeof META.target === 'string') {
    $('sentence-b-label').textContent = 'Target';
    $('sentence-b-line').hidden = false;
    setSentence('sentence-b', target);
  } else if (target !== null && FIRST_GEN < 0) {
    // The encoder's kind of a run whose decoder generated its text: say so, as its kinds do.
    $('generated-line').hidden = false;
    setSentence('generated-text', target);
  }
  const generatedText = generatedWords();
  if (generatedText !== null) {
    $('generated-line').hidden = false;
    setSentence('generated-text', generatedText);
  }
  setSentence('sentence-a', meta.text);
  if (KINDS) $('sentence-a-label').textContent = 'Source';
  if (isPair || meta.pair) {
    $('sentence-a-label').textContent = 'Sentence A';
    $('sentence-b-line').hidden = false;
    setSentence('sentence-b', meta.pair || '');
  }
  const s = sections.attention;
  const b64Len = Math.ceil(meta.payload.raw_bytes / 3) * 4;
  const rows = [
    ['Model', (m.name || m.id) + (m.revision ? ' (revision ' + m.revision + ')' : '')],
    ['Shape', layersText + ' × ' + m.heads + ' heads' +
      (m.hidden_size ? ', hidden size ' + m.hidden_size + ', head dim ' + m.head_dim : '') +
      (subset ? ' (only these layers were captured)' : '')],
    [isPair ? 'Sentence A' : KINDS ? 'Source' : 'Sentence', meta.text],
  ];
  if (KINDS) {
    rows.push(['Kinds', KINDS.map((k) => kindName(k.kind) + ' (' + k.model.layers + ' layers × ' + k.model.heads + ' heads, ' +
      (k.keys ? k.tokens.length + ' decoder × ' + k.keys.tokens.length + ' encoder' : k.tokens.length) + unitName + ')').join(' · ') +
      '; the selector above the views switches between them (keys e, d, c)']);
    if (target !== null) rows.push([typeof META.target === 'string' ? 'Target' : 'Generated', target]);
  }
  if (meta.pair !== null && meta.pair !== undefined) rows.push(['Sentence B', meta.pair]);
  rows.push(['Attention', (meta.kind === 'self' ? 'self-attention' : kindName(meta.kind)) + (CAUSAL
    ? ', causal: a token sees itself and the tokens before it; the views hatch (matrix, model) or leave out (head view) the keys after it'
      + (PREFIX > 0 ? '; but the first ' + PREFIX + ' tokens (the prompt with its pictures) see each other in full, whatever the sliding window: a prefix-LM mask' : '')
    : SQUARE ? ', bidirectional: every token sees every token'
      : ': every decoder (target) token, the query, sees every encoder (source) token, the keys')]);
  if (GROUPED) {
    const groups = [];
    for (let g = 0; g < KVH; g++) groups.push('kv ' + g + ': heads ' + headsOfKv(g).join(', '));
    rows.push(['Key/value heads', KVH + ' (grouped-query attention: each is read by several query heads, and every query head has its own attention) · ' + groups.join(' · ')]);
  }
  if (meta.positions) {
    rows.push(['Positions', ROTARY
      ? 'rotary (RoPE): every layer rotates queries and keys by their position; the neuron view shows the rotated vectors, whose dot products the softmax saw'
      : meta.positions === 'relative' ? 'relative: a learned bias on the scores by distance, in neither query nor key'
        : 'absolute: position vectors added to the token embeddings']);
  }
  if (FIRST_GEN >= 0) {
    const last = GENERATED.lastIndexOf(true);
    rows.push(['Generated', (meta.level === 'word' ? 'words' : 'tokens') + ' #' + FIRST_GEN + '–' + last + ', written by the model after the prompt: "' + generatedWords() + '"']);
  }
  if (SINK !== null) rows.push(['Attention sink', describeToken(SINK) + ': ' + SINK_NOTE]);
  rows.push(
    ['Units', N + ' ' + (meta.level === 'word' ? 'words (word pieces merged: attention to a word sums its pieces, from a word averages them)' : 'tokens')],
    [SQUARE ? 'Tokens' : 'Decoder tokens (rows)', QSIDE.display.join(' ')],
    ...(SQUARE ? [] : [['Encoder tokens (columns)', KSIDE.display.join(' ')]]),
    [SQUARE ? 'Raw tokens' : 'Raw decoder tokens', meta.tokens.join(' ')],
    ...(SQUARE ? [] : [['Raw encoder tokens', KMETA.tokens.join(' ')]]),
    ['Labels', labelSchemeNote()],
    ['Special tokens', meta.special_excluded ? 'removed when the report was written; rows renormalised' : 'kept (the page can hide them)'],
    ['Numbering', 'layers and heads from 0'],
    ['Weights', (s.dtype === 'u8' ? '8-bit' : '16-bit') + ' fixed point, each within ' + s.maxError.toExponential(2) +
      ' of the model\'s f32, shown to ' + (s.dtype === 'u8' ? '3' : '5') + ' decimals; renormalising rows without ' + SPECIAL_NAMES + ' ' +
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

/** Whether raw and display labels differ anywhere (else the toggle has nothing to do). */
const canToggleRaw = [QSIDE, KSIDE].some((sd) => sd.display.some((t, i) => t !== sd.data.tokens[i]));

/** The labels of the menus that name tokens, in the current labelling. */
function refreshTokenMenus() {
  const nq = $('neuron-query');
  [...nq.options].forEach((o, i) => {
    o.textContent = i + ': ' + tokenLabel(i) + (GENERATED[i] ? ' (generated)' : '') + (i === SINK ? ' (sink)' : '');
  });
}

/** How the About panel explains the labels. */
function labelSchemeNote() {
  const names = { 'byte-level': 'byte-level BPE', sentencepiece: 'SentencePiece', wordpiece: 'WordPiece', smiles: 'SMILES', plain: 'as given' };
  const scheme = names[meta.label_scheme] || 'as given';
  return 'tokens are shown as read (tokenizer: ' + scheme + '): a word-initial space (Ġ, ▁) dropped, other spaces as ·, ' +
    'line feeds as ↵, tabs as ⇥, bytes that are only part of a character as ⟨C3⟩, invisible characters as ⟨U+202E⟩; ' +
    'where a label repeats, its token number follows in subscript (C₇). The Raw tokens toggle (r) shows the vocabulary\'s own pieces.';
}

/** How the page names a kind in prose. */
function kindName(kind) {
  return { encoder: 'encoder self-attention', decoder: 'decoder self-attention', cross: 'cross-attention', self: 'self-attention' }[kind] || kind;
}

/** The decoder's text (its units' surfaces) of a report of several kinds, or null. */
function targetText() {
  if (typeof META.target === 'string') return META.target;
  const dec = KINDS && KINDS.find((k) => k.kind === 'decoder');
  if (!dec) return null;
  const parts = dec.tokens.map((t, i) => (isSpecialRole(dec.roles[i]) ? '' : dec.surfaces && dec.surfaces[i] ? dec.surfaces[i] : ''));
  return (dec.level === 'word' ? parts.join(' ') : parts.join('')).trim();
}

/** The text the model generated (its units' surfaces; a special token by its label), or null
 *  when it generated nothing. */
function generatedWords() {
  if (FIRST_GEN < 0) return null;
  const parts = [];
  for (let i = FIRST_GEN; i < N; i++) {
    if (GENERATED[i]) parts.push(meta.surfaces && meta.surfaces[i] ? meta.surfaces[i] : SPECIAL[i] ? meta.tokens[i] : '');
  }
  return (meta.level === 'word' ? parts.join(' ') : parts.join('')).trim();
}

/** Put `text` in summary line `id`, its line breaks kept: the expanded summary shows them (the
 *  collapsed one, one line each, runs them on; fitSummary offers the toggle for them). */
function setSentence(id, text) {
  $(id).textContent = String(text);
}

/** The model and sentence lines take one line each until expanded; the toggle shows only when
 *  something is cut off (or to collapse again). */
function fitSummary() {
  const box = $('summary');
  const lines = [...box.querySelectorAll('.summary-line:not([hidden]) .value')];
  // Cut off, or holding line breaks that only the expanded summary shows.
  const cut = lines.some((v) => v.scrollWidth > v.clientWidth + 1 || v.textContent.includes('\n'));
  $('summary-toggle').hidden = box.classList.contains('collapsed') && !cut;
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
  // The markup as loaded (the payload's text already dropped), for booting another kind.
  if (SHELL === null) SHELL = document.body.innerHTML;
  timings.decoded = performance.now();
  fillSummary();
  imageSummary();
  setupControls();
  fitSummary();
  buildLegend();
  setupMatrixHover('matrix-left', matrixTip(() => 'Layer ' + layerName(state.layer) + ', head ' + state.head, () => 'head'));
  setupMatrixHover('matrix-right', matrixTip(() => $('matrix-right-select').selectedOptions[0].textContent + ', layer ' + layerName(state.layer),
    () => state.matrixRight));
  setupMatrixZoom();
  setupNeuronPointer();
  // The report's embedded font subsets (data: URIs, so this is quick) before the first
  // drawing, so canvas text and token columns never show fallback boxes.
  if (document.fonts) await Promise.all([...document.fonts].map((f) => f.load().catch(() => null)));
  // A vision model's picture, decoded before the image view first draws on it.
  await imageLoaded;
  $('status').hidden = true;
  render();
  if (carry.focus) {
    const b = document.querySelector('#kind-select button[aria-pressed="true"]');
    if (b) b.focus();
  }
  timings.interactive = performance.now();
  document.documentElement.dataset.ready = 'true';
  // When the first drawing has been rasterised and shown.
  requestAnimationFrame(() => setTimeout(() => { timings.painted = performance.now(); }, 0));
}

/** Draw another report's data in place (`window.attnviz.load`; `attnviz serve`: the app gets a new run's
 *  metadata and payload, the blocks its report would carry, and hands them over as text): the
 *  markup as loaded, the new blocks, and the page boots again, keeping the kind, view, layer,
 *  head and settings where they fit. No reload, no request: the page's policy is unchanged, so
 *  the caller gives new data only to a page whose style and images are the same (the server's
 *  `shell`). Resolves once the new data is drawn. */
function loadInPlace(metaText, dataText) {
  const keep = {
    layer: state.layer, head: state.head, headPicked: state.headPicked, shown: state.shown,
    hideSpecial: state.hideSpecial, words: state.words, rawTokens: state.rawTokens, groupKv: state.groupKv,
    threshold: state.threshold, pair: state.pair, matrixScale: state.matrixScale,
    matrixShared: state.matrixShared, matrixRight: state.matrixRight, stat: state.stat, expanded: state.expanded,
    imageSource: state.imageSource, imageOpacity: state.imageOpacity,
  };
  const view = state.view;
  const kind = KINDS ? meta.kind : null;
  ABORT.abort();
  hideTip();
  document.documentElement.dataset.ready = 'false';
  document.body.innerHTML = SHELL;
  $('attnviz-meta').textContent = metaText;
  $('attnviz-data').textContent = dataText;
  SHELL = null;
  RAW = null;
  boot({ kind, view, keep });
  const fresh = window.attnviz;
  if (typeof fresh.meta.title === 'string') document.title = fresh.meta.title;
  return fresh.ready.then(() => fresh.settled());
}

/** Read-only window onto the page for the browser tests and the benchmark, and `load`, which
 *  draws another report's data in place (the page's one global name). */
window.attnviz = {
  load: loadInPlace,
  meta,
  state,
  drawn,
  timings,
  set,
  settled,
  neuronData,
  weight,
  image: () => imageDrawn,
  speech: () => speechDrawn,
  imageSources: () => (IMAGE ? imageSources() : []),
  // The learned-sink column a matrix panel draws (gpt-oss), one share per row; null for none.
  matrixSink: (id) => (matrixPanels[id] && matrixPanels[id].sink ? Array.from(matrixPanels[id].sink) : null),
  matrixGeometry: (id) => {
    const p = matrixPanels[id];
    // margin: the plot's left and top edge in the canvas; cell: its size; (ox, oy): the column and
    // row at the plot's corner, in cells (zoomed and panned); all CSS px.
    return p ? { margin: p.x0, cell: matrixCell(p), m: p.m, mk: p.mk, plot: p.plot, plotH: p.plotH, side: p.side, zoom: matrixZoom.z, ox: matrixZoom.ox, oy: matrixZoom.oy, labels: p.labels, labelPx: p.labelPx } : null;
  },
  // A matrix panel as drawn: its values, its row and column labels, and which cells are masked.
  matrix: (id) => {
    const p = matrixPanels[id];
    if (!p) return null;
    const masked = [];
    for (let i = 0; i < p.m * p.mk; i++) masked.push(CAUSAL && unitMasked(Math.floor(i / p.mk), i % p.mk, state.layer));
    return { m: p.m, mk: p.mk, values: Array.from(p.values), rows: p.us.map((u) => u.label), cols: p.ks.map((u) => u.label), masked };
  },
  neuronGeometry: () => {
    const p = neuronLayout;
    return p ? { y0: p.y0, rh: p.rh, cols: p.cols, barW: p.barW, font: p.font, axisX: p.axisX, ticks: p.ticks, legends: p.legends, keys: p.keys } : null;
  },
  ready: main().catch(fail),
};
