//! The plan step: the flags as typed ([`Args`]) become a checked [`Plan`] of library values.
//!
//! Every check of the command line lives here, once, and fails with one line that says what to
//! do: flags that belong to the other mode or that need another flag, outputs that cannot be
//! written or that collide, the corpus mode's input and output folder ([`plan`], before anything
//! is loaded, read or written, so a mistake costs no model load and leaves no file), and the
//! layer and head against the loaded model ([`Single::selection`]). The library below takes the
//! resulting typed values and never sees a flag.

use std::collections::HashMap;
use std::io::{self, IsTerminal};
use std::path::{Path, PathBuf};

use attnviz::analysis::{Stat, ViewOptions, Weighting};
use attnviz::attention::summary::SummarySpec;
use attnviz::attention::{AttentionKind, HeadSel, ModelInfo, Selection};
use attnviz::corpus::merge::MergeJob;
use attnviz::corpus::{CorpusJob, InputFormat, OnBadLine, PerSentence, Shard};
use attnviz::output::{Destination, Identity};
use attnviz::pixels::ImageSource;
use attnviz::render::image::{ColorScale, Figure, ImageOptions};
use attnviz::render::json::{JsonOptions, JsonSection};
use attnviz::render::stats_table::StatsTableOptions;
use attnviz::render::ColorChoice;
use attnviz::report::{
    self, Choose, FigurePlan, Files, HtmlPlan, JsonPlan, TerminalPlan, TerminalView,
};
use attnviz::request::{AblationMode, RunRequest};
use attnviz::save::SaveDtype;

use super::cli::{Args, Command, MergeArgs, Outputs, PictureArgs, StatsArgs};
use super::words;

/// What one invocation does, checked.
#[derive(Debug, PartialEq)]
pub struct Plan {
    /// `--threads`, at least 1 (capped later to what the machine has).
    pub threads: Option<usize>,
    /// One input, or a corpus.
    pub mode: Mode,
}

/// The modes of the command line.
#[derive(Debug, PartialEq)]
pub enum Mode {
    /// One text (or pair): every output from one forward pass.
    Single(Box<Single>),
    /// `--input FILE --out-dir DIR`.
    Corpus(CorpusJob),
    /// `attnviz render FILE`: attention from a file, drawn like a single input's.
    Render(Box<Render>),
    /// `attnviz merge PARTIAL... --out FILE`.
    Merge(MergeJob),
}

/// `attnviz render FILE`: where the attention comes from, and the outputs (checked as for a
/// single input; `out.text` is FILE, and the model fields are not used).
#[derive(Debug, PartialEq)]
pub struct Render {
    /// The file to read.
    pub file: PathBuf,
    /// `--tokens FILE`.
    pub tokens: Option<PathBuf>,
    /// `render --max-memory`: what reading and drawing the file may take; `None`: the
    /// library's default.
    pub max_memory: Option<u64>,
    /// `render --layers`: the layers of a saved capture to read; `None`: all.
    pub layers: Option<Vec<usize>>,
    /// The outputs.
    pub out: Single,
}

/// A single input and its outputs, resolved once: the library's run request and the plan of
/// its outputs, with what only the command line does (loading the model, saving the capture).
#[derive(Debug, PartialEq)]
pub struct Single {
    /// Hub repo id or local folder.
    pub model: String,
    /// Hub revision.
    pub revision: String,
    /// What to run: the text as typed (`-` is read from standard input when the run starts,
    /// once the model's byte limit is known), or the picture (`--image FILE`), and the
    /// analyses the outputs need.
    pub request: RunRequest,
    /// The outputs and their options.
    pub report: report::Plan,
    /// What every view draws (`--weighting`).
    pub weighting: Weighting,
    /// `--full-paths`: name a local model (and `render`'s file) by its full path in what is
    /// written, not by its name.
    pub full_paths: bool,
    /// `--save-attention FILE`: save the capture layer by layer.
    pub save: Option<PathBuf>,
    /// `--save-dtype`.
    pub save_dtype: SaveDtype,
}

impl Single {
    /// The layer (default: the model's last) and head the single-head views show, checked
    /// against the model: the one range check of `--layer` and `--head`, worded for them.
    ///
    /// With `--layers`, `--layer` must be one of them (default: the last), and the selection
    /// names its place among the captured layers, as the views index them.
    pub fn selection(&self, info: &ModelInfo) -> Result<Selection, String> {
        self.selection_of(info, AttentionKind::SelfAttention)
    }

    /// [`Single::selection`] against the attention of `kind`, whose layers and heads are its own
    /// (an encoder–decoder's encoder may have other counts than its decoder); errors name the
    /// kind.
    pub fn selection_of(&self, info: &ModelInfo, kind: AttentionKind) -> Result<Selection, String> {
        self.report
            .choose
            .of(info, kind)
            .map_err(|e| words::selection(&e))
    }

    /// [`Single::selection`] for a model that captures some of its layers only (Qwen3-Next's
    /// attention layers, `numbers`): `--layer` names one of them as the model numbers it.
    pub fn selection_among(
        &self,
        info: &ModelInfo,
        numbers: &[usize],
    ) -> Result<Selection, String> {
        self.report
            .choose
            .among(info, numbers, report::Among::Captured)
            .map_err(|e| words::selection(&e))
    }

    /// Refuse attention rollout of a capture that leaves layers out: it multiplies every
    /// layer's attention in turn. Checked once the model's `layers` are known, before it runs.
    /// An encoder–decoder's kinds have their own layer counts: with `--layers` some are left
    /// out.
    ///
    /// `hybrid`: the model's layers that mix tokens without a softmax, in words (`layers 0, 2
    /// are gated delta token mixing, …`), where it has some: a rollout is refused there.
    pub fn check_rollout(
        &self,
        layers: usize,
        seq2seq: bool,
        hybrid: Option<&str>,
    ) -> Result<(), String> {
        let every_layer = match &self.request.layers {
            None => true,
            Some(_) if seq2seq => false,
            Some(picked) => picked.iter().copied().eq(0..layers),
        };
        let out = &self.report;
        let rollout_asked = (out.figure.figure == Figure::Rollout && out.figures())
            || out.json.include.contains(&JsonSection::Rollout);
        if let (Some(hybrid), true) = (hybrid, rollout_asked) {
            return Err(format!(
                "attention rollout multiplies every layer's attention probabilities, and this \
                 model's {hybrid}: drop the rollout (--figure rollout, --json-include rollout)"
            ));
        }
        if !every_layer && rollout_asked {
            return Err(
                "attention rollout multiplies every layer's attention, and --layers \
                        captures only some; drop --layers, or the rollout (--figure rollout, \
                        --json-include rollout)"
                    .into(),
            );
        }
        Ok(())
    }
}

/// Check `args` and resolve them into a [`Plan`], as the module docs describe.
pub fn plan(args: &Args) -> Result<Plan, String> {
    if args.threads == Some(0) {
        return Err("--threads must be at least 1".into());
    }
    let mode = match &args.command {
        Some(Command::Render(r)) => {
            let model_only = [
                ("--generate", args.generate.is_some()),
                ("--target", args.target.is_some()),
                ("--chat", args.chat),
                ("--layers", args.layers.is_some()),
                ("--max-memory", args.max_memory.is_some()),
                ("--max-analysis-time", args.max_analysis_time.is_some()),
                ("--save-attention", args.save_attention.is_some()),
                ("--summarise", args.summarise),
            ];
            if let Some(flag) = first_given(&model_only) {
                return Err(format!(
                    "{flag} runs a model; `attnviz render` draws attention from a file: drop {flag}"
                ));
            }
            let out = single(
                args,
                &r.out,
                &r.stats,
                Some(r.file.display().to_string()),
                Some(&r.picture),
            )?;
            rendered_analyses(&out.request)?;
            Mode::Render(Box::new(Render {
                file: r.file.clone(),
                tokens: r.tokens.clone(),
                max_memory: r.max_memory,
                layers: r.layers.clone().map(|l| l.0),
                out,
            }))
        }
        Some(Command::Merge(m)) => Mode::Merge(merge(m)?),
        // Carried out by `super::diff`, before any plan.
        Some(Command::Diff(_)) => return Err("attnviz diff has no plan of its own".into()),
        // `attnviz serve` runs its own loop (src/app/serve), before any plan is made.
        Some(Command::Serve(_)) => return Err("`attnviz serve` is not planned here".into()),
        Some(Command::Models(_)) => return Err("`attnviz models` is not planned here".into()),
        None if args.input.is_some() => {
            if args.summarise {
                return Err(
                    "--summarise keeps one long input's summaries; corpus mode (--input) \
                     writes each sentence's attention and statistics: drop --summarise"
                        .into(),
                );
            }
            if args.save_attention.is_some() {
                return Err(
                    "--save-attention saves one run's capture; corpus mode (--input) \
                            writes its own files per sentence: drop --save-attention"
                        .into(),
                );
            }
            Mode::Corpus(corpus(args)?)
        }
        None => Mode::Single(Box::new(single(
            args,
            &args.out,
            &args.stats,
            args.text
                .clone()
                .or_else(|| (!args.image.is_empty() || args.audio.is_some()).then(String::new)),
            None,
        )?)),
    };
    Ok(Plan {
        threads: args.threads,
        mode,
    })
}

/// `attnviz render`: the analyses that re-run the model, which a file of attention cannot.
fn rendered_analyses(request: &RunRequest) -> Result<(), String> {
    if request.value_zeroing {
        return Err(
            "value zeroing re-runs each layer of the model with a token's value vector zeroed, \
             which an attention file cannot; run the model with --value-zeroing (and --json to \
             keep it)"
                .into(),
        );
    }
    if request.alti {
        return Err(
            "ALTI follows the value vectors, residual stream and norms through the model, which \
             an attention file does not hold; run the model with --alti (and --json to keep it)"
                .into(),
        );
    }
    if request.lens.is_some() {
        return Err(
            "the logit lens runs the model's own head over its residual stream, which an \
             attention file does not hold; run the model with --lens (and --json to keep it)"
                .into(),
        );
    }
    Ok(())
}

/// `--summarise`'s settings: the keys kept per token and the tokens `--query` names; the
/// outputs that draw matrices refused.
fn summarised(
    args: &Args,
    out: &Outputs,
    picture: &PictureArgs,
) -> Result<Option<SummarySpec>, String> {
    if let Some(flag) = first_given(&[
        ("--png", out.png.is_some()),
        ("--svg", out.svg.is_some()),
        ("--report", out.report.is_some()),
        ("--figure", out.figure.is_some()),
        ("--save-attention", args.save_attention.is_some()),
    ]) {
        return Err(format!(
            "--summarise keeps no attention matrix, only its summaries, written to the terminal, \
             --json and --html; {flag} needs the matrices: drop {flag}, or --summarise for a \
             shorter input"
        ));
    }
    let top_k = args.top_keys.unwrap_or(16);
    if top_k == 0 {
        return Err("--top-keys 0 keeps nothing; give at least 1".into());
    }
    let mut rows = Vec::new();
    if let Some(q) = &picture.query {
        for part in q.split(',') {
            let n: usize = part.trim().parse().map_err(|_| {
                format!(
                    "--query {q}: with --summarise, give token numbers (from 0), e.g. --query 0,511"
                )
            })?;
            rows.push(n);
        }
        rows.sort_unstable();
        rows.dedup();
    }
    Ok(Some(SummarySpec { top_k, rows }))
}

/// The first flag of `flags` that was given, if any.
fn first_given<'a>(flags: &[(&'a str, bool)]) -> Option<&'a str> {
    flags
        .iter()
        .find(|(_, given)| *given)
        .map(|(flag, _)| *flag)
}

/// A single input (TEXT, or the FILE of `attnviz render` as `text`, with its own output flags
/// `out`): no corpus-only flags, no flag that needs an output that is not asked for, and outputs
/// that can be written, each to its own place.
/// `rendered`: the picture options of `attnviz render FILE`, where FILE (not `--image`) says
/// whether there is a picture.
fn single(
    args: &Args,
    out: &Outputs,
    stats_args: &StatsArgs,
    text: Option<String>,
    rendered: Option<&PictureArgs>,
) -> Result<Single, String> {
    let picture = rendered.unwrap_or(&args.picture);
    let pictured = rendered.is_some() || !args.image.is_empty();
    let corpus_only = [
        ("--out-dir", args.out_dir.is_some()),
        ("--on-bad-line", args.on_bad_line.is_some()),
        ("--per-sentence", args.per_sentence.is_some()),
        ("--force", args.force),
        ("--shard", args.shard.is_some()),
        ("--resume", args.resume),
        ("--input-format", args.input_format.is_some()),
    ];
    if let Some(flag) = first_given(&corpus_only) {
        return Err(format!(
            "{flag} only applies to corpus mode; add --input FILE (one sentence per line), or \
             drop {flag}"
        ));
    }
    if args.generate == Some(0) {
        return Err("--generate 0 generates nothing; give the number of tokens to generate".into());
    }
    if args.target.is_some() && args.chat {
        return Err(
            "--chat wraps a decoder model's prompt in its chat template; --target is for \
             encoder–decoder models, which have none: drop one of them"
                .into(),
        );
    }
    if args.target.as_deref().is_some_and(|t| t.trim().is_empty()) {
        return Err("--target is empty; give the output to teacher-force".into());
    }
    if args.pair.is_some() {
        if let Some(flag) = first_given(&[
            ("--generate", args.generate.is_some()),
            ("--chat", args.chat),
            ("--target", args.target.is_some()),
        ]) {
            return Err(format!(
                "{flag} is for decoder models, which read one text; drop --pair"
            ));
        }
    }
    let Some(text) = text else {
        return Err(
            "give TEXT to analyse (`-` reads standard input), --input FILE for corpus mode, or \
             `attnviz render FILE` to draw attention you have; see --help"
                .into(),
        );
    };
    let (json, report) = (out.json.is_some(), out.report.is_some());
    let (png, svg, html) = (out.png.is_some(), out.svg.is_some(), out.html.is_some());
    if !out.json_include.is_empty() && !json && !report {
        return Err(
            "--json-include adds sections to the JSON export; add --json FILE or --report DIR"
                .into(),
        );
    }
    let needs = |flag: &str, given: bool, ok: bool, outputs: &str| -> Result<(), String> {
        if given && !ok {
            Err(format!(
                "{flag} applies to {outputs}, and none is written; add one, or drop {flag}"
            ))
        } else {
            Ok(())
        }
    };
    needs(
        "--full-precision",
        out.full_precision,
        json || report,
        "the JSON export (--json FILE or --report DIR)",
    )?;
    needs(
        "--figure",
        out.figure.is_some(),
        png || svg,
        "--png and --svg (a report folder holds every figure)",
    )?;
    let look = [
        ("--colormap", out.colormap.is_some()),
        ("--theme", out.theme.is_some()),
        ("--scale", out.scale.is_some()),
    ];
    if let Some(flag) = first_given(&look) {
        needs(
            flag,
            true,
            png || svg || report,
            "images (--png FILE, --svg FILE or --report DIR)",
        )?;
    }
    let density = [
        ("--scale-factor", out.scale_factor.is_some()),
        ("--dpi", out.dpi.is_some()),
    ];
    if let Some(flag) = first_given(&density) {
        needs(
            flag,
            true,
            png || report,
            "PNG images (--png FILE or --report DIR; SVG has no pixels)",
        )?;
    }
    let report_flags = [
        ("--neuron", args.neuron),
        ("--html-precision", out.html_precision.is_some()),
    ];
    if let Some(flag) = first_given(&report_flags) {
        needs(
            flag,
            true,
            html || report,
            "the HTML report (--html FILE or --report DIR)",
        )?;
    }
    let outputs = output_paths(out);
    check_outputs(out, &outputs)?;
    if args.lens_top == Some(0) {
        return Err("--lens-top 0 keeps no token; give 1 or more (default 5)".into());
    }
    let max_top = attnviz::analysis::lens::MAX_TOP;
    if let Some(k) = args.lens_top.filter(|&k| k > max_top) {
        return Err(format!(
            "--lens-top {k} keeps more tokens per cell than the logit lens writes (at most \
             {max_top}: each costs memory at every layer and position); give {max_top} or fewer"
        ));
    }
    if args.lens_top.is_some() && !args.lens && out.figure != Some(Figure::Lens) {
        return Err("--lens-top sets the logit lens; add --lens (or --figure lens)".into());
    }
    let (target_token, contrast) = match &args.contrast {
        Some(pair) => {
            let Some((a, b)) = pair.split_once(',') else {
                return Err(format!(
                    "--contrast {pair:?} needs two tokens, A,B (the logit difference A − B)"
                ));
            };
            if let Some(t) = args.target_token.as_deref().filter(|t| *t != a) {
                return Err(format!(
                    "--contrast {pair:?} takes {a:?} as the target, and --target-token says {t:?}; drop one of them"
                ));
            }
            (Some(a.to_string()), Some(b.to_string()))
        }
        None => (args.target_token.clone(), None),
    };
    for figure in [
        Figure::Attribution,
        Figure::Ablation,
        Figure::Router,
        Figure::Mixing,
    ] {
        if out.figure == Some(figure) && !(png || svg) {
            return Err(format!(
                "--figure {} draws into --png or --svg; add one",
                attnviz::choice::Choice::name(figure)
            ));
        }
    }
    let value_zeroing = args.value_zeroing
        || out.figure == Some(Figure::ValueZeroing)
        || out.json_include.contains(&JsonSection::ValueZeroing);
    let ablation = args.ablate.is_some()
        || out.figure == Some(Figure::Ablation)
        || out.json_include.contains(&JsonSection::HeadAblation);
    if args.max_analysis_time.is_some() && !value_zeroing && !ablation {
        return Err(
            "--max-analysis-time limits the analyses that re-run the model; add \
             --value-zeroing or --ablate"
                .into(),
        );
    }
    if value_zeroing {
        let what = if args.value_zeroing {
            "--value-zeroing"
        } else if out.figure == Some(Figure::ValueZeroing) {
            "--figure value-zeroing"
        } else {
            "--json-include value_zeroing"
        };
        if args.layers.is_some() {
            return Err(format!(
                "{what}: value zeroing rolls out the scores of every layer, and --layers \
                 captures only some; drop --layers"
            ));
        }
        if !args.image.is_empty() {
            return Err(format!(
                "{what}: value zeroing is not available with --image (vision and \
                 vision-language models) yet; drop {what}"
            ));
        }
    }
    let alti = args.alti
        || out.figure == Some(Figure::Alti)
        || out.json_include.contains(&JsonSection::Alti);
    if alti {
        let what = if args.alti {
            "--alti"
        } else if out.figure == Some(Figure::Alti) {
            "--figure alti"
        } else {
            "--json-include alti"
        };
        if args.layers.is_some() {
            return Err(format!(
                "{what}: ALTI multiplies the contributions of every layer, and --layers captures \
                 only some; drop --layers"
            ));
        }
        if args.save_attention.is_some() {
            return Err(format!(
                "{what}: --save-attention streams the attention to a file, and ALTI needs the \
                 whole run; run them separately"
            ));
        }
        if !args.image.is_empty() {
            return Err(format!(
                "{what}: ALTI is not available with --image (vision and vision-language \
                 models) yet; drop {what}"
            ));
        }
    }
    if out.figure == Some(Figure::Lens) && !(png || svg) {
        return Err("--figure lens draws the logit lens into --png or --svg; add one".into());
    }
    let stdout_taken = outputs
        .iter()
        .filter(|(flag, _)| *flag != "--report")
        .any(|(_, p)| matches!(Destination::of(p), Ok(Destination::Stdout)));
    let terminal_view = !out.quiet && !stdout_taken;
    let stats = stats_args.stats || stats_args.stat.is_some();
    quiet_outputs(args, out, stats)?;
    if out.top.is_some() && !terminal_view {
        return Err(format!(
            "--top sets the terminal view, which {}; drop --top",
            if out.quiet {
                "--quiet turns off"
            } else {
                "is not printed while standard output carries a file"
            }
        ));
    }
    if out.raw_tokens && !(terminal_view || png || svg || html || report) {
        return Err(
            "--raw-tokens sets how the terminal view, the images and the HTML report label \
             tokens, and none of them is written; the JSON export holds both the raw pieces and \
             the display texts: drop --raw-tokens"
                .into(),
        );
    }
    if out.color.is_some() && !terminal_view && !stats {
        return Err(
            "--color sets the terminal view and the --stats table, and neither is printed; \
             drop --color, or add --stats"
                .into(),
        );
    }
    if args.pan_and_scan && args.image.is_empty() {
        return Err("--pan-and-scan cuts pictures into crops; add --image FILE".into());
    }
    let summary = if args.summarise {
        summarised(args, out, picture)?
    } else {
        None
    };
    let query = match &picture.query {
        None => attnviz::render::image::picture::Query::Cls,
        // With --summarise, the tokens whose rows are kept (read above).
        Some(_) if summary.is_some() => attnviz::render::image::picture::Query::Cls,
        Some(q) => {
            if !pictured {
                return Err("--query picks a patch of an image; add --image FILE".into());
            }
            q.parse().map_err(|e| format!("--query {e}"))?
        }
    };
    if picture.expand_pictures && !pictured {
        return Err(
            "--expand-pictures draws a vision-language model's pictures token by token; add \
             --image FILE, or drop --expand-pictures"
                .into(),
        );
    }
    let image_rollout = match (picture.head_fusion, picture.discard_ratio) {
        (None, None) => None,
        (fusion, ratio) => {
            if !pictured || out.figure != Some(Figure::Rollout) {
                return Err(
                    "--head-fusion and --discard-ratio set the rollout drawn over an image; \
                     add --image FILE and --figure rollout"
                        .into(),
                );
            }
            let ratio = ratio.unwrap_or(0.0);
            if !(0.0..1.0).contains(&ratio) {
                return Err(format!(
                    "--discard-ratio {ratio} is not between 0 and 1 (0 keeps every weight, 0.9 \
                     drops the smallest 90 %)"
                ));
            }
            Some((fusion.unwrap_or_default(), ratio))
        }
    };
    let layers = args.layers.clone().map(|l| l.0);
    let attribution = args.attribution
        || target_token.is_some() && args.ablate.is_none()
        || contrast.is_some()
        || out.figure == Some(Figure::Attribution)
        || out.json_include.contains(&JsonSection::HeadAttribution);
    let ablate = match args.ablate.as_deref() {
        Some("mean") => Some(AblationMode::Mean),
        Some(_) => Some(AblationMode::Zero),
        None => (out.figure == Some(Figure::Ablation)
            || out.json_include.contains(&JsonSection::HeadAblation))
        .then_some(AblationMode::Zero),
    };
    let weighting = args.weighting.unwrap_or_default();
    let request = RunRequest {
        // A picture is the request's own field; a vision model reads it alone, a
        // vision-language model with the text.
        text,
        pair: args.pair.clone(),
        target: args.target.clone(),
        generate: args.generate,
        chat: args.chat,
        layers: layers.clone(),
        max_memory: args.max_memory,
        truncate: args.truncate,
        query_key: args.neuron,
        value_weighted: weighting != Weighting::Raw,
        alti,
        value_zeroing,
        images: args.image.iter().cloned().map(ImageSource::File).collect(),
        tower: args.tower,
        pan_and_scan: args.pan_and_scan,
        mmproj: args.mmproj.clone(),
        lens: (args.lens || out.figure == Some(Figure::Lens)).then(|| args.lens_top.unwrap_or(5)),
        attribution,
        ablate,
        target_token,
        contrast,
        analysis_time: args.max_analysis_time,
        audio: args.audio.clone().map(attnviz::request::AudioSource::File),
        language: args.language.clone(),
        translate: args.task.as_deref() == Some("translate"),
        timestamps: args.timestamps,
        summary,
        window: args.window,
    };
    let color = out.color.unwrap_or_default();
    let report = report::Plan {
        view: ViewOptions {
            words: out.words,
            no_special: out.no_special,
        },
        kind: out.kind,
        choose: Choose {
            layer: out.layer,
            head: out.head.unwrap_or(HeadSel::Mean),
            captured: layers,
        },
        files: Files {
            json: out.json.clone(),
            png: out.png.clone(),
            svg: out.svg.clone(),
            html: out.html.clone(),
            report: out.report.clone(),
        },
        figure: FigurePlan {
            figure: out.figure.unwrap_or_default(),
            image: ImageOptions {
                colormap: out.colormap.unwrap_or_default(),
                theme: out.theme.unwrap_or_default(),
                scale: out.scale.unwrap_or(ColorScale::Auto),
                raw_tokens: out.raw_tokens,
                expand_pictures: picture.expand_pictures,
                scale_factor: out
                    .dpi
                    .map_or(out.scale_factor.unwrap_or(1.0), |dpi| dpi / 96.0),
            },
            query,
            image_rollout,
        },
        json: JsonPlan {
            format: JsonOptions {
                full_precision: out.full_precision,
            },
            include: out.json_include.clone(),
        },
        html: HtmlPlan {
            neuron: args.neuron,
            precision: out.html_precision.unwrap_or_default(),
            raw_tokens: out.raw_tokens,
            compress: true,
        },
        terminal: TerminalPlan {
            view: terminal_view.then(|| {
                terminal_look(
                    out.top.unwrap_or(3),
                    out.raw_tokens,
                    picture.expand_pictures,
                    color,
                )
            }),
            stats: stats.then(|| stats_table(stats_args.stat, color, stdout_taken)),
            lens_table: args.lens.then(lens_table_width),
            heads_table: args.attribution
                || args.target_token.is_some()
                || args.contrast.is_some()
                || args.ablate.is_some(),
            aside: stdout_taken,
        },
        keep_stats: false,
    };
    Ok(Single {
        model: args.model.clone(),
        revision: args.revision.clone(),
        request,
        report,
        weighting,
        full_paths: out.full_paths,
        save: args.save_attention.clone(),
        save_dtype: match args.save_dtype.as_deref() {
            Some("f16") => SaveDtype::F16,
            _ => SaveDtype::F32,
        },
    })
}

/// The terminal view's look: colour where standard output is a terminal (or as `--color`
/// says), as wide as that terminal (or `COLUMNS`, or 80).
fn terminal_look(
    top: usize,
    raw_tokens: bool,
    expand_pictures: bool,
    color: ColorChoice,
) -> TerminalView {
    let is_tty = io::stdout().is_terminal();
    let width = terminal_size::terminal_size()
        .map(|(w, _)| w.0 as usize)
        .filter(|_| is_tty)
        .or_else(|| std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()))
        .unwrap_or(80);
    TerminalView {
        color: color.enabled(is_tty),
        width,
        top,
        raw_tokens,
        expand_pictures,
    }
}

/// The statistics table's options: for standard output, or for standard error when standard
/// output carries a file.
fn stats_table(stat: Option<Stat>, color: ColorChoice, aside: bool) -> StatsTableOptions {
    if aside {
        StatsTableOptions {
            stat,
            color: color.enabled(io::stderr().is_terminal()),
            ..StatsTableOptions::default()
        }
    } else {
        StatsTableOptions::for_stdout(stat, color)
    }
}

/// The logit-lens table's width: the terminal's, or 120.
fn lens_table_width() -> usize {
    terminal_size::terminal_size().map_or(120, |(w, _)| w.0 as usize)
}

/// `-q` turns off the terminal view. An analysis asked for by its flag whose result would then
/// reach no output is refused, as any flag that would do nothing is, before the model loads.
/// (`-q` with no output at all still runs: loading a model, say to fetch it, may be the point,
/// and a run that fails says so on its one line.)
fn quiet_outputs(args: &Args, out: &Outputs, stats: bool) -> Result<(), String> {
    if !out.quiet {
        return Ok(());
    }
    let files = out.json.is_some() || out.html.is_some() || out.report.is_some();
    let images = out.png.is_some() || out.svg.is_some();
    let attribution = first_given(&[
        ("--attribution", args.attribution),
        ("--contrast", args.contrast.is_some()),
        (
            "--target-token",
            args.target_token.is_some() && args.ablate.is_none(),
        ),
    ]);
    let analyses = [
        (
            args.lens.then_some("--lens"),
            "the logit lens",
            Figure::Lens,
        ),
        (args.alti.then_some("--alti"), "ALTI", Figure::Alti),
        (
            args.value_zeroing.then_some("--value-zeroing"),
            "value zeroing",
            Figure::ValueZeroing,
        ),
        (attribution, "the head attribution", Figure::Attribution),
        (
            args.ablate.is_some().then_some("--ablate"),
            "the head ablation",
            Figure::Ablation,
        ),
    ];
    for (flag, what, figure) in analyses {
        let Some(flag) = flag else { continue };
        if !(files || images && out.figure == Some(figure)) {
            return Err(format!(
                "-q turns off the terminal view, where {flag} shows {what}, and no output asked \
                 for holds it: add --json FILE, --html FILE or --png FILE --figure {}, or drop -q",
                attnviz::choice::Choice::name(figure)
            ));
        }
    }
    if args.weighting.is_some_and(|w| w != Weighting::Raw) && !(files || images || stats) {
        return Err(
            "-q turns off the terminal view, and no output asked for is drawn with --weighting: \
             add --json FILE, --html FILE, --png FILE or --stats, or drop -q"
                .into(),
        );
    }
    Ok(())
}

/// Corpus mode (`--input FILE --out-dir DIR`): no single-input flags; an input that is a file
/// (or `-`); an output folder that is a folder and holds no earlier run unless `--force`.
fn corpus(args: &Args) -> Result<CorpusJob, String> {
    let single_only = [
        ("--json", args.out.json.is_some()),
        ("--png", args.out.png.is_some()),
        ("--svg", args.out.svg.is_some()),
        ("--html", args.out.html.is_some()),
        ("--report", args.out.report.is_some()),
        ("--neuron", args.neuron),
        ("--html-precision", args.out.html_precision.is_some()),
        ("--generate", args.generate.is_some()),
        ("--chat", args.chat),
        ("--target", args.target.is_some()),
        ("--layers", args.layers.is_some()),
        ("--max-memory", args.max_memory.is_some()),
        ("--figure", args.out.figure.is_some()),
        ("--colormap", args.out.colormap.is_some()),
        ("--theme", args.out.theme.is_some()),
        ("--scale", args.out.scale.is_some()),
        ("--scale-factor", args.out.scale_factor.is_some()),
        ("--dpi", args.out.dpi.is_some()),
        ("--layer", args.out.layer.is_some()),
        ("--head", args.out.head.is_some()),
        ("--top", args.out.top.is_some()),
        ("--mmproj", args.mmproj.is_some()),
        ("--pan-and-scan", args.pan_and_scan),
    ];
    if let Some(flag) = first_given(&single_only) {
        return Err(format!(
            "{flag} is for a single input; with --input, per-sentence outputs go into --out-dir \
             (choose them with --per-sentence)"
        ));
    }
    let Some(out_dir) = args.out_dir.clone() else {
        return Err("--input needs --out-dir DIR for its outputs".into());
    };
    let per_sentence =
        normalise_per_sentence(args.per_sentence.as_deref().unwrap_or(&[PerSentence::Json]))?;
    if per_sentence.is_empty() {
        let json_only = [
            ("--json-include", !args.out.json_include.is_empty()),
            ("--full-precision", args.out.full_precision),
        ];
        if let Some(flag) = first_given(&json_only) {
            return Err(format!(
                "{flag} sets the per-sentence JSON files, but --per-sentence none writes none; \
                 drop one of them"
            ));
        }
    }
    if args.out.color.is_some() && args.out.quiet {
        return Err(
            "--color sets the statistics table, which --quiet turns off; drop one of them".into(),
        );
    }
    let input = args.input.clone().unwrap_or_else(|| PathBuf::from("-"));
    // A folder is a vision model's corpus of images; the run refuses it for a text model.
    if out_dir.exists() && !out_dir.is_dir() {
        return Err(format!(
            "--out-dir {} is a file; give a folder (it is created if missing)",
            out_dir.display()
        ));
    }
    let earlier = attnviz::corpus::earlier_run_files(&out_dir);
    if earlier > 0 && !args.force && !args.resume {
        return Err(format!(
            "{} already holds {earlier} file{} from an earlier run, and mixing two runs would \
             mislead; give another --out-dir, add --resume to continue that run, or --force to \
             replace it",
            out_dir.join(attnviz::corpus::SENTENCES_DIR).display(),
            if earlier == 1 { "" } else { "s" }
        ));
    }
    Ok(CorpusJob {
        model: args.model.clone(),
        revision: args.revision.clone(),
        input,
        out_dir,
        per_sentence,
        on_bad_line: args.on_bad_line.unwrap_or(OnBadLine::Skip),
        truncate: args.truncate,
        view: ViewOptions {
            words: args.out.words,
            no_special: args.out.no_special,
        },
        json: JsonOptions {
            full_precision: args.out.full_precision,
        },
        json_include: args.out.json_include.clone(),
        force: args.force,
        resume: args.resume,
        shard: match args.shard {
            None => Shard::WHOLE,
            Some(spec) => {
                spec.resolve(|k| std::env::var(k).ok())
                    .map_err(|e| super::words::auto_shard(&e))?
                    .0
            }
        },
        input_format: args.input_format.unwrap_or(InputFormat::Auto),
        quiet: args.out.quiet,
        stat: args.stats.stat,
        color: args.out.color.unwrap_or_default(),
        kind: args.out.kind,
        full_paths: args.out.full_paths,
    })
}

/// `attnviz merge`: the partial files exist (a shard's output folder stands for its
/// corpus_partial.json), and the summary goes to a new place, not over one of them.
fn merge(m: &MergeArgs) -> Result<MergeJob, String> {
    let mut partials = Vec::with_capacity(m.partials.len());
    for p in &m.partials {
        let file = if p.is_dir() {
            p.join(attnviz::corpus::PARTIAL_FILE)
        } else {
            p.clone()
        };
        if !file.is_file() {
            return Err(if p.is_dir() {
                format!(
                    "{} holds no {}; give the output folders (or partial files) of runs with \
                     --input",
                    p.display(),
                    attnviz::corpus::PARTIAL_FILE
                )
            } else if p.exists() {
                format!("{} is not a file; give partial files to merge", p.display())
            } else {
                format!(
                    "{} does not exist; give partial files to merge",
                    p.display()
                )
            });
        }
        partials.push(file);
    }
    let out = &m.out;
    if out.as_os_str() != "-" {
        if out.is_dir() {
            return Err(format!(
                "--out {} is a folder; give the file to write, e.g. {}",
                out.display(),
                out.join("corpus_stats.json").display()
            ));
        }
        let dir = out.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir.filter(|d| !d.is_dir()) {
            return Err(format!(
                "--out {}: folder {} does not exist; create it first",
                out.display(),
                dir.display()
            ));
        }
        let target = attnviz::output::absolute(out);
        if let Some(p) = partials
            .iter()
            .find(|p| attnviz::output::absolute(p) == target)
        {
            return Err(format!(
                "--out {} is one of the partial files being merged; write the summary elsewhere",
                p.display()
            ));
        }
    }
    if m.color.is_some() && m.quiet {
        return Err(
            "--color sets the statistics table, which --quiet turns off; drop one of them".into(),
        );
    }
    Ok(MergeJob {
        partials,
        out: out.clone(),
        quiet: m.quiet,
        stat: m.stat,
        color: m.color.unwrap_or_default(),
    })
}

/// Drop duplicates; `none` alone means no per-sentence files, and cannot be combined.
fn normalise_per_sentence(list: &[PerSentence]) -> Result<Vec<PerSentence>, String> {
    let mut out: Vec<PerSentence> = Vec::new();
    for kind in list {
        if !out.contains(kind) {
            out.push(*kind);
        }
    }
    if out.contains(&PerSentence::None) {
        if out.len() > 1 {
            return Err("--per-sentence none cannot be combined with other outputs".into());
        }
        return Ok(Vec::new());
    }
    Ok(out)
}

/// Every output file the arguments name (`-` included), with its flag. A report folder
/// contributes each file it will hold.
fn output_paths(out: &Outputs) -> Vec<(&'static str, PathBuf)> {
    let mut paths: Vec<(&'static str, PathBuf)> = [
        ("--json", &out.json),
        ("--png", &out.png),
        ("--svg", &out.svg),
        ("--html", &out.html),
    ]
    .into_iter()
    .filter_map(|(flag, p)| p.clone().map(|p| (flag, p)))
    .collect();
    if let Some(dir) = &out.report {
        paths.extend(
            report::folder_files()
                .into_iter()
                .map(|f| ("--report", dir.join(f))),
        );
    }
    paths
}

/// Outputs that can be written, and no two of them to one place: at most one to standard
/// output (`-`, `/dev/stdout`), no two to one file however spelled (`x`, `./x`, a link to it).
/// Devices such as `/dev/null` may take several.
fn check_outputs(out: &Outputs, paths: &[(&'static str, PathBuf)]) -> Result<(), String> {
    if let Some(dir) = &out.report {
        if dir.exists() && !dir.is_dir() {
            return Err(format!(
                "--report {}: that is a file; give a folder (it is created if missing)",
                dir.display()
            ));
        }
    }
    let mut outputs = Vec::new();
    for (flag, path) in paths {
        let dest = Destination::of(path).map_err(|e| {
            let reason = match e.source.kind() {
                std::io::ErrorKind::NotFound => "a folder on the way does not exist".to_string(),
                _ => e.source.to_string(),
            };
            format!("{flag} {}: {reason}", path.display())
        })?;
        outputs.push((*flag, path, dest));
    }
    let mut seen: HashMap<Identity, (&'static str, &Path)> = HashMap::new();
    for (flag, path, dest) in &outputs {
        let Some(id) = dest.identity() else { continue };
        if let Some((other, other_path)) = seen.get(&id) {
            if id == Identity::Stdout {
                return Err(format!(
                    "{other} and {flag} both write to standard output ({} and {}); only one \
                     output can",
                    other_path.display(),
                    path.display()
                ));
            }
            let both = if other == flag {
                format!("{flag} twice")
            } else {
                format!("{other} and {flag}")
            };
            let file = match &id {
                Identity::File(p) => p.display().to_string(),
                _ => path.display().to_string(),
            };
            return Err(format!(
                "{both} would both write {file} ({} and {}); give each output its own file",
                other_path.display(),
                path.display()
            ));
        }
        seen.insert(id, (flag, path.as_path()));
    }
    for (flag, path, dest) in &outputs {
        let Destination::File { target } = dest else {
            continue;
        };
        // A report folder is created; the folder of any other file must exist.
        let dir = target.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir.filter(|d| *flag != "--report" && !d.is_dir()) {
            return Err(format!(
                "{flag} {}: folder {} does not exist; create it first",
                path.display(),
                dir.display()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn check(argv: &[&str]) -> Result<Plan, String> {
        let args = Args::try_parse_from(std::iter::once("attnviz").chain(argv.iter().copied()))
            .expect("parses");
        plan(&args)
    }

    fn single_plan(argv: &[&str]) -> Single {
        match check(argv).expect("a valid plan").mode {
            Mode::Single(s) => *s,
            Mode::Corpus(_) | Mode::Render(_) | Mode::Merge(_) => panic!("not single"),
        }
    }

    #[test]
    fn quiet_with_an_analysis_that_reaches_no_output_says_so() {
        // Each analysis asked for, with -q and nothing that holds it: refused, naming the flag.
        for (flag, figure) in [
            (&["--lens"][..], "lens"),
            (&["--alti"], "alti"),
            (&["--value-zeroing"], "value-zeroing"),
            (&["--attribution"], "attribution"),
            (&["--target-token", " Paris"], "attribution"),
            (&["--contrast", " Paris,Paris"], "attribution"),
            (&["--ablate"], "ablation"),
        ] {
            let argv: Vec<&str> = ["t", "-q"].iter().chain(flag).copied().collect();
            let e = check(&argv).expect_err("refused");
            assert!(
                e.starts_with("-q turns off the terminal view, where ") && e.contains(flag[0]),
                "{e}"
            );
            assert!(
                e.contains(&format!("--figure {figure}")) && !e.contains('\n'),
                "{e}"
            );
            // Any output that holds it will do.
            for out in [
                &["--json", "a.json"][..],
                &["--html", "a.html"],
                &["--report", "dir"],
                &["--png", "a.png", "--figure", figure],
            ] {
                let argv: Vec<&str> = argv.iter().chain(out).copied().collect();
                check(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            }
            // A figure of something else does not hold it.
            let argv: Vec<&str> = argv.iter().chain(&["--png", "a.png"]).copied().collect();
            assert!(check(&argv).is_err(), "{argv:?}");
        }
        let e = check(&["t", "-q", "--weighting", "norm-aware"]).unwrap_err();
        assert!(e.contains("--weighting"), "{e}");
        assert!(check(&["t", "-q", "--weighting", "norm-aware", "--stats"]).is_ok());
        // Without -q the terminal view shows them; -q alone runs (a model fetched, say).
        assert!(check(&["t", "--lens"]).is_ok() && check(&["t", "-q"]).is_ok());
    }

    #[test]
    fn render_takes_the_output_flags_and_keeps_text_working() {
        let plan = check(&[
            "render", "a.npz", "--words", "--layer", "1", "--kind", "cross",
        ])
        .unwrap();
        let Mode::Render(r) = plan.mode else {
            panic!("render mode")
        };
        assert_eq!(r.file, PathBuf::from("a.npz"));
        assert_eq!(r.out.report.kind, Some(AttentionKind::Cross));
        assert!(r.out.report.view.words);
        // Flags go after the subcommand: before it they would belong to a model run.
        assert!(Args::try_parse_from(["attnviz", "--stats", "render", "a.npz"]).is_err());
        // A text is still a text; a text that is the subcommand's name goes after `--`.
        assert!(matches!(
            check(&["The cat."]).unwrap().mode,
            Mode::Single(_)
        ));
        let s = single_plan(&["--", "render"]);
        assert_eq!(s.request.text, "render");
        // A text and the subcommand together are refused by clap.
        let args = Args::try_parse_from(["attnviz", "text", "render", "a.npz"]);
        assert!(args.is_err());
    }

    #[test]
    fn render_refuses_the_analyses_that_need_the_model_before_reading_the_file() {
        // Planned, not run: the file need not exist.
        for (flag, want) in [
            (
                &["--png", "a.png", "--figure", "value-zeroing"][..],
                "run the model with --value-zeroing",
            ),
            (
                &["--json", "a.json", "--json-include", "value_zeroing"],
                "run the model with --value-zeroing",
            ),
            (
                &["--svg", "a.svg", "--figure", "alti"],
                "run the model with --alti",
            ),
            (
                &["--json", "a.json", "--json-include", "alti"],
                "run the model with --alti",
            ),
            (
                &["--png", "a.png", "--figure", "lens"],
                "run the model with --lens",
            ),
        ] {
            let argv: Vec<&str> = ["render", "no-such-file.json"]
                .iter()
                .chain(flag)
                .copied()
                .collect();
            let e = check(&argv).unwrap_err();
            assert!(e.contains(want) && !e.contains('\n'), "{argv:?}: {e}");
        }
        assert!(check(&["render", "no-such-file.json", "--stats"]).is_ok());
    }

    #[test]
    fn corpus_flags_without_input_get_one_line_each() {
        for flag in [
            &["--out-dir", "x"][..],
            &["--on-bad-line", "stop"],
            &["--per-sentence", "none"],
            &["--force"],
        ] {
            // With a text, and without one (`--per-sentence none` alone used to print clap's
            // usage for the missing TEXT).
            for text in [&["text"][..], &[]] {
                let mut argv = text.to_vec();
                argv.extend_from_slice(flag);
                let e = check(&argv).unwrap_err();
                assert!(
                    e.starts_with(&format!("{} only applies to corpus mode", flag[0])),
                    "{e}"
                );
                assert!(e.contains("--input FILE") && !e.contains('\n'), "{e}");
            }
        }
        let e = check(&["text", "--json-include", "means"]).unwrap_err();
        assert!(e.contains("--json FILE"), "{e}");
        let e = check(&["text", "--threads", "0"]).unwrap_err();
        assert!(e.contains("at least 1"), "{e}");
        let e = check(&[]).unwrap_err();
        assert!(e.starts_with("give TEXT"), "{e}");
    }

    #[test]
    fn flags_that_need_an_output_say_which() {
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("a.svg");
        let svg = svg.to_str().unwrap();
        let cases: &[(&[&str], &str)] = &[
            (
                &["t", "--full-precision"],
                "--full-precision applies to the JSON",
            ),
            (&["t", "--figure", "model"], "--figure applies to --png"),
            (
                &["t", "--colormap", "magma"],
                "--colormap applies to images",
            ),
            (&["t", "--theme", "dark"], "--theme applies to images"),
            (&["t", "--scale", "log"], "--scale applies to images"),
            (
                &["t", "--scale-factor", "2"],
                "--scale-factor applies to PNG",
            ),
            (&["t", "--svg", svg, "--dpi", "300"], "--dpi applies to PNG"),
            (&["t", "--neuron"], "--neuron applies to the HTML report"),
            (
                &["t", "--html-precision", "8"],
                "--html-precision applies to the HTML",
            ),
            (
                &["t", "--quiet", "--top", "5"],
                "--top sets the terminal view",
            ),
            (
                &["t", "--quiet", "--color", "always"],
                "--color sets the terminal view",
            ),
        ];
        for (argv, want) in cases {
            let e = check(argv).unwrap_err();
            assert!(e.starts_with(want), "{argv:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        // With the output they need, they are fine, and land in the plan.
        let s = single_plan(&[
            "t",
            "--svg",
            svg,
            "--colormap",
            "magma",
            "--figure",
            "model",
        ]);
        assert_eq!(s.report.figure.figure, Figure::Model);
        assert_eq!(
            s.report.figure.image.colormap,
            attnviz::render::image::Colormap::Magma
        );
        let s = single_plan(&["t", "--quiet", "--stats", "--color", "never"]);
        assert!(s.report.terminal.view.is_none() && s.report.terminal.stats.is_some());
        assert!(!s.report.terminal.stats.unwrap().color);
    }

    #[test]
    fn corpus_mode_refuses_single_input_flags() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.txt");
        std::fs::write(&input, "a\n").unwrap();
        let input = input.to_str().unwrap();
        let out = dir.path().join("out");
        let out = out.to_str().unwrap();
        for flag in [
            &["--layer", "1"][..],
            &["--head", "2"],
            &["--top", "4"],
            &["--colormap", "magma"],
            &["--neuron"],
        ] {
            let mut argv = vec!["--input", input, "--out-dir", out];
            argv.extend_from_slice(flag);
            let e = check(&argv).unwrap_err();
            assert!(
                e.starts_with(&format!("{} is for a single input", flag[0])),
                "{e}"
            );
        }
        let e = check(&["--input", input]).unwrap_err();
        assert!(e.contains("--out-dir DIR"), "{e}");
        let e = check(&[
            "--input",
            input,
            "--out-dir",
            out,
            "--per-sentence",
            "none,json",
        ])
        .unwrap_err();
        assert!(e.contains("cannot be combined"), "{e}");
        let e = check(&[
            "--input",
            input,
            "--out-dir",
            out,
            "--per-sentence",
            "none",
            "--full-precision",
        ])
        .unwrap_err();
        assert!(
            e.starts_with("--full-precision sets the per-sentence JSON"),
            "{e}"
        );
        let plan = check(&[
            "--input",
            input,
            "--out-dir",
            out,
            "--per-sentence",
            "json,json",
        ])
        .unwrap();
        let Mode::Corpus(job) = plan.mode else {
            panic!("corpus mode")
        };
        assert_eq!(job.per_sentence, [PerSentence::Json]);
        assert_eq!(job.on_bad_line, OnBadLine::Skip);
    }

    #[test]
    fn selection_is_checked_once_against_the_model() {
        let info = ModelInfo {
            id: "m".into(),
            revision: None,
            name: None,
            family: "BERT".into(),
            layers: 6,
            heads: 12,
            hidden_size: 384,
            head_dim: 32,
        };
        let s = single_plan(&["t"]);
        assert_eq!(s.selection(&info), Ok(Selection::new(5, HeadSel::Mean)));
        let s = single_plan(&["t", "--layer", "6"]);
        let e = s.selection(&info).unwrap_err();
        assert!(
            e.starts_with("--layer 6 is out of range: m has layers 0–5"),
            "{e}"
        );
        let s = single_plan(&["t", "--head", "12"]);
        let e = s.selection(&info).unwrap_err();
        assert!(e.contains("--head mean"), "{e}");
    }

    #[test]
    fn two_outputs_on_one_file_are_refused_however_spelled() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let same = format!("{d}/same.json");
        let dotted = format!("{d}/./same.json");
        let e = check(&["t", "--json", &same, "--html", &dotted]).unwrap_err();
        assert!(e.starts_with("--json and --html would both write"), "{e}");
        // A link to the file is the same file.
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("same.json", dir.path().join("link")).unwrap();
            let link = format!("{d}/link");
            let e = check(&["t", "--png", &same, "--svg", &link]).unwrap_err();
            assert!(e.contains("--png and --svg"), "{e}");
        }
        // A report folder's files count.
        let report = format!("{d}/rep");
        let inside = format!("{d}/rep/report.html");
        let e = check(&["t", "--report", &report, "--html", &inside]).unwrap_err();
        assert!(e.contains("--html and --report"), "{e}");
        // Standard output once, under any name.
        let e = check(&["t", "--json", "-", "--html", "-"]).unwrap_err();
        assert!(e.contains("standard output"), "{e}");
        // Different files are fine.
        let other = format!("{d}/other.html");
        check(&["t", "--json", &same, "--html", &other, "--report", &report]).unwrap();
        // Standard output carrying a file turns the terminal view off.
        let s = single_plan(&["t", "--json", "-"]);
        assert!(s.report.terminal.aside && s.report.terminal.view.is_none());
    }

    #[test]
    fn report_files_match_what_a_report_writes() {
        let files = report::folder_files();
        for name in ["attention.json", "report.html", "head.png", "rollout.svg"] {
            assert!(files.iter().any(|f| f == name), "{name} in {files:?}");
        }
    }

    #[test]
    fn per_sentence_none_stands_alone() {
        assert_eq!(
            normalise_per_sentence(&[PerSentence::Json, PerSentence::Json]).unwrap(),
            [PerSentence::Json]
        );
        assert!(normalise_per_sentence(&[PerSentence::None])
            .unwrap()
            .is_empty());
        assert!(normalise_per_sentence(&[PerSentence::None, PerSentence::Json]).is_err());
    }
}
