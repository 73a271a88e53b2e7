//! Per-head direct logit attribution and head ablation in the terminal: the top heads ranked by
//! |value| (signed), then a compact layers × heads table of every value.

use std::io::{self, Write};

use crate::render::term::Term;

use crate::analysis::attribution::{HeadAblation, HeadAttribution, RankedHead};
use crate::analysis::lens::quoted;

/// How many ranked heads the terminal lists.
pub const LISTED: usize = 10;

fn ranked_list(ranked: &[RankedHead], t: &mut Term) -> io::Result<()> {
    for (i, r) in ranked.iter().take(LISTED).enumerate() {
        t.say(&format!(
            "  {:>2}. layer {:>2} head {:>2}  {:+.4}",
            i + 1,
            r.layer,
            r.head,
            r.value
        ))?;
    }
    Ok(())
}

/// Layers × heads, each value with 2 decimals, in columns as wide as the widest.
fn table(values: &[Vec<f32>], t: &mut Term) -> io::Result<()> {
    let cells: Vec<Vec<String>> = values
        .iter()
        .map(|row| row.iter().map(|v| format!("{v:+.2}")).collect())
        .collect();
    let heads = values.first().map_or(0, Vec::len);
    let col = cells
        .iter()
        .flatten()
        .map(String::len)
        .chain((0..heads).map(|h| format!("h{h}").len()))
        .max()
        .unwrap_or(1);
    let label = format!("layer {}", values.len().saturating_sub(1)).len();
    let mut line = format!("{:label$}", "");
    for h in 0..heads {
        line.push_str(&format!(" {:>col$}", format!("h{h}")));
    }
    t.say(&line)?;
    for (l, row) in cells.iter().enumerate() {
        let mut line = format!("{:<label$}", format!("layer {l}"));
        for c in row {
            line.push_str(&format!(" {c:>col$}"));
        }
        t.say(&line)?;
    }
    Ok(())
}

/// Write the attribution: what it takes apart, the ranked heads, the layers × heads table.
pub fn write_attribution(a: &HeadAttribution, w: &mut dyn Write) -> io::Result<()> {
    let t = &mut Term::new(w, false);
    let target = format!("{} (id {})", quoted(&a.target.text), a.target.id);
    match &a.contrast {
        Some(c) => t.say(&format!(
            "Direct logit attribution: each head's share of logit {target} − {} (id {}) = {:+.4}",
            quoted(&c.text),
            c.id,
            a.logit
        ))?,
        None => t.say(&format!(
            "Direct logit attribution: each head's share of the logit of {target} = {:.4}",
            a.logit
        ))?,
    }
    t.say(&format!(
        "(at position {}, {}, through the final norm frozen at the real residual; embeddings {:+.4}, other writes {:+.4})",
        a.position,
        quoted(&a.position_token),
        a.embeddings,
        a.rest.iter().sum::<f32>() + a.norm_bias
    ))?;
    t.say("Top heads by |attribution|:")?;
    ranked_list(&a.ranked, t)?;
    t.end_line()?;
    table(&a.per_head, t)
}

/// Write the ablation: what it follows, the ranked heads, the layers × heads table.
pub fn write_ablation(a: &HeadAblation, w: &mut dyn Write) -> io::Result<()> {
    let t = &mut Term::new(w, false);
    t.say(&format!(
        "Head ablation ({}): change in log p({} (id {})) when each head is removed; with every head {:.4}",
        a.mode,
        quoted(&a.target.text),
        a.target.id,
        a.base_log_prob
    ))?;
    t.say(&format!(
        "(at position {}, {}; negative: the head helps predict it)",
        a.position,
        quoted(&a.position_token)
    ))?;
    t.say("Top heads by |Δ log p|:")?;
    ranked_list(&a.ranked, t)?;
    t.end_line()?;
    table(&a.delta, t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_a_row_per_layer_and_a_column_per_head() {
        let mut out = Vec::new();
        table(
            &[vec![1.0, -0.5], vec![0.25, 2.0]],
            &mut Term::new(&mut out, false),
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].contains("h0") && lines[0].contains("h1"));
        assert!(lines[1].starts_with("layer 0") && lines[1].contains("-0.50"));
        assert!(lines[2].contains("+2.00"));
    }

    #[test]
    fn tokens_that_read_alike_are_told_apart() {
        let token = |id, text: &str| crate::analysis::attribution::TokenRef {
            id,
            text: text.into(),
        };
        let ablation = HeadAblation {
            position: 4,
            position_token: " is".into(),
            target: token(7042, " Paris"),
            mode: "zero",
            base_log_prob: -1.0,
            layers: 1,
            heads: 1,
            delta: vec![vec![0.5]],
            ranked: Vec::new(),
        };
        let mut out = Vec::new();
        write_ablation(&ablation, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(r#"log p(" Paris" (id 7042))"#), "{text}");
        assert!(text.contains(r#"position 4, " is";"#), "{text}");
        let mut attribution = HeadAttribution {
            position: 4,
            position_token: " is".into(),
            target: token(7042, " Paris"),
            contrast: Some(token(38634, "Paris")),
            layers: 1,
            heads: 1,
            per_head: vec![vec![0.5]],
            embeddings: 0.0,
            rest: vec![0.0],
            norm_bias: 0.0,
            logit: 7.3,
            softcap: None,
            ranked: Vec::new(),
            convention: "frozen",
        };
        let mut out = Vec::new();
        write_attribution(&attribution, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(r#"logit " Paris" (id 7042) − "Paris" (id 38634)"#),
            "{text}"
        );
        attribution.contrast = None;
        attribution.target = token(198, "\n");
        let mut out = Vec::new();
        write_attribution(&attribution, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(r#"logit of "\n" (id 198)"#), "{text}");
        assert_eq!(
            text.lines().count(),
            6,
            "one line each, the token escaped: {text}"
        );
    }
}
