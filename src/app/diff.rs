//! `attnviz diff A B`: read two captures (any files `attnviz render` reads), compare them with
//! the library ([`attnviz::compare`]) and write what the flags ask for: the terminal view,
//! `--png`/`--svg` (the figure `--figure` names), `--html`, `--json`.

use std::io::{self, IsTerminal, Write};
use std::path::Path;

use attnviz::attention::{Attention, AttentionKind};
use attnviz::compare::{compare, CompareError, CompareOptions, Comparison};
use attnviz::import;
use attnviz::render::compare::html::{write_compare_html_file, CompareHtmlOptions};
use attnviz::render::compare::image::{write_png, write_svg};
use attnviz::render::compare::json::{write_comparison_json_file, CompareJsonOptions};
use attnviz::render::compare::terminal::{write_compare_view, CompareTerminalOptions};
use attnviz::render::compare::CompareFigure;
use attnviz::render::image::ImageOptions;

use super::cli::{DiffArgs, DiffFigure};
use super::error::{note, Error};

/// Carry out `attnviz diff`.
pub fn run(args: &DiffArgs) -> Result<(), Error> {
    if args.head.is_some() && args.layer.is_none() && args.figure == Some(DiffFigure::Layer) {
        return Err(Error::Usage(
            "--figure layer draws every head of --layer: drop --head".into(),
        ));
    }
    let a = read(&args.a, args)?;
    let b = read(&args.b, args)?;
    let opts = CompareOptions {
        words: args.words,
        shared_only: args.shared,
    };
    let c = compare(&a, &b, opts).map_err(|e| Error::Usage(worded(&e)))?;
    write(&c, args)
}

/// The library's comparison error, with the flag that fixes it.
pub fn worded(e: &CompareError) -> String {
    match e {
        CompareError::Shape {
            a_layers,
            a_heads,
            b_layers,
            b_heads,
        } => format!(
            "A has {a_layers} layers × {a_heads} heads and B {b_layers} × {b_heads}; pass \
             --shared to compare the layers and heads they share (by index), or compare two \
             captures of one model"
        ),
        CompareError::LayerNumbers { a, b } => format!(
            "A holds layers {a} and B layers {b} of their models; capture the same layers, or \
             pass --shared to compare them by index"
        ),
        e => e.to_string(),
    }
}

/// The one attention of `path` to compare: its only kind, or `--kind`'s.
fn read(path: &Path, args: &DiffArgs) -> Result<Attention, Error> {
    let opts = import::ReadOptions {
        tokens: None,
        max_memory: args.max_memory,
        layers: None,
        // The compared copies of A and B (restricted, renormalised) and the word-level views.
        cost: import::Cost {
            per_weight: 8 + if args.words { 4 } else { 0 },
            per_cell: 16,
        },
        only: args.kind,
        full_path: args.full_paths,
    };
    let mut imported = import::read(path, &opts).map_err(|e| match e {
        e @ import::ImportError::TooBig { .. } => Error::Usage(format!("{e} with --max-memory")),
        e => Error::Import(e),
    })?;
    for w in &imported.warnings {
        note(&format!("warning: {}: {w}", path.display()));
    }
    let file = path.display();
    match args.kind {
        Some(kind) => {
            let at = imported.kinds.iter().position(|a| a.kind == kind);
            match at {
                Some(i) => Ok(imported.kinds.swap_remove(i)),
                None => Err(Error::Usage(format!(
                    "{file} holds no {} attention (it holds {}); choose one of those with --kind",
                    kind.as_str(),
                    imported.kinds_in_words()
                ))),
            }
        }
        None if imported.kinds.len() == 1 => Ok(imported.kinds.pop().expect("one kind")),
        None => {
            let cross = imported
                .kinds
                .iter()
                .position(|a| a.kind == AttentionKind::Cross);
            match cross {
                Some(i) => Ok(imported.kinds.swap_remove(i)),
                None => Err(Error::Usage(format!(
                    "{file} holds {} attention; choose one with --kind {}",
                    imported.kinds_in_words(),
                    imported.kind_names().join("|")
                ))),
            }
        }
    }
}

/// `--layer`/`--head` checked against the comparison, with the farthest head's filling in.
fn selection(c: &Comparison, args: &DiffArgs) -> Result<(usize, usize), Error> {
    let farthest = c.ranked().first().map_or((0, 0), |h| (h.layer, h.head));
    if let Some(l) = args.layer {
        if l >= c.layers {
            return Err(Error::Usage(format!(
                "--layer {l} is out of range: the comparison has layers 0–{} (numbered from 0)",
                c.layers.saturating_sub(1)
            )));
        }
    }
    if let Some(h) = args.head {
        if h >= c.heads {
            return Err(Error::Usage(format!(
                "--head {h} is out of range: the comparison has heads 0–{} per layer (numbered \
                 from 0)",
                c.heads.saturating_sub(1)
            )));
        }
    }
    let layer = args.layer.unwrap_or(farthest.0);
    // A layer without a head: that layer's farthest head.
    let head = args.head.unwrap_or_else(|| match args.layer {
        None => farthest.1,
        Some(l) => c
            .ranked()
            .iter()
            .find(|h| h.layer == l)
            .map_or(0, |h| h.head),
    });
    Ok((layer, head))
}

/// Write every output `args` asks for from `c`.
pub fn write(c: &Comparison, args: &DiffArgs) -> Result<(), Error> {
    let (layer, head) = selection(c, args)?;
    // By their names, or (`--full-paths`) their full paths, as every export names files.
    let named = |p: &Path| {
        if args.full_paths {
            attnviz::model::source::full_path(p)
        } else {
            attnviz::model::source::local_name(p)
        }
    };
    let sources = (Some(named(&args.a)), Some(named(&args.b)));
    let sources = (sources.0.as_deref(), sources.1.as_deref());
    let figure = match args.figure.unwrap_or(DiffFigure::Distance) {
        DiffFigure::Distance => CompareFigure::Distance,
        DiffFigure::Head => CompareFigure::Head { layer, head },
        DiffFigure::Layer => CompareFigure::Layer { layer },
    };
    let image = ImageOptions {
        colormap: args.colormap.unwrap_or_default(),
        theme: args.theme.unwrap_or_default(),
        scale_factor: args.scale_factor.unwrap_or(1.0),
        raw_tokens: args.raw_tokens,
        ..ImageOptions::default()
    };
    if let Some(path) = &args.png {
        write_png(c, figure, &image, path)?;
    }
    if let Some(path) = &args.svg {
        write_svg(c, figure, &image, path)?;
    }
    if let Some(path) = &args.html {
        let opts = CompareHtmlOptions {
            head: (args.layer.is_some() || args.head.is_some()).then_some((layer, head)),
            raw_tokens: args.raw_tokens,
        };
        write_compare_html_file(c, sources, &opts, path)?;
    }
    if let Some(path) = &args.json {
        let opts = CompareJsonOptions {
            full_precision: args.full_precision,
            no_diff: false,
        };
        write_comparison_json_file(c, sources, opts, path)?;
    }
    let to_stdout = [&args.png, &args.svg, &args.html, &args.json]
        .iter()
        .any(|p| p.as_deref() == Some(Path::new("-")));
    if !args.quiet && !to_stdout {
        let stdout = io::stdout();
        let opts = CompareTerminalOptions {
            color: args.color.unwrap_or_default().enabled(stdout.is_terminal()),
            top: args.top.unwrap_or(10),
            raw_tokens: args.raw_tokens,
            head: (args.layer.is_some() || args.head.is_some()).then_some((layer, head)),
        };
        let mut out = stdout.lock();
        write_compare_view(c, &opts, &mut out)
            .and_then(|_| out.flush())
            .map_err(Error::Stdout)?;
    }
    Ok(())
}
