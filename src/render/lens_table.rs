//! The logit lens in the terminal: stages (rows: the embeddings, then each layer) × positions
//! (columns, headed by the input token), each cell the most probable token and its probability
//! in per cent. Columns that do not fit the width wrap into further blocks.

use std::io::{self, Write};

use crate::render::term::Term;

use unicode_width::UnicodeWidthStr;

use crate::analysis::lens::{readable, LogitLens};

/// The most columns of a token shown in a cell.
const TOKEN_COLS: usize = 10;

/// Cut `s` to `cols` display columns, with `…` when cut.
fn fit(s: &str, cols: usize) -> String {
    if s.width() <= cols {
        return s.to_string();
    }
    let mut out = String::new();
    for c in s.chars() {
        if out.width() + unicode_width::UnicodeWidthChar::width(c).unwrap_or(0) + 1 > cols {
            break;
        }
        out.push(c);
    }
    out.push('…');
    out
}

/// Pad `s` on the right to `cols` display columns.
fn pad(s: &str, cols: usize) -> String {
    format!("{s}{}", " ".repeat(cols.saturating_sub(s.width())))
}

/// Write the lens table of `lens` for a terminal `width` columns wide.
pub fn write_lens_table(lens: &LogitLens, width: usize, w: &mut dyn Write) -> io::Result<()> {
    let t = &mut Term::new(w, false);
    let (stages, positions) = (lens.top.len(), lens.positions.len());
    if stages == 0 || positions == 0 {
        return t.say("No positions to show.");
    }
    let cell = |s: usize, p: usize| {
        let t = lens.top1(s, p);
        let pct = (t.prob * 100.0).round() as u32;
        format!("{} {pct:>2}", fit(&readable(&t.text), TOKEN_COLS))
    };
    let heads: Vec<String> = lens
        .positions
        .iter()
        .map(|t| fit(&readable(t), TOKEN_COLS + 3))
        .collect();
    let col_w: Vec<usize> = (0..positions)
        .map(|p| {
            (0..stages)
                .map(|s| cell(s, p).width())
                .chain([heads[p].width()])
                .max()
                .unwrap_or(1)
        })
        .collect();
    let label_w = lens.stages.iter().map(|s| s.width()).max().unwrap_or(0);
    t.say(
        "Logit lens: the most probable token at each stage and position, and its probability (%)",
    )?;
    t.say("(the residual stream through the model's own head; a decoder's position predicts the next token, a masked LM's its own)")?;
    let mut start = 0;
    while start < positions {
        let mut end = start;
        let mut used = label_w;
        while end < positions && (end == start || used + 2 + col_w[end] <= width) {
            used += 2 + col_w[end];
            end += 1;
        }
        t.end_line()?;
        let mut line = pad("", label_w);
        for p in start..end {
            line.push_str("  ");
            line.push_str(&pad(&heads[p], col_w[p]));
        }
        t.say(line.trim_end())?;
        for s in 0..stages {
            let mut line = pad(&lens.stages[s], label_w);
            for (p, width) in col_w.iter().enumerate().take(end).skip(start) {
                line.push_str("  ");
                line.push_str(&pad(&cell(s, p), *width));
            }
            t.say(line.trim_end())?;
        }
        start = end;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LensForward;

    #[test]
    fn a_cell_is_the_top_token_and_its_percentage_and_wide_inputs_wrap() {
        let forward = LensForward {
            stages: 2,
            positions: 3,
            k: 1,
            ids: vec![0, 1, 2, 1, 2, 0],
            probs: vec![0.5, 0.25, 0.125, 0.9, 0.994, 0.01],
        };
        let names = [" Paris", "\n", " of"];
        let lens = LogitLens::new(
            &forward,
            vec!["The".into(), "capital".into(), "of".into()],
            |id| names[id as usize].to_string(),
        );
        let mut out = Vec::new();
        write_lens_table(&lens, 200, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[3].starts_with("            The"), "{text}");
        assert!(lines[4].starts_with("embeddings  Paris 50"), "{text}");
        assert!(
            lines[5].contains("↵ 90") && lines[5].contains("of 99"),
            "{text}"
        );
        let mut narrow = Vec::new();
        write_lens_table(&lens, 24, &mut narrow).unwrap();
        // one column per block: three header lines
        assert_eq!(
            String::from_utf8(narrow).unwrap().matches("\n\n").count(),
            3
        );
    }
}
