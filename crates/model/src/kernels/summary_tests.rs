//! The attention kernel's summaries of long inputs against the same attention captured in full
//! and summarised by plain loops: every field within 1e-6, on 2048 tokens (the bound),
//! under a causal mask with grouped heads, a sliding window, and a bidirectional one; the
//! context the layer passes on is the same bit for bit whether it summarises or captures.

use super::attention::{attention, AttentionSpec, CaptureSink, Mask, Operand};
use super::testing::random;
use attnviz_core::attention::summary::{
    distance_bin, distance_bins, pool_size, SummaryBuilder, SummarySpec,
};

struct Case {
    n: usize,
    heads: usize,
    kv_heads: usize,
    mask: Mask,
    window: Option<usize>,
}

/// The summary of one head's full `[n, n]` matrix, by plain loops: sorted rows, f64 sums.
struct Plain {
    top: Vec<Vec<(u32, f32)>>,
    sink: Vec<f32>,
    entropy: Vec<f64>,
    distance: Vec<f64>,
    pooled: Vec<f64>,
}

fn plain(p: &[f32], n: usize, k: usize) -> Plain {
    let pool = pool_size(n);
    let cells = n.div_ceil(pool);
    let bins = distance_bins(n);
    let mut out = Plain {
        top: Vec::new(),
        sink: Vec::new(),
        entropy: Vec::new(),
        distance: vec![0.0; bins.len()],
        pooled: vec![0.0; cells * cells],
    };
    for (i, row) in p.chunks(n).enumerate() {
        let mut keys: Vec<(u32, f32)> = row
            .iter()
            .enumerate()
            .filter(|(_, &w)| w > 0.0)
            .map(|(j, &w)| (j as u32, w))
            .collect();
        keys.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        keys.truncate(k);
        out.top.push(keys);
        out.sink.push(row[0]);
        let mut entropy = 0.0;
        for (j, &w) in row.iter().enumerate() {
            let w = w as f64;
            if w > 0.0 {
                entropy -= w * w.ln();
            }
            let d = i.abs_diff(j);
            let bin = bins.iter().rposition(|&edge| edge <= d).unwrap();
            out.distance[bin] += w / n as f64;
            out.pooled[(i / pool) * cells + j / pool] += w;
        }
        out.entropy.push(entropy);
    }
    out
}

fn op(data: &[f32], stride: usize) -> Operand<'_> {
    Operand {
        data,
        offset: 0,
        stride,
    }
}

fn check(c: &Case) {
    let (n, d) = (c.n, 16);
    let (qw, kw) = (c.heads * d, c.kv_heads * d);
    let q = random(n * qw, 21, 2.0);
    let k = random(n * kw, 22, 2.0);
    let v = random(n * kw, 23, 2.0);
    let group = c.heads / c.kv_heads;
    let kv_head: Vec<usize> = (0..c.heads).map(|h| h / group).collect();
    let spec = AttentionSpec {
        batch: 1,
        query_tokens: n,
        key_tokens: n,
        heads: c.heads,
        kv_heads: c.kv_heads,
        kv_head: &kv_head,
        head_dim: d,
        scale: 0.25,
        mask: c.mask,
        bias: None,
        window: c.window,
        softcap: None,
        blocks: &[],
        sink_logits: None,
    };
    // In full.
    let mut probs = vec![0f32; c.heads * n * n];
    let mut full_context = vec![0f32; n * qw];
    attention(
        op(&q, qw),
        op(&k, kw),
        op(&v, kw),
        &spec,
        &[n],
        &[n],
        &mut [CaptureSink {
            probs: Some(&mut probs),
            query_key: None,
            summary: None,
        }],
        &mut full_context,
    );
    // Summarised.
    let top_k = 16;
    let rows = vec![0, n / 2, n - 1];
    let mut builder = SummaryBuilder::new(
        5,
        c.heads,
        n,
        n,
        &SummarySpec {
            top_k,
            rows: rows.clone(),
        },
    );
    let mut context = vec![0f32; n * qw];
    attention(
        op(&q, qw),
        op(&k, kw),
        op(&v, kw),
        &spec,
        &[n],
        &[n],
        &mut [CaptureSink {
            probs: None,
            query_key: None,
            summary: Some(&mut builder),
        }],
        &mut context,
    );
    assert_eq!(
        context, full_context,
        "summarising changed the layer's output"
    );
    let mut summary = builder.frame();
    summary.layers.push(builder.finish());
    let layer = &summary.layers[0];
    assert_eq!(layer.layer, 5);
    let cells = n.div_ceil(pool_size(n));
    let bins = distance_bins(n).len();
    let mut worst = 0f64;
    let mut off = |a: f64, b: f64| worst = worst.max((a - b).abs());
    for h in 0..c.heads {
        let head = &probs[h * n * n..(h + 1) * n * n];
        let want = plain(head, n, top_k);
        for i in 0..n {
            let got: Vec<(u32, f32)> = summary
                .top_keys(0, h, i)
                .iter()
                .map(|t| (t.key, t.weight))
                .collect();
            assert_eq!(got, want.top[i], "head {h}, query {i}: top keys");
            off(layer.sink[h * n + i] as f64, want.sink[i] as f64);
            off(layer.entropy[h * n + i] as f64, want.entropy[i]);
        }
        for b in 0..bins {
            off(layer.distance[h * bins + b] as f64, want.distance[b]);
        }
        for (x, y) in layer.pooled[h * cells * cells..][..cells * cells]
            .iter()
            .zip(&want.pooled)
        {
            off(*x as f64, *y);
        }
        for (r, &query) in rows.iter().enumerate() {
            assert_eq!(
                &layer.rows[(h * rows.len() + r) * n..][..n],
                &head[query * n..][..n],
                "head {h}: the full row of query {query}"
            );
        }
    }
    assert!(
        worst <= 1e-6,
        "summary off by {worst:e} from the full matrix's"
    );
    // The farthest key falls in the last bin.
    assert_eq!(distance_bin(n - 1), bins - 1);
}

#[test]
fn causal_grouped_heads_at_2048_tokens() {
    check(&Case {
        n: 2048,
        heads: 4,
        kv_heads: 2,
        mask: Mask::Causal,
        window: None,
    });
}

#[test]
fn sliding_window() {
    check(&Case {
        n: 1000,
        heads: 2,
        kv_heads: 1,
        mask: Mask::Causal,
        window: Some(300),
    });
}

#[test]
fn bidirectional() {
    check(&Case {
        n: 777,
        heads: 3,
        kv_heads: 3,
        mask: Mask::Bidirectional,
        window: None,
    });
}
