/* attnviz report: the model view, every layer x head as a thumbnail (lines or heatmap). */

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
