/* attnviz report: the stats view, a layers x heads grid coloured by a per-head statistic. */

/* -------------------------------------------------------------- stats view */

function renderStats() {
  const grid = $('stats-grid');
  const stat = stats.find((s) => s.id === state.stat) || stats[0];
  if (!stat) { grid.textContent = ''; return; }
  $('stat-select').value = stat.id;
  $('stat-desc').textContent = stat.description + (meta.stats_left_out ? ' Statistics: ' + meta.stats_left_out + '.' : '') + ' Click a cell to open that head.';
  let lo = Infinity;
  let hi = -Infinity;
  for (const row of stat.values) for (const v of row) if (v !== null && !Number.isNaN(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  if (!Number.isFinite(lo)) { lo = 0; hi = 1; }
  grid.textContent = '';
  grid.style.gridTemplateColumns = '28px repeat(' + H + ', auto)';
  grid.append(el('span', { class: 'axis', text: 'L \\ H' }));
  for (let h = 0; h < H; h++) grid.append(el('span', { class: 'axis', text: String(h), title: 'Head ' + h + (GROUPED ? ' (' + kvNote(h) + ')' : '') }));
  const labels = analysis.head_labels;
  for (let l = 0; l < L; l++) {
    grid.append(el('span', { class: 'axis', text: layerName(l) }));
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
      cell.classList.toggle('current', state.headPicked && l === state.layer && h === state.head);
      cell.addEventListener('click', () => openHead(l, h));
      cell.addEventListener('mousemove', (e) => {
        let t = 'Layer ' + layerName(l) + ', head ' + h + (GROUPED ? ' (' + kvNote(h) + ')' : '') + (tag ? ' — ' + tag : '');
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
  renderImageNorms();
}
