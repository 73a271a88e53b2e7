//! One invocation of the CLI: check the flags into a plan, load the model once, encode once,
//! then write every requested output.

use std::borrow::Cow;
use std::io::{self, IsTerminal, Read, Write};
use std::mem::ManuallyDrop;
use std::path::Path;

use attnviz::analysis::{self, Analysis, AnalysisError, HeadStats, StatsSection};
use attnviz::attention::{Attention, AttentionKind, AttentionSet, HeadSel, Selection};
use attnviz::model::encdec::DecoderInput;
use attnviz::model::{EncodeOptions, Encoding, GenerateOptions, Model};
use attnviz::output::{write_output, OutputError, StagedFolder};
use attnviz::render::html::{
    alignment_statistics, report_analysis, statistics_unit, write_html_kinds_file, HtmlOptions,
};
use attnviz::render::image::{self, Figure, FigureSpec, ImageError, ImageOptions};
use attnviz::render::json::{json_sections, write_set_json, JsonOptions, KindSections};
use attnviz::render::stats_table::{token_names, write_stats_table, StatsTableOptions};
use attnviz::render::terminal::{escape_controls, write_view, TerminalOptions};
use attnviz::{import, tokenize};

use super::bars::Bars;
use super::cli::Args;
use super::plan::{self, Mode, Render, Single, REPORT_HTML, REPORT_JSON};
use super::words;

/// Anything that stops a run. Each displays as one line that says what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Loading or running the model.
    #[error("{}", words::model(.0))]
    Model(#[from] attnviz::model::Error),
    /// Writing an output file.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// Building the word-level or special-excluded view.
    #[error("{}", words::analysis(.0))]
    Analysis(#[from] AnalysisError),
    /// Drawing or writing an image.
    #[error("{}", words::image(.0))]
    Image(#[from] ImageError),
    /// Arguments that don't fit the model or each other.
    #[error("{0}")]
    Usage(String),
    /// Reading the text from standard input.
    #[error("cannot read the text from standard input: {0}")]
    Stdin(io::Error),
    /// Writing the terminal view or the statistics table.
    #[error("cannot write to the terminal: {0}")]
    Stdout(io::Error),
    /// Corpus mode (`--input`).
    #[error(transparent)]
    Corpus(#[from] attnviz::corpus::CorpusError),
    /// Reading attention from a file (`attnviz render`).
    #[error("{}", words::import(.0))]
    Import(#[from] attnviz::import::ImportError),
    /// `attnviz merge`.
    #[error(transparent)]
    Merge(#[from] attnviz::corpus::merge::MergeError),
}

impl Error {
    /// The exit status for this error: 130 for a run stopped by Ctrl-C and 143 by SIGTERM (as
    /// when the signal ends it at once), 1 for everything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Corpus(attnviz::corpus::CorpusError::Interrupted { signal, .. }) => {
                u8::try_from(128 + signal).unwrap_or(130)
            }
            _ => 1,
        }
    }
}

/// A line on standard error that must never fail the run (a closed stderr is ignored).
fn note(msg: &str) {
    // Notes quote file contents and names too: escaped as errors are (`main`).
    let _ = writeln!(io::stderr(), "{}", escape_controls(msg));
}

/// Settle the worker threads (`--threads`, capped; see [`attnviz::threads::configure`]) and say
/// so when a request was capped.
fn configure_threads(flag: Option<usize>) -> usize {
    let asked = flag.or_else(attnviz::threads::from_env);
    let threads = attnviz::threads::configure(flag);
    if let Some(asked) = asked.filter(|&n| n > threads) {
        let source = if flag.is_some() {
            "--threads"
        } else {
            "RAYON_NUM_THREADS"
        };
        note(&format!(
            "note: {source} {asked} is more than {} × the {} CPUs available; using {threads}",
            attnviz::threads::MAX_THREADS_PER_CPU,
            threads / attnviz::threads::MAX_THREADS_PER_CPU,
        ));
    }
    threads
}

/// Progress of a generation on standard error: a line redrawn in place after each token when
/// standard error is a terminal; otherwise, for long generations only (from
/// [`Progress::LONG`] tokens), a line at each quarter.
struct Progress {
    total: usize,
    terminal: bool,
    shown: bool,
}

impl Progress {
    /// Generations at least this long report progress on a standard error that is no terminal.
    const LONG: usize = 64;

    fn new(total: usize) -> Progress {
        Progress {
            total,
            terminal: io::stderr().is_terminal(),
            shown: false,
        }
    }

    fn update(&mut self, done: usize) {
        let mut err = io::stderr().lock();
        if self.terminal {
            let _ = write!(err, "\rgenerating: {done}/{} tokens", self.total);
            let _ = err.flush();
            self.shown = true;
        } else if self.total >= Self::LONG
            && done < self.total
            && done.is_multiple_of(self.total / 4)
        {
            let _ = writeln!(err, "generating: {done}/{} tokens", self.total);
        }
    }

    /// Clear the line drawn in place.
    fn finish(&mut self) {
        if self.shown {
            let _ = write!(io::stderr().lock(), "\r\x1b[2K");
            self.shown = false;
        }
    }
}

/// Run the command line described by `args`.
pub fn run(args: &Args) -> Result<(), Error> {
    // Everything that needs no model first: a mistake costs no load and leaves no file.
    let plan = plan::plan(args).map_err(Error::Usage)?;
    if let Mode::Merge(job) = &plan.mode {
        // No model and no threads: merging adds integers.
        return Ok(attnviz::corpus::merge::run(job)?);
    }
    let threads = configure_threads(plan.threads);
    match plan.mode {
        // Corpus mode lives in its own module.
        Mode::Corpus(job) => Ok(attnviz::corpus::run(&job, threads)?),
        Mode::Merge(job) => Ok(attnviz::corpus::merge::run(&job)?),
        Mode::Single(single) => run_single(&single),
        Mode::Render(render) => run_render(&render),
    }
}

/// One text (or pair): load, encode once, write every output.
fn run_single(plan: &Single) -> Result<(), Error> {
    // The weights, the captured attention and the analyses are left for the OS to reclaim
    // when the process exits, which it does right after this function: freeing them first
    // (unmapping the checkpoint, returning the capture buffer page by page) only adds time.
    let model = ManuallyDrop::new(Model::load_within(
        &plan.model,
        &plan.revision,
        &attnviz::model::Hub::from_env().with_progress(std::sync::Arc::new(Bars::default())),
        plan.max_memory,
    )?);
    // Checked before anything is read or run; an encoder–decoder's is checked per kind once
    // its attentions exist, each against its own layers and heads.
    let selection = if model.is_seq2seq() {
        Selection::new(0, HeadSel::Mean)
    } else {
        plan.selection(model.info()).map_err(Error::Usage)?
    };
    let limit = tokenize::byte_limit(model.max_positions());
    let (text, stdin_cut) = read_text(&plan.text, limit, plan.truncate, model.max_positions())?;
    let opts = EncodeOptions {
        truncate: plan.truncate,
        capture_query_key: plan.neuron,
        layers: plan.layers.clone(),
        max_memory: plan.max_memory,
    };
    // An encoder–decoder's run gives three attentions; the views below show the one --kind
    // picks (cross-attention by default).
    let (encoding, selection, seq2seq) = if model.is_seq2seq() {
        let (encoding, selection, set) = run_seq2seq(plan, &model, &text, &opts)?;
        (encoding, selection, Some(set))
    } else if plan.target.is_some() {
        return Err(Error::Usage(format!(
            "--target is for encoder–decoder models (BART, T5, Marian); {} is a {} model: drop \
             --target{}",
            model.info().name(),
            model.family(),
            if model.architecture().mask == attnviz::model::Mask::Causal {
                ", or use --generate"
            } else {
                ""
            }
        )));
    } else {
        (
            single_encoding(plan, &model, &text, &opts)?,
            selection,
            None,
        )
    };
    let bytes_cut = stdin_cut || encoding.bytes_cut;
    if bytes_cut {
        note(&format!(
            "note: the input is over {limit} bytes; only its first {limit} bytes were read \
             (--truncate)"
        ));
    }
    if let Some(from) = encoding.truncated_from {
        let what = if bytes_cut {
            "those bytes were"
        } else {
            "the input was"
        };
        // An encoder–decoder's input is its source: the encoder's tokens, whatever --kind shows.
        let kept = match seq2seq.as_ref().and_then(AttentionSet::encoder) {
            Some(encoder) => encoder.len(),
            None => encoding.attention.len(),
        };
        note(&format!(
            "note: {what} {from} tokens; truncated to the model's maximum of {kept} (--truncate)"
        ));
    }

    // Attention rollout multiplies every layer's attention in turn: with only some layers
    // captured (--layers) there is none to show.
    // (An encoder–decoder's kinds have their own layer counts: every layer is captured unless
    // --layers picks some.)
    let every_layer = match &seq2seq {
        Some(_) => plan.layers.is_none(),
        None => encoding
            .attention
            .layer_numbers()
            .iter()
            .copied()
            .eq(0..model.info().layers),
    };
    if !every_layer {
        let rollout_asked = (plan.figure == Figure::Rollout
            && (plan.png.is_some() || plan.svg.is_some()))
            || plan
                .json_include
                .contains(&attnviz::render::json::JsonSection::Rollout);
        if rollout_asked {
            return Err(Error::Usage(
                "attention rollout multiplies every layer's attention, and --layers captures \
                 only some; drop --layers, or the rollout (--figure rollout, --json-include \
                 rollout)"
                    .into(),
            ));
        }
    }

    // Every attention of the run, token level: one value, or an encoder–decoder's three.
    // Labelled for people by the rules of the tokenizers that made them (`Ġ`, `▁`, bytes).
    let schemes = (
        model.tokenizer().label_scheme(),
        model.target_side().label_scheme(),
    );
    let tokens = ManuallyDrop::new(
        match seq2seq {
            Some(set) => set,
            None => AttentionSet::single(encoding.attention),
        }
        .relabel(schemes.0, schemes.1),
    );

    let mut settings = vec![("model".to_string(), plan.model.clone())];
    if !std::path::Path::new(&plan.model).is_dir() {
        settings.push(("revision".to_string(), plan.revision.clone()));
    }
    if plan.truncate {
        settings.push(("truncate".to_string(), "yes".to_string()));
    }
    write_outputs(plan, &tokens, selection, every_layer, settings)
}

/// `attnviz render FILE`: read the attention, say what the reader noticed, and write every
/// output as for a single input. A file of an encoder–decoder run (JSON version 3, or arrays of
/// the three kinds) is read whole: `--kind` picks what the single-kind outputs show, and JSON
/// gets all three.
fn run_render(render: &Render) -> Result<(), Error> {
    let plan = &render.out;
    let tokens = match &render.tokens {
        Some(path) => Some(import::read_token_file(path)?),
        None => None,
    };
    let opts = import::ReadOptions {
        tokens,
        max_memory: render.max_memory,
        cost: render_cost(plan),
        // Outputs that show one kind need only its weights (JSON and the report hold every
        // kind of an encoder–decoder file).
        only: (plan.json.is_none() && !plan.html_report())
            .then(|| plan.kind.unwrap_or(AttentionKind::Cross)),
    };
    let mut imported = import::read(&render.file, &opts).map_err(|e| match e {
        e @ import::ImportError::TooBig { .. } => Error::Usage(format!("{e} with --max-memory")),
        e => Error::Import(e),
    })?;
    for w in &imported.warnings {
        note(&format!("warning: {w}"));
    }
    let file = render.file.display();
    if let Some(kind) = plan.kind {
        if imported.kind(kind).is_none() {
            return Err(Error::Usage(format!(
                "{file} holds no {} attention (it holds {}); choose one of those with --kind",
                kind.as_str(),
                imported.kinds_in_words()
            )));
        }
    }
    let set = match imported.kinds.as_slice() {
        // Moved, not copied: the weights are most of the memory.
        [_] => imported.kinds.pop().map(AttentionSet::single),
        [enc, dec, cross]
            if [enc.kind, dec.kind, cross.kind] == attnviz::attention::ENCODER_DECODER_KINDS =>
        {
            // Arrays without texts (.npz, .safetensors) label each side by its own tokens:
            // every value of a run carries the source as its text, and the decoder's is the
            // target.
            let target = imported
                .target
                .clone()
                .or_else(|| (dec.text != enc.text).then(|| dec.text.clone()));
            // A generated run's decoder text is what it generated (a target, if any, is
            // quoted by `encoder_decoder`).
            let source = |a: &Attention| {
                let mut a = a.clone();
                a.text = enc.text.clone();
                a.pair = None;
                a.target_text = imported.generated_text.clone();
                a
            };
            AttentionSet::encoder_decoder(enc.clone(), source(dec), source(cross), target).ok()
        }
        _ => None,
    };
    let set = match set {
        Some(set) => set,
        // Kinds that are not one run's whole set: draw the one --kind picks.
        None => match plan.kind {
            Some(kind) => AttentionSet::single(imported.kind(kind).expect("checked").clone()),
            None => {
                return Err(Error::Usage(format!(
                    "{file} holds {} attention; choose one with --kind {}",
                    imported.kinds_in_words(),
                    imported.kind_names().join("|")
                )))
            }
        },
    };
    let shown = set
        .get(plan.kind)
        .map_err(|e| Error::Usage(words::kind(&e)))?;
    // A file may hold some layers only (an export made with --layers): --layer names them by
    // their numbers in the model, as for the run that wrote it.
    let selection = if shown.layer_numbers().iter().copied().eq(0..shown.layers()) {
        plan.selection_of(&shown.model, shown.kind)
    } else {
        plan.selection_among(&shown.model, shown.layer_numbers(), "the file's layers")
    }
    .map_err(Error::Usage)?;
    let every_layer = set
        .iter()
        .all(|a| a.layer_numbers().iter().copied().eq(0..a.layers()));
    let settings = vec![
        ("source".to_string(), file.to_string()),
        ("format".to_string(), imported.format.clone()),
    ];
    write_outputs(plan, &set, selection, every_layer, settings)
}

/// What `attnviz render`'s outputs cost beyond the f32 weights themselves, per weight and per
/// cell of one layer-and-head matrix: the peak resident memory of each output over the
/// reading alone, fitted on files shaped [1, 1, 2048, 2048], [16, 16, 128, 128] and
/// [4, 4, 1024, 1024] and checked on [2, 2, 3000, 3000] and [8, 12, 700, 700], rounded up
/// (docs/render.md, "Memory"). Outputs asked for together add up.
fn render_cost(plan: &Single) -> import::Cost {
    let mut cost = import::Cost::default();
    let mut add = |per_weight: u64, per_cell: u64| {
        cost.per_weight += per_weight;
        cost.per_cell += per_cell;
    };
    if plan.terminal_view {
        // The strongest links of the shown matrix, sorted (24 bytes a cell), and the mean.
        add(0, 28);
    }
    if plan.png.is_some() || plan.svg.is_some() {
        add(0, 8);
        if plan.figure == Figure::Rollout {
            add(4, 24);
        }
    }
    if plan.html.is_some() {
        add(2, 20);
    }
    if plan.report.is_some() {
        add(9, 20);
    }
    if plan.json.is_some() {
        add(7, 7);
    }
    if plan.view.words || plan.view.no_special {
        // The view's own copy of the weights.
        add(4, 0);
    }
    if plan.json.is_some() || plan.html_report() {
        // Every kind of an encoder–decoder file, copied into its set.
        add(4, 0);
    }
    cost
}

/// Write every output `plan` asks for from the token-level attention `tokens` (one value, or an
/// encoder–decoder's three): the view (`--words`, `--no-special`), its analyses, the files and
/// the terminal views, of the kind `--kind` picks where an output shows one. `selection` was
/// checked against that kind; `every_layer`: whether every layer was captured (else there is no
/// rollout). `settings` go into the report's "About" panel.
fn write_outputs(
    plan: &Single,
    tokens: &AttentionSet,
    selection: Selection,
    every_layer: bool,
    settings: Vec<(String, String)>,
) -> Result<(), Error> {
    let Selection { layer, head } = selection;
    // The kind the terminal view, the table and the images show (--kind; default: the run's
    // primary one, cross-attention for an encoder–decoder), and the layer/head selection,
    // checked against that kind's own layers and heads.
    let shown_kind = tokens
        .get(plan.kind)
        .map_err(|e| Error::Usage(words::kind(&e)))?
        .kind;
    let shown_index = tokens
        .kinds()
        .iter()
        .position(|&k| k == shown_kind)
        .expect("the kind was found");
    let token_att = tokens.kind(shown_kind).expect("the kind was found");

    // The view every output shows (word level and/or special tokens excluded), and the analyses
    // the requested outputs need, each computed once per kind.
    let view_opts = plan.view;
    let needs_rollout = plan.report.is_some()
        || !plan.json_include.is_empty()
        || (plan.figure == Figure::Rollout && (plan.png.is_some() || plan.svg.is_some()));
    let shown = ManuallyDrop::new(analysis::view_set(tokens, view_opts)?);
    let kept = ManuallyDrop::new(needs_rollout.then(|| {
        tokens
            .iter()
            .zip(shown.iter())
            .map(|(t, v)| Analysis::of_view(t, v, view_opts))
            .collect::<Vec<Analysis>>()
    }));
    let analyses: &Option<Vec<Analysis>> = &kept;
    let needs_stats = plan.json.is_some() || plan.html_report() || plan.stats;
    let stats: Vec<Cow<'_, [Vec<HeadStats>]>> = match &analyses {
        Some(all) => all
            .iter()
            .map(|a| Cow::Borrowed(a.stats.as_slice()))
            .collect(),
        None if needs_stats => shown
            .iter()
            .map(|v| Cow::Owned(analysis::head_stats(v)))
            .collect(),
        None => shown.iter().map(|_| Cow::Borrowed(&[][..])).collect(),
    };
    let att = shown.iter().nth(shown_index).expect("one view per kind");
    let rollout = analyses
        .as_ref()
        .filter(|_| every_layer)
        .and_then(|a| a[shown_index].rollout.get(layer))
        .filter(|m| !m.is_empty())
        .map(Vec::as_slice);
    if plan.figure == Figure::Rollout
        && (plan.png.is_some() || plan.svg.is_some())
        && rollout.is_none()
    {
        return Err(Error::Usage(format!(
            "--figure rollout follows the residual stream through one side's own units; {} \
             attention has none: choose --kind encoder or decoder, or another --figure",
            shown_kind.as_str()
        )));
    }

    let outputs = Outputs {
        stats: &stats[shown_index],
        set: &shown,
        all_stats: stats.iter().map(|s| &**s).collect(),
        analyses: analyses.as_deref(),
        every_layer,
        include: &plan.json_include,
        json: plan.json_format,
        image: plan.image,
    };
    if let Some(path) = &plan.json {
        outputs.json(path)?;
    }
    if plan.png.is_some() || plan.svg.is_some() {
        let figure = FigureSpec::of(plan.figure, layer, head, rollout)?;
        if let Some(path) = &plan.png {
            image::write_png(att, &figure, &outputs.image, path)?;
        }
        if let Some(path) = &plan.svg {
            image::write_svg(att, &figure, &outputs.image, path)?;
        }
    }
    // The report gets the token-level attention (and rollout): the page merges words and hides
    // special tokens itself, reversibly. An encoder–decoder's report holds all three kinds,
    // each at the selection (or, out of its range, its last layer), opening on the --kind one.
    let html: Vec<HtmlOptions> = if plan.html_report() {
        tokens
            .iter()
            .enumerate()
            .map(|(i, kind_att)| {
                let kind_selection = if i == shown_index {
                    selection
                } else {
                    plan.selection_of(&kind_att.model, kind_att.kind)
                        .unwrap_or_else(|_| {
                            Selection::new(kind_att.layers().saturating_sub(1), HeadSel::Mean)
                        })
                };
                let token_rollout = match &analyses {
                    _ if !every_layer || !kind_att.is_square() => Cow::Owned(Vec::new()),
                    Some(a) if view_opts == analysis::ViewOptions::default() => {
                        Cow::Borrowed(&a[i].rollout)
                    }
                    _ => Cow::Owned(analysis::rollout(kind_att)),
                };
                let mut opts = html_options(
                    plan,
                    kind_att,
                    kind_selection,
                    &stats[i],
                    &token_rollout,
                    settings.clone(),
                );
                // Cross-attention's alignment figures lead its statistics.
                let view_att = shown.iter().nth(i).expect("one view per kind");
                let align = match analyses.as_ref().and_then(|a| a[i].alignment.clone()) {
                    Some(a) => Some(a),
                    None => analysis::alignment_stats(view_att),
                };
                if let Some(align) = align {
                    let unit = statistics_unit(kind_att, plan.view);
                    let mut all = alignment_statistics(&align, &unit);
                    all.append(&mut opts.analysis.stats);
                    opts.analysis.stats = all;
                }
                opts
            })
            .collect()
    } else {
        Vec::new()
    };
    let html_kinds: Vec<(&Attention, &HtmlOptions)> = tokens.iter().zip(&html).collect();
    if let Some(path) = plan.html.as_ref().filter(|_| !html.is_empty()) {
        write_html_kinds_file(&html_kinds, shown_index, tokens.target(), path)?;
    }
    if let Some(dir) = plan.report.as_ref().filter(|_| !html.is_empty()) {
        // Built aside and moved into place whole: a failure or Ctrl-C leaves no partial folder.
        let staged = StagedFolder::create(dir)?;
        let build = || -> Result<(), Error> {
            outputs.report(staged.staging(), plan, selection)?;
            write_html_kinds_file(
                &html_kinds,
                shown_index,
                tokens.target(),
                &staged.staging().join(REPORT_HTML),
            )?;
            Ok(())
        };
        // Errors name the file in DIR, not in the hidden staging folder.
        build().map_err(|e| match e {
            Error::Output(o) => Error::Output(staged.rename_error(o)),
            Error::Image(ImageError::Output(o)) => {
                Error::Image(ImageError::Output(staged.rename_error(o)))
            }
            other => other,
        })?;
        let written = staged.commit()?;
        note(&format!(
            "wrote {} files into {}",
            written.len(),
            dir.display()
        ));
    }

    if plan.terminal_view {
        let opts = terminal_options(plan);
        to_stdout(|w| write_view(att, selection, &opts, w))?;
    }
    if plan.stats {
        if plan.stdout_taken {
            // Standard output carries a file (`--json -`): the table goes to standard error.
            let opts = StatsTableOptions {
                stat: plan.stat,
                color: plan.color.enabled(io::stderr().is_terminal()),
                token_names: Some(token_names(token_att)),
                layer_numbers: Some(token_att.layer_numbers().to_vec()),
                ..StatsTableOptions::default()
            };
            let res = write_stats_table(outputs.stats, &opts, &mut io::stderr().lock());
            match res {
                Err(e) if e.kind() != io::ErrorKind::BrokenPipe => return Err(Error::Stdout(e)),
                _ => {}
            }
        } else {
            let opts = StatsTableOptions {
                token_names: Some(token_names(token_att)),
                layer_numbers: Some(token_att.layer_numbers().to_vec()),
                ..StatsTableOptions::for_stdout(plan.stat, plan.color)
            };
            let blank = plan.terminal_view;
            to_stdout(|w| {
                if blank {
                    writeln!(w)?;
                }
                write_stats_table(outputs.stats, &opts, w)
            })?;
        }
    }
    Ok(())
}

/// The encoding of a decoder-only or encoder-only model: generated (`--generate`, `--chat`) or
/// of the text (and pair) as given.
fn single_encoding(
    plan: &Single,
    model: &Model,
    text: &str,
    opts: &EncodeOptions,
) -> Result<Encoding, Error> {
    let encoding = if plan.generates() {
        let generate = GenerateOptions {
            max_new_tokens: plan.generate.unwrap_or(0),
            chat: plan.chat,
        };
        let mut progress = Progress::new(generate.max_new_tokens);
        let encoding =
            model.encode_generated(text, opts, generate, &mut |done| progress.update(done));
        progress.finish();
        let encoding = encoding?;
        if let Some(g) = &encoding.generation {
            let text = model.tokenizer().decode(g.generated()).unwrap_or_default();
            note(&format!(
                "generated {} token{}{}: {text:?}",
                g.generated().len(),
                if g.generated().len() == 1 { "" } else { "s" },
                if g.stopped_at_eos {
                    " (stopped at the end-of-sequence token)"
                } else {
                    ""
                }
            ));
        }
        encoding
    } else {
        model.encode(text, plan.pair.as_deref(), opts)?
    };
    Ok(encoding)
}

/// An encoder–decoder's run: TEXT as the source, the decoder teacher-forced with `--target` or
/// generating (`--generate N`, or the checkpoint's default length, said on stderr); the
/// encoding of the attention `--kind` picks (cross by default) and the selection checked
/// against that attention's layers and heads.
fn run_seq2seq(
    plan: &Single,
    model: &Model,
    text: &str,
    opts: &EncodeOptions,
) -> Result<(Encoding, Selection, AttentionSet), Error> {
    let name = model.info().name();
    if plan.chat {
        return Err(Error::Usage(format!(
            "--chat: {name} is an encoder–decoder model ({}), with no chat template; give the \
             source as TEXT and --target or --generate",
            model.family()
        )));
    }
    if plan.pair.is_some() {
        return Err(Error::Usage(format!(
            "--pair: {name} is an encoder–decoder model ({}), which reads one source text; give \
             the output with --target",
            model.family()
        )));
    }
    // The default length is said once the run holds up (a bad source gets its one line).
    let mut default_note = None;
    let input = match (&plan.target, plan.generate) {
        (Some(target), _) => DecoderInput::Target(target),
        (None, Some(n)) => DecoderInput::Generate(n),
        (None, None) => {
            let n = model.default_generation_length();
            default_note = Some(format!(
                "{name} is an encoder–decoder model: TEXT is the source, and with neither \
                 --target nor --generate the decoder generates up to {n} tokens greedily \
                 (--target TEXT teacher-forces an output; --generate N sets the length)"
            ));
            DecoderInput::Generate(n)
        }
    };
    let total = match input {
        DecoderInput::Generate(n) => n,
        DecoderInput::Target(_) => 0,
    };
    let mut progress = Progress::new(total);
    let out = model.encode_seq2seq(text, input, opts, &mut |done| progress.update(done));
    progress.finish();
    let out = out?;
    if let Some(line) = default_note {
        note(&line);
    }
    if let Some(g) = &out.generation {
        let generated = model.tokenizer().decode(g.generated()).unwrap_or_default();
        note(&format!(
            "generated {} token{}{}: {generated:?}",
            g.generated().len(),
            if g.generated().len() == 1 { "" } else { "s" },
            if g.stopped_at_eos {
                " (stopped at the end-of-sequence token)"
            } else {
                ""
            }
        ));
    }
    // The decoder reads the target shifted right: as many tokens as the labels kept.
    let kept = out.labels.as_ref().map_or(0, Vec::len);
    match (out.target_bytes_cut, out.target_truncated_from) {
        (false, Some(from)) => note(&format!(
            "note: the target was {from} tokens; truncated to the decoder's maximum of {kept} \
             (--truncate)"
        )),
        (true, Some(from)) => note(&format!(
            "note: the target is longer than the decoder could use: its first bytes were read, \
             {from} tokens, truncated to the decoder's maximum of {kept} (--truncate)"
        )),
        (true, None) => note(
            "note: the target is longer than the decoder could use; only its first bytes were \
             read (--truncate)",
        ),
        (false, None) => {}
    }
    let [encoder, decoder, cross]: [Attention; 3] = out
        .attentions
        .try_into()
        .map_err(|_| Error::Usage("an encoder–decoder run gives three attentions".into()))?;
    let set = AttentionSet::encoder_decoder(encoder, decoder, cross, plan.target.clone())
        .map_err(|e| Error::Usage(e.to_string()))?;
    let kind = plan.kind.unwrap_or(AttentionKind::Cross);
    let att = set
        .get(Some(kind))
        .map_err(|e| Error::Usage(words::kind(&e)))?;
    let selection = plan.selection_of(&att.model, kind).map_err(Error::Usage)?;
    let encoding = Encoding {
        attention: att.clone(),
        hidden: out.decoder_hidden,
        truncated_from: out.truncated_from,
        bytes_cut: out.bytes_cut,
        generation: out.generation,
    };
    Ok((encoding, selection, set))
}

/// The files a run can write, from one encoded input.
struct Outputs<'a> {
    /// The statistics of the value the views show (the `--kind` chosen).
    stats: &'a [Vec<HeadStats>],
    /// Every kind, in the view asked for.
    set: &'a AttentionSet,
    /// The statistics of every kind, in the order of `set`.
    all_stats: Vec<&'a [Vec<HeadStats>]>,
    /// The analyses of every kind, when they were computed (means, rollout).
    analyses: Option<&'a [Analysis]>,
    /// Whether every layer was captured (without, there is no rollout).
    every_layer: bool,
    /// Optional JSON sections (`--json-include`).
    include: &'a [attnviz::render::json::JsonSection],
    json: JsonOptions,
    image: ImageOptions,
}

impl Outputs<'_> {
    fn json(&self, path: &Path) -> Result<(), Error> {
        let sections: Vec<KindSections> = self
            .set
            .iter()
            .enumerate()
            .map(|(i, att)| {
                let analysis = self.analyses.map(|a| &a[i]);
                let alignment = match analysis {
                    Some(a) => a.alignment.clone(),
                    None => analysis::alignment_stats(att),
                };
                let section = serde_json::to_value(
                    StatsSection::new(self.all_stats[i]).with_alignment(alignment.as_deref()),
                )
                .expect("statistics serialise to JSON");
                // Cross-attention has no rollout: its section is left out, not written empty.
                let matrices = json_sections(self.include, analysis)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|m| m.layers.iter().all(|l| !l.is_empty()))
                    .collect();
                KindSections {
                    extra: vec![("stats", section)],
                    matrices,
                }
            })
            .collect();
        write_output(path, |w| write_set_json(self.set, &sections, self.json, w))?;
        Ok(())
    }

    /// The JSON export and every kind of figure as PNG and SVG, in one (staging) folder: the
    /// figures of the one attention of most models (`head.png`, …), of each kind of an
    /// encoder–decoder (`cross-head.png`, `encoder-head.png`, …; each at the selection, or its
    /// last layer and the head mean where the selection is out of its range).
    fn report(&self, dir: &Path, plan: &Single, selection: Selection) -> Result<(), Error> {
        self.json(&dir.join(REPORT_JSON))?;
        let several = self.set.is_encoder_decoder();
        for (i, att) in self.set.iter().enumerate() {
            let (prefix, selection) = if several {
                (
                    format!("{}-", att.kind.as_str()),
                    plan.selection_of(&att.model, att.kind).unwrap_or_else(|_| {
                        Selection::new(att.layers().saturating_sub(1), HeadSel::Mean)
                    }),
                )
            } else {
                (String::new(), selection)
            };
            let Selection { layer, head } = selection;
            let rollout = self
                .analyses
                .filter(|_| self.every_layer)
                .and_then(|a| a[i].rollout.get(layer))
                .filter(|m| !m.is_empty())
                .map(Vec::as_slice);
            // With `--head mean` the mean has its own figure: the head figure shows the layer's
            // most focused head (lowest mean entropy, sinks left out) instead, and says so, and
            // how it was picked, in its title.
            let focused = (head == HeadSel::Mean)
                .then(|| analysis::most_focused_head(self.all_stats[i], layer))
                .flatten();
            for (name, figure) in FigureSpec::all(layer, head, rollout) {
                let figure = match (name, focused) {
                    ("head", Some((h, how))) => FigureSpec::Matrix {
                        title: format!(
                            "layer {} · head {h} (most focused: {how}{})",
                            att.layer_number(layer),
                            if att.is_grouped() {
                                format!(", kv head {}", att.kv_head()[h])
                            } else {
                                String::new()
                            }
                        ),
                        values: att.head(layer, h),
                    },
                    _ => figure,
                };
                image::write_png(
                    att,
                    &figure,
                    &self.image,
                    &dir.join(format!("{prefix}{name}.png")),
                )?;
                image::write_svg(
                    att,
                    &figure,
                    &self.image,
                    &dir.join(format!("{prefix}{name}.svg")),
                )?;
            }
        }
        Ok(())
    }
}

/// Report options from the command line. The report gets the token-level attention and opens on
/// the `--words` / `--no-special` view, which the page can undo; statistics are those of that view.
fn html_options(
    plan: &Single,
    att: &Attention,
    selection: Selection,
    stats: &[Vec<HeadStats>],
    rollout: &[Vec<f32>],
    mut settings: Vec<(String, String)>,
) -> HtmlOptions {
    let precision =
        plan.html_precision
            .resolve(att.layers(), att.heads(), att.n_queries(), att.n_keys());
    settings.push((
        "statistics computed on".to_string(),
        statistics_unit(att, plan.view),
    ));
    HtmlOptions {
        neuron: plan.neuron,
        precision,
        layer: selection.layer,
        head: match selection.head {
            HeadSel::Index(h) => h,
            HeadSel::Mean => 0,
        },
        hide_special: plan.view.no_special,
        words: plan.view.words,
        raw_tokens: plan.raw_tokens,
        settings,
        analysis: report_analysis(att, plan.view, stats, rollout),
        ..HtmlOptions::default()
    }
}

/// `text`, or standard input when it is `-`, read up to `limit` bytes (the model's
/// [`tokenize::byte_limit`]): more is an error, or with `truncate` is cut (at a character
/// boundary) and left unread. Returns the text and whether it was cut.
fn read_text(
    text: &str,
    limit: usize,
    truncate: bool,
    max_positions: usize,
) -> Result<(String, bool), Error> {
    if text != "-" {
        // An argument is already in memory; the tokenizer bounds its own work by the same limit.
        return Ok((text.to_string(), false));
    }
    let mut buf = Vec::new();
    io::stdin()
        .lock()
        .take(limit as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(Error::Stdin)?;
    let cut = buf.len() > limit;
    if cut {
        if !truncate {
            return Err(Error::Usage(format!(
                "standard input holds more than {limit} bytes, more than a model of \
                 {max_positions} positions can take; shorten it, or pass --truncate to analyse \
                 its beginning"
            )));
        }
        buf.truncate(limit);
    }
    let text = match String::from_utf8(buf) {
        Ok(s) => s,
        // The cut fell inside a character: drop its first bytes.
        Err(e) if cut && e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        }
        Err(e) => {
            return Err(Error::Usage(format!(
                "standard input is not valid UTF-8 (byte {}); give UTF-8 text",
                e.utf8_error().valid_up_to() + 1
            )))
        }
    };
    Ok((text.trim_end_matches(['\n', '\r']).to_string(), cut))
}

/// Write to standard output; a reader that stops early (`| head`) is not an error.
fn to_stdout(write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), Error> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    match write(&mut out).and_then(|_| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(Error::Stdout(e)),
        _ => Ok(()),
    }
}

fn terminal_options(plan: &Single) -> TerminalOptions {
    let is_tty = io::stdout().is_terminal();
    let color = plan.color.enabled(is_tty);
    let width = terminal_size::terminal_size()
        .map(|(w, _)| w.0 as usize)
        .filter(|_| is_tty)
        .or_else(|| std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()))
        .unwrap_or(80);
    TerminalOptions {
        color,
        width,
        top: plan.top,
        raw_tokens: plan.raw_tokens,
        ..TerminalOptions::default()
    }
}
