//! The routes: the page and its script, the models, a run, a report; and the layer every
//! request passes (guard, security headers, the log line).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State as Shared};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use attnviz::attention::{Attention, AttentionKind, AttentionSet};
use attnviz::cancel::Cancel;
use attnviz::compare::{compare, CompareError, CompareOptions};
use attnviz::progress::Silent;
use attnviz::render::compare::html::{write_compare_html, CompareHtmlOptions};
use attnviz::request::{RequestError, Run, RunRequest};
use serde_json::json;

use super::kept::{Kept, KEPT_REPORTS};
use super::{guard, report, slot, State};

mod audio;
mod upload;

/// The largest request body: a text and a pair of a few thousand characters.
const MAX_BODY: usize = 64 * 1024;
/// The longest text or pair, in bytes.
const MAX_TEXT: usize = 16 * 1024;
/// The times of a run's parts, in ms (`run`, `report`, `total`): read by the page's timing
/// record and the benchmark.
const SERVER_TIMING: header::HeaderName = header::HeaderName::from_static("server-timing");

const INDEX: &str = include_str!("../../../assets/serve/index.html");
const APP_JS: &str = include_str!("../../../assets/serve/app.js");
const APP_CSS: &str = include_str!("../../../assets/serve/app.css");
/// The app page's policy: its own script and style only, fetches and frames to this server.
const APP_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; frame-src 'self'; img-src 'self' data:; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// A file name's part for a text: its first few ASCII words, lower case, joined by `-` (none:
/// `fallback`).
fn slug(text: &str, fallback: &str) -> String {
    let mut out = String::new();
    for word in text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if out.len() + word.len() > 24 {
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&word.to_ascii_lowercase());
    }
    if out.is_empty() {
        fallback.to_string()
    } else {
        out
    }
}

/// The file name of a comparison: `attnviz-compare-A-vs-B.html`, each side named by its text,
/// or by its model when the texts are the same.
fn compare_filename(a: (&str, &str), b: (&str, &str)) -> String {
    let (sa, sb) = if a.0 == b.0 {
        (slug(a.1, "a"), slug(b.1, "b"))
    } else {
        (slug(a.0, "a"), slug(b.0, "b"))
    };
    format!("attnviz-compare-{sa}-vs-{sb}.html")
}

/// The app's routes, behind the guard.
pub fn router(state: Arc<State>) -> Router {
    Router::new()
        .route("/", get(index))
        .route(
            "/app.js",
            get(|| async { asset(APP_JS, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/app.css",
            get(|| async { asset(APP_CSS, "text/css; charset=utf-8") }),
        )
        .route("/api/models", get(models))
        .route("/api/health", get(health))
        .route("/api/run", post(run))
        .route("/api/compare", post(compare_runs))
        .route("/api/image", post(upload::image))
        .route("/api/audio", post(audio::audio))
        .route("/report/{id}", get(report_page))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such page") })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn_with_state(Arc::clone(&state), gate))
        .with_state(state)
}

/// Every request: the guard first, then the handler; security headers on every answer; one
/// log line on stderr (method, path without the query — it may hold the token —, status, ms).
async fn gate(Shared(state): Shared<Arc<State>>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let headers = req.headers();
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let target = req.uri().authority().map(|a| a.as_str());
    let ambiguous = guard::ambiguous(
        |name| headers.get_all(name).iter().count(),
        headers.get(header::HOST).map(HeaderValue::as_bytes),
        target,
    );
    let checked = state.guard.check(
        match headers.get(header::HOST) {
            Some(host) => host.to_str().ok(),
            None => target,
        },
        text(header::ORIGIN),
        guard::query_token(req.uri().query()),
        headers.get("x-attnviz-token").and_then(|v| v.to_str().ok()),
    );
    let mut response = match (ambiguous, checked) {
        (Some(a), _) => error(StatusCode::BAD_REQUEST, &a.message()),
        (None, Err(refusal)) => error(StatusCode::FORBIDDEN, refusal.message()),
        (None, Ok(()))
            if method != Method::GET && method != Method::HEAD && method != Method::POST =>
        {
            error(
                StatusCode::METHOD_NOT_ALLOWED,
                "only GET and POST are served",
            )
        }
        // The whole request, its body read included (a client trickling a body is cut off).
        (None, Ok(())) => match tokio::time::timeout(state.timeout, next.run(req)).await {
            Ok(response) => response,
            Err(_) => error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the request took longer than this server allows (--timeout)",
            ),
        },
    };
    let h = response.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(
            "default-src 'none'; frame-ancestors 'none'",
        ));
    let total = started.elapsed();
    if let Some(v) = h.get(SERVER_TIMING).and_then(|v| v.to_str().ok()) {
        let all = format!("{v}, total;dur={:.3}", total.as_secs_f64() * 1e3);
        if let Ok(v) = HeaderValue::from_str(&all) {
            h.insert(SERVER_TIMING, v);
        }
    }
    // One write (`write_message`): stderr is unbuffered, and a line written in pieces could
    // interleave with another request's.
    let line = format!(
        "{method} {path} {} {} ms",
        response.status().as_u16(),
        total.as_millis()
    );
    let _ = attnviz::render::term::write_message(&mut std::io::stderr(), &line);
    response
}

/// How long a client told 503 is asked to wait before it tries again, in seconds.
const RETRY_AFTER: &str = "1";

/// A JSON error answer, `{"error": message}`; a 503 (busy, or out of time) says when to try
/// again (`Retry-After`).
fn error(status: StatusCode, message: &str) -> Response {
    let mut response = (status, Json(serde_json::json!({ "error": message }))).into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER));
    }
    response
}

fn asset(body: &'static str, kind: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

async fn index() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, APP_CSP),
        ],
        INDEX,
    )
        .into_response()
}

#[derive(Serialize)]
struct ModelEntry<'a> {
    id: usize,
    name: &'a str,
    family: &'static str,
    kind: &'static str,
    /// Whether it reads pictures with its prompt (a vision-language model).
    pictures: bool,
    layers: usize,
    heads: usize,
}

async fn models(Shared(state): Shared<Arc<State>>) -> Response {
    let list: Vec<ModelEntry<'_>> = state
        .models
        .iter()
        .enumerate()
        .map(|(id, m)| ModelEntry {
            id,
            name: &m.name,
            family: m.model.family(),
            kind: m.kind,
            pictures: m.model.is_multimodal(),
            layers: m.model.info().layers,
            heads: m.model.info().heads,
        })
        .collect();
    Json(serde_json::json!({
        "models": list,
        "max_tokens": state.max_tokens,
        "max_generate": state.max_generate,
        "max_upload": upload::MAX_UPLOAD,
        "max_audio": audio::MAX_AUDIO,
    }))
    .into_response()
}

async fn health(Shared(state): Shared<Arc<State>>) -> Response {
    let in_flight: usize = state.models.iter().map(|m| m.slot.in_flight()).sum();
    Json(serde_json::json!({
        "in_flight": in_flight,
        "reports": state.reports.len(),
        "report_bytes": state.reports.bytes(),
        "writing": state.drawing.in_flight(),
    }))
    .into_response()
}

/// What the page asks to run. Models are named by their place in the list: a request never
/// names a file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunBody {
    #[serde(default)]
    model: usize,
    text: String,
    #[serde(default)]
    pair: Option<String>,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    generate: Option<usize>,
    #[serde(default)]
    chat: bool,
}

/// A request refused before anything runs: its status and the one line the client is told.
type Refused = (StatusCode, String);

/// The checks of a run that need no model: the model's index, an empty text, the size of each
/// text, the tokens to generate. Blank pairs and targets become none.
fn check_body(body: &mut RunBody, models: usize, max_generate: usize) -> Result<(), Refused> {
    if body.model >= models {
        return Err((
            StatusCode::NOT_FOUND,
            format!("there is no model {}: this server has {models}", body.model),
        ));
    }
    if body.text.trim().is_empty() {
        return Err((StatusCode::BAD_REQUEST, "the text is empty".into()));
    }
    for field in [&mut body.pair, &mut body.target] {
        if field.as_deref().is_some_and(|s| s.trim().is_empty()) {
            *field = None;
        }
    }
    let longest = [Some(&body.text), body.pair.as_ref(), body.target.as_ref()]
        .into_iter()
        .flatten()
        .map(String::len)
        .max()
        .unwrap_or(0);
    if longest > MAX_TEXT {
        return Err((
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("a text may have at most {MAX_TEXT} bytes"),
        ));
    }
    if body.generate.is_some_and(|g| g > max_generate) {
        return Err((
            StatusCode::BAD_REQUEST,
            format!("this server generates at most {max_generate} tokens"),
        ));
    }
    Ok(())
}

/// The input tokens of a request (text and pair, with special tokens), against `max_tokens`
/// and the model's positions.
fn check_tokens(n: usize, max_tokens: usize, max_positions: usize) -> Result<(), Refused> {
    let most = max_tokens.min(max_positions);
    if n > most {
        return Err((
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the input is {n} tokens; this server takes at most {most}"),
        ));
    }
    Ok(())
}

/// A run checked and ready: the model's index and the library's request.
type Prepared = (usize, RunRequest);

/// The checks of one run against its model (index, sizes, input tokens, the request itself);
/// an encoder–decoder with neither target nor generation generates its default length.
fn prepare(state: &State, mut body: RunBody) -> Result<Prepared, Refused> {
    if let Err((status, message)) = check_body(&mut body, state.models.len(), state.max_generate) {
        return Err((status, message));
    }
    let served = &state.models[body.model];
    if served.kind == "vision" {
        return Err((
            StatusCode::BAD_REQUEST,
            format!(
                "{} is a vision model ({}): it reads a picture, not text; upload one \
                 (POST /api/image)",
                served.name,
                served.model.family()
            ),
        ));
    }
    if served.kind == "speech" {
        return Err((
            StatusCode::BAD_REQUEST,
            format!(
                "{} is a speech model ({}): it reads a recording, not text; upload one                  (POST /api/audio)",
                served.name,
                served.model.family()
            ),
        ));
    }
    let (pair, target) = (body.pair, body.target);
    let model = &served.model;
    // The input's tokens, counted before anything runs.
    let tokens = model
        .tokenizer()
        .encode(&body.text, pair.as_deref(), usize::MAX, false)
        .map(|e| e.ids.len());
    let counted = tokens
        .map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()))
        .and_then(|n| check_tokens(n, state.max_tokens, model.max_positions()));
    if let Err((status, message)) = counted {
        return Err((status, message));
    }
    let mut generate = body.generate;
    if model.is_seq2seq() && target.is_none() && generate.is_none() {
        generate = Some(model.default_generation_length().min(state.max_generate));
    }
    let request = RunRequest {
        text: body.text,
        pair,
        target,
        generate,
        chat: body.chat,
        ..RunRequest::default()
    };
    if let Err(e) = request.check(model) {
        return Err((StatusCode::BAD_REQUEST, e.to_string()));
    }
    Ok((body.model, request))
}

/// Run a prepared request with its model's turn (503 when its queue is full), then `then` on
/// the run, on the same blocking thread. When the request ends first (its time is up, or its
/// client left) the run is cancelled: it stops at its next check (a picture's decoder between
/// rows and scans, a vision model between layers) and holds the model's turn and its place
/// until it has stopped, so the queue stays true. Once the server is stopping, a request still
/// waiting for its turn is answered 503 instead of being run.
async fn execute<T: Send + 'static>(
    state: &Arc<State>,
    prepared: Prepared,
    then: impl FnOnce(&State, Run, Duration) -> Result<T, RunFailure> + Send + 'static,
) -> Result<T, Refused> {
    let admitted = admit(state, prepared.0)?;
    execute_admitted(state, admitted, prepared, then).await
}

/// Ready once Ctrl-C or SIGTERM asked the server to stop.
async fn stopping() {
    while !attnviz::cleanup::stop_requested() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A place in model `index`'s queue, or 503 when it is full.
fn admit(state: &State, index: usize) -> Result<slot::Admitted, Refused> {
    state.models[index].slot.admit().ok_or_else(|| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "the model is busy and its queue is full; try again in a moment".into(),
        )
    })
}

/// [`execute`] with the place in the queue already taken (an upload takes it before its body is
/// read, so the pictures held in memory are bounded by the queues).
async fn execute_admitted<T: Send + 'static>(
    state: &Arc<State>,
    admitted: slot::Admitted,
    (index, request): Prepared,
    then: impl FnOnce(&State, Run, Duration) -> Result<T, RunFailure> + Send + 'static,
) -> Result<T, Refused> {
    let job = Arc::clone(state);
    let cancel = Cancel::new();
    // Dropped with this future: on timeout (the gate drops the handler) or when the client
    // leaves; the run then stops.
    let _cancel_when_dropped = cancel.on_drop();
    let permit = tokio::select! {
        permit = job.models[index].slot.turn() => permit,
        () = stopping() => {
            return Err((
                StatusCode::SERVICE_UNAVAILABLE,
                "the server is stopping; this request was not run".into(),
            ))
        }
    };
    let done = tokio::task::spawn_blocking(move || {
        let _held = (permit, admitted);
        job.wait_for_release();
        let started = Instant::now();
        let served = &job.models[index];
        let run = match request.run_until(&served.model, &Silent, &cancel) {
            Err(RequestError::Model(attnviz::model::Error::Cancelled)) => {
                let _ = attnviz::render::term::write_message(
                    &mut std::io::stderr(),
                    &format!(
                        "attnviz serve: a run of {} stopped after {} ms: its request ended \
                         first (--timeout, or the client left)",
                        served.name,
                        started.elapsed().as_millis()
                    ),
                );
                return Err(RequestError::Model(attnviz::model::Error::Cancelled).into());
            }
            run => run?,
        };
        let ran = started.elapsed();
        then(&job, run, ran)
    })
    .await;
    match done {
        Err(_) => Err((StatusCode::INTERNAL_SERVER_ERROR, "the run failed".into())),
        Ok(Err(RunFailure::Request(e))) => Err((StatusCode::BAD_REQUEST, e.to_string())),
        Ok(Err(RunFailure::Report(e))) => Err((StatusCode::INTERNAL_SERVER_ERROR, e)),
        Ok(Ok(t)) => Ok(t),
    }
}

/// The About panel's settings of a served model, as the command line writes them.
fn settings_of(state: &State, index: usize) -> Vec<(String, String)> {
    let served = &state.models[index];
    // The About panel's `model`, as the command line writes it: the model's id (a local
    // folder by its name; `--full-paths`: its full path).
    let mut settings = vec![("model".to_string(), served.model.info().id.clone())];
    if !std::path::Path::new(&served.spec).is_dir() {
        settings.push(("revision".to_string(), state.revision.clone()));
    }
    settings
}

/// The `Server-Timing` header of a run: the library's parts (the gate adds the total).
fn with_timing(mut response: Response, parts: &[(&str, Duration)]) -> Response {
    let timing = parts
        .iter()
        .map(|(name, d)| format!("{name};dur={:.3}", d.as_secs_f64() * 1e3))
        .collect::<Vec<_>>()
        .join(", ");
    if let Ok(v) = HeaderValue::from_str(&timing) {
        response.headers_mut().insert(SERVER_TIMING, v);
    }
    response
}

async fn run(
    Shared(state): Shared<Arc<State>>,
    body: Result<Json<RunBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Json(body) = match body {
        Ok(b) => b,
        Err(e) => return error(e.status(), &format!("a run is JSON: {}", e.body_text())),
    };
    let prepared = match prepare(&state, body) {
        Ok(p) => p,
        Err((status, message)) => return error(status, &message),
    };
    let index = prepared.0;
    let made = execute(&state, prepared, move |job, run, ran| {
        let generated = run.generated_text.clone();
        let kept = keep_run(job, index, run, ran, "attnviz-report.html".into())?;
        Ok((kept, generated))
    })
    .await;
    // The time bound is the gate's, around the whole request.
    match made {
        Err((status, message)) => error(status, &message),
        Ok((kept, generated)) => kept.answer(json!({ "generated": generated })),
    }
}

/// A run kept for its report, with what the page needs to draw it in place.
struct KeptRun {
    id: String,
    filename: String,
    tokens: usize,
    data: attnviz::render::html::ReportData,
    ran: Duration,
    drew: Duration,
}

/// Draws the data of model `index`'s `run` (which took `ran`) and keeps the run under a new
/// id, for "Save report" to download as `filename`.
fn keep_run(
    job: &State,
    index: usize,
    run: Run,
    ran: Duration,
    filename: String,
) -> Result<KeptRun, RunFailure> {
    let started = Instant::now();
    let settings = settings_of(job, index);
    let data = report::report_data(&run.set, &settings).map_err(RunFailure::Report)?;
    let drew = started.elapsed();
    let tokens = run.set.primary().len();
    let id = job
        .reports
        .put(Kept::Run {
            set: run.set,
            settings,
            filename: filename.clone(),
        })
        .ok_or(RunFailure::Report("no random id".into()))?;
    Ok(KeptRun {
        id,
        filename,
        tokens,
        data,
        ran,
        drew,
    })
}

impl KeptRun {
    /// The JSON answer: the report's address, file name, token count, the report data, and
    /// the fields of `extra` (an object); the run's and the drawing's times in `Server-Timing`.
    fn answer(self, extra: serde_json::Value) -> Response {
        let mut answer = json!({
            "report": format!("/report/{}", self.id),
            "filename": self.filename,
            "tokens": self.tokens,
            "shell": self.data.shell,
            "meta": self.data.meta,
        });
        if let (Some(answer), serde_json::Value::Object(extra)) = (answer.as_object_mut(), extra) {
            answer.extend(extra);
        }
        let response = (
            [(header::CONTENT_TYPE, "application/json")],
            Body::new(with_base64_field(&answer, "data", self.data.data)),
        )
            .into_response();
        with_timing(response, &[("run", self.ran), ("report", self.drew)])
    }
}

/// The JSON text of `object` with one more field, `name`, holding the base64 text `base64` as a
/// string, as a body of three pieces: the payload (most of a run's answer) goes out as it is,
/// neither copied nor scanned for escapes (base64 has no character JSON escapes).
fn with_base64_field(object: &serde_json::Value, name: &str, base64: String) -> Pieces {
    debug_assert!(base64
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b)));
    let mut head = serde_json::to_vec(object).expect("a JSON value serialises");
    debug_assert_eq!(head.last(), Some(&b'}'));
    head.pop();
    if head.len() > 1 {
        head.push(b',');
    }
    serde_json::to_writer(&mut head, name).expect("a string serialises");
    head.extend_from_slice(b":\"");
    Pieces(VecDeque::from([
        Bytes::from(head),
        Bytes::from(base64),
        Bytes::from_static(b"\"}"),
    ]))
}

/// A body sent as the pieces it is made of, its length known (`Content-Length`).
struct Pieces(VecDeque<Bytes>);

impl http_body::Body for Pieces {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        std::task::Poll::Ready(
            self.get_mut()
                .0
                .pop_front()
                .map(|b| Ok(http_body::Frame::data(b))),
        )
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.0.iter().map(|b| b.len() as u64).sum())
    }
}

/// What the page asks to compare: two runs (two inputs on one model, or one input on two
/// models), and the library's two choices.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompareBody {
    a: RunBody,
    b: RunBody,
    /// Compare at word level even with one tokenizer.
    #[serde(default)]
    words: bool,
    /// Compare the layers and heads both have, by index.
    #[serde(default)]
    shared: bool,
}

/// The attention `attnviz diff` compares from a run's export: its only kind, or the
/// cross-attention of an encoder–decoder.
fn compared_kind(set: &AttentionSet) -> &Attention {
    set.get(Some(AttentionKind::Cross))
        .ok()
        .filter(|_| set.iter().count() > 1)
        .unwrap_or_else(|| set.primary())
}

/// Two runs compared by the library and drawn by its comparison page: the bytes
/// `attnviz diff A.json B.json --html` writes for the two runs' exports (`A.json`, `B.json`).
async fn compare_runs(
    Shared(state): Shared<Arc<State>>,
    body: Result<Json<CompareBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Json(body) = match body {
        Ok(b) => b,
        Err(e) => {
            return error(
                e.status(),
                &format!("a comparison is JSON: {}", e.body_text()),
            )
        }
    };
    let opts = CompareOptions {
        words: body.words,
        shared_only: body.shared,
    };
    let filename = compare_filename(
        (
            &body.a.text,
            state.models.get(body.a.model).map_or("", |m| &m.name),
        ),
        (
            &body.b.text,
            state.models.get(body.b.model).map_or("", |m| &m.name),
        ),
    );
    let (a, b) = match (prepare(&state, body.a), prepare(&state, body.b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err((status, message)), _) | (_, Err((status, message))) => {
            return error(status, &message)
        }
    };
    let keep = |_: &State, run: Run, ran: Duration| Ok((run, ran));
    let (run_a, ran_a) = match execute(&state, a, keep).await {
        Ok(r) => r,
        Err((status, message)) => return error(status, &message),
    };
    let (run_b, ran_b) = match execute(&state, b, keep).await {
        Ok(r) => r,
        Err((status, message)) => return error(status, &message),
    };
    // Drawn with the report writer's turn (waiting for it: the two runs have passed the
    // models' queues), so that drawing never takes more than its one blocking thread.
    let permit = state.drawing.turn().await;
    let job = Arc::clone(&state);
    let made = tokio::task::spawn_blocking(move || {
        let _held = permit;
        let started = Instant::now();
        let (att_a, att_b) = (compared_kind(&run_a.set), compared_kind(&run_b.set));
        let c = compare(att_a, att_b, opts).map_err(|e| (StatusCode::BAD_REQUEST, worded(&e)))?;
        let mut html = Vec::new();
        write_compare_html(
            &c,
            (Some("A.json"), Some("B.json")),
            &CompareHtmlOptions::default(),
            &mut html,
        )
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        let drew = started.elapsed();
        let saved_as = filename.clone();
        let html = Bytes::from(html);
        let id = job.reports.put(Kept::Page { html, filename }).ok_or((
            StatusCode::INTERNAL_SERVER_ERROR,
            "no random id".to_string(),
        ))?;
        let farthest = c.ranked().first().map(|h| {
            json!({
                "layer": h.layer, "head": h.head, "distance": h.distance,
            })
        });
        let answer = json!({
            "report": format!("/report/{id}"),
            "filename": saved_as,
            "level": c.level.as_str(),
            "basis": c.basis.as_str(),
            "layers": c.layers,
            "heads": c.heads,
            "farthest": farthest,
            "tokens": [att_a.len(), att_b.len()],
            "generated": [run_a.generated_text, run_b.generated_text],
        });
        Ok::<_, (StatusCode, String)>((answer, drew))
    })
    .await;
    match made {
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the comparison failed"),
        Ok(Err((status, message))) => error(status, &message),
        Ok(Ok((answer, drew))) => with_timing(
            Json(answer).into_response(),
            &[("run", ran_a + ran_b), ("report", drew)],
        ),
    }
}

/// The library's comparison error, worded for the page (its two choices are checkboxes).
fn worded(e: &CompareError) -> String {
    match e {
        CompareError::Shape { .. } | CompareError::LayerNumbers { .. } => {
            format!("{e} (tick “shared layers”)")
        }
        e => e.to_string(),
    }
}

enum RunFailure {
    Request(attnviz::request::RequestError),
    Report(String),
}

impl From<attnviz::request::RequestError> for RunFailure {
    fn from(e: attnviz::request::RequestError) -> Self {
        RunFailure::Request(e)
    }
}

#[derive(Deserialize)]
struct ReportQuery {
    #[serde(default)]
    download: Option<String>,
    // The token travels in the query too; the guard has checked it.
    #[serde(default)]
    #[allow(dead_code)]
    token: Option<String>,
}

/// The report of a kept run, written on a blocking thread with the report writer's turn (503
/// when its queue is full).
async fn write_report(state: &Arc<State>, kept: Arc<Kept>) -> Result<Vec<u8>, Refused> {
    let admitted = state.drawing.admit().ok_or_else(|| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is writing other reports and its queue is full; try again in a moment"
                .to_string(),
        )
    })?;
    let permit = state.drawing.turn().await;
    let job = Arc::clone(state);
    let written = tokio::task::spawn_blocking(move || {
        let _held = (permit, admitted);
        job.wait_for_release();
        match kept.as_ref() {
            Kept::Run { set, settings, .. } => report::report_html(set, settings),
            Kept::Page { html, .. } => Ok(html.to_vec()),
        }
    })
    .await;
    match written {
        Ok(Ok(html)) => Ok(html),
        Ok(Err(e)) => Err((StatusCode::INTERNAL_SERVER_ERROR, e)),
        Err(_) => Err((
            StatusCode::INTERNAL_SERVER_ERROR,
            "the report failed".to_string(),
        )),
    }
}

async fn report_page(
    Shared(state): Shared<Arc<State>>,
    Path(id): Path<String>,
    Query(query): Query<ReportQuery>,
) -> Response {
    let Some(kept) = state.reports.get(&id) else {
        return error(
            StatusCode::NOT_FOUND,
            &format!(
                "no such report (the server keeps the last {KEPT_REPORTS}, as memory allows: \
                 --keep-memory)"
            ),
        );
    };
    let download = query.download.is_some();
    let html = match kept.as_ref() {
        // A comparison's page is kept written: its bytes, not a copy.
        Kept::Page { html, .. } => html.clone(),
        // A run's report is written now, when the frame first loads it or Save asks for it:
        // one at a time, beside the runs (never in their way), a few waiting, the rest 503.
        Kept::Run { .. } => match write_report(&state, Arc::clone(&kept)).await {
            Ok(html) => Bytes::from(html),
            Err((status, message)) => return error(status, &message),
        },
    };
    let mut response = Response::new(Body::from(html));
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    // The report's own policy is in its markup; this one only lets the app page frame it.
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("frame-ancestors 'self'"),
    );
    if download {
        let disposition = format!("attachment; filename=\"{}\"", kept.filename());
        if let Ok(v) = HeaderValue::from_str(&disposition) {
            h.insert(header::CONTENT_DISPOSITION, v);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(json: &str) -> Result<RunBody, serde_json::Error> {
        serde_json::from_str(json)
    }

    fn checked(json: &str) -> Result<RunBody, Refused> {
        let mut b = body(json).expect("valid JSON");
        check_body(&mut b, 2, 64).map(|()| b)
    }

    #[test]
    fn a_request_names_no_file_and_nothing_unknown() {
        assert!(body(r#"{"text": "hi"}"#).is_ok());
        for bad in [
            r#"{"text": "hi", "path": "/etc/passwd"}"#,
            r#"{"text": "hi", "model": "/models/bert"}"#,
            r#"{"text": "hi", "model": -1}"#,
            r#"{"text": 3}"#,
            r#"{"pair": "no text"}"#,
        ] {
            assert!(body(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn texts_are_bounded_and_blank_fields_dropped() {
        let at_limit = "a".repeat(MAX_TEXT);
        let over = "a".repeat(MAX_TEXT + 1);
        let json = |field: &str, value: &str| {
            serde_json::json!({ "text": "hi", field: value }).to_string()
        };
        assert!(checked(&serde_json::json!({ "text": at_limit }).to_string()).is_ok());
        for field in ["text", "pair", "target"] {
            let refused = checked(&json(field, &over)).err().map(|e| e.0);
            assert_eq!(refused, Some(StatusCode::PAYLOAD_TOO_LARGE), "{field}");
        }
        let b = checked(r#"{"text": "hi", "pair": "  ", "target": ""}"#).unwrap();
        assert_eq!((b.pair, b.target), (None, None));
        let b = checked(r#"{"text": "hi", "pair": "there"}"#).unwrap();
        assert_eq!(b.pair.as_deref(), Some("there"));
        for empty in [r#"{"text": ""}"#, r#"{"text": " \n\t"}"#] {
            assert_eq!(
                checked(empty).err().map(|e| e.0),
                Some(StatusCode::BAD_REQUEST)
            );
        }
    }

    #[test]
    fn the_model_index_and_generation_are_bounded() {
        assert!(checked(r#"{"text": "hi", "model": 1}"#).is_ok());
        let e = checked(r#"{"text": "hi", "model": 2}"#).err().unwrap();
        assert_eq!(e.0, StatusCode::NOT_FOUND);
        assert!(e.1.contains("this server has 2"), "{}", e.1);
        assert!(checked(r#"{"text": "hi", "generate": 64}"#).is_ok());
        let e = checked(r#"{"text": "hi", "generate": 65}"#).err().unwrap();
        assert_eq!(e.0, StatusCode::BAD_REQUEST);
        assert!(e.1.contains("at most 64"), "{}", e.1);
    }

    #[test]
    fn input_tokens_are_bounded_by_the_server_and_the_model() {
        assert!(check_tokens(256, 256, 512).is_ok());
        let e = check_tokens(257, 256, 512).err().unwrap();
        assert_eq!(e.0, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(e.1.contains("at most 256"), "{}", e.1);
        let e = check_tokens(65, 256, 64).err().unwrap();
        assert!(e.1.contains("at most 64"), "{}", e.1);
    }

    #[test]
    fn the_payload_joins_the_answer_as_a_json_string() {
        let text = |pieces: Pieces| {
            let len = http_body::Body::size_hint(&pieces).exact().unwrap();
            let text: Vec<u8> = pieces.0.iter().flatten().copied().collect();
            assert_eq!(text.len() as u64, len);
            serde_json::from_slice::<serde_json::Value>(&text).unwrap()
        };
        let object = json!({ "tokens": 3, "meta": "{\"a\": \"<\\\">\"}" });
        let mut want = object.clone();
        want["data"] = json!("QUJD+/8=");
        assert_eq!(
            text(with_base64_field(&object, "data", "QUJD+/8=".into())),
            want
        );
        assert_eq!(
            text(with_base64_field(&json!({}), "data", String::new())),
            json!({ "data": "" })
        );
    }

    #[test]
    fn a_comparison_is_saved_under_its_texts_or_models() {
        assert_eq!(
            compare_filename(("The cat sat.", "m"), ("The dog sat!", "m")),
            "attnviz-compare-the-cat-sat-vs-the-dog-sat.html"
        );
        assert_eq!(
            compare_filename(("same", "all-MiniLM-L6-v2"), ("same", "SmolLM2 135M")),
            "attnviz-compare-all-minilm-l6-v2-vs-smollm2-135m.html"
        );
        // Nothing but punctuation or other scripts, and a quote that could end the header's
        // quoted name: neither reaches the name.
        assert_eq!(
            compare_filename(("\"；", "m"), ("猫", "m")),
            "attnviz-compare-a-vs-b.html"
        );
        let long = slug(&"word ".repeat(40), "x");
        assert!(long.len() <= 24, "{long}");
    }
}
