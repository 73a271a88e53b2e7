/* attnviz report: the router view of a mixture-of-experts model. For the routed layer picked,
 * tokens (rows) × experts (columns) coloured by the router's probability, each token's chosen
 * experts outlined with the weight their output was added with; a click on an expert's number
 * highlights the tokens routed to it and lists them. Under it, the expert load of every routed
 * layer (tokens per expert), the same columns. Per token: the router does not merge words or
 * hide special tokens. */

/* ------------------------------------------------------------- router view */

/** meta.router: {experts, top_k, renormalised, tokens, layers: [{layer, chosen, weights, load}]};
 *  the probabilities are the payload section `router`, [routed layers][tokens][experts]. */
const ROUTER = meta.router || null;
if (state.view === 'router' && !ROUTER) state.view = 'head';

/** The routed layer shown (an index into ROUTER.layers) and the expert picked (null: none). */
let routerAt = 0;
let routerExpert = null;

/** The router probability of token t for expert e in routed layer i. */
function routerProb(i, t, e) {
  const s = sections.router;
  const n = ROUTER.tokens.length;
  return s.lo + s.values[(i * n + t) * ROUTER.experts + e] * s.step;
}

/** How a router row is labelled: the report's token label when the router's tokens are the
 *  report's (the usual case), else the router's own token. */
function routerToken(t) {
  return ROUTER.tokens.length === N ? tokenLabel(t) : visibleText(ROUTER.tokens[t]);
}

/** The tokens routed to expert e in routed layer i, each with its weight. */
function routedTo(i, e) {
  const k = ROUTER.top_k;
  const l = ROUTER.layers[i];
  const out = [];
  for (let j = 0; j < l.chosen.length; j++) if (l.chosen[j] === e) out.push({ token: Math.floor(j / k), weight: l.weights[j] });
  return out;
}

function setupRouter() {
  if (!ROUTER) return;
  const pick = $('router-layer');
  pick.textContent = '';
  ROUTER.layers.forEach((l, i) => pick.append(el('option', { value: String(i), text: 'layer ' + l.layer })));
  // Open on the routed layer the attention views show, where it is one.
  const shown = ROUTER.layers.findIndex((l) => String(l.layer) === layerName(state.layer));
  routerAt = shown >= 0 ? shown : 0;
  pick.value = String(routerAt);
  pick.addEventListener('change', () => { routerAt = Number(pick.value); renderRouter(); });
}

/** A cell's text colour on its background: black on light colours, white on dark. */
function inkOn(v) {
  const i = lutIndex(v) * 3;
  return 0.2126 * LUT[i] + 0.7152 * LUT[i + 1] + 0.0722 * LUT[i + 2] > 140 ? '#111' : '#fff';
}

function renderRouterNote() {
  const note = $('router-note');
  const l = ROUTER.layers[routerAt];
  if (routerExpert === null) {
    note.textContent = 'Click an expert\'s number to see the tokens routed to it in layer ' + l.layer + '.';
    return;
  }
  const got = routedTo(routerAt, routerExpert);
  note.textContent = 'Expert ' + routerExpert + ', layer ' + l.layer + ': ' + got.length + ' of ' + ROUTER.tokens.length +
    ' tokens' + (got.length ? ': ' + got.map((g) => routerToken(g.token) + ' (' + g.weight.toFixed(2) + ')').join(', ') : '') +
    '. Click it again to clear.';
}

function pickExpert(e) {
  routerExpert = routerExpert === e ? null : e;
  renderRouter();
}

function renderRouter() {
  if (!ROUTER) return;
  const E = ROUTER.experts;
  const k = ROUTER.top_k;
  const n = ROUTER.tokens.length;
  const l = ROUTER.layers[routerAt];
  $('router-layer').value = String(routerAt);
  $('router-desc').textContent = E + ' experts, top ' + k + ' per token (' +
    (ROUTER.renormalised ? 'weights renormalised to sum to 1' : 'weights are the experts\' probabilities') +
    '). Colour: the router\'s probability of each expert; outlined: the chosen experts, with their weights. Per token: words are not merged here.';
  const wide = E <= 24;
  const cellW = wide ? 34 : E <= 64 ? 18 : 10;
  const routed = new Set(routerExpert === null ? [] : routedTo(routerAt, routerExpert).map((g) => g.token));
  const grid = $('router-grid');
  grid.textContent = '';
  grid.style.gridTemplateColumns = 'max-content repeat(' + E + ', ' + cellW + 'px)';
  grid.append(el('span', { class: 'axis', text: 'token \\ expert' }));
  for (let e = 0; e < E; e++) {
    const b = el('button', { type: 'button', class: 'router-expert', 'aria-pressed': String(routerExpert === e), title: 'Expert ' + e + ': highlight the tokens routed to it', dataset: { expert: String(e) } },
      wide || e % 4 === 0 ? String(e) : '');
    b.addEventListener('click', () => pickExpert(e));
    grid.append(b);
  }
  for (let t = 0; t < n; t++) {
    const off = routerExpert !== null && !routed.has(t);
    grid.append(el('span', { class: 'axis router-token' + (off ? ' off' : ''), text: t + ' ' + routerToken(t), dataset: { token: String(t) } }));
    const chosen = new Map();
    for (let r = 0; r < k; r++) chosen.set(l.chosen[t * k + r], { rank: r, weight: l.weights[t * k + r] });
    for (let e = 0; e < E; e++) {
      const p = routerProb(routerAt, t, e);
      const c = chosen.get(e);
      const cell = el('span', { class: 'router-cell' + (c ? ' chosen' : '') + (off ? ' off' : ''), dataset: { token: String(t), expert: String(e) } },
        c && wide ? c.weight.toFixed(2) : '');
      cell.style.background = lutCss(p);
      cell.style.color = inkOn(p);
      cell.title = 'token ' + t + ' ' + routerToken(t) + ' · expert ' + e + ': probability ' + p.toFixed(4) +
        (c ? '; chosen (rank ' + (c.rank + 1) + ' of ' + k + '), weight ' + c.weight.toFixed(4) : '; not chosen');
      grid.append(cell);
    }
  }
  // The load of every routed layer on the same columns.
  const load = $('router-load');
  load.textContent = '';
  load.style.gridTemplateColumns = 'max-content repeat(' + E + ', ' + cellW + 'px)';
  let most = 1;
  for (const x of ROUTER.layers) for (const c of x.load) most = Math.max(most, c);
  ROUTER.layers.forEach((x, i) => {
    const name = el('span', { class: 'axis router-token router-layer-name' + (i === routerAt ? ' current' : ''), text: 'layer ' + x.layer, title: 'Show layer ' + x.layer });
    name.addEventListener('click', () => { routerAt = i; renderRouter(); });
    load.append(name);
    x.load.forEach((count, e) => {
      const v = count / most;
      const cell = el('span', { class: 'router-cell load' + (i === routerAt && e === routerExpert ? ' chosen' : ''), dataset: { layer: String(x.layer), expert: String(e), load: String(count) } },
        wide ? String(count) : '');
      cell.style.background = lutCss(v);
      cell.style.color = inkOn(v);
      cell.title = 'layer ' + x.layer + ' · expert ' + e + ': ' + count + ' of ' + n + ' tokens';
      cell.addEventListener('click', () => { routerAt = i; routerExpert = e; renderRouter(); });
      load.append(cell);
    });
  });
  renderRouterNote();
  document.querySelectorAll('#view-router .cbar').forEach(drawColorbar);
}
