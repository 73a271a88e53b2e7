use super::*;
use crate::attention::summary::{
    distance_bins, pool_size, LayerSummary, SummaryBuilder, SummarySpec, TopKey,
};
use crate::attention::{ModelInfo, Role, Units};
use crate::html::tests::{meta_of, raw_payload, script_block, section};

const INJECTION: &str = "</script><script>alert(1)</script><img src=x onerror=alert(2)>";

/// A units-only attention over `n` tokens (a summarised run's holds no layer), its first token
/// and its text carrying `label`.
fn units_only(n: usize, heads: usize, label: &str) -> Attention {
    let labels: Vec<String> = (0..n)
        .map(|i| {
            if i == 1 {
                label.to_string()
            } else {
                format!("t{i}")
            }
        })
        .collect();
    let roles = (0..n)
        .map(|i| if i == 0 { Role::Start } else { Role::Word })
        .collect();
    let units = Units::tokens(
        labels.clone(),
        (0..n as u32).collect(),
        vec![0; n],
        vec![0; n],
        roles,
        (0..n).map(|i| (i > 0).then_some(i - 1)).collect(),
        labels,
    );
    let model = ModelInfo {
        id: format!("demo{label}"),
        revision: None,
        name: None,
        family: "Llama".into(),
        layers: 0,
        heads,
        hidden_size: 64 * heads,
        head_dim: 64,
    };
    Attention::new(model, format!("text {label}"), None, units, Vec::new())
        .unwrap()
        .with_mask(MaskKind::Causal)
}

fn render(att: &Attention, s: &AttentionSummary, opts: &SummaryHtmlOptions) -> String {
    let mut out = Vec::new();
    write_summary_html(att, s, opts, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// A causal matrix of softmaxed rows from a small deterministic generator.
fn causal(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) as f64 / (1u64 << 31) as f64) * 6.0 - 3.0
    };
    let mut m = vec![0f32; n * n];
    for i in 0..n {
        let scores: Vec<f64> = (0..=i).map(|_| next()).collect();
        let max = scores.iter().cloned().fold(f64::MIN, f64::max);
        let sum: f64 = scores.iter().map(|s| (s - max).exp()).sum();
        for (j, s) in scores.iter().enumerate() {
            m[i * n + j] = ((s - max).exp() / sum) as f32;
        }
    }
    m
}

/// The summary of full causal matrices (2 layers × 2 heads over `n` tokens), summarised by
/// the crate's builder, with the matrices.
fn summarised(n: usize, spec: &SummarySpec) -> (AttentionSummary, Vec<Vec<f32>>) {
    let mut frame = None;
    let mut layers = Vec::new();
    let mut matrices = Vec::new();
    for layer in 0..2 {
        let mut b = SummaryBuilder::new(layer * 3, 2, n, n, spec);
        for h in 0..2 {
            let m = causal(n, (layer * 2 + h) as u64 + 1);
            let part = b.shape().summarise(h, 0, &m, n, 0);
            b.merge(part);
            matrices.push(m);
        }
        frame.get_or_insert_with(|| b.frame());
        layers.push(b.finish());
    }
    let mut s = frame.unwrap();
    s.layers = layers;
    (s, matrices)
}

/// The page's pooled map is each block's sum over the full matrix divided by its queries; its
/// overview of the other layer the same over coarser blocks; its links the top keys; its rows
/// the full rows: each within half a 16-bit step, computed here from the matrices themselves.
#[test]
fn the_page_holds_the_summaries_it_says() {
    let n = 700; // pool 3: 234 × 234 blocks, an overview of blocks of 12 tokens
    let spec = SummarySpec {
        top_k: 4,
        rows: vec![5, 699],
    };
    let (s, matrices) = summarised(n, &spec);
    let att = units_only(n, 2, "x");
    let opts = SummaryHtmlOptions {
        layer: 1,
        ..SummaryHtmlOptions::default()
    };
    let html = render(&att, &s, &opts);
    let meta = meta_of(&html);
    let raw = raw_payload(&html, &meta);
    let pool = pool_size(n);
    assert_eq!(meta["pool"], pool);
    let opool = meta["overview_pool"].as_u64().unwrap() as usize;
    assert_eq!(opool % pool, 0);
    assert!(n.div_ceil(opool) <= OVERVIEW_SIDE);
    let half_step = 0.5 / 65535.0 + 1e-6;
    // Block shares from the matrix: Σ over the block / queries in it.
    let shares = |m: &[f32], block: usize| -> Vec<f64> {
        let nb = n.div_ceil(block);
        let mut out = vec![0f64; nb * nb];
        for q in 0..n {
            for k in 0..n {
                out[(q / block) * nb + k / block] += m[q * n + k] as f64;
            }
        }
        for (r, row) in out.chunks_mut(nb).enumerate() {
            let queries = block.min(n - r * block) as f64;
            row.iter_mut().for_each(|v| *v /= queries);
        }
        out
    };
    let pooled = section(&raw, &meta, "pooled");
    let overview = section(&raw, &meta, "overview");
    let nb = n.div_ceil(pool);
    let no = n.div_ceil(opool);
    for h in 0..2 {
        let want = shares(&matrices[2 + h], pool);
        for (a, b) in pooled[h * nb * nb..][..nb * nb].iter().zip(&want) {
            assert!((a - b).abs() <= half_step, "pooled {a} {b}");
        }
        for layer in 0..2 {
            let want = shares(&matrices[layer * 2 + h], opool);
            let got = &overview[(layer * 2 + h) * no * no..][..no * no];
            for (a, b) in got.iter().zip(&want) {
                assert!((a - b).abs() <= half_step, "overview {a} {b}");
            }
        }
    }
    // Links: each query's 4 largest weights of the detail layer, largest first.
    let counts = section(&raw, &meta, "counts");
    let keys = section(&raw, &meta, "link_keys");
    let weights = section(&raw, &meta, "link_weights");
    assert_eq!(meta["link_threshold"], 0.0);
    let mut at = 0;
    for h in 0..2 {
        let m = &matrices[2 + h];
        for q in 0..n {
            let mut row: Vec<(usize, f32)> = (0..=q).map(|k| (k, m[q * n + k])).collect();
            row.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            row.truncate(4);
            let c = counts[h * n + q] as usize;
            assert_eq!(c, row.len(), "query {q}");
            for (i, (k, w)) in row.iter().enumerate() {
                assert_eq!(keys[at + i] as usize, *k);
                assert!((weights[at + i] - *w as f64).abs() <= half_step);
            }
            at += c;
        }
    }
    // Full rows of queries 5 and 699.
    let rows = section(&raw, &meta, "rows");
    assert_eq!(meta["rows"], serde_json::json!([5, 699]));
    for h in 0..2 {
        for (r, q) in [5usize, 699].into_iter().enumerate() {
            let got = &rows[(h * 2 + r) * n..][..n];
            for (a, b) in got.iter().zip(&matrices[2 + h][q * n..(q + 1) * n]) {
                assert!((a - *b as f64).abs() <= half_step);
            }
        }
    }
    // Statistics: the distance profile as kept, the means over the queries.
    let distance = section(&raw, &meta, "distance");
    let bins = distance_bins(n).len();
    assert_eq!(distance.len(), 2 * 2 * bins);
    for (a, b) in distance
        .iter()
        .zip(s.layers.iter().flat_map(|l| &l.distance))
    {
        assert_eq!(*a, *b as f64);
    }
    let means = section(&raw, &meta, "means");
    let sink_mean: f64 = (0..n).map(|q| matrices[0][q * n] as f64).sum::<f64>() / n as f64;
    assert!(
        (means[0] - sink_mean).abs() < 1e-6,
        "{} {sink_mean}",
        means[0]
    );
}

/// A synthetic summary the size of a 1B model's at 32 768 tokens (16 layers × 32 heads, 16
/// top keys, three full rows asked for): the page stays under [`SIZE_LIMIT`], keeps at most
/// [`MAX_LINKS`] links (the strongest) and the full rows that fit ([`MAX_ROW_VALUES`]). Only the detail layer's
/// top keys are read by the page, so the other layers' are left empty here (memory).
#[test]
fn a_32k_token_report_stays_a_few_megabytes() {
    let (n, heads, layers, k) = (32_768usize, 32usize, 16usize, 16usize);
    let pool = pool_size(n);
    let nb = n.div_ceil(pool);
    let bins = distance_bins(n);
    let mut seed = 12345u64;
    let mut rand = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 40) as f32 / (1u64 << 24) as f32
    };
    let detail = layers - 1;
    let rows = vec![0, 16_383, 32_767];
    let layers: Vec<LayerSummary> = (0..layers)
        .map(|l| {
            let mut pooled = vec![0f32; heads * nb * nb];
            let (mut sink, mut entropy) = (Vec::new(), Vec::new());
            for h in 0..heads {
                let s = 0.2 + 0.6 * rand();
                for i in 0..nb {
                    let queries = pool.min(n - i * pool) as f32;
                    let row = &mut pooled[(h * nb + i) * nb..][..nb];
                    let spread = (1.0 - s - 0.2) / (i + 1) as f32;
                    for cell in row.iter_mut().take(i + 1) {
                        *cell = queries * spread * (0.8 + 0.4 * rand());
                    }
                    row[0] += queries * s;
                    row[i] += queries * 0.2;
                }
                for _ in 0..n {
                    sink.push(s * (0.9 + 0.2 * rand()));
                    entropy.push(2.0 + 3.0 * rand());
                }
            }
            let top = if l == detail {
                let mut top = Vec::with_capacity(heads * n * k);
                for _ in 0..heads {
                    for q in 0..n {
                        let s = 0.3 + 0.5 * rand();
                        top.push(TopKey { key: 0, weight: s });
                        let mut w = (1.0 - s) * 0.4;
                        for i in 1..k {
                            let key = q.saturating_sub(i - 1);
                            if key == 0 && i > 1 || q + 1 < i {
                                top.push(TopKey {
                                    key: u32::MAX,
                                    weight: 0.0,
                                });
                                continue;
                            }
                            top.push(TopKey {
                                key: key as u32,
                                weight: w * (0.9 + 0.1 * rand()),
                            });
                            w *= 0.6;
                        }
                    }
                }
                top
            } else {
                Vec::new()
            };
            let full = if l == detail {
                (0..heads * rows.len() * n)
                    .map(|_| rand() / n as f32)
                    .collect()
            } else {
                Vec::new()
            };
            LayerSummary {
                layer: l,
                top,
                sink,
                entropy,
                distance: (0..heads * bins.len()).map(|_| rand()).collect(),
                pooled,
                rows: full,
                learned_sink: Vec::new(),
            }
        })
        .collect();
    let s = AttentionSummary {
        heads,
        queries: n,
        keys: n,
        top_k: k,
        distance_bins: bins,
        pool,
        rows,
        learned_sink: false,
        layers,
    };
    let att = units_only(n, heads, "x");
    let opts = SummaryHtmlOptions {
        layer: detail,
        ..SummaryHtmlOptions::default()
    };
    let html = render(&att, &s, &opts);
    eprintln!(
        "32k-token summarised report: {:.2} MB",
        html.len() as f64 / 1e6
    );
    assert!(
        html.len() < SIZE_LIMIT,
        "{} bytes, over {SIZE_LIMIT}",
        html.len()
    );
    let meta = meta_of(&html);
    let kept = meta["links_kept"].as_u64().unwrap() as usize;
    assert!(kept <= MAX_LINKS && kept > MAX_LINKS * 9 / 10, "{kept}");
    assert!(meta["link_threshold"].as_f64().unwrap() > 0.0);
    // Two full rows of 32 heads fit, the third is left out and listed.
    assert_eq!(meta["rows"], serde_json::json!([0, 16_383]));
    assert_eq!(meta["rows_left_out"], serde_json::json!([32_767]));
    let raw = raw_payload(&html, &meta);
    let weights = section(&raw, &meta, "link_weights");
    let t = meta["link_threshold"].as_f64().unwrap();
    assert!(weights.iter().all(|&w| w >= t - 1e-5));
}

/// Every text typed by the user (the input, the tokens, the title, the settings) is escaped:
/// no markup of theirs survives into the page outside the JSON block, where `<` is `\u003c`.
#[test]
fn user_text_is_escaped() {
    let spec = SummarySpec {
        top_k: 2,
        rows: vec![],
    };
    let (s, _) = summarised(20, &spec);
    let att = units_only(20, 2, INJECTION);
    let opts = SummaryHtmlOptions {
        settings: vec![("command".into(), INJECTION.into())],
        ..SummaryHtmlOptions::default()
    };
    let html = render(&att, &s, &opts);
    assert_eq!(
        html.matches("<script").count(),
        3,
        "only the page's own scripts"
    );
    assert!(!html.contains("<img"));
    assert!(html.contains("<title>attnviz — text &lt;/script&gt;"));
    let meta = meta_of(&html);
    assert_eq!(meta["tokens"][1], INJECTION);
    assert!(!script_block(&html, "attnviz-meta").contains('<'));
    assert!(!JS.to_ascii_lowercase().contains("</script"));
    assert!(
        !JS.contains("innerHTML"),
        "the page writes text, never markup"
    );
}

#[test]
fn bad_options_are_refused() {
    let (s, _) = summarised(10, &SummarySpec::default());
    let att = units_only(10, 2, "x");
    let mut out = Vec::new();
    let layer = SummaryHtmlOptions {
        layer: 2,
        ..SummaryHtmlOptions::default()
    };
    assert!(write_summary_html(&att, &s, &layer, &mut out).is_err());
    let head = SummaryHtmlOptions {
        head: 2,
        ..SummaryHtmlOptions::default()
    };
    assert!(write_summary_html(&att, &s, &head, &mut out).is_err());
    let other = units_only(11, 2, "x");
    assert!(write_summary_html(&other, &s, &SummaryHtmlOptions::default(), &mut out).is_err());
    assert!(out.is_empty());
}
