//! `--stats`: per-head statistics in the terminal.
//!
//! Two layouts, both within 80 columns for 12 heads and split into blocks of heads beyond
//! `max_width`:
//! - the overview (no statistic chosen): a layers × heads grid of label symbols, a one-line
//!   legend, then one line per head with every statistic;
//! - a layers × heads heatmap of one chosen statistic, each cell showing the value and the head's
//!   label symbol.
//!
//! With colour, numeric cells get a viridis background (shares on 0..1, entropy and distance on
//! 0..their maximum); without it (not a terminal, `NO_COLOR`, `--color never`) the output is plain
//! ASCII text.

use std::io::{self, IsTerminal, Write};

use crate::analysis::stats::{BROAD_THRESHOLD, POSITIONAL_THRESHOLD, SINK_THRESHOLD};
use crate::analysis::{HeadLabel, HeadStats, Stat};
use crate::colormap::{viridis, Rgb};
use crate::term::{Paint, Term};
use crate::ColorChoice;

/// How to print the statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct StatsTableOptions {
    /// Show this statistic as a layers × heads heatmap; `None` prints the overview.
    pub stat: Option<Stat>,
    /// Use 24-bit colour escapes.
    pub color: bool,
    /// Widest line to print; wider grids are split into blocks of heads.
    pub max_width: usize,
    /// The model's own names of the start and end tokens, for the legend (see
    /// [`token_names`]); `None` keeps the legend generic.
    pub token_names: Option<String>,
    /// The model's number of each row of statistics when only some layers were captured
    /// (`--layers`); `None`: rows are layers 0, 1, ….
    pub layer_numbers: Option<Vec<usize>>,
    /// The model's induction scores `[layer][head]` (the head detector's probe, one row per row
    /// of statistics), shown as a last column of the overview; `None`: not measured.
    pub induction: Option<Vec<Vec<f64>>>,
    /// Layers the statistics leave out, in words (a hybrid model's gated delta layers: `layers
    /// 0, 2 (gated delta: token mixing, not probabilities) left out`), said in one line under
    /// the table; `None`: every layer is in it.
    pub left_out: Option<String>,
}

impl StatsTableOptions {
    /// The model's number of statistics row `l`.
    fn layer(&self, l: usize) -> usize {
        self.layer_numbers
            .as_ref()
            .and_then(|n| n.get(l).copied())
            .unwrap_or(l)
    }
}

impl Default for StatsTableOptions {
    fn default() -> Self {
        StatsTableOptions {
            stat: None,
            color: false,
            max_width: 100,
            token_names: None,
            layer_numbers: None,
            induction: None,
            left_out: None,
        }
    }
}

/// How the legend names the start and end tokens of `att`'s input: `[CLS], [SEP]`, `<s>, </s>`,
/// `none, </s>` (T5 adds no start token), `none` (GPT-2 adds neither).
pub fn token_names(att: &crate::attention::Attention) -> String {
    use crate::attention::Role;
    match (att.role_name(Role::Start), att.role_name(Role::End)) {
        (None, None) => "none".to_string(),
        (start, end) => format!(
            "{}, {}",
            start.as_deref().unwrap_or("none"),
            end.as_deref().unwrap_or("none")
        ),
    }
}

impl StatsTableOptions {
    /// Options for standard output: colour per `choice` (`auto`: only when stdout is a terminal
    /// and `NO_COLOR` is unset or empty).
    pub fn for_stdout(stat: Option<Stat>, choice: ColorChoice) -> Self {
        let terminal = io::stdout().is_terminal();
        // a 12-head heatmap is 92 columns: on a narrower terminal, split it rather than wrap
        let width = terminal
            .then(terminal_size::terminal_size)
            .flatten()
            .map(|(w, _)| (w.0 as usize).clamp(40, 100));
        StatsTableOptions {
            stat,
            color: color_enabled(choice, terminal),
            max_width: width.unwrap_or(100),
            token_names: None,
            layer_numbers: None,
            induction: None,
            left_out: None,
        }
    }
}

/// Whether to colour output going to a stream that is (or is not) a terminal (see
/// [`ColorChoice::enabled`]).
pub fn color_enabled(choice: ColorChoice, is_terminal: bool) -> bool {
    choice.enabled(is_terminal)
}

/// Print `stats` (`[layer][head]`) as described in the module docs.
pub fn write_stats_table(
    stats: &[Vec<HeadStats>],
    opts: &StatsTableOptions,
    w: &mut dyn Write,
) -> io::Result<()> {
    let t = &mut Term::new(w, opts.color);
    let heads = stats.first().map_or(0, Vec::len);
    if stats.is_empty() || heads == 0 {
        return t.say("No heads to show.");
    }
    match opts.stat {
        Some(stat) => write_heatmap(stats, stat, opts, t),
        None => write_overview(stats, opts, t),
    }?;
    // Statistics that assume probabilities say which layers they could not read.
    match &opts.left_out {
        Some(line) => t.say(&format!("Statistics: {line}")),
        None => Ok(()),
    }
}

const ROW_LABEL: usize = 8; // "layer 11"

fn write_overview(
    stats: &[Vec<HeadStats>],
    opts: &StatsTableOptions,
    t: &mut Term,
) -> io::Result<()> {
    let heads = stats[0].len();
    t.say("Head labels; layers x heads, numbered from 0")?;
    let per_block = heads_per_block(opts.max_width, 3, heads);
    for block in (0..heads).step_by(per_block) {
        let hs = block..(block + per_block).min(heads);
        t.text(&format!("{:ROW_LABEL$}", ""));
        for h in hs.clone() {
            t.text(&format!("{h:>3}"));
        }
        t.end_line()?;
        for (l, layer) in stats.iter().enumerate() {
            t.text(&format!(
                "{:<ROW_LABEL$}",
                format!("layer {}", opts.layer(l))
            ));
            for s in &layer[hs.clone()] {
                t.text(&format!("  {}", s.label.symbol()));
            }
            t.end_line()?;
        }
    }
    write_legend(t, opts, causal(stats))?;
    t.end_line()?;

    // One line per head with every statistic the attention defines (a cross-attention has no
    // position statistics, a causal model no next-token share and only it a first-token share).
    let columns: Vec<(Stat, &str)> = [
        (Stat::Entropy, "H nats"),
        (Stat::EntropyNorm, "H/ln n"),
        (Stat::Distance, "dist"),
        (Stat::ToStart, "start"),
        (Stat::ToEnd, "end"),
        (Stat::ToFirst, "first"),
        (Stat::ToPunct, "punct"),
        (Stat::ToSelf, "self"),
        (Stat::ToPrev, "prev"),
        (Stat::ToNext, "next"),
    ]
    .into_iter()
    .filter(|(stat, _)| defined(stats, *stat))
    .collect();
    write_columns(t, stats, opts, &columns, None)?;
    t.say("Means over query rows; shares are fractions of attention. Details: docs/stats.md")?;

    // The head detectors in a table of their own, so that the overview keeps to 80 columns.
    let detectors: Vec<(Stat, &str)> = [
        (Stat::PrevTokenScore, "ptok"),
        (Stat::DuplicateTokenScore, "dup"),
    ]
    .into_iter()
    .filter(|(stat, _)| defined(stats, *stat))
    .collect();
    let induction = opts.induction.as_ref().filter(|g| g.len() == stats.len());
    if detectors.is_empty() && induction.is_none() {
        return Ok(());
    }
    t.end_line()?;
    t.say("Head detectors (TransformerLens's; share of all attention on the pattern)")?;
    write_columns(t, stats, opts, &detectors, induction)?;
    if induction.is_some() {
        t.say("ptok the previous token, dup other copies of the same token,")?;
        t.say(
            "induct the token after an earlier copy, measured on the model's repeated \
             random-token probe, not this input.",
        )?;
    } else {
        t.say("ptok the previous token, dup other copies of the same token.")?;
    }
    t.say("Details: docs/stats.md")
}

/// One line per head: `columns` of `stats`, then (when given) the induction score `[layer][head]`.
fn write_columns(
    t: &mut Term,
    stats: &[Vec<HeadStats>],
    opts: &StatsTableOptions,
    columns: &[(Stat, &str)],
    induction: Option<&Vec<Vec<f64>>>,
) -> io::Result<()> {
    let scales: Vec<f64> = columns.iter().map(|(s, _)| scale_max(stats, *s)).collect();
    t.text("layer head label ");
    for (_, title) in columns {
        t.text(&format!(" {title:>6}"));
    }
    if induction.is_some() {
        t.text(&format!(" {:>6}", "induct"));
    }
    t.end_line()?;
    for (l, layer) in stats.iter().enumerate() {
        for (h, s) in layer.iter().enumerate() {
            t.text(&format!(
                "{:>5} {h:>4} {:<5} ",
                opts.layer(l),
                short_label(s.label)
            ));
            for ((stat, _), max) in columns.iter().zip(&scales) {
                let v = stat.value(s);
                let text = format!("{:>6}", format_value(*stat, v));
                t.text(" ");
                write_cell(t, &text, v / max);
            }
            if let Some(grid) = induction {
                let v = grid[l].get(h).copied().unwrap_or(f64::NAN);
                let text = format!("{:>6}", format_value(Stat::PrevTokenScore, v));
                t.text(" ");
                write_cell(t, &text, v);
            }
            t.end_line()?;
        }
    }
    Ok(())
}

fn write_heatmap(
    stats: &[Vec<HeadStats>],
    stat: Stat,
    opts: &StatsTableOptions,
    t: &mut Term,
) -> io::Result<()> {
    let heads = stats[0].len();
    let max = scale_max(stats, stat);
    let texts: Vec<Vec<String>> = stats
        .iter()
        .map(|l| {
            l.iter()
                .map(|s| format_value(stat, stat.value(s)))
                .collect()
        })
        .collect();
    let value_width = texts.iter().flatten().map(String::len).max().unwrap_or(4);
    let cell = value_width + 3; // separator, value, space, label symbol
    t.say(&format!(
        "{}; layers x heads, numbered from 0",
        capitalise(stat.title())
    ))?;
    let per_block = heads_per_block(opts.max_width, cell, heads);
    for block in (0..heads).step_by(per_block) {
        let hs = block..(block + per_block).min(heads);
        let header: String = hs
            .clone()
            .map(|h| format!(" {h:>value_width$}  "))
            .collect();
        t.say(&format!("{:ROW_LABEL$}{}", "", header.trim_end()))?;
        for (l, layer) in stats.iter().enumerate() {
            t.text(&format!(
                "{:<ROW_LABEL$}",
                format!("layer {}", opts.layer(l))
            ));
            for h in hs.clone() {
                let s = &layer[h];
                // a space between value and label symbol: "2.16 B", not "2.16B"
                let text = format!("{:>value_width$} {}", texts[l][h], s.label.symbol());
                t.text(" ");
                write_cell(t, &text, stat.value(s) / max);
            }
            t.end_line()?;
        }
    }
    let all = stats
        .iter()
        .enumerate()
        .flat_map(|(l, layer)| layer.iter().enumerate().map(move |(h, s)| (l, h, s)));
    let by_value = |a: &(usize, usize, &HeadStats), b: &(usize, usize, &HeadStats)| {
        stat.value(a.2).total_cmp(&stat.value(b.2))
    };
    if let (Some(lo), Some(hi)) = (all.clone().min_by(by_value), all.max_by(by_value)) {
        t.say(&format!(
            "min {} (layer {} head {}), max {} (layer {} head {})",
            format_value(stat, stat.value(lo.2)),
            opts.layer(lo.0),
            lo.1,
            format_value(stat, stat.value(hi.2)),
            opts.layer(hi.0),
            hi.1
        ))?;
    }
    write_legend(t, opts, causal(stats))
}

/// Whether `stat` has a value for some head (cross-attention has no position statistics; only
/// causal attention has a first-token share, and it has no next-token share).
fn defined(stats: &[Vec<HeadStats>], stat: Stat) -> bool {
    stats.iter().flatten().any(|s| !stat.value(s).is_nan())
}

/// Whether the statistics are those of causal attention: they have a first-token share.
fn causal(stats: &[Vec<HeadStats>]) -> bool {
    defined(stats, Stat::ToFirst)
}

fn write_legend(t: &mut Term, opts: &StatsTableOptions, causal: bool) -> io::Result<()> {
    let next = if causal {
        String::new()
    } else {
        format!("  > next>{POSITIONAL_THRESHOLD}")
    };
    let first = if causal {
        format!("  F sink>{SINK_THRESHOLD}")
    } else {
        String::new()
    };
    t.say(&format!(
        "Labels: < prev>{POSITIONAL_THRESHOLD}{next}  B H/ln n>={BROAD_THRESHOLD}{first}  \
         S ends>{SINK_THRESHOLD}  . none"
    ))?;
    let names = opts
        .token_names
        .as_deref()
        .map_or(String::new(), |n| format!(" ({n})"));
    t.say(&format!(
        "start, end: shares to the sequence start and end tokens{names}"
    ))?;
    if causal {
        for line in [
            "first: share to the first token, the attention sink where causal heads park",
            "attention they do not need; rows that see a single key are left out",
            "sink (F): a head with over half on the first token, the one the views tag sink;",
            "ends (S): over half on the sequence start and end tokens",
        ] {
            t.say(line)?;
        }
    }
    Ok(())
}

fn short_label(label: HeadLabel) -> &'static str {
    match label {
        HeadLabel::PositionalPrevious => "prev",
        HeadLabel::PositionalNext => "next",
        HeadLabel::Broad => "broad",
        HeadLabel::FirstTokenSink => "sink",
        HeadLabel::SpecialSink => "ends",
        HeadLabel::None => "-",
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

fn format_value(stat: Stat, v: f64) -> String {
    if v.is_nan() {
        return "n/a".to_string();
    }
    match stat {
        Stat::Distance if v >= 100.0 => format!("{v:.0}"),
        Stat::Distance => format!("{v:.1}"),
        _ => format!("{v:.2}"),
    }
}

/// The value that maps to the top of the colour scale.
fn scale_max(stats: &[Vec<HeadStats>], stat: Stat) -> f64 {
    if stat.is_unit_range() {
        return 1.0;
    }
    let max = stats
        .iter()
        .flatten()
        .map(|s| stat.value(s))
        .fold(0.0, f64::max);
    if max > 0.0 {
        max
    } else {
        1.0
    }
}

fn heads_per_block(max_width: usize, cell: usize, heads: usize) -> usize {
    (max_width.saturating_sub(ROW_LABEL) / cell).clamp(1, heads)
}

/// Write `text`, on a viridis background for `t` in 0..=1 when colouring.
fn write_cell(t: &mut Term, text: &str, v: f64) {
    let bg = viridis(v as f32);
    let Rgb(r, g, b) = bg;
    // dark text on the light (yellow-green) end, light text on the dark end
    let luminance = 0.2126 * r as f64 + 0.7152 * g as f64 + 0.0722 * b as f64;
    let fg = if luminance > 120.0 { 0 } else { 255 };
    t.painted(
        Paint::On {
            fg: Rgb(fg, fg, fg),
            bg,
        },
        text,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::head_stats;
    use crate::attention::fixtures::synthetic;

    fn render(stats: &[Vec<HeadStats>], opts: StatsTableOptions) -> String {
        let mut out = Vec::new();
        write_stats_table(stats, &opts, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn sample(layers: usize, heads: usize) -> Vec<Vec<HeadStats>> {
        let tokens = ["[CLS]", "the", "cat", ",", "sat", ".", "[SEP]"];
        head_stats(&synthetic(&tokens, layers, heads))
    }

    #[test]
    fn overview_is_plain_and_fits_80_columns_for_12_heads() {
        let stats = sample(6, 12);
        let text = render(&stats, StatsTableOptions::default());
        assert!(!text.contains('\x1b'));
        assert!(text.is_ascii());
        for line in text.lines() {
            assert!(line.len() <= 80, "{} columns: {line}", line.len());
        }
        // a label grid row per layer, a table line per head
        let grid_rows = text.lines().filter(|l| {
            l.strip_prefix("layer ")
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        });
        assert_eq!(grid_rows.count(), 6);
        let head_lines = text
            .lines()
            .filter(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() == 12
                    && f[..2].iter().all(|x| x.parse::<usize>().is_ok())
                    && ["prev", "next", "broad", "sink", "ends", "-"].contains(&f[2])
            })
            .count();
        assert_eq!(head_lines, 72);
        assert!(text.contains("Labels: < prev>0.5  > next>0.5  B H/ln n>=0.85"));
    }

    #[test]
    fn overview_line_shows_the_head_values() {
        let stats = sample(2, 3);
        let text = render(&stats, StatsTableOptions::default());
        let s = &stats[1][2];
        let line = text
            .lines()
            .find(|l| l.starts_with("    1    2 "))
            .expect("line for layer 1 head 2");
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields[3], format!("{:.2}", s.entropy));
        assert_eq!(fields[4], format!("{:.2}", s.entropy_norm));
        assert_eq!(fields[11], format!("{:.2}", s.to_next));
    }

    #[test]
    fn heatmap_shows_value_and_label_symbol() {
        let stats = sample(6, 12);
        let opts = StatsTableOptions {
            stat: Some(Stat::ToStart),
            ..Default::default()
        };
        let text = render(&stats, opts);
        let row = text.lines().find(|l| l.starts_with("layer 3")).unwrap();
        let cells: Vec<&str> = row["layer 3".len()..].split_whitespace().collect();
        // value and symbol are apart: 2 fields per head
        assert_eq!(cells.len(), 2 * 12);
        let s = &stats[3][7];
        assert_eq!(cells[14], format!("{:.2}", s.to_start));
        assert_eq!(cells[15], s.label.symbol().to_string());
        // the header's head numbers end where the values end
        let header = text.lines().nth(1).unwrap();
        let ends = |line: &str| -> Vec<usize> {
            let b = line.as_bytes();
            (1..b.len())
                .filter(|&i| b[i - 1] != b' ' && b[i] == b' ')
                .chain([b.len()])
                .collect()
        };
        let value_ends: Vec<usize> = ends(row).into_iter().skip(2).step_by(2).collect();
        assert_eq!(ends(header)[7], value_ends[7], "{header}\n{row}");
        for line in text.lines() {
            assert!(line.len() <= 100, "{} columns: {line}", line.len());
        }
        assert!(text.contains("min ") && text.contains("max "));
    }

    #[test]
    fn wide_grids_split_into_blocks() {
        let stats = sample(2, 24);
        let opts = StatsTableOptions {
            stat: Some(Stat::Distance),
            max_width: 80,
            ..Default::default()
        };
        let text = render(&stats, opts);
        for line in text.lines() {
            assert!(line.len() <= 80, "{} columns: {line}", line.len());
        }
        assert_eq!(text.lines().filter(|l| l.starts_with("layer 1")).count(), 2);
    }

    #[test]
    fn colour_uses_truecolor_backgrounds() {
        let stats = sample(2, 3);
        let opts = StatsTableOptions {
            color: true,
            ..Default::default()
        };
        let text = render(&stats, opts);
        assert!(text.contains("\x1b[48;2;"));
        assert!(text.contains("\x1b[0m"));
    }

    #[test]
    fn colour_choice() {
        assert!(color_enabled(ColorChoice::Always, false));
        assert!(!color_enabled(ColorChoice::Never, true));
        assert!(!color_enabled(ColorChoice::Auto, false));
    }

    #[test]
    fn causal_overview_has_a_first_column_no_next_column_and_names_the_sink() {
        let tokens = ["ĠThe", "Ġcat", "Ġsat", "Ġon", "Ġthe", "Ġmat", "."];
        let att = synthetic(&tokens, 2, 12).with_mask(crate::attention::MaskKind::Causal);
        let stats = head_stats(&att);
        let text = render(&stats, StatsTableOptions::default());
        for line in text.lines() {
            assert!(line.len() <= 80, "{} columns: {line}", line.len());
        }
        let header = text
            .lines()
            .find(|l| l.starts_with("layer head label"))
            .unwrap();
        let titles: Vec<&str> = header.split_whitespace().skip(3).collect();
        assert_eq!(
            titles,
            ["H", "nats", "H/ln", "n", "dist", "start", "end", "first", "punct", "self", "prev"]
        );
        assert!(text.contains("F sink>0.5"), "{text}");
        assert!(!text.contains("> next>"), "{text}");
        assert!(text.contains("the attention sink"), "{text}");
        let s = &stats[1][2];
        let line = text.lines().find(|l| l.starts_with("    1    2 ")).unwrap();
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields[8], format!("{:.2}", s.to_first));
        // A bidirectional value keeps its next column and has no first column.
        let text = render(&sample(1, 2), StatsTableOptions::default());
        assert!(
            text.contains("   next") && !text.contains(" first "),
            "{text}"
        );
    }
}
