//! The library's typed errors, worded for the command line: the flags a user typed, and what to
//! type instead. (Python words the same errors with its keyword names.)

use attnviz::corpus::lines::BadLine;
use attnviz::corpus::{self, CorpusError, Notice, ResumeFix};
use attnviz::request::RequestError;

use super::flows::Error;

/// A run request the model refused, as the CLI says it.
pub(super) fn request(e: RequestError) -> Error {
    let usage = |s: String| Error::Usage(s);
    match e {
        RequestError::Model(e) => Error::Model(e),
        RequestError::TargetNeedsEncoderDecoder {
            model,
            family,
            decoder,
        } => usage(format!(
            "--target is for encoder–decoder models (BART, T5, Marian); {model} is a {family} \
             model: drop --target{}",
            if decoder { ", or use --generate" } else { "" }
        )),
        RequestError::ChatForEncoderDecoder { model, family } => usage(format!(
            "--chat: {model} is an encoder–decoder model ({family}), with no chat template; give \
             the source as TEXT and --target or --generate"
        )),
        RequestError::PairForEncoderDecoder { model, family } => usage(format!(
            "--pair: {model} is an encoder–decoder model ({family}), which reads one source \
             text; give the output with --target"
        )),
        RequestError::PairForDecoder { model, family } => usage(format!(
            "{model} is a decoder ({family}), which reads one text: sentence pairs (--pair) are \
             for encoders such as BERT"
        )),
        RequestError::PairWithGeneration => usage(
            "--generate and --chat are for decoder models, which read one text; drop --pair".into(),
        ),
        RequestError::EmptyTarget => {
            usage("--target is empty; give the output to teacher-force".into())
        }
        RequestError::GenerateNothing => {
            usage("--generate 0 generates nothing; give the number of tokens to generate".into())
        }
        RequestError::LayersForEncoderDecoder { family } => usage(format!(
            "--layers is not supported for encoder–decoder models ({family}): every layer of the \
             encoder and the decoder is captured"
        )),
        RequestError::LayerOutOfRange { layer, layers } => usage(format!(
            "--layers {layer} is out of range: the model has layers 0–{} (numbered from 0)",
            layers.saturating_sub(1)
        )),
        RequestError::Shape(e) => usage(e.to_string()),
    }
}

/// A bad line's reason as the CLI says it (the flag that would have let it through).
pub(super) fn bad_line(bad: &BadLine) -> String {
    match bad {
        BadLine::TooLong { tokens, max } => format!(
            "{tokens} tokens, but the model takes at most {max}; shorten it or pass --truncate"
        ),
        BadLine::TooManyBytes { len, limit } => format!(
            "{len} bytes long, over the limit of {limit} bytes per line for this model (even \
             with --truncate); split it"
        ),
        other => other.to_string(),
    }
}

/// A corpus run's notice as the CLI says it.
pub(super) fn notice(notice: &Notice<'_>) -> String {
    let mut line = String::new();
    let _ = match notice {
        Notice::BadLine {
            line: n,
            bad,
            last_shown,
        } => corpus::notice::bad_line(&mut line, *n, &bad_line(bad), bad.kind(), *last_shown),
        Notice::Truncated {
            line: n,
            from,
            kept,
            last_listed,
        } => corpus::notice::truncated(&mut line, *n, *from, *kept, *last_listed, " (--truncate)"),
        Notice::Summary(outcome) => {
            line = corpus::notice::summary_line(outcome, " (--resume)");
            Ok(())
        }
        other => {
            line = other.to_string();
            Ok(())
        }
    };
    line
}

/// A corpus run's error as the CLI says it.
pub(super) fn corpus(e: CorpusError) -> Error {
    let usage = |s: String| Error::Usage(s);
    match e {
        CorpusError::Folder { path, reason } => {
            usage(format!("--out-dir {}: {reason}", path.display()))
        }
        CorpusError::Stopped { line, reason, done } => usage(format!(
            "line {line}: {}; stopped (--on-bad-line stop). {done}",
            bad_line(&reason)
        )),
        CorpusError::Resume { dir, reason, fix } => {
            let fix = match fix {
                ResumeFix::None => "",
                ResumeFix::StartOver => "; use --force to start over, or another --out-dir",
                ResumeFix::SameSettings => {
                    "; resume with what the earlier run used, or use --force to start over"
                }
            };
            usage(format!(
                "cannot resume the run in {}: {reason}{fix}",
                dir.display()
            ))
        }
        CorpusError::Interrupted { done, signal } => Error::Interrupted {
            message: format!(
                "{}. {done}; continue with the same command and --resume",
                if signal == 15 {
                    "terminated (SIGTERM)"
                } else {
                    "interrupted"
                }
            ),
            signal,
        },
        e => Error::Corpus(e),
    }
}
