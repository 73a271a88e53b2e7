/* attnviz report: the Speech view (a speech run's report only, `meta.speech`). The recording's
 * log-mel spectrogram as a strip, the cross-attention as words × time under it with each word's
 * time (from the alignment heads) boxed on its row, a player whose cursor runs across both and
 * lights the word being said, and the encoder's self-attention pooled into blocks of frames.
 * The numbers come from src/render/speech.rs (the PNG figures draw the same): sections
 * `speech:mel`, `speech:words` (the alignment heads' mean, each layer's head mean, each head)
 * and `speech:encoder` (each layer's head mean, each head), laid out in src/render/html/speech.rs.
 */

const SPEECH = META.speech || null;
if (SPEECH && !ASKED_VIEW && meta.initial.view === 'head') state.view = 'speech';
if (!SPEECH && state.view === 'speech') state.view = 'head';
if (SPEECH) Object.assign(state, { speechSource: 'alignment', speechEncoder: 'mean:' + Math.max(0, ((SPEECH.encoder && SPEECH.encoder.layers) || 1) - 1) });

/** What the Speech view drew last; read by the browser tests. */
const speechDrawn = { seq: 0, source: null, words: 0, frames: 0, max: 0, current: -1, cursorX: null, boxes: [], encoder: null, audio: false };

/** The decoded sections, on first use. */
let speechData = null;
function speechLoad() {
  if (speechData) return speechData;
  const find = (name) => {
    const s = META.payload.sections.find((x) => x.name === name);
    return s ? decodeSection(RAW, s) : null;
  };
  speechData = { mel: find('speech:mel'), words: find('speech:words'), encoder: find('speech:encoder') };
  return speechData;
}

/** The word matrices on offer: the alignment mean, each layer's mean, each head. */
function speechSources() {
  if (!SPEECH || !SPEECH.has_words) return [];
  const out = [{ id: 'alignment', block: 0, label: SPEECH.alignment_what + ' (the word times\' heads)' }];
  const L_ = SPEECH.layers;
  const H_ = SPEECH.heads;
  for (let l = 0; l < L_; l++) out.push({ id: 'mean:' + l, block: 1 + l, label: 'layer ' + SPEECH.layer_numbers[l] + ' · mean of ' + H_ + ' heads' });
  if (SPEECH.word_heads) {
    for (let l = 0; l < L_; l++) {
      for (let h = 0; h < H_; h++) out.push({ id: 'head:' + l + ':' + h, block: 1 + L_ + l * H_ + h, label: 'layer ' + SPEECH.layer_numbers[l] + ' · head ' + h });
    }
  }
  return out;
}

/** The encoder's pooled matrices on offer: each layer's mean, each head. */
function speechEncoderSources() {
  const E = SPEECH && SPEECH.encoder;
  if (!E) return [];
  const out = [];
  for (let l = 0; l < E.layers; l++) out.push({ id: 'mean:' + l, block: l, label: 'layer ' + l + ' · mean of ' + E.heads + ' heads' });
  if (E.heads_kept) {
    for (let l = 0; l < E.layers; l++) {
      for (let h = 0; h < E.heads; h++) out.push({ id: 'head:' + l + ':' + h, block: E.layers + l * E.heads + h, label: 'layer ' + l + ' · head ' + h });
    }
  }
  return out;
}

/** Magma, 9 stops: the spectrogram's colours (the attention is in viridis). */
const MAGMA = ['#000004', '#1c1044', '#4f127b', '#812581', '#b5367a', '#e55064', '#fb8761', '#fec287', '#fcfdbf'].map(hexToRgb);
function magma(t) {
  const x = Math.max(0, Math.min(1, t)) * (MAGMA.length - 1);
  const a = Math.min(MAGMA.length - 2, Math.floor(x));
  const f = x - a;
  return [0, 1, 2].map((c) => Math.round(MAGMA[a][c] * (1 - f) + MAGMA[a + 1][c] * f));
}

const SP_LABEL_W = 120;
const SP_STRIP = 96;
const SP_ROW = 20;
const SP_GAP = 8;
const SP_AXIS = 34;

/** The plot's geometry for the current width. */
function speechGeometry() {
  const F = SPEECH.frames;
  const W = SPEECH.words.length;
  const plotW = Math.max(300, Math.min(F * 12, contentWidth() - SP_LABEL_W - 24));
  const x0 = SP_LABEL_W;
  const stripY = 4;
  const heatY = stripY + SP_STRIP + SP_GAP;
  return { F, W, plotW, x0, stripY, heatY, heatH: W * SP_ROW, width: x0 + plotW + 8, height: heatY + W * SP_ROW + SP_AXIS };
}

/** Seconds from the recording's start → x on the plot. */
function speechX(g, seconds) {
  return g.x0 + ((seconds - SPEECH.window_start) / (SPEECH.frames * SPEECH.frame_seconds)) * g.plotW;
}

/** The word being said at `seconds`, or -1. */
function speechWordAt(seconds) {
  return SPEECH.words.findIndex((w) => w.start <= seconds && seconds < w.end);
}

function renderSpeech() {
  if (!SPEECH) return;
  const data = speechLoad();
  const g = speechGeometry();
  const canvas = $('speech-canvas');
  const ctx = sizeCanvas(canvas, g.width, g.height);
  sizeCanvas($('speech-cursor'), g.width, g.height);
  const text = cssVar('--fg') || '#222';
  const muted = cssVar('--muted') || '#666';
  ctx.font = '12px ' + FONT_FAMILY;
  // The spectrogram: bins from the top (highest) down, each column the mean of its mel frames.
  const mel = data.mel;
  const melFrames = Math.min(SPEECH.mel_frames, Math.round(g.F * SPEECH.frame_seconds / SPEECH.mel_seconds));
  if (mel && melFrames > 0) {
    const cols = Math.max(1, Math.round(g.plotW));
    const bins = SPEECH.mel_bins;
    const off = document.createElement('canvas');
    off.width = cols;
    off.height = bins;
    const octx = off.getContext('2d');
    const img = octx.createImageData(cols, bins);
    const levels = mel.dtype === 'u8' ? 255 : 65535;
    for (let r = 0; r < bins; r++) {
      const bin = bins - 1 - r;
      for (let c = 0; c < cols; c++) {
        const m0 = Math.floor(c * melFrames / cols);
        const m1 = Math.max(m0 + 1, Math.floor((c + 1) * melFrames / cols));
        let s = 0;
        for (let m = m0; m < m1; m++) s += mel.values[bin * SPEECH.mel_frames + m];
        const rgb = magma(s / (m1 - m0) / levels);
        img.data.set([rgb[0], rgb[1], rgb[2], 255], (r * cols + c) * 4);
      }
    }
    octx.putImageData(img, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(off, g.x0, g.stripY, g.plotW, SP_STRIP);
  }
  ctx.fillStyle = muted;
  ctx.textBaseline = 'middle';
  if (mel && melFrames > 0) {
    ctx.textAlign = 'right';
    ctx.fillText('log-mel', g.x0 - 8, g.stripY + SP_STRIP / 2);
    ctx.fillText('8 kHz', g.x0 - 8, g.stripY + 8);
  } else {
    // A report drawn from a JSON export (attnviz render): it carries no spectrogram.
    ctx.textAlign = 'left';
    ctx.fillText('no spectrogram: the JSON export does not carry it; run the model on the recording to draw it', g.x0, g.stripY + SP_STRIP / 2);
  }
  // The words × time matrix.
  const src = speechSources().find((s) => s.id === state.speechSource) || speechSources()[0];
  let max = 0;
  const boxes = [];
  if (src && data.words) {
    const n = g.W * g.F;
    const vals = data.words.values.subarray(src.block * n, (src.block + 1) * n);
    for (let i = 0; i < n; i++) max = Math.max(max, vals[i]);
    const off = document.createElement('canvas');
    off.width = g.F;
    off.height = Math.max(1, g.W);
    const octx = off.getContext('2d');
    const img = octx.createImageData(g.F, Math.max(1, g.W));
    for (let i = 0; i < n; i++) {
      // Square root: a row's weight spreads over hundreds of frames.
      const t = max > 0 ? Math.sqrt(vals[i] / max) : 0;
      const j = lutIndex(t) * 3;
      img.data.set([LUT[j], LUT[j + 1], LUT[j + 2], 255], i * 4);
    }
    octx.putImageData(img, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(off, g.x0, g.heatY, g.plotW, g.heatH);
    max = max * data.words.step;
  }
  SPEECH.words.forEach((w, i) => {
    const y = g.heatY + i * SP_ROW;
    ctx.fillStyle = text;
    ctx.textAlign = 'right';
    ctx.fillText(w.word.trim(), g.x0 - 8, y + SP_ROW / 2);
    const x0 = speechX(g, w.start);
    const x1 = speechX(g, w.end);
    boxes.push([x0, y + 1, x1, y + SP_ROW - 1]);
    if (x1 > x0) {
      ctx.lineWidth = 3;
      ctx.strokeStyle = '#000';
      ctx.strokeRect(x0, y + 1.5, x1 - x0, SP_ROW - 3);
      ctx.lineWidth = 1.5;
      ctx.strokeStyle = '#fff';
      ctx.strokeRect(x0, y + 1.5, x1 - x0, SP_ROW - 3);
    }
    ctx.fillStyle = '#fff';
    ctx.fillRect(Math.round(x0), g.stripY + SP_STRIP - 6, 1, 6);
  });
  // The time axis, in seconds from the recording's start.
  const seconds = g.F * SPEECH.frame_seconds;
  const perSecond = g.plotW / seconds;
  const step = [0.1, 0.2, 0.5, 1, 2, 5, 10].find((s) => s * perSecond >= 60) || 10;
  ctx.fillStyle = text;
  ctx.textAlign = 'center';
  ctx.textBaseline = 'top';
  const axisY = g.heatY + g.heatH + 2;
  for (let k = Math.ceil(SPEECH.window_start / step); k * step <= SPEECH.window_start + seconds + 1e-9; k++) {
    const t = k * step;
    const x = speechX(g, t);
    ctx.fillRect(Math.round(x), axisY, 1, 5);
    ctx.fillText((Math.round(t * 10) / 10) + ' s', x, axisY + 7);
  }
  Object.assign(speechDrawn, { source: src ? src.id : null, words: g.W, frames: g.F, max, boxes, audio: Boolean(SPEECH.audio) });
  $('speech-info').textContent = (src ? src.label : 'no cross-attention in this report') +
    ' · rows: the words, each the mean of the decoder rows that write its tokens; boxes: each word\u2019s time from the alignment heads (dynamic time warping, as openai-whisper\u2019s word timestamps); square-root colour scale up to ' +
    scaleNumber(max) + '.';
  renderSpeechWords();
  renderSpeechEncoder(data);
  speechCursor();
  speechDrawn.seq++;
}

/** The words as a line of text under the plot, each with its time; the current one lit. */
function renderSpeechWords() {
  const box = $('speech-words');
  if (box.childElementCount !== SPEECH.words.length) {
    box.replaceChildren(...SPEECH.words.map((w, i) => {
      const b = el('button', { type: 'button', class: 'speech-word', dataset: { word: String(i) }, title: w.start.toFixed(2) + '–' + w.end.toFixed(2) + ' s' }, w.word.trim());
      b.addEventListener('click', () => {
        const a = $('speech-audio');
        if (a && SPEECH.audio) a.currentTime = Math.max(0, w.start - SPEECH.window_start);
        speechCursor(w.start);
      });
      return b;
    }));
  }
}

/** The encoder's self-attention pooled into blocks (each cell: a block of query frames' weight
 *  on a block of key frames, summed over the keys and averaged over the queries). */
function renderSpeechEncoder(data) {
  const E = SPEECH.encoder;
  const fig = $('speech-encoder-figure');
  fig.hidden = !E || !data.encoder;
  if (fig.hidden) return;
  const src = speechEncoderSources().find((s) => s.id === state.speechEncoder) || speechEncoderSources()[0];
  const m = E.side;
  const vals = data.encoder.values.subarray(src.block * m * m, (src.block + 1) * m * m);
  let max = 0;
  for (let i = 0; i < vals.length; i++) max = Math.max(max, vals[i]);
  const side = Math.min(600, Math.max(300, contentWidth() - 40));
  const canvas = $('speech-encoder');
  const ctx = sizeCanvas(canvas, side, side);
  const off = document.createElement('canvas');
  off.width = m;
  off.height = m;
  const octx = off.getContext('2d');
  const img = octx.createImageData(m, m);
  for (let i = 0; i < m * m; i++) {
    const j = lutIndex(max > 0 ? Math.sqrt(vals[i] / max) : 0) * 3;
    img.data.set([LUT[j], LUT[j + 1], LUT[j + 2], 255], i * 4);
  }
  octx.putImageData(img, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, 0, 0, side, side);
  // Where the audio ends: after it the encoder reads padding.
  const end = SPEECH.window_seconds / (SPEECH.frame_seconds * E.block * m) * side;
  if (end < side) {
    ctx.strokeStyle = '#fff';
    ctx.setLineDash([4, 4]);
    ctx.beginPath();
    ctx.moveTo(end, 0); ctx.lineTo(end, side);
    ctx.moveTo(0, end); ctx.lineTo(side, end);
    ctx.stroke();
    ctx.setLineDash([]);
  }
  const ms = Math.round(E.block * SPEECH.frame_seconds * 1000);
  $('speech-encoder-caption').textContent = 'Encoder self-attention, ' + src.label + ' · pooled: 1 cell = ' + ms + ' ms (' +
    E.block + ' × ' + E.block + ' frames: summed over the keys, averaged over the queries) · ' + m + ' × ' + m +
    ' cells · square-root colour scale up to ' + scaleNumber(max * data.encoder.step) +
    (end < side ? ' · dashed: the audio ends at ' + (SPEECH.window_start + SPEECH.window_seconds).toFixed(2) + ' s, padding after' : '');
  speechDrawn.encoder = { source: src.id, side: m, block: E.block, max: max * data.encoder.step };
}

/** The player's cursor over the strip and the matrix, and the word being said lit. */
function speechCursor(at) {
  if (!SPEECH || state.view !== 'speech') return;
  const a = $('speech-audio');
  const seconds = at !== undefined ? at : SPEECH.window_start + (a && SPEECH.audio ? a.currentTime : 0);
  const g = speechGeometry();
  const ctx = sizeCanvas($('speech-cursor'), g.width, g.height);
  const x = speechX(g, seconds);
  const current = speechWordAt(seconds);
  if (current >= 0) {
    ctx.fillStyle = 'rgba(255,255,255,0.18)';
    ctx.fillRect(0, g.heatY + current * SP_ROW, g.x0 + g.plotW, SP_ROW);
  }
  const moving = (a && !a.paused) || at !== undefined || seconds > SPEECH.window_start;
  if (moving) {
    ctx.fillStyle = '#ff3b30';
    ctx.fillRect(Math.round(x) - 1, g.stripY, 2, g.heatY + g.heatH - g.stripY);
  }
  speechDrawn.cursorX = moving ? x : null;
  if (current !== speechDrawn.current) {
    speechDrawn.current = current;
    document.querySelectorAll('#speech-words .speech-word').forEach((b, i) => b.classList.toggle('current', i === current));
    $('speech-now').textContent = current >= 0
      ? '“' + SPEECH.words[current].word.trim() + '” ' + SPEECH.words[current].start.toFixed(2) + '–' + SPEECH.words[current].end.toFixed(2) + ' s'
      : '';
  }
}

/** Wire the Speech view's controls and player (once per boot). */
function setupSpeech() {
  $('tab-speech').hidden = !SPEECH;
  if (!SPEECH) return;
  const sel = $('speech-source');
  for (const s of speechSources()) sel.append(el('option', { value: s.id, text: s.label }));
  sel.value = state.speechSource;
  sel.addEventListener('change', () => set({ speechSource: sel.value }));
  const esel = $('speech-encoder-source');
  for (const s of speechEncoderSources()) esel.append(el('option', { value: s.id, text: s.label }));
  esel.value = state.speechEncoder;
  esel.addEventListener('change', () => set({ speechEncoder: esel.value }));
  $('speech-name').textContent = SPEECH.name + ' · ' + SPEECH.window_start.toFixed(2) + '–' +
    (SPEECH.window_start + SPEECH.window_seconds).toFixed(2) + ' s · ' + SPEECH.words.length + ' words';
  const a = $('speech-audio');
  if (SPEECH.audio) {
    a.src = SPEECH.audio;
    let frame = 0;
    const tick = () => {
      speechCursor();
      frame = a.paused ? 0 : requestAnimationFrame(tick);
    };
    a.addEventListener('play', () => { if (!frame) frame = requestAnimationFrame(tick); }, { signal: ABORT.signal });
    for (const e of ['timeupdate', 'seeked', 'pause', 'ended']) a.addEventListener(e, () => speechCursor(), { signal: ABORT.signal });
  } else {
    a.hidden = true;
  }
  // Click on the plot: play from there.
  $('speech-cursor').addEventListener('click', (e) => {
    const g = speechGeometry();
    const r = e.target.getBoundingClientRect();
    const t = SPEECH.window_start + ((e.clientX - r.left - g.x0) / g.plotW) * SPEECH.frames * SPEECH.frame_seconds;
    if (t < SPEECH.window_start) return;
    if (SPEECH.audio) a.currentTime = Math.max(0, t - SPEECH.window_start);
    speechCursor(t);
  });
  $('speech-cursor').addEventListener('mousemove', (e) => {
    const g = speechGeometry();
    const r = e.target.getBoundingClientRect();
    const x = e.clientX - r.left;
    const y = e.clientY - r.top;
    const f = Math.floor(((x - g.x0) / g.plotW) * g.F);
    const w = Math.floor((y - g.heatY) / SP_ROW);
    if (f < 0 || f >= g.F || w < 0 || w >= g.W) { hideTip(); return; }
    const data = speechLoad();
    const src = speechSources().find((s) => s.id === state.speechSource);
    const t = SPEECH.window_start + f * SPEECH.frame_seconds;
    let v = '';
    if (src && data.words) v = ' · weight ' + fmtWeight(data.words.lo + data.words.values[src.block * g.W * g.F + w * g.F + f] * data.words.step);
    showTip('“' + SPEECH.words[w].word.trim() + '” (' + SPEECH.words[w].start.toFixed(2) + '–' + SPEECH.words[w].end.toFixed(2) + ' s) at ' + t.toFixed(2) + ' s' + v, e.clientX, e.clientY);
  });
  $('speech-cursor').addEventListener('mouseleave', hideTip);
}
