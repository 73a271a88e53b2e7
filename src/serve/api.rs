//! The routes: the page and its script, the models, a run, a report; and the layer every
//! request passes (guard, security headers, the log line).

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State as Shared};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use attnviz::progress::Silent;
use attnviz::request::RunRequest;

use super::{guard, report, State};

/// The largest request body: a text and a pair of a few thousand characters.
const MAX_BODY: usize = 64 * 1024;
/// The longest text or pair, in bytes.
const MAX_TEXT: usize = 16 * 1024;
/// How many reports are kept for the page to show and save.
const KEPT_REPORTS: usize = 16;

const INDEX: &str = include_str!("../../assets/serve/index.html");
const APP_JS: &str = include_str!("../../assets/serve/app.js");
const APP_CSS: &str = include_str!("../../assets/serve/app.css");
/// The app page's policy: its own script and style only, fetches and frames to this server.
const APP_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; frame-src 'self'; img-src 'self' data:; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// Reports by id, the newest last; memory only.
#[derive(Default)]
pub struct Reports(Mutex<VecDeque<(String, Arc<Vec<u8>>)>>);

impl Reports {
    fn put(&self, html: Vec<u8>) -> Option<String> {
        let id = guard::new_token().ok()?;
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() >= KEPT_REPORTS {
            kept.pop_front();
        }
        kept.push_back((id.clone(), Arc::new(html)));
        Some(id)
    }

    fn get(&self, id: &str) -> Option<Arc<Vec<u8>>> {
        let kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        kept.iter()
            .find(|(k, _)| k == id)
            .map(|(_, r)| Arc::clone(r))
    }

    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
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
    let checked = state.guard.check(
        text(header::HOST).or(req.uri().authority().map(|a| a.as_str())),
        text(header::ORIGIN),
        guard::query_token(req.uri().query()),
        headers.get("x-attnviz-token").and_then(|v| v.to_str().ok()),
    );
    let mut response = match checked {
        Err(refusal) => error(StatusCode::FORBIDDEN, refusal.message()),
        Ok(()) if method != Method::GET && method != Method::HEAD && method != Method::POST => {
            error(
                StatusCode::METHOD_NOT_ALLOWED,
                "only GET and POST are served",
            )
        }
        Ok(()) => next.run(req).await,
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
    let path = attnviz::render::terminal::escape_controls(&path).into_owned();
    let _ = writeln!(
        std::io::stderr(),
        "{method} {path} {} {} ms",
        response.status().as_u16(),
        started.elapsed().as_millis()
    );
    response
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(serde_json::json!({ "error": message }))).into_response()
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
            layers: m.model.info().layers,
            heads: m.model.info().heads,
        })
        .collect();
    Json(serde_json::json!({
        "models": list,
        "max_tokens": state.max_tokens,
        "max_generate": state.max_generate,
    }))
    .into_response()
}

async fn health(Shared(state): Shared<Arc<State>>) -> Response {
    let in_flight: usize = state.models.iter().map(|m| m.slot.in_flight()).sum();
    Json(serde_json::json!({ "in_flight": in_flight, "reports": state.reports.len() }))
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

async fn run(
    Shared(state): Shared<Arc<State>>,
    body: Result<Json<RunBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Json(body) = match body {
        Ok(b) => b,
        Err(e) => return error(e.status(), &format!("a run is JSON: {}", e.body_text())),
    };
    let Some(served) = state.models.get(body.model) else {
        return error(
            StatusCode::NOT_FOUND,
            &format!(
                "there is no model {}: this server has {}",
                body.model,
                state.models.len()
            ),
        );
    };
    let blank = |s: &Option<String>| s.as_deref().is_some_and(|s| s.trim().is_empty());
    if body.text.trim().is_empty() {
        return error(StatusCode::BAD_REQUEST, "the text is empty");
    }
    let pair = if blank(&body.pair) { None } else { body.pair };
    let target = if blank(&body.target) {
        None
    } else {
        body.target
    };
    let longest = [Some(&body.text), pair.as_ref(), target.as_ref()]
        .into_iter()
        .flatten()
        .map(String::len)
        .max()
        .unwrap_or(0);
    if longest > MAX_TEXT {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("a text may have at most {MAX_TEXT} bytes"),
        );
    }
    if body.generate.is_some_and(|g| g > state.max_generate) {
        return error(
            StatusCode::BAD_REQUEST,
            &format!(
                "this server generates at most {} tokens",
                state.max_generate
            ),
        );
    }
    let model = &served.model;
    // The input's tokens, counted before anything runs.
    let tokens = model
        .tokenizer()
        .encode(&body.text, pair.as_deref(), usize::MAX, false)
        .map(|e| e.ids.len());
    match tokens {
        Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string()),
        Ok(n) if n > state.max_tokens || n > model.max_positions() => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!(
                    "the input is {n} tokens; this server takes at most {}",
                    state.max_tokens.min(model.max_positions())
                ),
            )
        }
        Ok(_) => {}
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
        return error(StatusCode::BAD_REQUEST, &e.to_string());
    }
    let Some(admitted) = served.slot.admit() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the model is busy and its queue is full; try again in a moment",
        );
    };
    let index = body.model;
    let job = Arc::clone(&state);
    let work = async move {
        let permit = job.models[index].slot.turn().await;
        // The pass runs to its end on a blocking thread even if the client leaves or the time
        // is up: it holds the model's turn and its place until then, so the queue stays true.
        tokio::task::spawn_blocking(move || {
            let _held = (permit, admitted);
            let served = &job.models[index];
            let run = request.run(&served.model, &Silent)?;
            let mut settings = vec![("model".to_string(), served.spec.clone())];
            if !std::path::Path::new(&served.spec).is_dir() {
                settings.push(("revision".to_string(), job.revision.clone()));
            }
            let html = report::report_html(&run.set, &settings).map_err(RunFailure::Report)?;
            let id = job
                .reports
                .put(html)
                .ok_or(RunFailure::Report("no random id".into()))?;
            Ok::<_, RunFailure>((id, run.set.primary().len(), run.generated_text))
        })
        .await
    };
    match tokio::time::timeout(state.timeout, work).await {
        Err(_) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the run took longer than this server allows (--timeout)",
        ),
        Ok(Err(_)) => error(StatusCode::INTERNAL_SERVER_ERROR, "the run failed"),
        Ok(Ok(Err(RunFailure::Request(e)))) => error(StatusCode::BAD_REQUEST, &e.to_string()),
        Ok(Ok(Err(RunFailure::Report(e)))) => error(StatusCode::INTERNAL_SERVER_ERROR, &e),
        Ok(Ok(Ok((id, n, generated)))) => Json(serde_json::json!({
            "report": format!("/report/{id}"),
            "tokens": n,
            "generated": generated,
        }))
        .into_response(),
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

async fn report_page(
    Shared(state): Shared<Arc<State>>,
    Path(id): Path<String>,
    Query(query): Query<ReportQuery>,
) -> Response {
    let Some(html) = state.reports.get(&id) else {
        return error(
            StatusCode::NOT_FOUND,
            "no such report (the server keeps the last 16)",
        );
    };
    let download = query.download.is_some();
    let mut response = Response::new(Body::from(html.as_ref().clone()));
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
        h.insert(
            header::CONTENT_DISPOSITION,
            HeaderValue::from_static("attachment; filename=\"attnviz-report.html\""),
        );
    }
    response
}
