//! The CLI's words for the library's typed errors. The library says what was wrong and never
//! names a flag; these messages add the flag that fixes it (`--truncate`, `--max-memory`,
//! `--model DIR`, …), so that a run that fails says what to type next. Errors without a flag to
//! name display as the library words them.

use super::error::Error;
use attnviz::analysis::AnalysisError;
use attnviz::attention::{AttentionKind, KindError};
use attnviz::corpus::folder::FolderProblem;
use attnviz::corpus::lines::BadLine;
use attnviz::corpus::merge::MergeError;
use attnviz::corpus::{self, CorpusError, Notice, ResumeFix};
use attnviz::import::ImportError;
use attnviz::model::rerun::TooSlow;
use attnviz::model::{self, Capture, CaptureTooBig, SourceError, TargetError};
use attnviz::render::image::ImageError;
use attnviz::report::{Among, ReportError, SelectionFault};
use attnviz::request::{RequestError, SummaryConflict};
use attnviz::tokenize;

/// A model error as the CLI shows it.
pub fn model(e: &model::Error) -> String {
    use model::Error as E;
    match e {
        E::Source(s) => source(s),
        E::Tokenize(t) => tokenize(t),
        E::NoChatTemplate { origin, searched } => format!(
            "{origin} carries no chat template ({searched}), so --chat cannot wrap the prompt; \
             run without --chat"
        ),
        E::TooBig(c) => capture(c),
        E::TooSlow(t) => too_slow(t),
        E::NotSeq2Seq { model, family } => format!(
            "{model} is not an encoder–decoder model ({family}); --target is for BART, T5 and \
             Marian"
        ),
        E::PairOnDecoder { model, family } => format!(
            "{model} is a decoder ({family}), which reads one text: sentence pairs (--pair) are \
             for encoders such as BERT"
        ),
        E::TooManyTokens { .. } | E::SideTooLong { .. } => {
            format!("{e} or pass --truncate")
        }
        E::PromptTooLong {
            tokens,
            new,
            longest,
        } => format!(
            "the prompt is {tokens} tokens and {new} more were asked for, but the model takes at \
             most {longest}; generate at most {} tokens, shorten the prompt, or pass --truncate \
             to cut it",
            longest.saturating_sub(*tokens)
        ),
        E::LayersOnSeq2Seq { family } => format!(
            "--layers is not supported for encoder–decoder models ({family}): every layer of the \
             encoder and the decoder is captured"
        ),
        E::Target(t) => target(t),
        E::Input(i) => match i.as_ref() {
            model::InputError::ImageNeedsProjector { .. } => {
                format!("{e}; pass it with --mmproj FILE")
            }
            model::InputError::ProjectorNeedsGguf { .. } => {
                format!("{e} (-m model.gguf --mmproj mmproj.gguf)")
            }
            model::InputError::PanAndScan { asked: true, .. } => {
                format!("{e}; drop --pan-and-scan")
            }
            model::InputError::NeedsAudio { family } => format!(
                "{family} reads a recording, not text: give it with --audio FILE (WAV, FLAC, MP3 or OGG) and no TEXT"
            ),
            model::InputError::AudioToText { .. } => format!("{e}; drop --audio"),
            model::InputError::EnglishOnly { .. } | model::InputError::UnknownLanguage { .. } => {
                format!("--language: {e}")
            }
            model::InputError::SpeechTask { .. } => format!("--task: {e}"),
            model::InputError::NoTimestampTokens { .. } => format!("{e}; drop --timestamps"),
            _ => e.to_string(),
        },
        _ => e.to_string(),
    }
}

/// Finding the model's files: a local folder given with `--model DIR` is the way out.
pub fn source(e: &SourceError) -> String {
    match e {
        SourceError::NotAModel(m) => format!(
            "model '{m}' is neither a folder nor a Hugging Face repo id (like 'bert-base-uncased' \
             or 'org/name'); pass --model DIR with config.json, weights and tokenizer files"
        ),
        SourceError::NotAFolder(path) => format!(
            "{} is a file; pass --model the folder that holds config.json, the weights and the \
             tokenizer files",
            path.display()
        ),
        SourceError::NotCachedOffline {
            model,
            revision,
            cache,
        } => format!(
            "model '{model}' (revision '{revision}') is not in the Hugging Face cache {} and \
             HF_HUB_OFFLINE is set: pass --model DIR with a local copy, or unset HF_HUB_OFFLINE \
             to download it",
            cache.display()
        ),
        SourceError::Unreachable {
            model,
            revision,
            cache,
            endpoint,
            reason,
        } => format!(
            "cannot reach the Hugging Face hub at {endpoint} ({reason}) and model '{model}' \
             (revision '{revision}') is not in the cache {}: pass --model DIR with a local copy, \
             or fetch the files into that cache on a machine with access (then HF_HUB_OFFLINE=1 \
             skips the network)",
            cache.display()
        ),
        SourceError::NotFound {
            model,
            revision,
            status,
        } => format!(
            "the Hugging Face hub has no model '{model}' at revision '{revision}' (HTTP \
             {status}); check the id and --revision (private or gated repos need HF_TOKEN), or \
             pass --model DIR"
        ),
        SourceError::Download {
            model,
            file,
            reason,
        } => format!(
            "downloading {file} of '{model}' failed: {reason}; retry, or pass --model DIR with a \
             local copy"
        ),
        _ => e.to_string(),
    }
}

/// Tokenizing the text: too long an input can be cut with `--truncate`.
pub fn tokenize(e: &tokenize::Error) -> String {
    match e {
        tokenize::Error::TooLong { .. } | tokenize::Error::TooManyBytes { .. } => {
            format!("{e} or pass --truncate")
        }
        _ => e.to_string(),
    }
}

/// The target text of an encoder–decoder (`--target`).
fn target(e: &TargetError) -> String {
    match e {
        TargetError::Empty => "the target is empty; give --target some text".to_string(),
        TargetError::NoTokens => {
            "the target contains no tokens the model can read; give --target some text".to_string()
        }
        TargetError::TooLong { tokens, max } => format!(
            "the target is {tokens} tokens long (with the special tokens) but the decoder takes \
             at most {max}; shorten --target or pass --truncate"
        ),
        TargetError::TooManyBytes { bytes, limit } => format!(
            "the target is {bytes} bytes long, more than the decoder can take (at most {limit} \
             bytes are read); shorten --target or pass --truncate"
        ),
    }
}

/// What `--summarise` cannot be combined with, in the flags' words.
fn summarised(c: SummaryConflict) -> String {
    let what = match c {
        SummaryConflict::Kind(kind) => {
            return format!("--summarise is for encoders and decoders reading a text, not {kind}")
        }
        SummaryConflict::Generation => "--generate and --chat need",
        SummaryConflict::Analysis("value-weighted attention") => "--weighting needs",
        SummaryConflict::Analysis("ALTI") => "--alti needs",
        SummaryConflict::Analysis("value zeroing") => "--value-zeroing needs",
        SummaryConflict::Analysis("the logit lens") => "--lens needs",
        SummaryConflict::Analysis("saving the capture") => "--save-attention needs",
        SummaryConflict::Analysis(_) => "--attribution and --ablate need",
        SummaryConflict::QueryKey => "--neuron needs",
        SummaryConflict::NoKeys => return "--top-keys 0 keeps nothing; give at least 1".into(),
    };
    format!(
        "--summarise keeps no attention matrix, only its summaries; {what} the full attention: \
         drop one of them"
    )
}

/// A capture over the memory budget: `--max-memory` raises it, `--layers` captures less.
fn capture(c: &CaptureTooBig) -> String {
    let budget = model::format_bytes(c.budget);
    let which = if c.budget_given {
        "the --max-memory budget"
    } else {
        "the default budget (half of this machine's memory; raise it with --max-memory)"
    };
    match c.capture {
        Capture::SelfAttention { layers, .. } => {
            let fewer = if layers > 1 {
                " capture fewer layers with --layers (e.g. --layers 0,5), or"
            } else {
                ""
            };
            format!(
                "{} needs {}, more than {budget} of {which};{fewer} use a shorter input, or \
                 --summarise to keep each layer's summary (top keys, sink, entropy, distance, \
                 pooled map) instead of its matrix",
                c.what(),
                c.needs_text()
            )
        }
        Capture::EncoderDecoder { .. } => format!(
            "{} needs {}, more than {budget} of {which}; use a shorter source, target or \
             --generate",
            c.what(),
            c.needs_text()
        ),
        Capture::LogitLens { .. } => format!(
            "{} needs {}, more than {budget} of {which}; keep fewer tokens per cell with \
             --lens-top, or use a shorter input",
            c.what(),
            c.needs_text()
        ),
        Capture::Summary { layers, .. } => format!(
            "{} needs {}, more than {budget} of {which}; keep fewer keys per token with \
             --top-keys,{} or use a shorter input",
            c.what(),
            c.needs_text(),
            if layers > 1 {
                " summarise fewer layers with --layers,"
            } else {
                ""
            }
        ),
    }
}

/// An analysis whose re-runs would outlast the time limit: `--max-analysis-time` raises it.
fn too_slow(e: &TooSlow) -> String {
    format!(
        "{}, or allow it with --max-analysis-time {}",
        e,
        duration_flag(e.enough_seconds())
    )
}

/// Seconds as `--max-analysis-time` reads them (`45s`, `3m`).
fn duration_flag(seconds: u64) -> String {
    if seconds >= 60 && seconds.is_multiple_of(60) {
        format!("{}m", seconds / 60)
    } else {
        format!("{seconds}s")
    }
}

/// A kind of attention the run does not hold (`--kind`).
pub fn kind(e: &KindError) -> String {
    let names: Vec<&str> = e.held.iter().map(|k| k.as_str()).collect();
    if e.held == [AttentionKind::SelfAttention] {
        format!(
            "--kind {}: this model has one attention, its self-attention (encoder–decoder models \
             have encoder, decoder and cross); drop --kind",
            e.asked.as_str()
        )
    } else {
        format!(
            "--kind {}: this attention has {}; choose one of them",
            e.asked.as_str(),
            names.join(", ")
        )
    }
}

/// Building the view: only special tokens, with `--no-special`.
pub fn analysis(e: &AnalysisError) -> String {
    match e {
        AnalysisError::NothingLeft { names } => format!(
            "the input has no tokens besides its special tokens ({names}), so excluding them \
             leaves nothing; drop --no-special"
        ),
        #[allow(unreachable_patterns)]
        _ => e.to_string(),
    }
}

/// Drawing an image: the scale flags and `--svg`.
pub fn image(e: &ImageError) -> String {
    match e {
        ImageError::ScaleFactor(_) => format!("{e} (or --dpi 48 to 384)"),
        ImageError::TooManyPixels { factor, w, h } => format!(
            "a scale factor of {factor} would make a {w} × {h} pixel PNG, more than the {} \
             million pixels allowed; use a smaller --scale-factor, or --svg",
            attnviz::render::image::MAX_PNG_PIXELS / 1_000_000
        ),
        ImageError::Selection(s) => s.to_string(),
        _ => e.to_string(),
    }
}

/// A layer or head that does not fit the attention (`--layer`, `--head`, `--layers`).
pub fn selection(e: &SelectionFault) -> String {
    match e {
        SelectionFault::CapturedOutOfRange {
            name,
            layer,
            layers,
        } => format!(
            "--layers {layer} is out of range: {name} has layers 0–{} (numbered from 0)",
            layers.saturating_sub(1)
        ),
        SelectionFault::NotAmong {
            layer,
            numbers,
            among,
        } => format!(
            "--layer {layer} is not among {} {}; pick one of them",
            match among {
                Among::Captured => "the captured --layers",
                Among::File => "the file's layers",
            },
            attnviz::attention::layer_list(numbers)
        ),
        SelectionFault::Layer {
            name,
            layer,
            layers,
        } => format!(
            "--layer {layer} is out of range: {name} has layers 0–{} (numbered from 0)",
            layers.saturating_sub(1)
        ),
        SelectionFault::Head { name, head, heads } => format!(
            "--head {head} is out of range: {name} has heads 0–{} per layer (numbered \
                 from 0), or use --head mean",
            heads.saturating_sub(1)
        ),
    }
}

/// Writing a run's outputs: the kind, the selection, the picture flags.
pub fn report(e: &ReportError) -> String {
    match e {
        ReportError::Kind(e) => kind(e),
        ReportError::Selection(e) => selection(e),
        ReportError::Analysis(e) => analysis(e),
        ReportError::Image(e) => image(e),
        ReportError::Output(e) => e.to_string(),
        ReportError::Terminal(e) => format!("cannot write to the terminal: {e}"),
        ReportError::NoPicture => "--query, --head-fusion and --discard-ratio draw on a picture, \
             and this attention has none (it is not an image run's JSON export); drop them"
            .to_string(),
        ReportError::RolloutWithoutOwnUnits { kind } => format!(
            "--figure rollout follows the residual stream through one side's own units; {} \
             attention has none: choose --kind encoder or decoder, or another --figure",
            kind.as_str()
        ),
        #[allow(unreachable_patterns)]
        _ => e.to_string(),
    }
}

/// Reading attention from a file (`attnviz render`): token labels come with `--tokens FILE`.
pub fn import(e: &ImportError) -> String {
    match e {
        ImportError::TokenFile { path, problem } => format!("--tokens {path}: {problem}"),
        ImportError::NoTokens { field, .. } if field == "tokens" => {
            format!("{e} with --tokens FILE")
        }
        ImportError::TokensForEncoderDecoder { file } => format!(
            "--tokens labels one self-attention array, but {file} holds encoder–decoder \
             attention; store encoder_tokens and decoder_tokens in the file instead"
        ),
        _ => e.to_string(),
    }
}

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
        RequestError::StreamForEncoderDecoder { family } => usage(format!(
            "--save-attention: an encoder–decoder model ({family}) is saved from its whole run"
        )),
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
        RequestError::ValueWeightedForEncoderDecoder { family } => usage(format!(
            "--weighting: value-weighted and norm-aware attention are not available for \
             encoder–decoder models ({family}) yet; drop --weighting"
        )),
        RequestError::NotOneToken {
            role,
            token,
            model,
            pieces,
        } => {
            let flag = match role {
                attnviz::request::TokenRole::Target => "--target-token",
                attnviz::request::TokenRole::Contrast => "--contrast",
            };
            let hint = match pieces.first() {
                Some(first) => format!("; give one token, e.g. {flag} {first:?}"),
                None => "; give a token of its vocabulary (as the JSON's tokens show them)".into(),
            };
            usage(format!(
                "{flag} {token:?} is not one token of {model}: {}{hint}",
                attnviz::request::describe_pieces(&pieces)
            ))
        }
        e @ RequestError::HeadsNeedDecoder { .. } => usage(format!(
            "--attribution, --target-token, --contrast, --ablate: {e}"
        )),
        RequestError::LensTopTooLarge { asked, max } => usage(format!(
            "--lens-top {asked} keeps more tokens per cell than the logit lens writes (at most \
             {max}); give {max} or fewer"
        )),
        RequestError::TowerPictures { given } => usage(format!(
            "--tower draws the vision tower's attention over one picture; give one --image \
             ({given} given)"
        )),
        e @ RequestError::TowerReadsThePicture => usage(format!(
            "--tower: {e}; drop --generate, --chat, --attribution and --ablate"
        )),
        RequestError::SeveralPictures {
            model,
            family,
            given,
        } => usage(format!(
            "--image given {given} times: {model} is a vision model ({family}), which reads one \
             picture; give one --image (vision-language models such as LLaVA take several)"
        )),
        RequestError::TextWithAudio { model } => usage(format!(
            "{model} reads the recording (--audio) alone: drop TEXT"
        )),
        RequestError::SpeechSettingsWithoutAudio => usage(
            "--language, --task, --timestamps and --window set how a recording is transcribed; give it with --audio FILE to a speech model (Whisper)"
                .into(),
        ),
        RequestError::Summarised(c) => usage(summarised(c)),
        e @ RequestError::NoSuchWindow { .. } => usage(format!("--window: {e}")),
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

/// A refused merge as the CLI says it: shards of different kinds are told which `--kind` to
/// rerun with, an unfinished shard to `--resume`.
pub(super) fn merge(e: MergeError) -> Error {
    match e {
        MergeError::KindsDiffer {
            file,
            kind,
            first,
            first_kind,
        } => Error::Usage(format!(
            "{file} holds the statistics of {kind} attention and {first} those of {first_kind} \
             attention; cannot merge them: run every shard with the same --kind (and with \
             targets on every line, or none)"
        )),
        MergeError::Unfinished(shard) => Error::Usage(format!(
            "{shard}; finish it (rerun its command with --resume), then merge"
        )),
        e => Error::Merge(e),
    }
}

/// A corpus run's error as the CLI says it.
pub(super) fn corpus(e: CorpusError) -> Error {
    let usage = |s: String| Error::Usage(s);
    match e {
        CorpusError::Folder { path, reason } => {
            usage(format!("--out-dir {}: {}", path.display(), folder(&reason)))
        }
        CorpusError::Stopped { line, reason, done } => usage(format!(
            "line {line}: {}; stopped (--on-bad-line stop). {done}",
            bad_line(&reason)
        )),
        CorpusError::Resume { dir, reason } => usage(format!(
            "cannot resume the run in {}: {reason}{}",
            dir.display(),
            resume_fix(reason.fix())
        )),
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
        CorpusError::Kind(e) => usage(kind(&e)),
        e => Error::Corpus(e),
    }
}

/// An output folder that cannot take the run: each run (each shard) its own `--out-dir`, or
/// `--force` to start over.
fn folder(problem: &FolderProblem) -> String {
    match problem {
        FolderProblem::Busy => "another attnviz run is writing into it; give each run (each \
                                shard) its own --out-dir"
            .to_string(),
        FolderProblem::OtherShard { theirs, ours } => format!(
            "it holds the results of shard {theirs}, and this run is shard {ours}; give each \
             shard its own --out-dir, or add --force to replace them"
        ),
        other => other.to_string(),
    }
}

/// What to do about a run that cannot be resumed: `--force` starts over.
fn resume_fix(fix: ResumeFix) -> &'static str {
    match fix {
        ResumeFix::None => "",
        ResumeFix::StartOver => "; use --force to start over, or another --out-dir",
        ResumeFix::SameSettings => {
            "; resume with what the earlier run used, or use --force to start over"
        }
        ResumeFix::SameInput => "; resume with the same input",
        ResumeFix::SameInputOrStartOver => {
            "; resume with the same input, or use --force to start over"
        }
        ResumeFix::Damaged => " (use --force to start over)",
    }
}

/// Why `--shard auto` found no shard, with the flag's forms.
pub fn auto_shard(e: &corpus::AutoShardError) -> String {
    use corpus::AutoShardError as E;
    match e {
        E::NoScheduler => "--shard auto found no scheduler: neither SLURM_ARRAY_TASK_ID (a Slurm \
            array job) nor JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) is set; give the shard \
            as --shard K/N"
            .to_string(),
        E::NoCount { index } => format!(
            "JOB_COMPLETION_INDEX is {index}, but Kubernetes does not tell a pod how many \
             completions its Job has: write --shard auto/N with N the Job's completions"
        ),
        E::NoSlurmCount { id } => format!(
            "SLURM_ARRAY_TASK_ID is {id} but SLURM_ARRAY_TASK_COUNT is not set: write --shard \
             auto/N with N the array's size"
        ),
        E::CountDiffers { array, given } => format!(
            "the Slurm array has {array} tasks (SLURM_ARRAY_TASK_COUNT) but --shard auto/{given} \
             says {given} shards: submit an array of {given} tasks (to redo failed tasks, \
             resubmit the whole array: with --resume, finished shards end at once), or write \
             --shard auto"
        ),
        other => format!("--shard auto: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// Every flag-worded message keeps the library's facts and adds the flag; the library's
    /// own message names no flag.
    fn check(library: &str, cli: &str, flag: &str) {
        assert!(
            !library.contains("--"),
            "the library named a flag: {library}"
        );
        assert!(cli.contains(flag), "{cli}");
        assert!(!cli.contains('\n'), "{cli}");
    }

    #[test]
    fn capture_over_budget_names_max_memory_and_layers() {
        let big = CaptureTooBig {
            capture: Capture::SelfAttention {
                layers: 12,
                heads: 12,
                tokens: 4096,
                mixing: None,
            },
            needs: Some(3_200_000_000),
            budget: 2_000_000_000,
            budget_given: true,
        };
        let e = model::Error::TooBig(big.clone());
        assert_eq!(
            e.to_string(),
            "capturing the attention of 12 layers × 12 heads for 4096 tokens needs 3.2 GB, more \
             than 2.0 GB of the memory budget given; capture fewer layers or use a shorter input"
        );
        assert_eq!(
            model(&e),
            "capturing the attention of 12 layers × 12 heads for 4096 tokens needs 3.2 GB, more \
             than 2.0 GB of the --max-memory budget; capture fewer layers with --layers (e.g. \
             --layers 0,5), or use a shorter input, or --summarise to keep each layer's summary \
             (top keys, sink, entropy, distance, pooled map) instead of its matrix"
        );
        let default = model::Error::TooBig(CaptureTooBig {
            budget_given: false,
            capture: Capture::EncoderDecoder {
                source: 10,
                decoder: 20,
            },
            ..big
        });
        check(
            &default.to_string(),
            &model(&default),
            "raise it with --max-memory",
        );
        assert!(model(&default).contains("--generate"));
    }

    #[test]
    fn too_long_inputs_name_truncate() {
        for e in [
            model::Error::Tokenize(tokenize::Error::TooLong {
                tokens: 602,
                max: 512,
            }),
            model::Error::TooManyTokens {
                tokens: 9,
                index: 2,
                max: 8,
            },
            model::Error::PromptTooLong {
                tokens: 6,
                new: 4,
                longest: 8,
            },
            model::Error::Target(TargetError::TooLong { tokens: 9, max: 8 }),
        ] {
            check(&e.to_string(), &model(&e), "--truncate");
        }
        let e = model::Error::Tokenize(tokenize::Error::TooLong {
            tokens: 602,
            max: 512,
        });
        assert!(
            model(&e).ends_with("shorten it or pass --truncate"),
            "{}",
            model(&e)
        );
    }

    #[test]
    fn model_sources_name_model_dir() {
        for e in [
            SourceError::NotAModel("bad name".into()),
            SourceError::NotCachedOffline {
                model: "org/m".into(),
                revision: "main".into(),
                cache: PathBuf::from("/c"),
            },
            SourceError::Download {
                model: "org/m".into(),
                file: "config.json".into(),
                reason: attnviz::model::source::DownloadProblem::Client {
                    cause: "reset".into(),
                },
            },
        ] {
            check(&e.to_string(), &source(&e), "--model DIR");
        }
        let e = SourceError::NotFound {
            model: "org/m".into(),
            revision: "v9".into(),
            status: 404,
        };
        check(&e.to_string(), &source(&e), "--revision");
    }

    #[test]
    fn projector_errors_name_mmproj() {
        let e = model::Error::from(model::InputError::ImageNeedsProjector {
            model: "m.gguf".into(),
        });
        check(&e.to_string(), &model(&e), "pass it with --mmproj FILE");
        let e = model::Error::from(model::InputError::ProjectorNeedsGguf {
            model: "dir".into(),
        });
        check(
            &e.to_string(),
            &model(&e),
            "-m model.gguf --mmproj mmproj.gguf",
        );
    }

    #[test]
    fn other_kinds_of_advice_name_their_flags() {
        let e = model::Error::NotSeq2Seq {
            model: "m".into(),
            family: "BERT".into(),
        };
        check(
            &e.to_string(),
            &model(&e),
            "--target is for BART, T5 and Marian",
        );
        let e = model::Error::PairOnDecoder {
            model: "m".into(),
            family: "GPT-2".into(),
        };
        check(&e.to_string(), &model(&e), "(--pair)");
        let e = model::Error::NoChatTemplate {
            origin: "m".into(),
            searched: "metadata tokenizer.chat_template".into(),
        };
        check(&e.to_string(), &model(&e), "run without --chat");
        let e = model::Error::Target(TargetError::Empty);
        check(&e.to_string(), &model(&e), "give --target some text");
        let e = KindError {
            asked: AttentionKind::Cross,
            held: vec![AttentionKind::SelfAttention],
        };
        check(&e.to_string(), &kind(&e), "drop --kind");
        let e = AnalysisError::NothingLeft {
            names: "[CLS]/[SEP]".into(),
        };
        check(&e.to_string(), &analysis(&e), "drop --no-special");
        let e = ImageError::TooManyPixels {
            factor: 4.0,
            w: 9000,
            h: 9000,
        };
        check(&e.to_string(), &image(&e), "--scale-factor, or --svg");
        let e = ImportError::TokenFile {
            path: "t.txt".into(),
            problem: attnviz::import::TokenFileProblem::Empty,
        };
        check(
            &e.to_string(),
            &import(&e),
            "--tokens t.txt: the file is empty",
        );
    }

    /// The corpus errors the library words without a flag: the CLI's messages name the flag
    /// that fixes them, as they did when the library named it.
    #[test]
    fn corpus_errors_name_force_out_dir_and_resume() {
        use attnviz::corpus::damage::{ImpossibleRecord, JournalError};
        use attnviz::corpus::merge::Unfinished;
        use attnviz::corpus::resume::ResumeProblem;
        use attnviz::corpus::Shard;
        let resume = |reason| CorpusError::Resume {
            dir: PathBuf::from("out"),
            reason: Box::new(reason),
        };
        let cases = [
            (
                resume(ResumeProblem::NoPartialFile),
                "cannot resume the run in out: it holds per-sentence files but no \
                 corpus_partial.json (written by a run of an older attnviz, or another program); \
                 use --force to start over, or another --out-dir",
                "--force",
            ),
            (
                resume(ResumeProblem::Shape {
                    layers: 2,
                    heads: 2,
                    model_layers: 3,
                    model_heads: 3,
                }),
                "cannot resume the run in out: corpus_partial.json holds sums for 2 layers × 2 \
                 heads, and the model has 3 × 3; the file is damaged or was edited (use --force \
                 to start over)",
                "--force",
            ),
            (
                resume(ResumeProblem::Journal(JournalError::Impossible {
                    name: ".corpus_journal.0".into(),
                    line: 3,
                    what: ImpossibleRecord::Counts {
                        tokens: 1,
                        units: 2,
                    },
                })),
                "cannot resume the run in out: its journal .corpus_journal.0: line 3: 1 tokens \
                 and 2 units, which no sentence has; the journal is damaged or was edited (use \
                 --force to start over)",
                "--force",
            ),
            (
                resume(ResumeProblem::InputChanged {
                    lines: 4,
                    input: "in.txt".into(),
                    sha256: "ab".into(),
                    bytes: 9,
                    earlier_sha256: "cd".into(),
                    earlier_bytes: 9,
                }),
                "cannot resume the run in out: the first 4 lines of in.txt are not the ones the \
                 earlier run read (SHA-256 ab, 9 bytes; the earlier run's: cd, 9 bytes); resume \
                 with the same input, or use --force to start over",
                "--force",
            ),
            (
                CorpusError::Folder {
                    path: PathBuf::from("out"),
                    reason: FolderProblem::Busy,
                },
                "--out-dir out: another attnviz run is writing into it; give each run (each \
                 shard) its own --out-dir",
                "its own --out-dir",
            ),
            (
                CorpusError::Folder {
                    path: PathBuf::from("out"),
                    reason: FolderProblem::OtherShard {
                        theirs: Shard::new(1, 2).unwrap(),
                        ours: Shard::new(2, 2).unwrap(),
                    },
                },
                "--out-dir out: it holds the results of shard 1/2, and this run is shard 2/2; \
                 give each shard its own --out-dir, or add --force to replace them",
                "--force",
            ),
        ];
        for (e, cli, flag) in cases {
            let library = e.to_string();
            let worded = corpus(e).to_string();
            assert_eq!(worded, cli);
            check(&library, &worded, flag);
        }
        let e = MergeError::Unfinished(Unfinished {
            file: "p.json".into(),
            shard: Shard::new(2, 4).unwrap(),
            end: "running".into(),
            lines: 1200,
            reason: None,
        });
        let library = e.to_string();
        let worded = merge(e).to_string();
        assert_eq!(
            worded,
            "p.json: shard 2/4 is still running, or was killed after line 1,200; finish it \
             (rerun its command with --resume), then merge"
        );
        check(&library, &worded, "--resume");
    }
}
