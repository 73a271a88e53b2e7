/* attnviz report: the heads view. Per-head direct logit attribution (each head's share of the
 * target's logit at the last position) and head ablation (the change in the target's
 * log-probability when a head is removed) as layers × heads heatmaps, coloured on a diverging
 * scale centred at 0 (red above, blue below, fading to the page's background at 0), with the
 * heads ranked by |value| beside them and the hovered (or clicked) cell's value above. */

/* -------------------------------------------------------------- heads view */

const HEAD_PARTS = [
  analysis.head_attribution ? { id: 'attribution', data: analysis.head_attribution } : null,
  analysis.head_ablation ? { id: 'ablation', data: analysis.head_ablation } : null,
].filter(Boolean);
if (state.view === 'heads' && !HEAD_PARTS.length) state.view = 'head';

let headsPart = HEAD_PARTS.length ? HEAD_PARTS[0].id : null;
let headsPinned = null; // [layer, head] of the clicked cell

function headsData() {
  const part = HEAD_PARTS.find((p) => p.id === headsPart) || HEAD_PARTS[0];
  return { id: part.id, d: part.data, grid: part.id === 'attribution' ? part.data.per_head : part.data.delta };
}

/** A token as the view names it: its text quoted as JSON, so spaces and controls show. */
function headsToken(t) {
  return JSON.stringify(t.text);
}

/** What one number of the shown part is, in words (units included). */
function headsWhat(id, d) {
  if (id === 'attribution') {
    const of = d.contrast ? 'logit(' + headsToken(d.target) + ') − logit(' + headsToken(d.contrast) + ')' : 'logit of ' + headsToken(d.target);
    return of;
  }
  return 'Δ log p(' + headsToken(d.target) + ')';
}

function headsNum(v) {
  return (v > 0 ? '+' : v < 0 ? '−' : '') + Math.abs(v).toFixed(Math.abs(v) >= 100 ? 1 : 3);
}

function headsMaxAbs(grid) {
  let m = 0;
  for (const row of grid) for (const v of row) m = Math.max(m, Math.abs(v));
  return m;
}

/** The hovered or pinned cell's value, into the strip above the grid. */
function showHeadsCell(l, h) {
  const { id, d, grid } = headsData();
  const box = $('heads-value');
  box.textContent = '';
  const v = grid[l][h];
  box.append(
    el('span', { class: 'heads-where', text: 'layer ' + l + ' · head ' + h + (headsPinned ? ' (pinned: click it again to unpin)' : '') + ':' }),
    el('span', { class: 'num heads-num', text: headsNum(v) }),
    el('span', { class: 'muted', text: headsWhat(id, d) }),
  );
}

function headsCellLabel(id, d, l, h, v) {
  return 'layer ' + l + ' head ' + h + ': ' + headsNum(v) + ' (' + headsWhat(id, d) + ')';
}

function buildHeadsGrid() {
  const { id, d, grid } = headsData();
  const bgRgb = parseRgb(cssVar('--bg'));
  const maxAbs = headsMaxAbs(grid);
  const box = $('heads-grid');
  box.textContent = '';
  const H = d.heads;
  box.style.gridTemplateColumns = 'max-content repeat(' + H + ', max-content)';
  box.append(el('span', { class: 'axis', text: '' }));
  for (let h = 0; h < H; h++) box.append(el('span', { class: 'axis heads-col', text: 'H' + h, title: 'head ' + h }));
  for (let l = 0; l < d.layers; l++) {
    box.append(el('span', { class: 'axis heads-row', text: 'L' + l, title: 'layer ' + l }));
    for (let h = 0; h < H; h++) {
      const v = grid[l][h];
      const cell = el('button', { type: 'button', class: 'heads-cell', dataset: { layer: String(l), head: String(h) } }, headsNum(v));
      cell.style.background = divergingColor(v, maxAbs, bgRgb);
      const rgb = parseRgb(divergingColor(v, maxAbs, bgRgb));
      cell.style.color = contrast(rgb, [17, 17, 17]) >= contrast(rgb, [255, 255, 255]) ? '#111' : '#fff';
      cell.setAttribute('aria-label', headsCellLabel(id, d, l, h, v));
      if (headsPinned && headsPinned[0] === l && headsPinned[1] === h) cell.classList.add('current');
      cell.addEventListener('mouseenter', () => { if (!headsPinned) showHeadsCell(l, h); });
      cell.addEventListener('focus', () => { if (!headsPinned) showHeadsCell(l, h); });
      cell.addEventListener('click', () => {
        const same = headsPinned && headsPinned[0] === l && headsPinned[1] === h;
        box.querySelectorAll('.heads-cell.current').forEach((c) => c.classList.remove('current'));
        headsPinned = same ? null : [l, h];
        if (!same) cell.classList.add('current');
        showHeadsCell(l, h);
      });
      box.append(cell);
    }
  }
  // The ranked list: the heads with the largest |value|, as the JSON ranks them.
  const list = $('heads-ranked');
  list.textContent = '';
  for (const r of d.ranked) {
    const bar = el('span', { class: 'heads-bar' });
    bar.style.width = Math.max(1, Math.round(maxAbs > 0 ? 80 * Math.abs(r.value) / maxAbs : 0)) + 'px';
    bar.style.background = rgbCss(r.value >= 0 ? POSITIVE : NEGATIVE);
    const item = el('li', { dataset: { layer: String(r.layer), head: String(r.head) } },
      el('span', { class: 'heads-name', text: 'L' + r.layer + ' H' + r.head }),
      el('span', { class: 'num', text: headsNum(r.value) }),
      bar);
    item.addEventListener('mouseenter', () => { if (!headsPinned) showHeadsCell(r.layer, r.head); });
    list.append(item);
  }
  // The colour scale: −max … 0 … +max.
  const canvas = $('heads-cbar');
  const w = 160;
  canvas.width = w;
  canvas.height = 1;
  const ctx = canvas.getContext('2d');
  for (let x = 0; x < w; x++) {
    ctx.fillStyle = divergingColor(((x + 0.5) / w * 2 - 1) * maxAbs, maxAbs, bgRgb);
    ctx.fillRect(x, 0, 1, 1);
  }
  $('heads-min').textContent = headsNum(-maxAbs);
  $('heads-max').textContent = headsNum(maxAbs);
  $('heads-unit').textContent = id === 'attribution' ? 'logit' : 'Δ log-probability';
  const top = d.ranked[0];
  if (headsPinned) showHeadsCell(headsPinned[0], headsPinned[1]);
  else if (top) showHeadsCell(top.layer, top.head);
}

function renderHeads() {
  if (!HEAD_PARTS.length) return;
  const pick = $('heads-pick');
  if (!pick.dataset.built) {
    pick.dataset.built = '1';
    for (const p of HEAD_PARTS) {
      pick.append(el('button', { type: 'button', dataset: { part: p.id }, onclick: () => { headsPart = p.id; headsPinned = null; render(); } },
        p.id === 'attribution' ? 'Attribution' : 'Ablation'));
    }
  }
  pick.hidden = HEAD_PARTS.length < 2;
  pick.querySelectorAll('button').forEach((b) => b.setAttribute('aria-pressed', String(b.dataset.part === headsPart)));
  const { id, d } = headsData();
  const at = 'at position ' + d.position + ' (' + JSON.stringify(d.position_token) + '), the last';
  if (id === 'attribution') {
    $('heads-desc').textContent = 'Each head\'s direct contribution to the ' + headsWhat(id, d) + ' ' + at +
      ': its output through the final norm (frozen at the real residual) onto the unembedding. ' +
      'The whole residual gives ' + headsNum(d.logit) + '; the embeddings ' + headsNum(d.embeddings) +
      '. Red raises it, blue lowers it. Hover a cell for its value, click to pin it.';
  } else {
    $('heads-desc').textContent = 'The change in the log-probability of ' + headsToken(d.target) + ' ' + at +
      ', when each head is ' + (d.mode === 'mean' ? 'replaced by its mean over the input' : 'zeroed') +
      ', one at a time (with every head: ' + headsNum(d.base_log_prob) + '). Blue: the head helps the prediction. ' +
      'Hover a cell for its value, click to pin it.';
  }
  buildHeadsGrid();
}
