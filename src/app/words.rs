//! The library's typed errors, worded for the command line: the flags a user typed, and what to
//! type instead. (Python words the same errors with its keyword names.)

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
