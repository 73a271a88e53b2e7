/* attnviz report: the head view (after bertviz's): the tokens twice, one colour per head, a line
 * per weight above the threshold, whose opacity is the weight.
 */

/* --------------------------------------------------------------- head view */

let headLayout = null;
const LINE_BUCKETS = 64;
/** Strongest tint of a token on hover (its weight, capped so the text stays readable). */
const TINT_MAX = 0.85;

function buildLegend() {
  const legend = $('head-legend');
  legend.textContent = '';
  const headButton = (h) => {
    const sw = el('span', { class: 'swatch' });
    const kv = kvNote(h);
    const b = el('button', { type: 'button', title: 'Head ' + h + (kv ? ' (' + kv + ')' : '') + ': click to toggle, double-click to show only this head', dataset: { head: String(h), kv: String(KV[h]) } }, sw, String(h));
    b.addEventListener('click', () => toggleHead(h));
    b.addEventListener('dblclick', () => soloHead(h));
    // The head under the pointer is drawn last, on top of the others.
    b.addEventListener('mouseenter', () => set({ hoverHead: h }));
    b.addEventListener('mouseleave', () => { if (state.hoverHead === h) set({ hoverHead: null }); });
    return b;
  };
  if (!(GROUPED && state.groupKv)) {
    for (let h = 0; h < H; h++) legend.append(headButton(h));
    return;
  }
  // Grouped by key/value head: a box per group, led by a button that shows only its heads.
  for (let g = 0; g < KVH; g++) {
    const heads = headsOfKv(g);
    const label = el('button', {
      type: 'button', class: 'kv-label', dataset: { kvGroup: String(g) },
      title: 'Key/value head ' + g + ', read by heads ' + heads.join(', ') + ': click to show only them (again: all heads)',
    }, 'kv ' + g);
    label.addEventListener('click', () => soloGroup(g));
    legend.append(el('div', { class: 'kv-group', role: 'group', 'aria-label': 'Heads reading key/value head ' + g }, label, ...heads.map(headButton)));
  }
}

/** Show only the heads that read key/value head g; when only they are shown, show all heads. */
function soloGroup(g) {
  const only = state.shown.map((_, h) => KV[h] === g);
  const already = only.every((v, h) => v === state.shown[h]);
  set({ shown: already ? new Array(H).fill(true) : only });
}

function layoutHead() {
  // The token elements are rebuilt, so the one under the pointer (if any) will never see the
  // pointer leave: start without a hovered token.
  state.hover = null;
  // Left: the query units; right: the key units (the same units for self-attention; the
  // decoder's and the encoder's for cross-attention). Two lists of different lengths share one
  // row height, and the shorter column is centred against the longer.
  const lists = { left: units().list, right: keyUnits().list };
  const firstGens = { left: units().firstGen, right: keyUnits().firstGen };
  const m = lists.left.length;
  const mk = lists.right.length;
  const most = Math.max(m, mk);
  const rh = most <= 40 ? 22 : most <= 128 ? 17 : 13;
  const fontPx = most <= 40 ? 14 : most <= 128 ? 12 : 10.5;
  const font = fontPx + 'px ' + FONT_FAMILY;
  let maxW = 20;
  const tagW = textWidth('sink', '9px ' + FONT_FAMILY) + 6;
  for (const u of lists.left.concat(lists.right)) maxW = Math.max(maxW, textWidth(u.label, font) + (u.sink ? tagW : 0));
  // Cross-attention's columns are headed "decoder (target) · m" and "encoder (source) · mk",
  // over the outer edge of each column and reaching into the lines between them.
  const headings = SQUARE ? [] : ['decoder (target) · ' + m, 'encoder (source) · ' + mk];
  const colW = Math.ceil(Math.min(maxW, 260)) + 16;
  const pad = 6;
  const ys = {};
  for (const side of ['left', 'right']) {
    const n = lists[side].length;
    const off = ((most - n) * rh) / 2;
    ys[side] = new Float64Array(n);
    for (let a = 0; a < n; a++) ys[side][a] = pad + off + a * rh + rh / 2;
  }
  const y = ys.left;
  const yk = ys.right;
  const height = pad * 2 + most * rh;
  const width = most <= 128 ? 300 : 360;
  $('hv-left').setAttribute('aria-label', SQUARE ? 'Query tokens' : 'Decoder (target) tokens: the queries');
  $('hv-right').setAttribute('aria-label', SQUARE ? 'Key tokens' : 'Encoder (source) tokens: the keys');
  const heads = $('hv-heads');
  heads.hidden = SQUARE;
  if (!SQUARE) {
    heads.style.width = (2 * colW + width) + 'px';
    $('hv-head-left').textContent = headings[0];
    $('hv-head-right').textContent = headings[1];
  }
  for (const side of ['left', 'right']) {
    const col = $('hv-' + side);
    const list = lists[side];
    const firstGen = firstGens[side];
    const sideObj = side === 'left' ? QSIDE : KSIDE;
    col.textContent = '';
    col.style.width = colW + 'px';
    col.style.height = height + 'px';
    col.style.font = font;
    list.forEach((u, a) => {
      const t = el('div', {
        class: 'tok' + (u.special ? ' special' : '') + (u.seg === 'B' ? ' segB' : '') +
          (u.generated ? ' generated' : '') + (a === firstGen && a > 0 ? ' gen-first' : '') + (u.sink ? ' sink' : '') +
          (u.arrow && a > 0 ? ' arrow-first' : '') + (u.seg === 'B' && a > 0 && list[a - 1].seg === 'A' ? ' seg-first' : ''),
        text: u.label,
        dataset: { unit: String(a), token: String(u.tokens[0]) },
      });
      if (u.sink) {
        // Beside the lines: before the label on the left, after it on the right.
        const tag = el('span', { class: 'tag', text: 'sink', title: SINK_NOTE });
        if (side === 'left') t.prepend(tag);
        else t.append(tag);
      }
      t.style.top = (ys[side][a] - rh / 2) + 'px';
      t.style.height = rh + 'px';
      t.style.lineHeight = rh + 'px';
      t.title = describeUnit(a, sideObj) + (u.generated ? '\nGenerated by the model.' : '') + (u.sink ? '\n' + SINK_NOTE : '');
      t.addEventListener('mouseenter', () => set({ hover: { side, unit: a } }));
      t.addEventListener('mouseleave', () => {
        if (state.hover && state.hover.side === side && state.hover.unit === a) set({ hover: null });
      });
      col.append(t);
    });
  }
  $('hv-mid').style.width = width + 'px';
  $('hv-mid').style.height = height + 'px';
  headLayout = { y, yk, width, height, rh, m, mk };
}

/** Line buckets per head: buckets[h][b] holds (y_query, y_key) pairs of weight in bucket b. */
const headBuckets = Array.from({ length: H }, () => Array.from({ length: LINE_BUCKETS }, () => []));

function renderHead() {
  if (!headLayout) layoutHead();
  const { y, yk, width, height, m, mk } = headLayout;
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
  // Per unit of the side opposite the hovered one: its strongest shown weight and that head.
  const opposite = hv ? new Float64Array(hv.side === 'left' ? mk : m) : null;
  const oppositeHead = hv ? new Int32Array(opposite.length).fill(-1) : null;
  // The links each shown head draws, and how many heads draw each link: a link several heads
  // share is drawn once per head, side by side (a lane each, in head order), so that no head's
  // line hides another's.
  const sharing = new Uint8Array(m * mk);
  const links = new Array(H).fill(null);
  for (let h = 0; h < H; h++) {
    drawn.perHead[h] = 0;
    if (!state.shown[h]) continue;
    const M = unitMatrix(l, h);
    const mine = [];
    for (const a of qs) {
      const row = a * mk;
      const ya = y[a];
      for (const b of ks) {
        const v = M[row + b];
        if (v <= 0 || v < thr || (CAUSAL && unitMasked(a, b, l))) continue;
        if (opposite) {
          const o = hv.side === 'left' ? b : a;
          if (v > opposite[o]) { opposite[o] = v; oppositeHead[o] = h; }
        }
        drawn.perHead[h]++;
        const yb = yk[b];
        // Lines that never cross the visible band are counted but not drawn.
        if ((ya < top && yb < top) || (ya > bottom && yb > bottom)) continue;
        mine.push(row + b, v);
        if (sharing[row + b] < 255) sharing[row + b]++;
      }
    }
    links[h] = mine;
    total += drawn.perHead[h];
  }
  // bertviz draws 2 px lines. Software canvases draw one-device-pixel (hairline) lines many
  // times faster than anything wider, so busy views use those.
  const dpr = Math.min(window.devicePixelRatio || 1, 2);
  const lineW = total <= 3000 ? 2 : 1 / dpr;
  ctx.lineWidth = lineW;
  // Lanes of a shared link: a line's width and a pixel apart, all of them within most of a row
  // (at least a device pixel apart).
  const laneOf = new Uint8Array(m * mk);
  const lane = (k) => Math.max(1 / dpr, Math.min(Math.max(lineW, 1) + 1, (0.8 * headLayout.rh) / k));
  for (let h = 0; h < H; h++) {
    const buckets = headBuckets[h];
    for (const bk of buckets) bk.length = 0;
    const mine = links[h];
    if (!mine) continue;
    for (let i = 0; i < mine.length; i += 2) {
      const cell = mine[i];
      const k = sharing[cell];
      let off = 0;
      if (k > 1) {
        off = (laneOf[cell] - (k - 1) / 2) * lane(k);
        laneOf[cell]++;
      }
      const a = (cell / mk) | 0;
      const b = cell - a * mk;
      buckets[Math.min(LINE_BUCKETS - 1, (mine[i + 1] * LINE_BUCKETS) | 0)].push(y[a] + off, yk[b] + off);
    }
  }
  drawn.shared = sharing.reduce((n, k) => n + (k > 1 ? 1 : 0), 0);
  const x0 = 2;
  const x1 = width - 2;
  // The picked head, then the head under the pointer in the legend, are drawn last: on top.
  const order = [];
  for (let h = 0; h < H; h++) if (h !== state.hoverHead && !(state.headPicked && h === state.head)) order.push(h);
  if (state.headPicked && state.head !== state.hoverHead) order.push(state.head);
  if (state.hoverHead !== null && state.hoverHead !== undefined) order.push(state.hoverHead);
  drawn.order = order.filter((h) => state.shown[h]);
  for (const h of order) {
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
        t.style.backgroundColor = rgbCss(headRgb(oppositeHead[a]), Math.min(TINT_MAX, opposite[a]));
      } else {
        t.style.backgroundColor = '';
      }
    }
  }
  document.querySelectorAll('#head-legend button[data-head]').forEach((b) => {
    const h = Number(b.dataset.head);
    b.setAttribute('aria-pressed', String(state.shown[h]));
    b.classList.toggle('current', state.headPicked && h === state.head);
    b.firstChild.style.background = headColor(h);
  });
  const shownCount = state.shown.filter(Boolean).length;
  const shownList = state.shown.map((s, h) => (s ? h : -1)).filter((h) => h >= 0);
  let status = shownCount === H ? 'All ' + H + ' heads shown'
    : shownCount === 0 ? 'No head shown (click one, or press a for all)'
    : shownCount === 1 ? 'Only head ' + shownList[0] + ' shown'
    : shownCount <= 6 ? 'Heads ' + shownList.join(', ') + ' shown'
    : shownCount + ' of ' + H + ' heads shown';
  if (GROUPED) {
    const groups = [];
    for (let g = 0; g < KVH; g++) {
      const hs = headsOfKv(g);
      if (hs.every((h) => state.shown[h]) && hs.length > 1) groups.push(g);
    }
    if (shownCount > 0 && shownCount < H && groups.length) status += ' (key/value head' + (groups.length > 1 ? 's ' : ' ') + groups.join(', ') + ')';
  }
  status += state.headPicked
    ? ' · head ' + state.head + (GROUPED ? ' (' + kvNote(state.head) + ')' : '') + ' outlined: Space toggles it, o shows only it, ← → move the outline'
    : ' · ← → pick a head with the keyboard';
  $('head-status').textContent = status;
  // The key to the hover colours, in the colour of the strongest link while hovering.
  let strongest = -1;
  if (hv) for (let a = 0; a < opposite.length; a++) if (oppositeHead[a] >= 0 && (strongest < 0 || opposite[a] > opposite[strongest])) strongest = a;
  const key = $('hv-key');
  const mode = hv ? 'hover:' + hv.side + ':' + hv.unit : 'idle';
  if (key.dataset.mode !== mode) {
    key.dataset.mode = mode;
    key.textContent = '';
    if (hv) {
      key.append(el('span', { class: 'key-swatch hovered' }), ' ' + describeUnit(hv.unit, hv.side === 'left' ? QSIDE : KSIDE) + ', under the pointer; ',
        el('span', { class: 'key-swatch tint' }), ' the tokens it ' + (hv.side === 'left' ? 'attends to' : 'is attended by') +
        ', each tinted in the colour of the head that links them most strongly, deeper for a larger weight.');
    } else {
      key.append('Hover a token: ', el('span', { class: 'key-swatch hovered' }), ' marks it, and ',
        el('span', { class: 'key-swatch tint' }), ' tints each token on the other side in the colour of the head that links them most strongly, deeper for a larger weight.');
    }
  }
  const tintRgb = headRgb(strongest >= 0 ? oppositeHead[strongest] : state.head);
  key.querySelector('.tint').style.background = 'linear-gradient(90deg, ' + rgbCss(tintRgb, 0.05) + ', ' + rgbCss(tintRgb, TINT_MAX) + ')';
  let info = 'Layer ' + layerName(l) + ' · ' + shownCount + ' of ' + H + ' heads' + (GROUPED ? ' (' + KVH + ' key/value heads)' : '') +
    ' · ' + total.toLocaleString('en') + ' lines of weight ≥ ' + thr.toFixed(3) + ' (opacity = weight)';
  if (drawn.shared) info += ' · a link several heads share is drawn once per head, side by side; the outlined or pointed-at head on top';
  if (CAUSAL) info += ' · causal: lines only to the token itself and earlier ones';
  if (!SQUARE) info += ' · cross-attention: decoder tokens (left) attend to encoder tokens (right)';
  if (hv) info += ' · only ' + (hv.side === 'left' ? 'from ' : 'to ') + describeUnit(hv.unit, hv.side === 'left' ? QSIDE : KSIDE);
  if (state.pair !== 'all') info += ' · ' + state.pair[0] + '→' + state.pair[1] + ' only';
  $('hv-info').textContent = info;
}
