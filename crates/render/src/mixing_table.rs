//! The terminal's token-mixing view of a hybrid model (Qwen3-Next's gated delta layers): for
//! each linear-attention layer that feeds the shown attention layer (those after the previous
//! attention layer), one head's exact mixing matrix, or the heads' mean, as signed numbers on
//! a diverging scale (red above 0, blue below), under the legend that says it is token mixing,
//! not attention probabilities.

use std::io::{self, Write};

use unicode_width::UnicodeWidthStr;

use crate::attention::{layer_list, HeadSel, Mixing};
use crate::colormap::Rgb;
use crate::compare::diverging;
use crate::term::{escape_controls, Paint, Term};

/// Widest token label, in terminal columns.
const LABEL_MAX: usize = 12;
/// One cell: a sign, a digit, a point and two digits, and a space.
const CELL: usize = 6;

/// The linear-attention layers of `mixing` that feed the attention layer numbered `layer`:
/// those after the previous attention layer in `attention` (the captured attention layers'
/// numbers) and before `layer`.
pub fn feeding(mixing: &Mixing, attention: &[usize], layer: usize) -> Vec<usize> {
    let before = attention.iter().copied().filter(|&l| l < layer).max();
    mixing
        .layer_numbers()
        .into_iter()
        .filter(|&l| l < layer && before.is_none_or(|b| l > b))
        .collect()
}

/// Write the token mixing of the model's layers `layers` (numbers of `mixing`'s layers) at
/// `head` (a head past the layers' heads: their mean), tokens labelled by `labels` where given
/// (one per token), as many columns as fit `width`.
pub fn write_mixing_view(
    mixing: &Mixing,
    layers: &[usize],
    head: HeadSel,
    labels: Option<&[String]>,
    color: bool,
    width: usize,
    w: &mut dyn Write,
) -> io::Result<()> {
    let t = &mut Term::new(w, color);
    let n = mixing.n();
    let labels: Vec<String> = labels
        .filter(|l| l.len() == n)
        .unwrap_or(&mixing.tokens)
        .iter()
        .map(|s| clip(&escape_controls(s), LABEL_MAX))
        .collect();
    let label_w = labels.iter().map(|l| l.width()).max().unwrap_or(0);
    let index_w = n.saturating_sub(1).to_string().len();
    let room = width.saturating_sub(index_w + label_w + 3) / CELL;
    let shown = n.min(room.max(1));
    let which = match head {
        HeadSel::Index(h) if h < mixing.heads => format!("head {h} of {}", mixing.heads),
        _ => format!("mean of {} heads", mixing.heads),
    };
    for layer in mixing.layers.iter().filter(|l| layers.contains(&l.layer)) {
        let m = mixing.matrix(layer, head);
        let scale = m.iter().fold(0f32, |a, &v| a.max(v.abs())).max(1e-6);
        t.painted(
            Paint::Bold,
            &format!("Token mixing · layer {} ({})", layer.layer, mixing.kind),
        )
        .text(&format!(" · {which} · {}", mixing.legend()))
        .end_line()?;
        t.say_as(
            Paint::Dim,
            &format!(
                "row: output token, column: source token; signed, rows need not sum to 1; red > 0, \
                 blue < 0, full colour at ±{scale:.3}"
            ),
        )?;
        if shown < n {
            t.say_as(
                Paint::Dim,
                &format!("first {shown} of {n} source tokens shown (the terminal's width)"),
            )?;
        }
        for (i, label) in labels.iter().enumerate() {
            t.text(&format!(
                "{i:>index_w$} {label}{}  ",
                " ".repeat(label_w - label.width())
            ));
            // Zero above the diagonal (causal): left blank.
            for j in 0..shown.min(i + 1) {
                let v = m[i * n + j];
                let cell = format!("{v:+.2}");
                let bg = diverging(v / scale);
                let fg = if (v / scale).abs() > 0.6 {
                    Rgb(255, 255, 255)
                } else {
                    Rgb(0, 0, 0)
                };
                t.painted(Paint::On { fg, bg }, &cell).text(" ");
            }
            t.end_line()?;
        }
        t.blank()?;
    }
    let others: Vec<usize> = mixing
        .layer_numbers()
        .into_iter()
        .filter(|l| !layers.contains(l))
        .collect();
    if !others.is_empty() {
        t.say_as(
            Paint::Dim,
            &format!(
                "token mixing of layer{} {} captured too: shown under the attention layer each \
                 feeds",
                if others.len() == 1 { "" } else { "s" },
                layer_list(&others)
            ),
        )?;
    }
    Ok(())
}

/// `s` cut to `max` columns with an ellipsis.
fn clip(s: &str, max: usize) -> String {
    if s.width() <= max {
        return s.to_string();
    }
    let mut out = String::new();
    for c in s.chars() {
        if out.width() + 2 > max {
            break;
        }
        out.push(c);
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::MixingLayer;

    #[test]
    fn the_view_signs_its_cells_and_says_what_they_are() {
        let mixing = Mixing {
            kind: "gated delta".into(),
            heads: 1,
            tokens: vec!["a".into(), "b".into()],
            layers: vec![
                MixingLayer {
                    layer: 0,
                    weights: vec![0.5, 0.0, -0.25, 1.0],
                },
                MixingLayer {
                    layer: 2,
                    weights: vec![1.0, 0.0, 0.0, 1.0],
                },
            ],
        };
        assert_eq!(feeding(&mixing, &[1, 3], 1), vec![0]);
        assert_eq!(feeding(&mixing, &[1, 3], 3), vec![2]);
        let mut out = Vec::new();
        write_mixing_view(&mixing, &[0], HeadSel::Index(0), None, false, 80, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("token mixing (gated delta), not attention probabilities"),
            "{text}"
        );
        assert!(text.contains("-0.25") && text.contains("+1.00"), "{text}");
        assert!(text.contains("layer 2 captured too"), "{text}");
    }
}
