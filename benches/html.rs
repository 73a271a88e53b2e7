//! HTML report benchmark: file size, time to write, and (in headless Chromium) time to
//! interactive, layer-switch latency and model-view build time, at 12, 128 and 512 tokens for a
//! MiniLM-shaped (6 layers × 12 heads) and a bert-base-shaped (12 × 12) attention.
//!
//! Run: `cargo bench --bench html` (needs the model from `scripts/fetch-minilm.sh` or
//! `$ATTNVIZ_MINILM_DIR`, plus chromium and `npm ci` in tests/browser, like the browser tests).
//!
//! Data: the real all-MiniLM-L6-v2 attention of an English text cut to N tokens. There is no
//! bert-base-uncased here (no hub access), so the bert-base shape is MiniLM's six real layers
//! twice over, relabelled 12 layers × 12 heads with head dim 64: real attention statistics at
//! bert-base's size. Reports are written with the defaults (16-bit weights, no query/key vectors),
//! and at 512 tokens also with the vectors (`--neuron`) and with 8-bit weights.

#[path = "../tests/suite/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use attnviz::model::Model;
use attnviz::render::html::{write_html_file, HtmlOptions, Precision};
use attnviz::{Attention, ModelInfo, QueryKey};

const TEXT: &str = "Attention lets every token look at every other token. In BERT, each of the \
    twelve heads in a layer learns its own way of looking: some heads attend to the previous or \
    the next word, some collect everything on the separator token, and a few follow syntax, \
    linking verbs to their objects or pronouns to the nouns they stand for. Visualising these \
    patterns head by head, layer by layer, is how researchers found out what BERT looks at, and \
    it is still the quickest way to build an intuition for what a Transformer does with a \
    sentence. The quick brown fox jumps over the lazy dog, while the cat sat on the mat and \
    watched the rain fall on the old stone bridge across the river. ";

/// bertviz 1.4.1 with transformers 5.24 on the same kind of machine (MiniLM, head view +
/// model view; measured once, before this benchmark was written on 29 November 2026): the HTML it
/// writes is 466 KB at 12 tokens, 53 MB at 128 and 869 MB at 512, where building it took 37 s and
/// 5.1 GB of memory.
const BERTVIZ: [(usize, &str); 3] = [
    (12, "466 KB"),
    (128, "53 MB"),
    (512, "869 MB, 37 s to build, 5.1 GB RAM"),
];

fn minilm_attention(model: &Model, n: usize, vectors: bool) -> Attention {
    let text = TEXT.repeat(8);
    let enc = model
        .tokenizer()
        .encode(&text, None, n, true)
        .expect("tokenize");
    assert_eq!(enc.ids.len(), n);
    let label = format!("{} … (cut to {n} tokens)", &text[..60]);
    model
        .encode_tokens(&label, None, enc, vectors)
        .expect("forward")
        .attention
}

/// MiniLM's layers twice over, as a 12 × 12 model with head dim 64 (vectors zero-padded).
fn bert_base_shaped(mini: &Attention) -> Attention {
    let mut weights = mini.weights().to_vec();
    weights.extend_from_slice(mini.weights());
    let query_key = mini.query_key.as_ref().map(|qk| {
        let widen = |v: &[f32]| -> Vec<f32> {
            let d = mini.model.head_dim;
            let mut out = Vec::with_capacity(v.len() * 4);
            for _ in 0..2 {
                for chunk in v.chunks(d) {
                    out.extend_from_slice(chunk);
                    out.extend(std::iter::repeat_n(0.0, 64 - d));
                }
            }
            out
        };
        QueryKey {
            queries: widen(&qk.queries),
            keys: widen(&qk.keys),
            scale: qk.scale,
        }
    });
    Attention::new(
        ModelInfo {
            id: "bert-base-shaped (MiniLM layers ×2)".into(),
            revision: None,
            name: None,
            family: "BERT".into(),
            layers: 12,
            heads: 12,
            hidden_size: 768,
            head_dim: 64,
        },
        mini.text.clone(),
        None,
        mini.queries().clone(),
        weights,
    )
    .and_then(|a| a.with_query_key(query_key))
    .expect("attention")
}

fn size(path: &Path) -> String {
    let b = std::fs::metadata(path).unwrap().len() as f64;
    if b < 1e6 {
        format!("{:.0} KB", b / 1e3)
    } else {
        format!("{:.1} MB", b / 1e6)
    }
}

fn main() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = repo.join("tests/artifacts/bench");
    std::fs::create_dir_all(&dir).unwrap();
    let model =
        Model::from_dir(&support::models::minilm::minilm_dir()).expect("load all-MiniLM-L6-v2");

    let mut rows = Vec::new();
    for n in [12, 128, 512] {
        let mini = minilm_attention(&model, n, n == 512);
        let base = bert_base_shaped(&mini);
        for (shape, att) in [("MiniLM 6×12", &mini), ("bert-base 12×12", &base)] {
            // The CLI's defaults first (`--html-precision auto`), then explicit variants at 512.
            let auto = Precision::auto(att.layers(), att.heads(), att.len());
            let auto_label = match auto {
                Precision::U16 => "auto=16",
                Precision::U8 => "auto=8",
            };
            let mut variants = vec![(false, auto, auto_label)];
            if n == 512 {
                variants.push((true, auto, "neuron"));
                for (precision, label) in [(Precision::U16, "16-bit"), (Precision::U8, "8-bit")] {
                    if precision != auto {
                        variants.push((false, precision, label));
                    }
                }
            }
            for (neuron, precision, variant) in variants {
                let name = format!(
                    "{}-{n}-{}.html",
                    if att.layers() == 6 {
                        "minilm"
                    } else {
                        "bertbase"
                    },
                    variant.replace('=', "")
                );
                let path = dir.join(&name);
                let opts = HtmlOptions {
                    neuron,
                    precision,
                    ..HtmlOptions::default()
                };
                let t = Instant::now();
                write_html_file(att, &opts, &path).unwrap();
                let write_ms = t.elapsed().as_secs_f64() * 1e3;
                rows.push((shape, n, variant, path, write_ms));
            }
        }
    }

    let files: Vec<&Path> = rows.iter().map(|r| r.3.as_path()).collect();
    let out = Command::new("node")
        .arg("bench.mjs")
        .args(&files)
        .current_dir(repo.join("tests/browser"))
        .output()
        .expect("node (Node ≥ 20) with `npm ci` done in tests/browser");
    assert!(
        out.status.success(),
        "bench.mjs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let measured: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();

    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let chromium = Command::new("/usr/bin/chromium")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "machine: {cpu}, {} logical CPUs, load average {} during the run; {chromium}, headless, software rendering",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    println!("data: real all-MiniLM-L6-v2 attention; bert-base shape = MiniLM's layers twice (see source)");
    println!("goals: 12 tokens ≤ 150 KB; 512 tokens ≤ 30 MB; interactive ≤ 2 s; layer switch < 100 ms at 512 tokens");
    println!();
    println!(
        "{:<16} {:>6} {:>7} {:>9} {:>9} {:>9} {:>14} {:>12} {:>10} {:>8}  bertviz (MiniLM)",
        "shape",
        "tokens",
        "variant",
        "size",
        "write",
        "TTI",
        "layer switch",
        "lines/layer",
        "model view",
        "JS heap"
    );
    for ((shape, n, variant, path, write_ms), m) in rows.iter().zip(&measured) {
        let f = |k: &str| m[k].as_f64().unwrap_or(f64::NAN);
        let bertviz = if !variant.starts_with("auto") || !shape.starts_with("MiniLM") {
            ""
        } else {
            BERTVIZ.iter().find(|b| b.0 == *n).map_or("", |b| b.1)
        };
        println!(
            "{:<16} {:>6} {:>7} {:>9} {:>6.0} ms {:>6.0} ms {:>5.0}/{:>3.0} ms {:>12.0} {:>7.0} ms {:>5.0} MB  {}",
            shape,
            n,
            if variant.is_empty() { "-" } else { variant },
            size(path),
            write_ms,
            f("tti_ms"),
            f("switch_render_ms"),
            f("switch_frame_ms"),
            f("lines_per_layer"),
            f("model_view_ms"),
            f("js_heap_mb"),
            bertviz
        );
        if let Some(errs) = m["errors"].as_array().filter(|e| !e.is_empty()) {
            println!("    page errors: {errs:?}");
        }
    }
    println!();
    println!("variant: auto=16/auto=8 = the CLI's defaults (--html-precision auto: 16-bit weights up to 25 million weights, else 8-bit; no vectors); neuron = defaults + query/key vectors (--neuron); 16-bit/8-bit = that precision forced.");
    println!("size: the whole .html file. write: Rust, write_html_file. TTI: navigation start to the first head view (all heads, default threshold: 0.01, 0.02 beyond 256 tokens) painted.");
    println!("layer switch: median render time / median time from the change event to the next frame, over 2×layers switches.");
}
