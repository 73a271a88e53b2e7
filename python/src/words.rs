//! Python's words for the library's typed errors: the library says what was wrong and names
//! no option; these add the keyword argument that fixes it (`truncate=True`, `max_memory=`,
//! `model=`), as the CLI's messages name its flags.

use attnviz::analysis::AnalysisError;
use attnviz::model::{self, Capture, SourceError, TargetError};
use attnviz::render::image::ImageError;
use attnviz::tokenize;

/// A model error as `attnviz.run` raises it.
pub fn model(e: &model::Error) -> String {
    use model::Error as E;
    match e {
        E::Source(s) => source(s),
        E::Tokenize(tokenize::Error::TooLong { .. } | tokenize::Error::TooManyBytes { .. })
        | E::TooManyTokens { .. }
        | E::SideTooLong { .. }
        | E::PromptTooLong { .. }
        | E::Target(TargetError::TooLong { .. } | TargetError::TooManyBytes { .. }) => {
            format!("{e}, or pass truncate=True")
        }
        E::TooBig(c) => {
            let budget = if c.budget_given {
                "the max_memory budget"
            } else {
                "the default budget (half of this machine's memory; raise it with max_memory=BYTES)"
            };
            let fewer = match c.capture {
                Capture::SelfAttention { layers, .. } if layers > 1 => {
                    " capture fewer layers with layers=[...], or"
                }
                Capture::SelfAttention { .. } => "",
                Capture::EncoderDecoder { .. } => " generate fewer tokens, or",
                Capture::LogitLens { .. } => " keep fewer tokens per cell with lens=K, or",
                Capture::Summary { .. } => " keep fewer keys per token, or",
            };
            format!(
                "{} needs {}, more than {} of {budget};{fewer} use a shorter input",
                c.what(),
                c.needs_text(),
                model::format_bytes(c.budget)
            )
        }
        E::TooSlow(t) => format!(
            "{t}, or allow it with max_analysis_time={} (seconds)",
            t.enough_seconds()
        ),
        E::NotSeq2Seq { .. } => format!("{e}; target= is for BART, T5 and Marian"),
        E::PairOnDecoder { .. } => format!("{e}; drop pair="),
        E::LayersOnSeq2Seq { .. } => format!("{e}; drop layers="),
        E::NoChatTemplate { .. } => format!("{e}; drop chat=True"),
        E::Input(i) => match i.as_ref() {
            model::InputError::ImageNeedsProjector { .. } => {
                format!("{e}; pass it with mmproj=\"mmproj.gguf\"")
            }
            model::InputError::ProjectorNeedsGguf { .. } => {
                format!("{e} (model=\"model.gguf\", mmproj=\"mmproj.gguf\")")
            }
            model::InputError::PanAndScan { asked: true, .. } => {
                format!("{e}; drop pan_and_scan=True")
            }
            _ => e.to_string(),
        },
        _ => e.to_string(),
    }
}

/// Finding the model's files: `model=` a local folder is the way out.
fn source(e: &SourceError) -> String {
    match e {
        SourceError::NotAModel(_)
        | SourceError::NotAFolder(_)
        | SourceError::NotCachedOffline { .. }
        | SourceError::Unreachable { .. }
        | SourceError::NotFound { .. }
        | SourceError::Download { .. } => {
            format!("{e} (model= a folder with config.json, the weights and the tokenizer files)")
        }
        _ => e.to_string(),
    }
}

/// Building a view with `no_special=True` that leaves nothing.
pub fn analysis(e: &AnalysisError) -> String {
    match e {
        AnalysisError::NothingLeft { .. } => format!("{e} (no_special=False)"),
        #[allow(unreachable_patterns)]
        _ => e.to_string(),
    }
}

/// Drawing an image: `scale_factor=`, or an SVG.
pub fn image(e: &ImageError) -> String {
    match e {
        ImageError::ScaleFactor(_) => format!("{e} (scale_factor=)"),
        ImageError::TooManyPixels { .. } => format!("{e} (a smaller scale_factor=, or .svg())"),
        _ => e.to_string(),
    }
}
