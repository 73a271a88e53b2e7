//! `POST /api/image?model=N&name=NAME&text=PROMPT&generate=K&chat=true`: a picture for a vision
//! model, or with its prompt for a vision-language model (LLaVA; `text`, whose `<image>` mark
//! says where the picture goes, else it goes first; `generate` and `chat` as `/api/run` takes
//! them). A vision model reads the picture alone: `text` with it is
//! refused in the library's words. The body is the picture
//! file's bytes as they are (no form encoding); `name` is what the browser calls the file. The
//! bytes go to the library in memory ([`ImageSource::Bytes`]): nothing of the request reaches
//! the file system, and the name only names the picture in the views and the saved report's
//! file name, after [`picture_name`] has made it harmless.
//!
//! The body is bounded ([`MAX_UPLOAD`]): a `Content-Length` over it is answered 413 before any
//! of the body is read, and a body without one (chunked) is cut off with 413 as soon as it
//! passes the bound. The upload takes its place in the model's queue before its body is read,
//! so a full queue is 503 at once and the pictures held in memory are at most the queues'
//! places. A picture the library cannot read (not an image, truncated, a header claiming a huge
//! size, an animation, a JPEG or PNG made to hold the decoder) is a 400 with the library's one
//! line; the decoder's work is bounded, and stops when the request times out.

use std::pin::Pin;
use std::sync::Arc;

use axum::body::{Body, HttpBody};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State as Shared};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;

use attnviz::pixels::ImageSource;
use attnviz::request::RunRequest;

use super::{admit, check_tokens, error, execute_admitted, keep_run, slug, Refused};
use crate::app::serve::{slot, Served, State};

/// The largest picture the server takes, in bytes (20 MiB).
pub const MAX_UPLOAD: usize = 20 << 20;
/// The most characters of a picture's name that are kept.
const MAX_NAME: usize = 100;
/// The name of a picture sent without one, or whose name is nothing once cleaned.
const UNNAMED: &str = "upload";

/// The upload's query: the model by index, the picture's name, a vision-language model's prompt
/// (the token may travel here too).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ImageQuery {
    #[serde(default)]
    model: usize,
    #[serde(default)]
    name: Option<String>,
    /// A vision-language model's prompt.
    #[serde(default)]
    text: Option<String>,
    /// Tokens a vision-language model generates after its prompt and picture.
    #[serde(default)]
    generate: Option<usize>,
    /// Whether the prompt goes through the chat template first.
    #[serde(default)]
    chat: bool,
    // The guard has checked it.
    #[serde(default)]
    #[allow(dead_code)]
    token: Option<String>,
}

/// A picture's name as the views and the saved file name may show it: its last path part (a
/// browser gives only the file's name, but a request can say anything), without control
/// characters or the invisible marks that reorder text, trimmed, at most [`MAX_NAME`]
/// characters (the end cut from the stem, keeping a short extension); `upload` when nothing is
/// left. HTML escaping is the report's and the page's business: they escape every name.
pub fn picture_name(given: &str) -> String {
    let last = given.rsplit(['/', '\\']).next().unwrap_or("");
    let bidi = |c: char| matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    let clean: String = last
        .chars()
        .filter(|&c| !c.is_control() && !bidi(c))
        .collect();
    let clean = clean.trim();
    if clean.is_empty() || clean == "." || clean == ".." {
        return UNNAMED.to_string();
    }
    if clean.chars().count() <= MAX_NAME {
        return clean.to_string();
    }
    let (stem, ext) = match clean.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() && ext.chars().count() <= 10 => (stem, ext),
        _ => (clean, ""),
    };
    let keep = if ext.is_empty() {
        MAX_NAME
    } else {
        MAX_NAME - ext.chars().count() - 1
    };
    let mut out: String = stem
        .chars()
        .take(keep)
        .collect::<String>()
        .trim_end()
        .to_string();
    if !ext.is_empty() {
        out.push('.');
        out.push_str(ext);
    }
    out
}

/// The name "Save report" gives a picture's report: `attnviz-report-STEM.html`, the stem's
/// ASCII words (`attnviz-report.html` when it has none).
pub(super) fn download_name(picture: &str) -> String {
    let stem = picture.rsplit_once('.').map_or(picture, |(s, _)| s);
    match slug(stem, "") {
        s if s.is_empty() => "attnviz-report.html".to_string(),
        s => format!("attnviz-report-{s}.html"),
    }
}

fn too_large() -> Refused {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "the picture is larger than this server takes ({} MiB); scale it down or save it \
             as JPEG",
            MAX_UPLOAD >> 20
        ),
    )
}

/// The upload's query, or 400 saying how `route` (`/api/image`) is called, with serde's words
/// on what was wrong.
pub(super) fn upload_query<Q>(
    query: Result<Query<Q>, QueryRejection>,
    what: &str,
    route: &str,
) -> Result<Q, Refused> {
    query.map(|Query(q)| q).map_err(|e| {
        (
            StatusCode::BAD_REQUEST,
            format!(
                "{what} is posted as the body of {route}?model=N&name=NAME: {}",
                e.body_text()
            ),
        )
    })
}

/// Served model `index`, or 404 saying how many there are.
pub(super) fn served_model(state: &State, index: usize) -> Result<&Served, Refused> {
    state.models.get(index).ok_or_else(|| {
        (
            StatusCode::NOT_FOUND,
            format!(
                "there is no model {index}: this server has {}",
                state.models.len()
            ),
        )
    })
}

/// `generate=K` (0 is none), refused when it is more than the server generates.
pub(super) fn bounded_generate(
    state: &State,
    generate: Option<usize>,
) -> Result<Option<usize>, Refused> {
    match generate.filter(|&g| g > 0) {
        Some(g) if g > state.max_generate => Err((
            StatusCode::BAD_REQUEST,
            format!(
                "generate={g} is more than this server generates ({}); ask for fewer",
                state.max_generate
            ),
        )),
        g => Ok(g),
    }
}

/// An upload's body, after its place in model `index`'s queue: a `Content-Length` over `limit`
/// is `too_large` before the queue or the body is touched, a full queue is 503 before the body
/// is read, and an empty body is 400. `what` names the upload (`the picture`).
pub(super) async fn admitted_body(
    state: &State,
    index: usize,
    headers: &HeaderMap,
    body: Body,
    (limit, what): (usize, &str),
    too_large: impl Fn() -> Refused,
) -> Result<(slot::Admitted, Vec<u8>), Refused> {
    let expected = content_length(headers)?;
    if expected.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let admitted = admit(state, index)?;
    let bytes = read_bounded(body, expected.map(|n| n as usize), limit, what, too_large).await?;
    if bytes.is_empty() {
        return Err((StatusCode::BAD_REQUEST, format!("{what} is empty")));
    }
    Ok((admitted, bytes))
}

/// The body's bytes, at most `limit` of them (`too_large`, a 413, as soon as there are more);
/// `what` names the upload in the message of a body cut short.
pub(super) async fn read_bounded(
    mut body: Body,
    expected: Option<usize>,
    limit: usize,
    what: &str,
    too_large: impl Fn() -> Refused,
) -> Result<Vec<u8>, Refused> {
    let mut bytes = Vec::with_capacity(expected.unwrap_or(0).min(limit));
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|e| {
            (
                StatusCode::BAD_REQUEST,
                format!("{what} did not arrive whole: {e}"),
            )
        })?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if bytes.len() + data.len() > limit {
            return Err(too_large());
        }
        bytes.extend_from_slice(&data);
    }
    Ok(bytes)
}

/// The request's `Content-Length`, when it says one (400 when it is not a number).
pub(super) fn content_length(headers: &HeaderMap) -> Result<Option<u64>, Refused> {
    match headers.get(header::CONTENT_LENGTH) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .map(Some)
            .ok_or((StatusCode::BAD_REQUEST, "a bad Content-Length".to_string())),
    }
}

/// `POST /api/image`: run a picture through a vision model; answered as `/api/run` answers a
/// text (the report, its data, the file name Save gives it), with the picture's name.
pub(super) async fn image(
    Shared(state): Shared<Arc<State>>,
    query: Result<Query<ImageQuery>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match upload(&state, query, &headers, body).await {
        Ok(response) => response,
        Err((status, message)) => error(status, &message),
    }
}

async fn upload(
    state: &Arc<State>,
    query: Result<Query<ImageQuery>, QueryRejection>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, Refused> {
    let query = upload_query(query, "a picture", "/api/image")?;
    let index = query.model;
    let served = served_model(state, index)?;
    let multimodal = served.model.is_multimodal();
    if served.kind == "speech" {
        return Err((
            StatusCode::BAD_REQUEST,
            format!(
                "{} is a speech model ({}): it reads a recording, not pictures; upload one \
                 (POST /api/audio)",
                served.name,
                served.model.family()
            ),
        ));
    }
    if served.kind != "vision" && !multimodal {
        return Err((
            StatusCode::BAD_REQUEST,
            format!(
                "{} is a text model ({}): it reads text, not pictures; send it a text \
                 (POST /api/run)",
                served.name,
                served.model.family()
            ),
        ));
    }
    let text = query.text.unwrap_or_default();
    let (generate, chat) = (bounded_generate(state, query.generate)?, query.chat);
    if (generate.is_some() || chat) && !multimodal {
        return Err((
            StatusCode::BAD_REQUEST,
            format!(
                "{} is a vision model: it generates nothing and has no chat template; post the \
                 picture alone",
                served.name
            ),
        ));
    }
    if multimodal {
        // The prompt's tokens, counted before the picture is read (its image tokens are the
        // library's to count).
        let tokens = served
            .model
            .tokenizer()
            .encode(&text, None, usize::MAX, false)
            .map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()))?;
        check_tokens(
            tokens.ids.len(),
            state.max_tokens,
            served.model.max_positions(),
        )?;
    }
    // A length over the bound is refused before a byte of the body is read, and a full queue
    // before the picture is sent.
    let (admitted, bytes) = admitted_body(
        state,
        index,
        headers,
        body,
        (MAX_UPLOAD, "the picture"),
        too_large,
    )
    .await?;
    let name = picture_name(query.name.as_deref().unwrap_or(""));
    let filename = download_name(&name);
    let request = RunRequest {
        // The bytes' name names the picture in the views, as a file's name does for --image;
        // a vision model given text refuses it, as the library words it.
        text,
        images: vec![ImageSource::Bytes {
            name: name.clone(),
            bytes: Arc::from(bytes),
        }],
        generate,
        chat,
        ..RunRequest::default()
    };
    let (kept, generated) =
        execute_admitted(state, admitted, (index, request), move |job, run, ran| {
            let generated = run.generated_text.clone();
            Ok((keep_run(job, index, run, ran, filename)?, generated))
        })
        .await?;
    Ok(kept.answer(serde_json::json!({ "name": name, "generated": generated })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_picture_name_loses_its_path_controls_and_length() {
        assert_eq!(picture_name("cat.png"), "cat.png");
        assert_eq!(picture_name("/etc/passwd"), "passwd");
        assert_eq!(picture_name("..\\..\\windows\\cat.jpg"), "cat.jpg");
        assert_eq!(picture_name("a/b/"), UNNAMED);
        assert_eq!(picture_name(".."), UNNAMED);
        assert_eq!(picture_name(""), UNNAMED);
        assert_eq!(picture_name(" \t\n"), UNNAMED);
        assert_eq!(picture_name("ca\u{0}t\r\n.png\u{1b}[31m"), "cat.png[31m");
        // Text that reorders what follows it (a name that reads as "gnp.exe"): dropped.
        assert_eq!(picture_name("photo\u{202e}gnp.exe"), "photognp.exe");
        // Markup is kept as text: the report and the page escape it.
        assert_eq!(picture_name("<b>x</b>.png"), "b>.png");
        assert_eq!(picture_name("<img src=x>.png"), "<img src=x>.png");
        let long = format!("{}.jpeg", "é".repeat(300));
        let cut = picture_name(&long);
        assert_eq!(cut.chars().count(), MAX_NAME);
        assert!(cut.ends_with("é.jpeg"), "{cut}");
        let no_ext = "x".repeat(300);
        assert_eq!(picture_name(&no_ext).chars().count(), MAX_NAME);
        let odd_ext = format!("a.{}", "b".repeat(300));
        assert_eq!(picture_name(&odd_ext).chars().count(), MAX_NAME);
    }

    #[test]
    fn a_pictures_report_is_saved_under_its_name() {
        assert_eq!(
            download_name("wide45x37.png"),
            "attnviz-report-wide45x37.html"
        );
        assert_eq!(
            download_name("My Holiday (2).JPG"),
            "attnviz-report-my-holiday-2.html"
        );
        assert_eq!(download_name("猫.png"), "attnviz-report.html");
        assert_eq!(
            download_name("\"quoted\".png"),
            "attnviz-report-quoted.html"
        );
    }
}
