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
  for (let h = 0; h < H; h++) {
    const sw = el('span', { class: 'swatch' });
    const b = el('button', { type: 'button', title: 'Head ' + h + ': click to toggle, double-click to show only this head', dataset: { head: String(h) } }, sw, String(h));
    b.addEventListener('click', () => toggleHead(h));
    b.addEventListener('dblclick', () => soloHead(h));
    legend.append(b);
  }
}

function layoutHead() {
  // The token elements are rebuilt, so the one under the pointer (if any) will never see the
  // pointer leave: start without a hovered token.
  state.hover = null;
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
        if (v <= 0 || v < thr || (CAUSAL && unitMasked(a, b))) continue;
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
        t.style.backgroundColor = rgbCss(headRgb(oppositeHead[a]), Math.min(TINT_MAX, opposite[a]));
      } else {
        t.style.backgroundColor = '';
      }
    }
  }
  document.querySelectorAll('#head-legend button').forEach((b) => {
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
  status += state.headPicked
    ? ' · head ' + state.head + ' outlined: Space toggles it, o shows only it, ← → move the outline'
    : ' · ← → pick a head with the keyboard';
  $('head-status').textContent = status;
  // The key to the hover colours, in the colour of the strongest link while hovering.
  let strongest = -1;
  if (hv) for (let a = 0; a < m; a++) if (oppositeHead[a] >= 0 && (strongest < 0 || opposite[a] > opposite[strongest])) strongest = a;
  const key = $('hv-key');
  const mode = hv ? 'hover:' + hv.side + ':' + hv.unit : 'idle';
  if (key.dataset.mode !== mode) {
    key.dataset.mode = mode;
    key.textContent = '';
    if (hv) {
      key.append(el('span', { class: 'key-swatch hovered' }), ' ' + describeUnit(hv.unit) + ', under the pointer; ',
        el('span', { class: 'key-swatch tint' }), ' the tokens it ' + (hv.side === 'left' ? 'attends to' : 'is attended by') +
        ', each tinted in the colour of the head that links them most strongly, deeper for a larger weight.');
    } else {
      key.append('Hover a token: ', el('span', { class: 'key-swatch hovered' }), ' marks it, and ',
        el('span', { class: 'key-swatch tint' }), ' tints each token on the other side in the colour of the head that links them most strongly, deeper for a larger weight.');
    }
  }
  const tintRgb = headRgb(strongest >= 0 ? oppositeHead[strongest] : state.head);
  key.querySelector('.tint').style.background = 'linear-gradient(90deg, ' + rgbCss(tintRgb, 0.05) + ', ' + rgbCss(tintRgb, TINT_MAX) + ')';
  let info = 'Layer ' + l + ' · ' + shownCount + ' of ' + H + ' heads · ' + total.toLocaleString('en') +
    ' lines of weight ≥ ' + thr.toFixed(3) + ' (opacity = weight)';
  if (hv) info += ' · only ' + (hv.side === 'left' ? 'from ' : 'to ') + describeUnit(hv.unit);
  if (state.pair !== 'all') info += ' · ' + state.pair[0] + '→' + state.pair[1] + ' only';
  $('hv-info').textContent = info;
}
