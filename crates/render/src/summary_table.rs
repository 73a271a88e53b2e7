//! The terminal's view of a summarised run (a long input's attention kept as summaries, never as
//! matrices): per layer, the mean over heads of the weight on the first token (the sink) and of
//! the entropy, and where the attention goes by distance; then one layer head by head; then the
//! tokens asked for, each with the keys it attends to most.

use std::io::{self, Write};

use unicode_width::UnicodeWidthStr;

use crate::attention::summary::AttentionSummary;
use crate::term::{escape_controls, Paint, Term};

/// Eight heights of a sparkline, lowest first.
const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
/// Widest token label, in terminal columns.
const LABEL_MAX: usize = 16;
/// Keys listed per token asked for.
const KEYS_LISTED: usize = 6;

/// What the view shows besides the per-layer lines.
#[derive(Clone, Copy, Debug)]
pub struct SummaryViewOptions {
    /// The layer slot (index among the summarised layers) shown head by head.
    pub layer: usize,
    /// Colour.
    pub color: bool,
}

/// Write the summarised run's view: `tokens` label the positions (one per token).
pub fn write_summary_view(
    summary: &AttentionSummary,
    tokens: &[String],
    opts: SummaryViewOptions,
    w: &mut dyn Write,
) -> io::Result<()> {
    let t = &mut Term::new(w, opts.color);
    let n = summary.queries;
    let heads = summary.heads;
    t.painted(Paint::Bold, "Summarised attention")
        .text(&format!(
            " · {n} tokens, {} layers × {heads} heads · kept per token: the top {} keys, the \
             weight on the first token (sink) and the entropy; per head: the attention by \
             distance and a {}×{} map pooled over blocks of {} token{}",
            summary.layers.len(),
            summary.top_k,
            summary.pooled_queries(),
            summary.pooled_keys(),
            summary.pool,
            if summary.pool == 1 { "" } else { "s" }
        ))
        .end_line()?;
    t.blank()?;
    let bins = &summary.distance_bins;
    // The sparklines are one column per bin; the header's word is padded to their width.
    let spark_w = bins.len().max("distance".len());
    t.say(&format!(
        "distance: the share of the attention on keys {} tokens away, one bar per bin; \
         median: the distance within which half of it lies",
        bin_names(bins)
    ))?;
    // A learned sink's share (gpt-oss) gets a column of its own: rows leave it to no token.
    let learned = summary.learned_sink;
    let learned_head = if learned { "  learned" } else { "" };
    if learned {
        t.say("learned: the share of each row on the model's learned sink, which is no token")?;
    }
    t.say_as(
        Paint::Bold,
        &format!(
            "layer    sink  entropy{learned_head}  {:<spark_w$}  median",
            "distance"
        ),
    )?;
    for (slot, layer) in summary.layers.iter().enumerate() {
        let mean_over =
            |xs: &[f32]| xs.iter().map(|&x| x as f64).sum::<f64>() / xs.len().max(1) as f64;
        let profile = head_mean_profile(summary, slot);
        t.text(&format!(
            "{:>5}  {:>6.3}  {:>7.3}  ",
            layer.layer,
            mean_over(&layer.sink),
            mean_over(&layer.entropy)
        ));
        if learned {
            t.text(&format!("{:>7.3}  ", mean_over(&layer.learned_sink)));
        }
        t.text(&format!("{:<spark_w$}", sparkline(&profile)))
            .text(&format!("  {}", median_bin(bins, &profile)))
            .end_line()?;
    }
    let Some(layer) = summary.layers.get(opts.layer) else {
        return Ok(());
    };
    t.blank()?;
    t.say_as(Paint::Bold, &format!("Layer {} head by head", layer.layer))?;
    t.say_as(
        Paint::Bold,
        &format!(
            " head    sink  entropy{learned_head}  {:<spark_w$}  median",
            "distance"
        ),
    )?;
    let count = bins.len();
    for h in 0..heads {
        let profile: Vec<f64> = layer.distance[h * count..(h + 1) * count]
            .iter()
            .map(|&x| x as f64)
            .collect();
        let sink = &layer.sink[h * n..(h + 1) * n];
        let entropy = &layer.entropy[h * n..(h + 1) * n];
        let mean = |xs: &[f32]| xs.iter().map(|&x| x as f64).sum::<f64>() / n.max(1) as f64;
        t.text(&format!(
            "{h:>5}  {:>6.3}  {:>7.3}  ",
            mean(sink),
            mean(entropy)
        ));
        if learned {
            t.text(&format!(
                "{:>7.3}  ",
                mean(&layer.learned_sink[h * n..(h + 1) * n])
            ));
        }
        t.text(&format!("{:<spark_w$}", sparkline(&profile)))
            .text(&format!("  {}", median_bin(bins, &profile)))
            .end_line()?;
    }
    // The tokens asked for (their full rows are kept), or else the last token: the keys each
    // attends to most, in the mean over the layer's heads where the row is whole, else in
    // each head's top keys.
    t.blank()?;
    let label = |i: usize| -> String {
        let text = tokens
            .get(i)
            .map_or(String::new(), |s| escape_controls(s).into_owned());
        clip(&text, LABEL_MAX)
    };
    if summary.rows.is_empty() {
        let last = n.saturating_sub(1);
        t.say_as(
            Paint::Bold,
            &format!(
                "Layer {} · token {last} {} · its top keys per head",
                layer.layer,
                label(last)
            ),
        )?;
        for h in 0..heads {
            let keys: Vec<String> = summary
                .top_keys(opts.layer, h, last)
                .iter()
                .take(KEYS_LISTED)
                .map(|k| format!("{} {:.2}", label(k.key as usize), k.weight))
                .collect();
            t.text(&format!("{h:>4}  {}", keys.join(" · ")))
                .end_line()?;
        }
        return Ok(());
    }
    t.say_as(
        Paint::Bold,
        &format!(
            "Layer {} · the tokens asked for · the keys each attends to most (mean of the heads)",
            layer.layer
        ),
    )?;
    let k = summary.keys;
    let named = summary.rows.len();
    for (r, &query) in summary.rows.iter().enumerate() {
        let mut mean = vec![0f64; k];
        for h in 0..heads {
            let row = &layer.rows[(h * named + r) * k..][..k];
            for (m, &x) in mean.iter_mut().zip(row) {
                *m += x as f64 / heads as f64;
            }
        }
        let mut order: Vec<usize> = (0..k).filter(|&j| mean[j] > 0.0).collect();
        order.sort_by(|&a, &b| mean[b].total_cmp(&mean[a]).then(a.cmp(&b)));
        let keys: Vec<String> = order
            .iter()
            .take(KEYS_LISTED)
            .map(|&j| format!("{j} {} {:.2}", label(j), mean[j]))
            .collect();
        t.text(&format!(
            "{query:>6} {}  → {}",
            label(query),
            keys.join(" · ")
        ))
        .end_line()?;
    }
    Ok(())
}

/// The mean over the layer's heads of the distance profile.
fn head_mean_profile(summary: &AttentionSummary, slot: usize) -> Vec<f64> {
    let count = summary.distance_bins.len();
    let mut out = vec![0f64; count];
    for row in summary.layers[slot].distance.chunks(count) {
        for (o, &x) in out.iter_mut().zip(row) {
            *o += x as f64 / summary.heads as f64;
        }
    }
    out
}

/// One bar per bin, its height the bin's share of the largest.
fn sparkline(profile: &[f64]) -> String {
    let most = profile.iter().copied().fold(0.0, f64::max);
    profile
        .iter()
        .map(|&x| {
            if most <= 0.0 || x <= 0.0 {
                ' '
            } else {
                BARS[((x / most) * 7.0).round() as usize]
            }
        })
        .collect()
}

/// The first and last bins' names: `0 … 1024+`.
fn bin_names(bins: &[usize]) -> String {
    match bins.last() {
        Some(&last) if bins.len() > 2 => format!("0, 1, 2–3, 4–7, … {last}+"),
        Some(&last) if bins.len() > 1 => format!("0, {last}+"),
        _ => "0".into(),
    }
}

/// The bin where the profile's cumulative mass passes one half, as a range of distances.
fn median_bin(bins: &[usize], profile: &[f64]) -> String {
    let total: f64 = profile.iter().sum();
    let mut sum = 0.0;
    for (b, &x) in profile.iter().enumerate() {
        sum += x;
        if sum >= total / 2.0 && total > 0.0 {
            return match (bins[b], bins.get(b + 1)) {
                (0, _) => "0 (itself)".into(),
                (lo, Some(&hi)) if hi == lo + 1 => format!("{lo}"),
                (lo, Some(&hi)) => format!("{lo}–{}", hi - 1),
                (lo, None) => format!("{lo}+"),
            };
        }
    }
    "–".into()
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
    use crate::attention::summary::{SummaryBuilder, SummarySpec};

    /// A two-head layer over 5 tokens: head 0 all on the first token, head 1 on itself.
    fn summary(rows: Vec<usize>) -> AttentionSummary {
        let n = 5;
        let spec = SummarySpec { top_k: 3, rows };
        let mut b = SummaryBuilder::new(7, 2, n, n, &spec);
        let mut sink = vec![0f32; n * n];
        let mut own = vec![0f32; n * n];
        for i in 0..n {
            sink[i * n] = 1.0;
            own[i * n + i] = 1.0;
        }
        let part = b.shape().summarise(0, 0, &sink, n, 0);
        b.merge(part);
        let part = b.shape().summarise(1, 0, &own, n, 0);
        b.merge(part);
        let mut s = b.frame();
        s.layers.push(b.finish());
        s
    }

    fn written(s: &AttentionSummary) -> String {
        let tokens: Vec<String> = ["<s>", "The", "\u{1b}[31mfox", "jumps", "."]
            .map(String::from)
            .to_vec();
        let mut out = Vec::new();
        write_summary_view(
            s,
            &tokens,
            SummaryViewOptions {
                layer: 0,
                color: false,
            },
            &mut out,
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn layers_heads_and_the_last_token_are_listed() {
        let text = written(&summary(vec![]));
        // Layer 7: mean sink (1 + 1/5) / 2 = 0.6; head 0's sink 1, head 1's 0.2.
        assert!(text.contains("    7   0.600"), "{text}");
        assert!(text.contains("    0   1.000    0.000"), "{text}");
        assert!(text.contains("    1   0.200    0.000"), "{text}");
        // Head 1 attends to itself: its median distance is 0.
        assert!(
            text.lines()
                .any(|l| l.starts_with("    1 ") && l.ends_with("0 (itself)")),
            "{text}"
        );
        // The last token: head 0 looks at <s>, head 1 at itself.
        assert!(text.contains("   0  <s> 1.00"), "{text}");
        assert!(text.contains("   1  . 1.00"), "{text}");
        // Control characters of a token are not written raw.
        assert!(!text.contains('\u{1b}'), "{text:?}");
    }

    #[test]
    fn the_tokens_asked_for_list_their_keys() {
        let text = written(&summary(vec![3]));
        // Token 3 ("jumps"): the mean of the heads is 0.5 on <s> and 0.5 on itself.
        assert!(
            text.contains("     3 jumps  → 0 <s> 0.50 · 3 jumps 0.50"),
            "{text}"
        );
    }
}
