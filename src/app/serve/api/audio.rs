//! `POST /api/audio?model=N&name=NAME&generate=K&timestamps=true&language=CODE&task=TASK&window=W`:
//! a recording (WAV, FLAC, MP3 or OGG) for a speech model (Whisper), the body the file's bytes
//! as they are, as `/api/image` takes a picture. The run is the library's [`RunRequest`] the
//! command line makes of `--audio FILE` with `--generate`, `--timestamps`, `--language`,
//! `--task` and `--window`: the bytes go to the library in memory ([`AudioSource::Bytes`]),
//! nothing reaches the file system, and the name (made harmless by [`picture_name`]) only names
//! the recording in the views and the saved report's file name. The answer is `/api/run`'s (the
//! report, whose Speech tab plays the recording) with the run's `speech` section, the JSON
//! export's (`transcript`, `words`, …).
//!
//! The body is bounded ([`MAX_AUDIO`]) as a picture's is: a `Content-Length` over it is 413
//! before a byte is read, a chunked body is cut off with 413 as soon as it passes it, and the
//! upload takes its place in the model's queue first. A recording the library cannot read is a
//! 400 with its one line; a recording sent to a model that reads text or pictures is a 400
//! saying so, before the body is read.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State as Shared};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;

use attnviz::request::{AudioSource, RunRequest};

use super::upload::{
    admitted_body, bounded_generate, download_name, picture_name, served_model, upload_query,
};
use super::{error, execute_admitted, keep_run, Refused};
use crate::app::serve::State;

/// The largest recording the server takes, in bytes (32 MiB: a 30-second window is 1 MB of
/// 16 kHz WAV; half an hour of MP3 fits).
pub const MAX_AUDIO: usize = 32 << 20;

/// The upload's query: the model by index, the recording's name, the run's settings.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AudioQuery {
    #[serde(default)]
    model: usize,
    #[serde(default)]
    name: Option<String>,
    /// The most tokens each window's transcript may have (`None`: the decoder's positions).
    #[serde(default)]
    generate: Option<usize>,
    /// Whisper's timestamp tokens between the segments.
    #[serde(default)]
    timestamps: bool,
    /// The spoken language (`en`, `english`); `None`: detected.
    #[serde(default)]
    language: Option<String>,
    /// `transcribe` (the default) or `translate`.
    #[serde(default)]
    task: Option<String>,
    /// The window of a long recording whose attention is captured (from 0).
    #[serde(default)]
    window: Option<usize>,
    // The guard has checked it.
    #[serde(default)]
    #[allow(dead_code)]
    token: Option<String>,
}

fn too_large() -> Refused {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "the recording is larger than this server takes ({} MiB); cut it or save it as MP3 \
             or OGG",
            MAX_AUDIO >> 20
        ),
    )
}

/// `POST /api/audio`: run a recording through a speech model; answered as `/api/run` answers a
/// text, with the recording's name and the run's speech section.
pub(super) async fn audio(
    Shared(state): Shared<Arc<State>>,
    query: Result<Query<AudioQuery>, QueryRejection>,
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
    query: Result<Query<AudioQuery>, QueryRejection>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, Refused> {
    let query = upload_query(query, "a recording", "/api/audio")?;
    let index = query.model;
    let served = served_model(state, index)?;
    if served.kind != "speech" {
        let (reads, route) = if served.kind == "vision" || served.model.is_multimodal() {
            ("pictures", "upload one (POST /api/image)")
        } else {
            ("text", "send it a text (POST /api/run)")
        };
        return Err((
            StatusCode::BAD_REQUEST,
            format!(
                "{} is a {} model ({}): it reads {reads}, not recordings; {route}",
                served.name,
                served.kind,
                served.model.family()
            ),
        ));
    }
    let translate = match query.task.as_deref() {
        None | Some("transcribe") => false,
        Some("translate") => true,
        Some(other) => {
            return Err((
                StatusCode::BAD_REQUEST,
                format!("task={other} is not a task: transcribe or translate"),
            ))
        }
    };
    let generate = bounded_generate(state, query.generate)?;
    let language = query.language.filter(|l| !l.trim().is_empty());
    if language.as_ref().is_some_and(|l| l.len() > 64) {
        return Err((
            StatusCode::BAD_REQUEST,
            "language= is a language's code or name (en, english)".into(),
        ));
    }
    // A length over the bound is refused before a byte of the body is read, and a full queue
    // before the recording is sent.
    let (admitted, bytes) = admitted_body(
        state,
        index,
        headers,
        body,
        (MAX_AUDIO, "the recording"),
        too_large,
    )
    .await?;
    let name = picture_name(query.name.as_deref().unwrap_or(""));
    let filename = download_name(&name);
    let request = RunRequest {
        audio: Some(AudioSource::Bytes {
            name: name.clone(),
            bytes: Arc::from(bytes),
        }),
        generate,
        timestamps: query.timestamps,
        language,
        translate,
        window: query.window,
        ..RunRequest::default()
    };
    let (kept, generated, speech) =
        execute_admitted(state, admitted, (index, request), move |job, run, ran| {
            let generated = run.generated_text.clone();
            let speech = serde_json::to_value(&run.measured.speech).unwrap_or_default();
            Ok((keep_run(job, index, run, ran, filename)?, generated, speech))
        })
        .await?;
    Ok(kept.answer(serde_json::json!({
        "name": name,
        "generated": generated,
        "speech": speech,
    })))
}
