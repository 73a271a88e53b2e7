/* attnviz serve: the page. The state (text, pair, target, generate, chat, model, view, layer,
 * head) lives in the address's query, so a link opens the same view for a colleague running the
 * same command. A change of the text is posted to /api/run at once when no run is in flight;
 * changes made while one is in flight are coalesced into one run of the latest text when it
 * answers (debounced by the run itself: typing never queues runs up, and an idle keystroke is
 * not delayed). The answer names a report, which the frame shows; the report's own script draws
 * every view. Nothing typed here is ever written into markup: it goes into form fields and JSON
 * only. `window.attnvizServe.runs` records each run's times (performance.now(), ms) for the
 * browser tests and the benchmark. */
'use strict';
(function () {
  const $ = (id) => document.getElementById(id);
  const params = new URLSearchParams(location.search);
  const token = params.get('token');
  let models = [];
  let seq = 0;
  let busy = false; // a run posted and not yet answered
  let dirty = false; // the inputs changed while it was
  let lastInput = 0; // performance.now() of the latest change
  const runs = [];
  window.attnvizServe = { runs };
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

  /** The server's Server-Timing header as { name: ms }. */
  function serverTiming(r) {
    const out = {};
    for (const part of (r.headers.get('Server-Timing') || '').split(',')) {
      const m = /^\s*([\w-]+);dur=([\d.]+)/.exec(part);
      if (m) out[m[1]] = Number(m[2]);
    }
    return out;
  }

  async function runNow() {
    remember();
    if (!$('text').value.trim()) { status('Type a text.'); return; }
    const mine = ++seq;
    status('Running…');
    const record = { text: $('text').value, input: lastInput, sent: performance.now() };
    busy = true;
    dirty = false;
    let answer;
    try {
      const r = await fetch(withToken('/api/run'), { method: 'POST', headers: headers(), body: JSON.stringify(body()) });
      answer = await r.json();
      record.answered = performance.now();
      record.server = serverTiming(r);
      if (!r.ok) throw new Error(answer.error || ('HTTP ' + r.status));
    } catch (e) {
      answer = null;
      if (!dirty) status(String(e.message || e), true);
    }
    busy = false;
    // Changed meanwhile: run the latest text (once) rather than show this one.
    if (dirty) { runNow(); return; }
    if (!answer || mine !== seq) return;
    const s = frameState();
    const frame = $('report');
    const fragment = s.view ? '#view=' + encodeURIComponent(s.view) : '';
    frame.onload = () => onFrame(mine, record, s, answer);
    frame.src = withToken(answer.report) + fragment;
    shown = answer.report;
    $('save').href = withToken(answer.report + '?download=1');
    $('save').setAttribute('aria-disabled', 'false');
  }

  /** Once the report has booted: restore layer and head, record the state. */
  async function onFrame(mine, record, s, answer) {
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
        // Drawn: the frame's next paint has happened.
        await new Promise((done) => win.requestAnimationFrame(() => setTimeout(done, 0)));
        // The frame's own controls change the view: keep the address in step.
        win.addEventListener('click', () => setTimeout(remember, 0));
        win.addEventListener('keyup', () => setTimeout(remember, 0));
        win.addEventListener('change', () => setTimeout(remember, 0));
      }
    } catch (e) { /* the report shows its own error */ }
    if (mine !== seq) return;
    record.drawn = performance.now();
    record.tokens = answer.tokens;
    record.report = answer.report;
    runs.push(record);
    document.documentElement.dataset.shown = shown;
    document.documentElement.dataset.runs = String(runs.length);
    const gen = answer.generated ? ' · generated: ' + answer.generated : '';
    status(answer.tokens + ' tokens · ' + Math.round(record.drawn - (record.input || record.sent)) + ' ms' + gen);
    remember();
  }

  function schedule() {
    lastInput = performance.now();
    if (busy) dirty = true; else runNow();
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
    $('input').addEventListener('submit', (e) => { e.preventDefault(); schedule(); });
    $('share').addEventListener('click', (e) => { e.preventDefault(); remember(); navigator.clipboard && navigator.clipboard.writeText(location.href).catch(() => {}); status('Link copied to the address bar.'); });
    document.documentElement.dataset.ready = 'true';
    if ($('text').value.trim()) runNow(); else status('Type a text.');
  }
  main().catch((e) => status(String(e), true));
}());
