//! One invocation of the CLI: load the model once, encode once, then write every requested output.

use std::borrow::Cow;
use std::io::{self, IsTerminal, Read, Write};
use std::path::Path;

use crate::checks::{self, REPORT_HTML, REPORT_JSON};

use crate::analysis::{
    self, Analysis, AnalysisError, HeadLabel, HeadStats, Stat, StatsSection, ViewOptions,
};
use crate::attention::{Attention, HeadSel};
use crate::cli::{Args, Figure, HtmlPrecision};
use crate::model::{EncodeOptions, Model};
use crate::output::{write_output, Destination, OutputError, StagedFolder};
use crate::render::html::{
    write_html_file, ExtraMatrix, HeadStatistic, HtmlAnalysis, HtmlOptions, Precision,
};
use crate::render::image::{self, FigureSpec, ImageError, ImageOptions};
use crate::render::json::{json_sections, write_json_with, JsonOptions, MatrixSection};
use crate::render::stats_table::{color_enabled, write_stats_table, StatsTableOptions};
use crate::render::terminal::{write_view, TerminalOptions};
use crate::tokenize;

/// Anything that stops a run. Each displays as one line that says what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Loading or running the model.
    #[error(transparent)]
    Model(#[from] crate::model::Error),
    /// Writing an output file.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// Building the word-level or special-excluded view.
    #[error(transparent)]
    Analysis(#[from] AnalysisError),
    /// Drawing or writing an image.
    #[error(transparent)]
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
    Corpus(#[from] crate::corpus::CorpusError),
}

impl Error {
    /// The exit status for this error: 130 for a run stopped by Ctrl-C (as when the signal ends
    /// it at once), 1 for everything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Corpus(crate::corpus::CorpusError::Interrupted { .. }) => 130,
            _ => 1,
        }
    }
}

/// A line on standard error that must never fail the run (a closed stderr is ignored).
fn note(msg: &str) {
    let _ = writeln!(io::stderr(), "{msg}");
}

/// Settle the worker threads (`--threads`, capped; see [`crate::threads::configure`]) and say
/// so when a request was capped.
fn configure_threads(args: &Args) -> usize {
    let asked = args.threads.or_else(crate::threads::from_env);
    let threads = crate::threads::configure(args.threads);
    if let Some(asked) = asked.filter(|&n| n > threads) {
        let source = if args.threads.is_some() {
            "--threads"
        } else {
            "RAYON_NUM_THREADS"
        };
        note(&format!(
            "note: {source} {asked} is more than {} × the {} CPUs available; using {threads}",
            crate::threads::MAX_THREADS_PER_CPU,
            threads / crate::threads::MAX_THREADS_PER_CPU,
        ));
    }
    threads
}

/// Run the command line described by `args`.
pub fn run(args: &Args) -> Result<(), Error> {
    // Everything that needs no model first: a mistake costs no load and leaves no file.
    checks::check_args(args).map_err(Error::Usage)?;
    let threads = configure_threads(args);
    // Corpus mode lives in its own module.
    if args.input.is_some() {
        return Ok(crate::corpus::run(args, threads)?);
    }
    let model = Model::load(&args.model, &args.revision)?;
    let (layer, head) = selection(args, model.info())?;
    let limit = tokenize::byte_limit(model.max_positions());
    let (text, stdin_cut) = read_text(
        args.text.as_deref().unwrap_or_default(),
        limit,
        args.truncate,
        model.max_positions(),
    )?;
    let opts = EncodeOptions {
        truncate: args.truncate,
        capture_query_key: args.neuron,
        ..EncodeOptions::default()
    };
    let encoding = model.encode(&text, args.pair.as_deref(), &opts)?;
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
        note(&format!(
            "note: {what} {from} tokens; truncated to the model's maximum of {} (--truncate)",
            encoding.attention.len()
        ));
    }

    // The view every output shows (word level and/or special tokens excluded), and the analyses
    // the requested outputs need, each computed once.
    let view_opts = ViewOptions {
        words: args.words,
        no_special: args.no_special,
    };
    let needs_rollout = args.report.is_some()
        || !args.json_include.is_empty()
        || (args.figure == Figure::Rollout && (args.png.is_some() || args.svg.is_some()));
    let (att, analysis): (Cow<'_, Attention>, Option<Analysis>) = if needs_rollout {
        let (view, analysis) = Analysis::compute_view(&encoding.attention, view_opts)?;
        (view, Some(analysis))
    } else {
        (analysis::view(&encoding.attention, view_opts)?, None)
    };
    let needs_stats = args.json.is_some()
        || args.html.is_some()
        || args.report.is_some()
        || args.stats
        || args.stat.is_some();
    let stats: Option<Cow<'_, [Vec<HeadStats>]>> = match &analysis {
        Some(a) => Some(Cow::Borrowed(&a.stats)),
        None => needs_stats.then(|| Cow::Owned(analysis::head_stats(&att))),
    };
    let rollout = analysis.as_ref().map(|a| a.rollout[layer].as_slice());

    let outputs = Outputs {
        att: &att,
        stats: stats.as_deref().unwrap_or_default(),
        sections: json_sections(&args.json_include, analysis.as_ref()).unwrap_or_default(),
        json: JsonOptions {
            full_precision: args.full_precision,
        },
        image: ImageOptions {
            colormap: args.colormap,
            theme: args.theme,
            scale: args.scale.into(),
            scale_factor: args.dpi.map_or(args.scale_factor, |dpi| dpi / 96.0),
        },
    };
    if let Some(path) = &args.json {
        outputs.json(path)?;
    }
    if args.png.is_some() || args.svg.is_some() {
        let figure = FigureSpec::from_cli(args.figure, layer, head, rollout)?;
        if let Some(path) = &args.png {
            image::write_png(&att, &figure, &outputs.image, path)?;
        }
        if let Some(path) = &args.svg {
            image::write_svg(&att, &figure, &outputs.image, path)?;
        }
    }
    // The report gets the token-level attention (and rollout): the page merges words and hides
    // [CLS]/[SEP] itself, reversibly.
    let html = (args.html.is_some() || args.report.is_some()).then(|| {
        let token_rollout = match &analysis {
            Some(a) if view_opts == ViewOptions::default() => Cow::Borrowed(&a.rollout),
            _ => Cow::Owned(analysis::rollout(&encoding.attention)),
        };
        html_options(args, layer, head, outputs.stats, &token_rollout)
    });
    if let (Some(path), Some(opts)) = (&args.html, &html) {
        write_html_file(&encoding.attention, opts, path)?;
    }
    if let (Some(dir), Some(opts)) = (&args.report, &html) {
        // Built aside and moved into place whole: a failure or Ctrl-C leaves no partial folder.
        let staged = StagedFolder::create(dir)?;
        let build = || -> Result<(), Error> {
            outputs.report(staged.staging(), layer, head, rollout)?;
            write_html_file(
                &encoding.attention,
                opts,
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

    if show_terminal_view(args) {
        let opts = terminal_options(args);
        to_stdout(|w| write_view(&att, layer, head, &opts, w))?;
    }
    if args.stats || args.stat.is_some() {
        let blank = show_terminal_view(args);
        if stdout_taken(args) {
            // Standard output carries a file (`--json -`): the table goes to standard error.
            let opts = StatsTableOptions {
                stat: args.stat,
                color: color_enabled(args.color, io::stderr().is_terminal()),
                ..StatsTableOptions::default()
            };
            let res = write_stats_table(outputs.stats, &opts, &mut io::stderr().lock());
            match res {
                Err(e) if e.kind() != io::ErrorKind::BrokenPipe => return Err(Error::Stdout(e)),
                _ => {}
            }
        } else {
            let opts = StatsTableOptions::for_stdout(args.stat, args.color);
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

/// The files a run can write, from one encoded input.
struct Outputs<'a> {
    att: &'a Attention,
    stats: &'a [Vec<HeadStats>],
    /// Optional JSON sections (`--json-include`).
    sections: Vec<MatrixSection<'a>>,
    json: JsonOptions,
    image: ImageOptions,
}

impl Outputs<'_> {
    fn json(&self, path: &Path) -> Result<(), Error> {
        let section = serde_json::to_value(StatsSection::new(self.stats))
            .expect("statistics serialise to JSON");
        write_output(path, |w| {
            write_json_with(
                self.att,
                &[("stats", section)],
                &self.sections,
                self.json,
                w,
            )
        })?;
        Ok(())
    }

    /// The JSON export and every kind of figure as PNG and SVG, in one (staging) folder.
    fn report(
        &self,
        dir: &Path,
        layer: usize,
        head: HeadSel,
        rollout: Option<&[f32]>,
    ) -> Result<(), Error> {
        self.json(&dir.join(REPORT_JSON))?;
        // With `--head mean` the mean has its own figure: the head figure shows the layer's most
        // focused head (lowest mean entropy) instead, and says so in its title.
        let focused = (head == HeadSel::Mean)
            .then(|| most_focused_head(self.stats, layer))
            .flatten();
        for (name, figure) in FigureSpec::all(layer, head, rollout) {
            let figure = match (name, focused) {
                ("head", Some(h)) => FigureSpec::Matrix {
                    title: format!("layer {layer} · head {h} (most focused)"),
                    values: self.att.head(layer, h),
                },
                _ => figure,
            };
            image::write_png(
                self.att,
                &figure,
                &self.image,
                &dir.join(format!("{name}.png")),
            )?;
            image::write_svg(
                self.att,
                &figure,
                &self.image,
                &dir.join(format!("{name}.svg")),
            )?;
        }
        Ok(())
    }
}

fn capitalise(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// Report options from the command line. The report gets the token-level attention and opens on
/// the `--words` / `--no-special` view, which the page can undo; statistics are those of that view.
fn html_options(
    args: &Args,
    layer: usize,
    head: HeadSel,
    stats: &[Vec<HeadStats>],
    rollout: &[Vec<f32>],
) -> HtmlOptions {
    let layers = stats.len();
    let heads = stats.first().map_or(0, Vec::len);
    let tokens = rollout.first().map_or(0, |m| m.len().isqrt());
    let precision = match args.html_precision {
        HtmlPrecision::Bits16 => Precision::U16,
        HtmlPrecision::Bits8 => Precision::U8,
        HtmlPrecision::Auto => Precision::auto(layers, heads, tokens),
    };
    let unit = match (args.words, args.no_special) {
        (false, false) => "word pieces, [CLS]/[SEP] included",
        (true, false) => "words, [CLS]/[SEP] included",
        (false, true) => "word pieces, [CLS]/[SEP] excluded",
        (true, true) => "words, [CLS]/[SEP] excluded",
    };
    let statistics = Stat::ALL
        .iter()
        .map(|&stat| HeadStatistic {
            id: stat.name().to_string(),
            label: stat.title().to_string(),
            description: format!(
                "{}, averaged over the query rows ({unit}). Tags: previous/next = over half \
                 the attention on the previous/next token, sink = over half on [CLS]/[SEP], \
                 broad = entropy near uniform.",
                capitalise(stat.title())
            ),
            values: stats
                .iter()
                .map(|l| l.iter().map(|s| stat.value(s) as f32).collect())
                .collect(),
        })
        .collect();
    let head_labels = stats
        .iter()
        .map(|l| {
            l.iter()
                .map(|s| {
                    // Short tags that fit a grid cell; the description explains them.
                    match s.label {
                        HeadLabel::PositionalPrevious => "previous",
                        HeadLabel::PositionalNext => "next",
                        HeadLabel::Broad => "broad",
                        HeadLabel::SpecialSink => "sink",
                        HeadLabel::None => "",
                    }
                    .to_string()
                })
                .collect()
        })
        .collect();
    let mut settings = vec![
        ("model".to_string(), args.model.clone()),
        ("statistics computed on".to_string(), unit.to_string()),
    ];
    if !std::path::Path::new(&args.model).is_dir() {
        settings.insert(1, ("revision".to_string(), args.revision.clone()));
    }
    if args.truncate {
        settings.push(("truncate".to_string(), "yes".to_string()));
    }
    HtmlOptions {
        neuron: args.neuron,
        precision,
        layer,
        head: match head {
            HeadSel::Index(h) => h,
            HeadSel::Mean => 0,
        },
        hide_special: args.no_special,
        words: args.words,
        settings,
        analysis: HtmlAnalysis {
            stats: statistics,
            head_labels: Some(head_labels),
            matrices: vec![ExtraMatrix {
                id: "rollout".to_string(),
                label: "Attention rollout".to_string(),
                description: "Abnar & Zuidema 2020: heads averaged, identity added, rows \
                    renormalised, multiplied through the layers up to this one"
                    .to_string(),
                layers: rollout.to_vec(),
            }],
        },
        ..HtmlOptions::default()
    }
}

/// The layer (default: the last) and head the single-head views show, checked against the model.
fn selection(args: &Args, info: &crate::ModelInfo) -> Result<(usize, HeadSel), Error> {
    let layer = args.layer.unwrap_or(info.layers - 1);
    if layer >= info.layers {
        return Err(Error::Usage(format!(
            "--layer {layer} is out of range: {} has layers 0–{} (numbered from 0)",
            info.name(),
            info.layers - 1
        )));
    }
    if let HeadSel::Index(h) = args.head {
        if h >= info.heads {
            return Err(Error::Usage(format!(
                "--head {h} is out of range: {} has heads 0–{} per layer (numbered from 0), or use --head mean",
                info.name(),
                info.heads - 1
            )));
        }
    }
    Ok((layer, args.head))
}

/// The head of `layer` with the lowest mean entropy (ties: the lowest number).
fn most_focused_head(stats: &[Vec<HeadStats>], layer: usize) -> Option<usize> {
    stats
        .get(layer)?
        .iter()
        .enumerate()
        .min_by(|(_, a), (_, b)| a.entropy.total_cmp(&b.entropy))
        .map(|(h, _)| h)
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

/// Whether one of the output files is standard output (`-`, `/dev/stdout`, …).
fn stdout_taken(args: &Args) -> bool {
    [&args.json, &args.png, &args.svg, &args.html]
        .into_iter()
        .flatten()
        .any(|p| matches!(Destination::of(p), Ok(Destination::Stdout)))
}

/// The terminal view is printed unless --quiet, or standard output carries another output.
fn show_terminal_view(args: &Args) -> bool {
    !args.quiet && !stdout_taken(args)
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

fn terminal_options(args: &Args) -> TerminalOptions {
    let is_tty = io::stdout().is_terminal();
    let color = color_enabled(args.color, is_tty);
    let width = terminal_size::terminal_size()
        .map(|(w, _)| w.0 as usize)
        .filter(|_| is_tty)
        .or_else(|| std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()))
        .unwrap_or(80);
    TerminalOptions {
        color,
        width,
        top: args.top,
        ..TerminalOptions::default()
    }
}
