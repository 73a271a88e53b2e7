/* attnviz report: shared parts. Colours, DOM and canvas helpers, the tooltip, and the render
 * scheduler every view goes through. Everything a user typed reaches the page through textContent
 * or canvas fillText, never through HTML parsing.
 */

/* ---------------------------------------------------------------- colours */

// One colour per head: Tableau 10, then a cyan and a purple. The purple replaced a pink that,
// darkened for the light theme (below), became the twin of head 7's.
const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948',
  '#b07aa1', '#ff9da7', '#9c755f', '#8f8a87', '#17a2b8', '#8d3cb6'];

/**
 * The least contrast between a head's colour and the page background. WCAG 2.1 asks 3:1 of the
 * graphics one needs to read a figure (SC 1.4.11, non-text contrast); 4:1 keeps a line drawn at
 * opacity 0.9 (weight 0.9) above 3:1 on screen, and puts the palette's mean contrast on white
 * (4.3:1) level with bertviz's layer colours (4.3:1, worst 2.5:1: orange). Unadjusted, the palette
 * reaches only 1.6:1 on white (yellow).
 */
const MIN_CONTRAST = 4;

function hexToRgb(hex) {
  const v = parseInt(hex.slice(1), 16);
  return [(v >> 16) & 255, (v >> 8) & 255, v & 255];
}
function parseRgb(css) {
  if (css.startsWith('#')) return hexToRgb(css.length === 4 ? '#' + css[1] + css[1] + css[2] + css[2] + css[3] + css[3] : css);
  const m = css.match(/\d+/g);
  return m ? m.slice(0, 3).map(Number) : [255, 255, 255];
}
function rgbCss(c, alpha) {
  return alpha === undefined ? 'rgb(' + c.join(',') + ')' : 'rgba(' + c.join(',') + ',' + alpha.toFixed(3) + ')';
}

/** sRGB channel (0–255) to linear light. */
function linear(c) { c /= 255; return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; }
/** WCAG relative luminance and contrast ratio. */
function luminance(c) { return 0.2126 * linear(c[0]) + 0.7152 * linear(c[1]) + 0.0722 * linear(c[2]); }
function contrast(a, b) {
  const x = luminance(a);
  const y = luminance(b);
  return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05);
}
/** sRGB to OKLab and back (Ottosson 2020): lightness changes there keep hue and colourfulness. */
function toOklab(c) {
  const [r, g, b] = c.map(linear);
  const l = Math.cbrt(0.4122214708 * r + 0.5363325363 * g + 0.0514459929 * b);
  const m = Math.cbrt(0.2119034982 * r + 0.6806995451 * g + 0.1073969566 * b);
  const s = Math.cbrt(0.0883024619 * r + 0.2817188376 * g + 0.6299787005 * b);
  return [0.2104542553 * l + 0.7936177850 * m - 0.0040720468 * s,
    1.9779984951 * l - 2.4285922050 * m + 0.4505937099 * s,
    0.0259040371 * l + 0.7827717662 * m - 0.8086757660 * s];
}
function fromOklab([L, a, b]) {
  const l = (L + 0.3963377774 * a + 0.2158037573 * b) ** 3;
  const m = (L - 0.1055613458 * a - 0.0638541728 * b) ** 3;
  const s = (L - 0.0894841775 * a - 1.2914855480 * b) ** 3;
  const enc = (x) => {
    x = Math.min(1, Math.max(0, x));
    return Math.round(255 * (x <= 0.0031308 ? 12.92 * x : 1.055 * x ** (1 / 2.4) - 0.055));
  };
  return [enc(4.0767416621 * l - 3.3077115913 * m + 0.2309699292 * s),
    enc(-1.2684380046 * l + 2.6097574011 * m - 0.3413193965 * s),
    enc(-0.0041960863 * l - 0.7034186147 * m + 1.7076147010 * s)];
}

/** The palette colour of head h, or past the palette a golden-angle hue. */
function baseHeadColor(h) {
  if (h < PALETTE.length) return hexToRgb(PALETTE[h]);
  const hue = ((h * 137.508) % 360) * Math.PI / 180;
  return fromOklab([0.62, 0.13 * Math.cos(hue), 0.13 * Math.sin(hue)]);
}

/** Head colours for the current theme, made darker (light theme) or lighter (dark theme) in
 *  OKLab lightness until each stands out from the background by MIN_CONTRAST. Heads grouped by
 *  key/value head (state.groupKv) share their group's hue: the group's colour, then each member a
 *  step further from the background (darker on light, lighter on dark) and a little turned in hue,
 *  so the heads of a group read as one family and still apart. */
let themeColors = null;
function resetThemeColors() { themeColors = null; }
function headRgb(h) {
  if (!themeColors || themeColors.grouped !== state.groupKv) {
    const bg = parseRgb(cssVar('--bg'));
    const dark = luminance(bg) < 0.18;
    const readable = (c) => {
      const ok = toOklab(c);
      for (let step = 0; step < 100 && contrast(c, bg) < MIN_CONTRAST; step++) {
        ok[0] += dark ? 0.005 : -0.005;
        c = fromOklab(ok);
      }
      return c;
    };
    const list = [];
    for (let i = 0; i < H; i++) {
      if (!state.groupKv) {
        list.push(readable(baseHeadColor(i)));
        continue;
      }
      // Group g's hue: evenly spaced around the OKLab hue circle; its heads spread over at most
      // a third of the gap to the next group, and a step apart in lightness.
      const members = headsOfKv(KV[i]);
      const j = members.indexOf(i);
      const gap = (2 * Math.PI) / KVH;
      const spread = Math.min(0.5, gap / 3);
      const hue = 4.1 + KV[i] * gap + (members.length > 1 ? (j / (members.length - 1) - 0.5) * spread : 0);
      const ok = toOklab(readable(fromOklab([0.62, 0.13 * Math.cos(hue), 0.13 * Math.sin(hue)])));
      ok[0] += (dark ? 1 : -1) * j * Math.min(0.08, 0.24 / Math.max(1, members.length - 1));
      list.push(readable(fromOklab(ok)));
    }
    themeColors = { bg, list, css: list.map((c) => rgbCss(c)), grouped: state.groupKv };
  }
  return themeColors.list[h];
}
function headColor(h) {
  headRgb(0);
  return themeColors.css[h];
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

/** The caption of every colour bar of attention weights, and the axis names: the words the PNG
 *  figures and the terminal use (src/render/mod.rs). */
const WEIGHT_CAPTION = 'attention weight';
/** … and of shares: each row's shares of what reaches the query (value-weighted and norm-aware
 *  attention, `meta.shares`; ALTI, value zeroing). */
const SHARE_CAPTION = 'share of the row';
const QUERY_AXIS = 'query (attending from)';
const KEY_AXIS = 'key (attended to)';

/** A colour-scale end for people: three significant digits, trailing zeros dropped (1, 0.5,
 *  0.512, 0.0213; below 0.001 1.2e-4), as src/render/mod.rs's scale_number. */
function scaleNumber(v) {
  const a = Math.abs(v);
  if (a === 0 || !Number.isFinite(a)) return a === 0 ? '0' : String(v);
  if (a < 1e-3) return v.toExponential(1).replace('.0e', 'e');
  const decimals = Math.max(0, 2 - Math.floor(Math.log10(a)));
  let s = v.toFixed(decimals);
  if (s.includes('.')) s = s.replace(/0+$/, '').replace(/\.$/, '');
  return s;
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
/** Token i's label on a side (the query side unless given): its display text, or its raw piece
 *  while raw tokens are shown. */
function tokenLabel(i, side = QSIDE) { return state.rawTokens ? side.data.tokens[i] : side.display[i]; }
/** Token i's label with its number where the label repeats on its side (`C₇`): how the token
 *  lists name tokens (the neuron view's keys). */
function tokenName(i, side = QSIDE) {
  if (!side.namesCache || side.namesCache.raw !== state.rawTokens) {
    const labels = Array.from({ length: side.n }, (_, t) => tokenLabel(t, side));
    side.namesCache = { raw: state.rawTokens, names: positionedLabels(labels, labels.map((_, t) => t)) };
  }
  return side.namesCache.names[i];
}
/** Which side a token is on, in words, when the sides are other units (cross-attention). */
function sideTag(side) { return SQUARE ? '' : (side === QSIDE ? SIDE_NAMES[0] : SIDE_NAMES[1]) + ' '; }
function describeToken(i, side = QSIDE) {
  return '"' + tokenLabel(i, side) + '" (' + sideTag(side) + '#' + i + (isPair ? ', ' + segmentOf(i, side) : '') + (side.generated[i] ? ', generated' : '') +
    (side === QSIDE && i === SINK ? ', the attention sink' : '') + ')';
}
/** A unit as text: its label and the token numbers it covers, and whether the model generated
 *  it or it is the attention sink. `side`: the query side (rows) unless given. */
function describeUnit(a, side = QSIDE) {
  const u = units(side).list[a];
  const t = u.tokens;
  const where = t.length === 1 ? '#' + t[0] : 'tokens #' + t[0] + '–' + t[t.length - 1];
  return '"' + u.text + '" (' + sideTag(side) + where + (isPair ? ', ' + u.seg : '') + (u.generated ? ', generated' : '') +
    (u.sink ? ', the attention sink' : '') + ')';
}
/** What the sink tag means, for titles. */
const SINK_NOTE = 'The attention sink: the first token, which every query of a causal model sees and where heads park the attention they do not need.';

/** Hatch the rectangle (x, y, w, h) of a 2D context (CSS px): thin diagonal lines in --hatch,
 *  4 px apart, over what is there (the page background). */
function hatchRect(ctx, x, y, w, h) {
  ctx.save();
  ctx.beginPath();
  ctx.rect(x, y, w, h);
  ctx.clip();
  ctx.strokeStyle = cssVar('--hatch');
  ctx.lineWidth = 1;
  ctx.beginPath();
  for (let d = -h; d < w; d += 4) {
    ctx.moveTo(x + d, y + h);
    ctx.lineTo(x + d + h, y);
  }
  ctx.stroke();
  ctx.restore();
}

/** Paint the hatch of masked cells into a small canvas (the keys beside the colour bars). */
function drawMaskKey(canvas) {
  const s = 14;
  canvas.width = s;
  canvas.height = s;
  const ctx = canvas.getContext('2d');
  ctx.fillStyle = cssVar('--bg');
  ctx.fillRect(0, 0, s, s);
  ctx.fillStyle = cssVar('--hatch');
  for (let y = 0; y < s; y++) for (let x = 0; x < s; x++) if ((x + y) % 4 === 0) ctx.fillRect(x, y, 1, 1);
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

/** Width (CSS px) the views have: main's content box, whatever view is shown. */
function contentWidth() {
  const main = document.querySelector('main');
  const cs = getComputedStyle(main);
  return main.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
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
const drawn = { view: null, seq: 0, lines: 0, perHead: new Array(H).fill(0), ms: 0, thumbs: 0, thumbLineWidth: 0 };
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
  // A kind switched away from draws no more (its frames and timers may still be queued).
  if (ABORT.signal.aborted) return;
  const t0 = performance.now();
  syncControls();
  if (state.view === 'head') renderHead();
  else if (state.view === 'model') renderModel();
  else if (state.view === 'matrix') renderMatrix();
  else if (state.view === 'neuron') renderNeuron();
  else if (state.view === 'stats') renderStats();
  else if (state.view === 'image') renderImage();
  else if (state.view === 'lens') renderLens();
  else if (state.view === 'heads') renderHeads();
  else if (state.view === 'speech') renderSpeech();
  else if (state.view === 'router') renderRouter();
  else if (state.view === 'mixing') renderMixing();
  drawn.view = state.view;
  drawn.seq++;
  drawn.ms = performance.now() - t0;
}

function invalidateWeights() {
  rowScaleCache.clear();
  unitCache.clear();
  headLayout = null;
  modelGrid.dirty = true;
  modelGrid.heat.clear();
}

function set(patch) {
  const before = { ...state };
  Object.assign(state, patch);
  if (patch.head !== undefined && patch.headPicked === undefined) state.headPicked = true;
  const rebanded = String(state.expanded) !== String(before.expanded);
  if (state.hideSpecial !== before.hideSpecial || state.words !== before.words || rebanded) invalidateWeights();
  if (state.rawTokens !== before.rawTokens) {
    headLayout = null;
    modelGrid.dirty = true;
    refreshTokenMenus();
  }
  if (state.groupKv !== before.groupKv) {
    resetThemeColors();
    buildLegend();
  }
  if (state.layer !== before.layer || state.words !== before.words || state.hideSpecial !== before.hideSpecial || rebanded) {
    state.hover = null;
  }
  if (patch.theme !== undefined) applyTheme();
  if (['threshold', 'pair', 'thumbStyle', 'hideSpecial', 'words', 'theme', 'groupKv'].some((k) => state[k] !== before[k])) {
    modelGrid.dirty = true;
  }
  renderNow();
}
