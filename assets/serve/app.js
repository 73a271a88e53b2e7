/* attnviz serve: the page. The state (text, pair, target, generate, chat, model, view, layer,
 * head) lives in the address's query, so a link opens the same view for a colleague running the
 * same command. Each change of the text is posted to /api/run after a pause (debounced); the
 * answer names a report, which the frame shows; the report's own script draws every view.
 * Nothing typed here is ever written into markup: it goes into form fields and JSON only. */
'use strict';
(function () {
  const $ = (id) => document.getElementById(id);
  const params = new URLSearchParams(location.search);
  const token = params.get('token');
  const DEBOUNCE_MS = 250;
  let models = [];
  let timer = 0;
  let seq = 0;
  let shown = null; // the report path on screen
  const view = { view: params.get('view'), layer: params.get('layer'), head: params.get('head') };

  function withToken(path) {
    return token ? path + (path.includes('?') ? '&' : '?') + 'token=' + encodeURIComponent(token) : path;
  }
  function headers() {
    const h = { 'Content-Type': 'application/json' };
    if (token) h['X-Attnviz-Token'] = token;
    return h;
  }
  function status(text, isError) {
    $('status').textContent = text;
    $('status').classList.toggle('error', Boolean(isError));
  }
  function current() { return models[Number($('model').value)] || models[0]; }

  /** Show the inputs the model takes. */
  function fitInputs() {
    const m = current();
    $('pair-line').hidden = !m || m.kind !== 'encoder';
    $('target-line').hidden = !m || m.kind !== 'encoder-decoder';
    $('gen-line').hidden = !m || m.kind !== 'decoder';
  }

  /** The report frame's view, layer and head, where it has booted. */
  function frameState() {
    try {
      const a = $('report').contentWindow.attnviz;
      if (a && a.state) return { view: a.state.view, layer: a.state.layer, head: a.state.head };
    } catch (e) { /* not loaded yet */ }
    return view;
  }

  /** Write the state into the address (replaceState: typing makes no history entries). */
  function remember() {
    const p = new URLSearchParams();
    if (token) p.set('token', token);
    p.set('model', $('model').value);
    p.set('text', $('text').value);
    for (const id of ['pair', 'target']) if ($(id).value && !$(id + '-line').hidden) p.set(id, $(id).value);
    if (!$('gen-line').hidden) {
      if (Number($('generate').value) > 0) p.set('generate', $('generate').value);
      if ($('chat').checked) p.set('chat', '1');
    }
    const s = frameState();
    for (const k of ['view', 'layer', 'head']) if (s[k] !== null && s[k] !== undefined) p.set(k, String(s[k]));
    const url = location.pathname + '?' + p.toString();
    history.replaceState(null, '', url);
    $('share').href = url;
  }

  function body() {
    const b = { model: Number($('model').value), text: $('text').value };
    if (!$('pair-line').hidden && $('pair').value) b.pair = $('pair').value;
    if (!$('target-line').hidden && $('target').value) b.target = $('target').value;
    if (!$('gen-line').hidden) {
      const g = Number($('generate').value);
      if (g > 0) b.generate = g;
      if ($('chat').checked) b.chat = true;
    }
    return b;
  }

  async function runNow() {
    remember();
    if (!$('text').value.trim()) { status('Type a text.'); return; }
    const mine = ++seq;
    status('Running…');
    const started = performance.now();
    let answer;
    try {
      const r = await fetch(withToken('/api/run'), { method: 'POST', headers: headers(), body: JSON.stringify(body()) });
      answer = await r.json();
      if (!r.ok) throw new Error(answer.error || ('HTTP ' + r.status));
    } catch (e) {
      if (mine === seq) status(String(e.message || e), true);
      return;
    }
    if (mine !== seq) return; // a newer text was sent meanwhile
    const s = frameState();
    const frame = $('report');
    const fragment = s.view ? '#view=' + encodeURIComponent(s.view) : '';
    frame.onload = () => onFrame(mine, started, s, answer);
    frame.src = withToken(answer.report) + fragment;
    shown = answer.report;
    $('save').href = withToken(answer.report + '?download=1');
    $('save').setAttribute('aria-disabled', 'false');
  }

  /** Once the report has booted: restore layer and head, record the state. */
  async function onFrame(mine, started, s, answer) {
    const win = $('report').contentWindow;
    try {
      if (win.attnviz) {
        await win.attnviz.ready;
        const patch = {};
        const L = win.attnviz.meta.model.layers, H = win.attnviz.meta.model.heads;
        if (s.layer !== null && s.layer !== undefined && Number(s.layer) < L) patch.layer = Number(s.layer);
        if (s.head !== null && s.head !== undefined && Number(s.head) < H) patch.head = Number(s.head);
        if (Object.keys(patch).length) win.attnviz.set(patch);
        await win.attnviz.settled();
        // The frame's own controls change the view: keep the address in step.
        win.addEventListener('click', () => setTimeout(remember, 0));
        win.addEventListener('keyup', () => setTimeout(remember, 0));
        win.addEventListener('change', () => setTimeout(remember, 0));
      }
    } catch (e) { /* the report shows its own error */ }
    if (mine !== seq) return;
    document.documentElement.dataset.shown = shown;
    const gen = answer.generated ? ' · generated: ' + answer.generated : '';
    status(answer.tokens + ' tokens · ' + Math.round(performance.now() - started) + ' ms' + gen);
    remember();
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(runNow, DEBOUNCE_MS);
  }

  async function main() {
    const r = await fetch(withToken('/api/models'), { headers: headers() });
    const info = await r.json();
    if (!r.ok) { status(info.error || 'cannot list the models', true); return; }
    models = info.models;
    for (const m of models) {
      const o = document.createElement('option');
      o.value = String(m.id);
      o.textContent = m.name + ' (' + m.family + ', ' + m.layers + ' × ' + m.heads + ')';
      $('model').appendChild(o);
    }
    if (params.has('model') && models[Number(params.get('model'))]) $('model').value = params.get('model');
    $('text').value = params.get('text') || '';
    $('pair').value = params.get('pair') || '';
    $('target').value = params.get('target') || '';
    $('generate').value = params.get('generate') || '0';
    $('generate').max = String(info.max_generate);
    $('chat').checked = params.get('chat') === '1';
    fitInputs();
    for (const id of ['text', 'pair', 'target', 'generate']) $(id).addEventListener('input', schedule);
    $('chat').addEventListener('change', schedule);
    $('model').addEventListener('change', () => { fitInputs(); schedule(); });
    $('input').addEventListener('submit', (e) => { e.preventDefault(); runNow(); });
    $('share').addEventListener('click', (e) => { e.preventDefault(); remember(); navigator.clipboard && navigator.clipboard.writeText(location.href).catch(() => {}); status('Link copied to the address bar.'); });
    document.documentElement.dataset.ready = 'true';
    if ($('text').value.trim()) runNow(); else status('Type a text.');
  }
  main().catch((e) => status(String(e), true));
}());
