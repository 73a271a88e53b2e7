/* attnviz report: the logit lens view. Stages (the embeddings, then each layer's output) ×
 * positions; each cell is the most probable token that the model's final norm and head read
 * from the residual stream there, coloured by its probability; the hovered (or clicked) cell's
 * top k is listed beside the table. */

/* --------------------------------------------------------------- lens view */

const LENS = analysis.lens || null;
if (state.view === 'lens' && !LENS) state.view = 'head';

/** A lens token as a person reads it in a small cell (as the PNG and the terminal show it): a
 *  leading space dropped, a token of spaces only as ␣, line breaks and controls made visible. */
function lensText(text) {
  if (text.length && /^ +$/.test(text)) return '␣'.repeat(Math.min(3, text.length));
  return visibleText(text.startsWith(' ') ? text.slice(1) : text);
}

let lensBuilt = false;
let lensPinned = null; // [stage, position] of the clicked cell

function lensCellTitle(s, p) {
  return LENS.stages[s] + ' · position ' + p + ' (' + LENS.positions[p] + ')';
}

/** The top k of one cell, most probable first, into the strip above the table. */
function showLensCell(s, p) {
  const box = $('lens-top');
  box.textContent = '';
  box.append(el('span', { class: 'lens-where', text: lensCellTitle(s, p) + (lensPinned ? ' (pinned: click it again to unpin)' : '') + ':' }));
  for (const t of LENS.top[s][p]) {
    const bar = el('span', { class: 'lens-bar' });
    bar.style.width = Math.max(1, Math.round(t.prob * 60)) + 'px';
    bar.style.background = lutCss(t.prob);
    box.append(el('span', {},
      el('span', { class: 'lens-token', text: lensText(t.text), title: 'id ' + t.id + ': ' + JSON.stringify(t.text) }),
      el('span', { class: 'num', text: (100 * t.prob).toFixed(1) + '%' }),
      bar));
  }
}

function buildLens() {
  lensBuilt = true;
  const grid = $('lens-grid');
  grid.textContent = '';
  const P = LENS.positions.length;
  grid.style.gridTemplateColumns = 'max-content repeat(' + P + ', max-content)';
  grid.append(el('span', { class: 'axis', text: '' }));
  for (let p = 0; p < P; p++) grid.append(el('span', { class: 'axis lens-pos', text: LENS.positions[p], title: 'position ' + p }));
  for (let s = 0; s < LENS.stages.length; s++) {
    grid.append(el('span', { class: 'axis lens-stage', text: LENS.stages[s] }));
    for (let p = 0; p < P; p++) {
      const top = LENS.top[s][p][0];
      const cell = el('button', { type: 'button', class: 'lens-cell', dataset: { stage: String(s), pos: String(p) } }, lensText(top.text));
      cell.style.background = lutCss(top.prob);
      const i = lutIndex(top.prob) * 3;
      const lum = 0.2126 * LUT[i] + 0.7152 * LUT[i + 1] + 0.0722 * LUT[i + 2];
      cell.style.color = lum > 140 ? '#111' : '#fff';
      cell.setAttribute('aria-label', lensCellTitle(s, p) + ': ' + lensText(top.text) + ' ' + (100 * top.prob).toFixed(1) + '%');
      cell.addEventListener('mouseenter', () => { if (!lensPinned) showLensCell(s, p); });
      cell.addEventListener('focus', () => { if (!lensPinned) showLensCell(s, p); });
      cell.addEventListener('click', () => {
        const same = lensPinned && lensPinned[0] === s && lensPinned[1] === p;
        grid.querySelectorAll('.lens-cell.current').forEach((c) => c.classList.remove('current'));
        lensPinned = same ? null : [s, p];
        if (!same) cell.classList.add('current');
        showLensCell(s, p);
      });
      grid.append(cell);
    }
  }
  // The last stage at the last position: the model's own prediction.
  showLensCell(LENS.stages.length - 1, P - 1);
  $('lens-min').textContent = '0';
  $('lens-max').textContent = '1';
  document.querySelectorAll('#view-lens .cbar').forEach(drawColorbar);
}

function renderLens() {
  if (!LENS) return;
  if (!lensBuilt) buildLens();
  const causal = CAUSAL
    ? 'through the model\'s final norm and head, for the next token (position i predicts token i + 1)'
    : 'through the model\'s own masked-LM head, for the token at that position';
  $('lens-desc').textContent = 'Each cell: the most probable token read from the residual stream after that stage, ' +
    causal + '; colour: its probability. ' +
    'Hover a cell for its top ' + LENS.k + ', click to pin it. Per token: the lens does not merge words or hide special tokens.';
}
