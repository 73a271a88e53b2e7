//! The terminal view of a [`Comparison`]: what was compared, a small layers × heads heatmap of
//! the Jensen–Shannon distances, the farthest heads ranked, and one head's largest differences.

use std::io::{self, Write};

use crate::colormap::viridis;
use crate::term::{escape_controls, Line, Paint, Term};
use attnviz_analysis::compare::Comparison;

/// How the terminal view looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompareTerminalOptions {
    /// 24-bit colour (else shades of block characters).
    pub color: bool,
    /// How many heads the ranking lists, and how many cells the head's table lists.
    pub top: usize,
    /// Label units by the tokenizer's own pieces.
    pub raw_tokens: bool,
    /// The head whose largest differences are listed; `None`: the farthest head.
    pub head: Option<(usize, usize)>,
}

impl Default for CompareTerminalOptions {
    fn default() -> Self {
        CompareTerminalOptions {
            color: false,
            top: 10,
            raw_tokens: false,
            head: None,
        }
    }
}

const SHADES: [&str; 5] = ["  ", "░░", "▒▒", "▓▓", "██"];

/// Add the cell of distance `d` on a scale whose top is `max` to `line`.
fn cell(d: Option<f64>, max: f64, color: bool, line: &mut Line) {
    let Some(d) = d else {
        line.push("··");
        return;
    };
    let t = if max > 0.0 { (d / max) as f32 } else { 0.0 };
    if color {
        line.paint(Paint::Back(viridis(t)), "  ");
    } else {
        line.push(SHADES[((t * 4.0).round() as usize).min(4)]);
    }
}

/// Write the view.
pub fn write_compare_view(
    c: &Comparison,
    opts: &CompareTerminalOptions,
    w: &mut dyn Write,
) -> io::Result<()> {
    let t = &mut Term::new(w, opts.color);
    for line in super::side_lines(c) {
        t.say(&line)?;
    }
    for line in super::note_lines(c, opts.raw_tokens, false) {
        t.say(&line)?;
    }
    t.blank()?;
    let max = c.max_distance();
    t.say(&format!(
        "Jensen–Shannon distance per head (0: the same, 1: disjoint; {} is 0 to {max:.3}):",
        if opts.color {
            "dark to bright"
        } else {
            "blank to █"
        }
    ))?;
    let names: Vec<String> = (0..c.layers)
        .map(|l| format!("layer {}", c.layer_name(l)))
        .collect();
    let lw = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    t.text(&format!("{:>lw$}      ", "head"));
    for h in (0..c.heads).step_by(2) {
        t.text(&format!("{h:<4}"));
    }
    t.end_line()?;
    for (l, name) in names.iter().enumerate() {
        let mut line = Line::from(format!("{name:>lw$}      ").as_str());
        for h in 0..c.heads {
            cell(c.distance(l, h), max, opts.color, &mut line);
        }
        if let Some(m) = c.layer_distance(l) {
            line.push(&format!("  mean {m:.3}"));
        }
        t.line(&line)?;
    }
    t.blank()?;
    let ranked = c.ranked();
    t.say("Farthest apart:")?;
    t.say("  rank  layer  head  JS distance  rows")?;
    for (i, h) in ranked.iter().take(opts.top.max(1)).enumerate() {
        t.say(&format!(
            "  {:>4}  {:>5}  {:>4}  {:>11.4}  {:>4}",
            i + 1,
            c.layer_name(h.layer),
            h.head,
            h.distance,
            h.rows
        ))?;
    }
    if ranked.is_empty() {
        t.say("  (no query row is visible in both)")?;
    }
    let Some((layer, head)) = opts.head.or(ranked.first().map(|h| (h.layer, h.head))) else {
        return Ok(());
    };
    t.blank()?;
    let d = c.diff(layer, head);
    let nk = c.n_keys();
    let mut cells: Vec<usize> = (0..d.len()).filter(|&i| d[i] != 0.0).collect();
    cells.sort_by(|&x, &y| d[y].abs().total_cmp(&d[x].abs()).then(x.cmp(&y)));
    t.say(&format!(
        "Layer {} head {}{}: largest differences (A − B)",
        c.layer_name(layer),
        head,
        c.distance(layer, head)
            .map(|j| format!(", JS distance {j:.4}"))
            .unwrap_or_default()
    ))?;
    // The values A − B is taken of: with different masks, each row's shares of the keys both
    // can attend (so the columns add up).
    let (a, b) = (c.a_compared(layer, head), c.b_compared(layer, head));
    let (ql, kl) = (
        c.query_labels(opts.raw_tokens),
        c.key_labels(opts.raw_tokens),
    );
    let rows: Vec<(String, usize)> = cells
        .iter()
        .take(opts.top.max(1))
        .map(|&i| {
            let (q, k) = (i / nk, i % nk);
            // Escaped before it is measured, so the columns line up.
            let label = format!("{} → {}", ql[q], kl[k]);
            (escape_controls(&label).into_owned(), i)
        })
        .collect();
    let width = rows
        .iter()
        .map(|(s, _)| s.chars().count())
        .max()
        .unwrap_or(0)
        .max(11);
    t.say(&format!(
        "  {:width$}  {:>7}  {:>7}  {:>8}",
        "query → key", "A", "B", "A − B"
    ))?;
    for (label, i) in rows {
        t.say(&format!(
            "  {:width$}  {:>7.4}  {:>7.4}  {:>+8.4}",
            label, a[i], b[i], d[i]
        ))?;
    }
    if cells.is_empty() {
        t.say("  (A and B are the same here)")?;
    } else if c.masks_differ() {
        t.say("  (A and B: each row's shares of the keys both can attend)")?;
    }
    Ok(())
}
