/* attnviz serve: the page. The state (text, pair, target, generate, chat, model, view, layer,
 * head, and a picture's map: source) lives in the address's query, so a link opens the same view for a colleague running the
 * same command. A change of the text is posted to /api/run at once when no run is in flight;
 * changes made while one is in flight are coalesced into one run of the latest text when it
 * answers (debounced by the run itself: typing never queues runs up, and an idle keystroke is
 * not delayed). The first answer's report is loaded into the frame; each later one's data (its
 * metadata and payload) is handed to that booted report (window.attnviz.load), which redraws in
 * place keeping its view, layer and head, unless its shell (policy: style, fonts, images)
 * differs, when the whole report is loaded again. Nothing typed here is ever written into markup: it goes into form fields and JSON
 * only. In compare mode (the Compare box) the page posts A (the inputs above) and B (text B, or
 * the same text, on model B) to /api/compare; the library compares them and draws its comparison
 * page (the bytes `attnviz diff A.json B.json --html` writes), which the frame shows. The
 * comparison's state (compare, textb, modelb once chosen, words, shared) is in the address too;
 * model B is model A until another is picked. A vision
 * model takes a picture instead of a text: picked in the file box or dropped anywhere on the
 * page, it is posted as it is (the request's body, its name in the query) to /api/image, and its
 * report is shown as a text's is. The address keeps the model and the view but cannot hold the
 * picture (the page says so): a link to a vision model opens with the picker. A
 * vision-language model takes both: the prompt in the text box and a picture beside it, posted
 * together to /api/image (the prompt, generate and chat in the query); without a picture its
 * prompt runs alone, as a decoder's text. A speech model (Whisper) takes a recording (WAV, FLAC,
 * MP3 or OGG), picked or dropped, posted as a picture is to /api/audio (timestamps in the query);
 * its report (the Speech tab: words × time over the spectrogram, the recording playing under a
 * cursor) is always loaded whole.
 * `window.attnvizServe.runs` records each run's times (performance.now(), ms) for the
 * browser tests and the benchmark. */
'use strict';
(function () {
  const $ = (id) => document.getElementById(id);
  const params = new URLSearchParams(location.search);
  const token = params.get('token');
  let models = [];
  let maxUpload = Infinity; // the server's bound on a picture, in bytes
  let picture = null; // the picture (a File) a vision model runs on, or a vision-language model's prompt with
  let pictureNote = ''; // the picker's note for a vision model, as the page wrote it
  let maxAudio = Infinity; // the server's bound on a recording, in bytes
  let recording = null; // the recording (a File) a speech model runs on
  let frameInput = null; // what the frame's report was made from: 'text', 'picture', 'compare'
  // Whether model B was chosen (in the address, or picked): until it is, model B is model A,
  // two inputs on one model, which always compare.
  let modelBChosen = params.has('modelb');
  let seq = 0;
  let busy = false; // a run posted and not yet answered
  let dirty = false; // the inputs changed while it was
  let lastInput = 0; // performance.now() of the latest change
  const runs = [];
  window.attnvizServe = { runs };
  let shown = null; // the report path on screen
  let frameShell = null; // the shell of the run report booted in the frame (null: none)
  // The report's view, layer and head, and the image view's map (`source`: one head, the mean,
  // rollout…), kept from one report to the next and in the address.
  const view = { view: params.get('view'), layer: params.get('layer'), head: params.get('head'), source: params.get('source') };

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
  /** Whether the selected model reads pictures rather than text. */
  function vision() { const m = current(); return Boolean(m && m.kind === 'vision'); }
  /** Whether it reads pictures with its prompt (a vision-language model). */
  function withPictures() { const m = current(); return Boolean(m && m.pictures); }
  /** Whether it takes a picture at all. */
  function takesPictures() { return vision() || withPictures(); }
  /** Whether the next run is of a picture: a vision model's, or a picture chosen for a
   * vision-language model's prompt. */
  function pictureRun() { return vision() || (withPictures() && picture !== null); }
  /** Whether the selected model reads a recording (Whisper). */
  function speech() { const m = current(); return Boolean(m && m.kind === 'speech'); }
  /** Whether it reads a file alone, no text. */
  function fileOnly() { return vision() || speech(); }
  function comparing() { return $('compare').checked && !takesPictures() && !speech(); }
  function mib(bytes) { return (bytes / 1048576).toFixed(bytes < 1048576 ? 2 : 1) + ' MiB'; }

  /** Model B is model A until the user picks another. */
  function followModelA() {
    if (!modelBChosen && !fileOnly()) $('model-b').value = $('model').value;
  }

  /** Show the inputs the model takes. */
  function fitInputs() {
    const m = current();
    $('pair-line').hidden = !m || m.kind !== 'encoder';
    $('target-line').hidden = !m || m.kind !== 'encoder-decoder';
    $('gen-line').hidden = !m || m.kind !== 'decoder';
    $('text-line').hidden = fileOnly();
    $('picture-line').hidden = !takesPictures();
    $('audio-line').hidden = !speech();
    $('picture-note').textContent = withPictures()
      ? 'or drop one on the page: the picture goes with the prompt (without one, the prompt runs alone) · PNG, JPEG or WebP up to ' + mib(maxUpload).replace('.0 ', ' ') + ' · the link keeps the model, the prompt and the view, not the picture'
      : pictureNote;
    // Comparing takes texts.
    $('compare-line').hidden = takesPictures() || speech();
    $('b-line').hidden = !comparing();
  }

  /** The report frame's view, layer and head, where it has booted. */
  function frameState() {
    try {
      const a = $('report').contentWindow.attnviz;
      if (a && a.state) return { view: a.state.view, layer: a.state.layer, head: a.state.head, source: a.meta.image ? a.state.imageSource : null };
    } catch (e) { /* not loaded yet */ }
    return view;
  }

  /** Write the state into the address (replaceState: typing makes no history entries). */
  function remember() {
    const p = new URLSearchParams();
    if (token) p.set('token', token);
    p.set('model', $('model').value);
    // A picture cannot travel in the address: a vision model's link keeps the model and view.
    if (!fileOnly()) p.set('text', $('text').value);
    if (speech() && $('timestamps').checked) p.set('timestamps', '1');
    for (const id of ['pair', 'target']) if ($(id).value && !$(id + '-line').hidden) p.set(id, $(id).value);
    if (!$('gen-line').hidden) {
      if (Number($('generate').value) > 0) p.set('generate', $('generate').value);
      if ($('chat').checked) p.set('chat', '1');
    }
    if (comparing()) {
      p.set('compare', '1');
      // Model B travels only once chosen: until then it follows model A.
      if (modelBChosen) p.set('modelb', $('model-b').value);
      if ($('text-b').value) p.set('textb', $('text-b').value);
      if ($('words').checked) p.set('words', '1');
      if ($('shared').checked) p.set('shared', '1');
    }
    const s = frameState();
    for (const k of ['view', 'layer', 'head', 'source']) if (s[k] !== null && s[k] !== undefined) p.set(k, String(s[k]));
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

  /** The comparison's body: A is the run above; B is text B (or the same text) on model B,
   * with A's pair, target or generation where model B takes the same inputs. */
  function compareBody() {
    const a = body();
    const b = Object.assign({}, a, { model: Number($('model-b').value) });
    if ($('text-b').value.trim()) b.text = $('text-b').value;
    const mb = models[b.model];
    if (!mb || mb.kind !== current().kind) for (const k of ['pair', 'target', 'generate', 'chat']) delete b[k];
    const out = { a, b };
    if ($('words').checked) out.words = true;
    if ($('shared').checked) out.shared = true;
    return out;
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

  /** Show the report frame, or (a vision model with no picture yet) the drop zone in its place,
   * so the frame never shows another model's report as if it were this one's. */
  function showFrame(on) {
    $('report').hidden = !on;
    $('drop-zone').hidden = on || !fileOnly();
    if (!on) $('save').setAttribute('aria-disabled', 'true');
  }

  /** What a vision model waits for: a picture, or one within the server's bound. */
  function pictureWanted() {
    if (!picture) {
      // Opened from a link: say why the picture is not there.
      const linked = params.has('view') || params.has('layer') || params.has('head');
      return 'Choose a picture, or drop one on the page' + (linked ? ' (links do not carry pictures).' : '.');
    }
    if (picture.size > maxUpload) {
      return picture.name + ' is ' + mib(picture.size) + '; this server takes pictures up to ' + mib(maxUpload) + '.';
    }
    return null;
  }

  /** What a speech model waits for: a recording, or one within the server's bound. */
  function recordingWanted() {
    if (!recording) return 'Choose a recording (WAV, FLAC, MP3 or OGG), or drop one on the page.';
    if (recording.size > maxAudio) {
      return recording.name + ' is ' + mib(recording.size) + '; this server takes recordings up to ' + mib(maxAudio) + '.';
    }
    return null;
  }

  /** The request of the inputs on screen: [route, fetch options]. */
  function requestOf(compareMode) {
    if (speech()) {
      const h = headers();
      h['Content-Type'] = 'application/octet-stream';
      let route = '/api/audio?model=' + encodeURIComponent($('model').value) + '&name=' + encodeURIComponent(recording.name);
      if ($('timestamps').checked) route += '&timestamps=true';
      return [route, { method: 'POST', headers: h, body: recording }];
    }
    if (pictureRun()) {
      const h = headers();
      h['Content-Type'] = 'application/octet-stream';
      let route = '/api/image?model=' + encodeURIComponent($('model').value) + '&name=' + encodeURIComponent(picture.name);
      if (withPictures()) {
        // The prompt, and what the decoder does with it, travel in the query.
        const b = body();
        route += '&text=' + encodeURIComponent(b.text);
        if (b.generate) route += '&generate=' + b.generate;
        if (b.chat) route += '&chat=true';
      }
      return [route, { method: 'POST', headers: h, body: picture }];
    }
    const [route, sent] = compareMode ? ['/api/compare', compareBody()] : ['/api/run', body()];
    return [route, { method: 'POST', headers: headers(), body: JSON.stringify(sent) }];
  }

  async function runNow() {
    remember();
    const isPicture = pictureRun();
    const isAudio = speech();
    if (isAudio) {
      const wanted = recordingWanted();
      if (wanted) {
        if (!recording) showFrame(false);
        status(wanted, Boolean(recording));
        return;
      }
    } else if (isPicture) {
      const wanted = pictureWanted();
      if (wanted) {
        if (!picture) showFrame(false);
        status(wanted, Boolean(picture));
        return;
      }
    } else if (!$('text').value.trim()) { status(withPictures() ? 'Type a prompt, and choose a picture or drop one on the page.' : 'Type a text.'); return; }
    const mine = ++seq;
    status('Running…');
    const compareMode = comparing();
    const input = isAudio ? 'audio' : isPicture ? 'picture' : compareMode ? 'compare' : 'text';
    const record = { text: isAudio ? recording.name : isPicture ? picture.name : $('text').value, input: lastInput, sent: performance.now(), compare: compareMode };
    if (isPicture) record.picture = true;
    if (isAudio) record.audio = true;
    if (isPicture && withPictures()) record.prompt = $('text').value;
    if (compareMode) record.textB = $('text-b').value;
    busy = true;
    dirty = false;
    let answer;
    try {
      const [route, options] = requestOf(compareMode);
      const r = await fetch(withToken(route), options);
      answer = await r.json();
      record.answered = performance.now();
      record.server = serverTiming(r);
      if (!r.ok) throw new Error(answer.error || ('HTTP ' + r.status));
    } catch (e) {
      answer = null;
      if (!dirty) status(String(e.message || e), true);
    }
    // Changed meanwhile: run the latest text (once) rather than show this one.
    if (dirty || !answer || mine !== seq) {
      busy = false;
      if (dirty) runNow();
      return;
    }
    const frame = $('report');
    // Visible before it draws (a hidden frame has no size to lay its views out in).
    showFrame(true);
    const win = frame.contentWindow;
    $('save').href = withToken(answer.report + '?download=1');
    $('save').download = answer.filename;
    $('save').setAttribute('aria-disabled', 'false');
    shown = answer.report;
    // A run whose report has the frame's shell (style, fonts, images): its data is drawn in
    // place by the booted report, keeping its view, layer, head and settings; the page stays
    // busy until it is drawn, so two never overlap. Anything else (the first run, a
    // comparison, new characters needing other fonts) loads the whole page.
    if (!compareMode && !isAudio && frameShell === answer.shell && win && win.attnviz && typeof win.attnviz.load === 'function') {
      record.inPlace = true;
      record.dataBytes = answer.meta.length + answer.data.length;
      try {
        await win.attnviz.load(answer.meta, answer.data);
        await new Promise((done) => win.requestAnimationFrame(() => setTimeout(done, 0)));
      } catch (e) { /* the report shows its own error */ }
      finish(mine, record, answer);
      busy = false;
      if (dirty) runNow();
      return;
    }
    busy = false;
    const s = frameState();
    // The view carries over between reports of one kind of input; a picture's report after a
    // text's (or the other way) opens on its own first view, as the command line's does.
    const sameInput = frameInput === null || frameInput === input;
    const fragment = s.view && !compareMode && sameInput ? '#view=' + encodeURIComponent(s.view) : '';
    frameShell = null;
    frameInput = input;
    frame.onload = () => onFrame(mine, record, s, answer);
    frame.src = withToken(answer.report) + fragment;
  }

  /** Where the frame's time went, on this page's clock: its document fetched (`fetched`),
   * parsed (`parsed`: DOM interactive), loaded (`loaded`: the load event's end), and its size. */
  function frameTiming(win) {
    try {
      const nav = win.performance.getEntriesByType('navigation')[0];
      const shift = win.performance.timeOrigin - performance.timeOrigin;
      return {
        fetched: nav.responseEnd + shift,
        parsed: nav.domInteractive + shift,
        loaded: nav.loadEventEnd + shift,
        bytes: nav.decodedBodySize,
      };
    } catch (e) { return null; }
  }

  /** Once the report has booted: restore layer and head, record the state. */
  async function onFrame(mine, record, s, answer) {
    const win = $('report').contentWindow;
    guardDrops(win);
    try {
      if (record.compare) {
        await new Promise((done) => win.requestAnimationFrame(() => setTimeout(done, 0)));
      } else if (win.attnviz) {
        await win.attnviz.ready;
        const patch = {};
        const L = win.attnviz.meta.model.layers, H = win.attnviz.meta.model.heads;
        if (s.layer !== null && s.layer !== undefined && Number(s.layer) < L) patch.layer = Number(s.layer);
        if (s.head !== null && s.head !== undefined && Number(s.head) < H) patch.head = Number(s.head);
        // A picture's report opens on the map the last one showed, where it offers it.
        if (s.source && win.attnviz.imageSources && win.attnviz.imageSources().includes(s.source)) patch.imageSource = s.source;
        if (Object.keys(patch).length) win.attnviz.set(patch);
        await win.attnviz.settled();
        // Drawn: the frame's next paint has happened.
        await new Promise((done) => win.requestAnimationFrame(() => setTimeout(done, 0)));
        // The frame's own controls change the view: keep the address in step.
        win.addEventListener('click', () => setTimeout(remember, 0));
        win.addEventListener('keyup', () => setTimeout(remember, 0));
        win.addEventListener('change', () => setTimeout(remember, 0));
      }
      frameShell = answer.shell || null;
    } catch (e) { /* the report shows its own error */ }
    record.frame = frameTiming(win);
    finish(mine, record, answer);
  }

  /** A run drawn: record it and say so. */
  function finish(mine, record, answer) {
    if (mine !== seq) return;
    record.drawn = performance.now();
    record.tokens = answer.tokens;
    record.report = answer.report;
    runs.push(record);
    document.documentElement.dataset.shown = shown;
    document.documentElement.dataset.runs = String(runs.length);
    const ms = Math.round(record.drawn - (record.input || record.sent)) + ' ms';
    if (record.compare) {
      const f = answer.farthest;
      const far = f ? ' · farthest: layer ' + f.layer + ' head ' + f.head + ' (' + f.distance.toFixed(3) + ')' : '';
      status('compared ' + answer.tokens[0] + ' and ' + answer.tokens[1] + ' tokens at ' + answer.level + ' level' + far + ' · ' + ms);
    } else {
      const gen = answer.generated ? ' · generated: ' + answer.generated : '';
      const named = answer.name ? answer.name + ' · ' : '';
      status(named + answer.tokens + ' tokens · ' + ms + gen);
    }
    remember();
  }

  function schedule() {
    lastInput = performance.now();
    if (busy) dirty = true; else runNow();
  }

  /** A picture picked or dropped: run it (a vision model, or a vision-language model's prompt
   * with it), or say which models take one. */
  function takePicture(file) {
    if (!file) return;
    if (!takesPictures()) {
      const some = models.filter((m) => m.kind === 'vision' || m.pictures).map((m) => m.name);
      status(current().name + ' reads text, not pictures' +
        (some.length ? '; choose ' + some.join(' or ') + ' to drop a picture.' : '.'), true);
      return;
    }
    picture = file;
    schedule();
  }

  /** A recording picked or dropped: run it on the speech model. */
  function takeRecording(file) {
    if (!file) return;
    recording = file;
    schedule();
  }

  /** Files dragged over the page (or its report frame) are the app's: highlighted while they
   * hover, run when dropped, and never opened by the browser in place of the page. */
  let dropTimer = 0;
  function carriesFiles(e) { return e.dataTransfer && [...e.dataTransfer.types].includes('Files'); }
  function guardDrops(win) {
    if (!win || win.attnvizServeDrops) return;
    try {
      win.attnvizServeDrops = true;
      win.addEventListener('dragover', (e) => {
        if (!carriesFiles(e)) return;
        e.preventDefault();
        e.dataTransfer.dropEffect = 'copy';
        $('input').classList.toggle('dropping', takesPictures() || speech());
        clearTimeout(dropTimer);
        // dragover repeats while the files hover; when it stops, they have left.
        dropTimer = setTimeout(() => $('input').classList.remove('dropping'), 300);
      });
      win.addEventListener('drop', (e) => {
        if (!carriesFiles(e)) return;
        e.preventDefault();
        $('input').classList.remove('dropping');
        const file = e.dataTransfer.files[0];
        if (speech()) {
          try { $('audio').files = e.dataTransfer.files; } catch (err) { /* read-only */ }
          takeRecording(file);
          return;
        }
        if (takesPictures() && file) {
          // The file box shows the dropped picture's name, where the browser lets it.
          try { $('picture').files = e.dataTransfer.files; } catch (err) { /* read-only */ }
        }
        takePicture(file);
      });
    } catch (e) { /* a frame of another origin: not ours */ }
  }

  async function main() {
    const r = await fetch(withToken('/api/models'), { headers: headers() });
    const info = await r.json();
    if (!r.ok) { status(info.error || 'cannot list the models', true); return; }
    models = info.models;
    for (const select of ['model', 'model-b']) {
      for (const m of models) {
        const o = document.createElement('option');
        o.value = String(m.id);
        o.textContent = m.name + ' (' + m.family + ', ' + m.layers + ' × ' + m.heads + ')';
        // Comparisons are of texts: a vision model cannot be B.
        if (select === 'model-b' && (m.kind === 'vision' || m.kind === 'speech')) o.disabled = true;
        $(select).appendChild(o);
      }
    }
    if (params.has('model') && models[Number(params.get('model'))]) $('model').value = params.get('model');
    // Model B: the address's, else model A's (two texts on one model: another model may have
    // other layers and heads, which compare only with Shared layers ticked).
    const mb = params.get('modelb');
    if (mb !== null && models[Number(mb)] && models[Number(mb)].kind !== 'vision' && models[Number(mb)].kind !== 'speech') $('model-b').value = mb;
    else { modelBChosen = false; followModelA(); }
    $('compare').checked = params.get('compare') === '1';
    $('text-b').value = params.get('textb') || '';
    $('words').checked = params.get('words') === '1';
    $('shared').checked = params.get('shared') === '1';
    $('text').value = params.get('text') || '';
    $('pair').value = params.get('pair') || '';
    $('target').value = params.get('target') || '';
    $('generate').value = params.get('generate') || '0';
    $('generate').max = String(info.max_generate);
    $('chat').checked = params.get('chat') === '1';
    if (Number.isFinite(info.max_upload)) {
      maxUpload = info.max_upload;
      $('max-upload').textContent = mib(maxUpload).replace('.0 ', ' ');
    }
    if (Number.isFinite(info.max_audio)) {
      maxAudio = info.max_audio;
      $('max-audio').textContent = mib(maxAudio).replace('.0 ', ' ');
    }
    $('timestamps').checked = params.get('timestamps') === '1';
    pictureNote = $('picture-note').textContent;
    fitInputs();
    for (const id of ['text', 'pair', 'target', 'generate', 'text-b']) $(id).addEventListener('input', schedule);
    for (const id of ['chat', 'words', 'shared']) $(id).addEventListener('change', schedule);
    $('model-b').addEventListener('change', () => { modelBChosen = true; schedule(); });
    $('compare').addEventListener('change', () => { fitInputs(); schedule(); });
    $('model').addEventListener('change', () => { followModelA(); fitInputs(); schedule(); });
    $('picture').addEventListener('change', () => takePicture($('picture').files[0]));
    $('audio').addEventListener('change', () => takeRecording($('audio').files[0]));
    $('timestamps').addEventListener('change', () => { if (recording) schedule(); });
    guardDrops(window);
    guardDrops($('report').contentWindow);
    $('input').addEventListener('submit', (e) => { e.preventDefault(); schedule(); });
    $('share').addEventListener('click', (e) => { e.preventDefault(); remember(); navigator.clipboard && navigator.clipboard.writeText(location.href).catch(() => {}); status('Link copied to the address bar.'); });
    document.documentElement.dataset.ready = 'true';
    if (fileOnly() || $('text').value.trim()) runNow();
    else status(withPictures() ? 'Type a prompt, and choose a picture or drop one on the page.' : 'Type a text.');
  }
  main().catch((e) => status(String(e), true));
}());
