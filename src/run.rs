//! One invocation of the CLI: load the model once, encode once, then write every requested output.

use std::io::{self, IsTerminal, Read, Write};
use std::path::Path;

use crate::analysis::{self, AnalysisError, StatsSection, ViewOptions};
use crate::attention::HeadSel;
use crate::cli::{Args, ColorChoice};
use crate::model::{EncodeOptions, Model};
use crate::output::{write_output, OutputError};
use crate::render::json::{write_json, JsonOptions};
use crate::render::stats_table::{write_stats_table, StatsTableOptions};
use crate::render::terminal::{write_view, TerminalOptions};

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
    /// Arguments that don't fit the model or each other.
    #[error("{0}")]
    Usage(String),
    /// Reading the text from standard input.
    #[error("cannot read the text from standard input: {0}")]
    Stdin(io::Error),
    /// Writing the terminal view.
    #[error("cannot write to standard output: {0}")]
    Stdout(io::Error),
    /// Corpus mode (`--input`).
    #[error(transparent)]
    Corpus(#[from] crate::corpus::CorpusError),
}

/// Run the command line described by `args`.
pub fn run(args: &Args) -> Result<(), Error> {
    // Corpus mode lives in its own module.
    if args.input.is_some() {
        return Ok(crate::corpus::run(args)?);
    }
    let text = read_text(args.text.as_deref().unwrap_or_default())?;
    check_outputs(args)?;
    let model = Model::load(&args.model, &args.revision)?;
    let info = model.info().clone();
    let layer = args.layer.unwrap_or(info.layers - 1);
    if layer >= info.layers {
        return Err(Error::Usage(format!(
            "--layer {layer} is out of range: {} has layers 0–{} (numbered from 0)",
            info.id,
            info.layers - 1
        )));
    }
    if let HeadSel::Index(h) = args.head {
        if h >= info.heads {
            return Err(Error::Usage(format!(
                "--head {h} is out of range: {} has heads 0–{} per layer (numbered from 0), or use --head mean",
                info.id,
                info.heads - 1
            )));
        }
    }
    let opts = EncodeOptions {
        truncate: args.truncate,
        capture_query_key: args.neuron,
    };
    let encoding = model.encode(&text, args.pair.as_deref(), &opts)?;
    if let Some(from) = encoding.truncated_from {
        eprintln!(
            "note: the input was {from} tokens; truncated to the model's maximum of {} (--truncate)",
            encoding.attention.len()
        );
    }
    let view_opts = ViewOptions {
        words: args.words,
        no_special: args.no_special,
    };
    let att = analysis::view(&encoding.attention, view_opts)?;
    let want_stats = args.json.is_some() || args.stats || args.stat.is_some();
    let stats = want_stats.then(|| analysis::head_stats(&att));

    if let Some(path) = &args.json {
        let json_opts = JsonOptions {
            full_precision: args.full_precision,
        };
        let section = StatsSection::new(stats.as_deref().unwrap_or_default());
        let extra = [(
            "stats",
            serde_json::to_value(section).expect("statistics serialise"),
        )];
        write_output(path, |w| write_json(&att, &extra, json_opts, w))?;
    }

    if show_terminal_view(args) {
        let stdout = io::stdout();
        let mut out = stdout.lock();
        let opts = terminal_options(args);
        match write_view(&att, layer, args.head, &opts, &mut out).and_then(|_| out.flush()) {
            Err(e) if e.kind() != io::ErrorKind::BrokenPipe => return Err(Error::Stdout(e)),
            _ => {}
        }
    }
    if let Some(stats) = stats
        .as_deref()
        .filter(|_| args.stats || args.stat.is_some())
    {
        let stdout = io::stdout();
        let mut out = stdout.lock();
        if show_terminal_view(args) {
            let _ = writeln!(out);
        }
        let opts = StatsTableOptions::for_stdout(args.stat, args.color);
        match write_stats_table(stats, &opts, &mut out).and_then(|_| out.flush()) {
            Err(e) if e.kind() != io::ErrorKind::BrokenPipe => return Err(Error::Stdout(e)),
            _ => {}
        }
    }
    Ok(())
}

/// `text`, or standard input when it is `-`.
fn read_text(text: &str) -> Result<String, Error> {
    if text != "-" {
        return Ok(text.to_string());
    }
    let mut s = String::new();
    io::stdin().read_to_string(&mut s).map_err(Error::Stdin)?;
    Ok(s.trim_end_matches(['\n', '\r']).to_string())
}

/// Fail before loading the model when outputs clash: only one of them can be standard output.
fn check_outputs(args: &Args) -> Result<(), Error> {
    let to_stdout = [&args.json]
        .into_iter()
        .flatten()
        .filter(|p| p.as_path() == Path::new("-"))
        .count();
    if to_stdout > 1 {
        return Err(Error::Usage(
            "only one output can go to standard output (`-`)".into(),
        ));
    }
    Ok(())
}

/// The terminal view is printed unless --quiet, or standard output carries another output.
fn show_terminal_view(args: &Args) -> bool {
    let stdout_taken = [&args.json]
        .into_iter()
        .flatten()
        .any(|p| p.as_path() == Path::new("-"));
    !args.quiet && !stdout_taken
}

fn terminal_options(args: &Args) -> TerminalOptions {
    let is_tty = io::stdout().is_terminal();
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let color = match args.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => is_tty && !no_color,
    };
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
