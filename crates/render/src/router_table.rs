//! The terminal's router view of a mixture-of-experts model: for one routed layer, each token's
//! chosen experts with their weights, then the expert load (how many tokens chose each expert)
//! as a bar per expert.

use std::io::{self, Write};

use unicode_width::UnicodeWidthStr;

use crate::attention::Router;
use crate::colormap::viridis;
use crate::term::{escape_controls, Paint, Term};

/// Widest token label, in terminal columns.
const LABEL_MAX: usize = 14;
/// Widest load bar, in terminal columns.
const BAR_MAX: usize = 40;

/// Write the router view of the model's layer `layer` (its number, from 0) of `router`, its
/// tokens labelled by `labels` where given (the attention's display texts, one per token) or as
/// the router recorded them. A layer without a router (a dense layer of a partly routed model)
/// gets one line that says so and names the routed layers.
pub fn write_router_view(
    router: &Router,
    layer: usize,
    labels: Option<&[String]>,
    color: bool,
    w: &mut dyn Write,
) -> io::Result<()> {
    let t = &mut Term::new(w, color);
    let (e, k) = (router.experts, router.top_k);
    let Some(routed) = router.layer(layer) else {
        let numbers: Vec<String> = router.layers.iter().map(|l| l.layer.to_string()).collect();
        return t.say(&format!(
            "Router: layer {layer} is dense (no experts); routed layers: {}",
            numbers.join(", ")
        ));
    };
    let weights = if router.renormalised {
        "weights renormalised to sum to 1"
    } else {
        "weights are the experts' probabilities"
    };
    t.painted(Paint::Bold, &format!("Router · layer {layer}"))
        .text(&format!(" · {e} experts, top {k} per token ({weights})"))
        .end_line()?;
    let n = router.tokens.len();
    let index_w = n.saturating_sub(1).to_string().len();
    let labels: Vec<String> = labels
        .filter(|l| l.len() == n)
        .unwrap_or(&router.tokens)
        .iter()
        .map(|t| clip(&escape_controls(t), LABEL_MAX))
        .collect();
    let label_w = labels.iter().map(|l| l.width()).max().unwrap_or(0);
    let expert_w = e.saturating_sub(1).to_string().len();
    for (i, label) in labels.iter().enumerate() {
        t.text(&format!(
            "{i:>index_w$} {label}{}  ",
            " ".repeat(label_w - label.width())
        ));
        for (rank, (expert, weight)) in routed.choices(i, k).enumerate() {
            if rank > 0 {
                t.text("  ");
            }
            t.text(&format!("e{expert:<expert_w$} "));
            let cell = format!("{weight:.2}");
            let on = viridis(weight.clamp(0.0, 1.0));
            let fg = if weight > 0.6 {
                crate::colormap::Rgb(0, 0, 0)
            } else {
                crate::colormap::Rgb(255, 255, 255)
            };
            t.painted(Paint::On { fg, bg: on }, &cell);
        }
        t.end_line()?;
    }
    t.blank()?;
    let load = routed.load(e);
    let most = load.iter().copied().max().unwrap_or(0).max(1);
    t.say_as(
        Paint::Bold,
        &format!("Expert load · layer {layer} · tokens per expert ({n} tokens × top {k})"),
    )?;
    let count_w = most.to_string().len();
    for (expert, &count) in load.iter().enumerate() {
        let bar = (count * BAR_MAX).div_ceil(most);
        t.text(&format!("  e{expert:<expert_w$} {count:>count_w$}"));
        if bar > 0 {
            t.text(" ").text(&"█".repeat(bar));
        }
        t.end_line()?;
    }
    Ok(())
}

/// `s` cut to `max` columns, with an ellipsis where it was cut.
fn clip(s: &str, max: usize) -> String {
    if s.width() <= max {
        return s.to_string();
    }
    let mut out = String::new();
    for c in s.chars() {
        let next = format!("{out}{c}");
        if next.width() + 1 > max {
            break;
        }
        out = next;
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::RouterLayer;

    fn router() -> Router {
        Router {
            experts: 4,
            top_k: 2,
            renormalised: true,
            tokens: vec!["The".into(), "\u{1b}[31mfox".into(), "jumps".into()],
            layers: vec![RouterLayer {
                layer: 2,
                probs: vec![0.1; 12],
                chosen: vec![3, 1, 1, 0, 3, 2],
                weights: vec![0.75, 0.25, 0.5, 0.5, 0.625, 0.375],
            }],
        }
    }

    fn written(layer: usize, color: bool) -> String {
        let mut out = Vec::new();
        write_router_view(&router(), layer, None, color, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn each_token_s_choices_and_the_load_are_listed() {
        let text = written(2, false);
        // Each line with its runs of spaces squeezed.
        let lines: Vec<String> = text
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        assert!(
            text.contains("Router · layer 2 · 4 experts, top 2"),
            "{text}"
        );
        assert!(
            lines.contains(&"0 The e3 0.75 e1 0.25".to_string()),
            "{text}"
        );
        assert!(
            lines.contains(&"2 jumps e3 0.62 e2 0.38".to_string()),
            "{text}"
        );
        // Tokens' control characters never reach the terminal.
        assert!(!text.contains('\u{1b}'), "{text}");
        // Expert 3 was chosen twice (the longest bar), expert 0 once.
        assert!(
            text.contains(&format!("  e3 2 {}\n", "█".repeat(BAR_MAX))),
            "{text}"
        );
        assert!(
            text.contains(&format!("  e0 1 {}\n", "█".repeat(BAR_MAX / 2))),
            "{text}"
        );
    }

    #[test]
    fn a_dense_layer_says_so() {
        let text = written(0, false);
        assert_eq!(
            text,
            "Router: layer 0 is dense (no experts); routed layers: 2\n"
        );
        assert!(written(2, true).contains("\u{1b}[48;2;"));
    }
}
