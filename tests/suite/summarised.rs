//! `--summarise` through the `attnviz` binary on the real SmolLM2-135M GGUF: a long input's
//! layers summarised while they are computed, held to the same layers captured in full by the
//! same binary and summarised here by plain loops (sorted rows, f64 sums): every field within
//! 1e-6. Then the terminal view, and the refusals, each one line, nothing written.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::models::smollm2::smollm2_gguf;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attnviz"))
        .env_remove("ATTNVIZ_MODEL")
        .env("HF_HUB_OFFLINE", "1")
        .env("NO_COLOR", "1")
        .args(args)
        .output()
        .expect("attnviz runs")
}

fn ok(out: &Output, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    String::from_utf8(out.stdout.clone()).expect("UTF-8")
}

fn refused(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "{needle}: {err}");
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// A text of about 435 tokens.
fn long_text() -> String {
    let sentences = [
        "The quick brown fox jumps over the lazy dog.",
        "A summary keeps what a reader needs and drops the rest.",
        "Attention heads often look at the first token, their sink.",
        "Some heads look one token back; others look far away.",
    ];
    (0..38)
        .map(|i| sentences[i % 4])
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn summaries_equal_the_full_matrix_s() {
    let gguf = smollm2_gguf();
    let model = gguf.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (full, summ) = (dir.path().join("full.json"), dir.path().join("summ.json"));
    let text = long_text();
    let layers = "0,17,29";
    ok(
        &run(&[
            "-m",
            model,
            &text,
            "--layers",
            layers,
            "--full-precision",
            "--json",
            full.to_str().unwrap(),
        ]),
        "full capture",
    );
    let queries = "0,7,200";
    let out = ok(
        &run(&[
            "-m",
            model,
            &text,
            "--layers",
            layers,
            "--summarise",
            "--top-keys",
            "8",
            "--query",
            queries,
            "--full-precision",
            "--json",
            summ.to_str().unwrap(),
        ]),
        "summarised",
    );
    let (full, summ) = (json(&full), json(&summ));
    assert_eq!(
        summ["attention"].as_array().unwrap().len(),
        0,
        "no matrix kept"
    );
    let s = &summ["summary"];
    let n = s["queries"].as_u64().unwrap() as usize;
    assert!(n > 400, "{n} tokens");
    assert_eq!(summ["tokens"], full["tokens"]);
    let pool = s["pool"].as_u64().unwrap() as usize;
    assert_eq!(pool, n.div_ceil(256));
    let edges: Vec<usize> = serde_json::from_value(s["distance_bins"].clone()).unwrap();
    let rows: Vec<usize> = serde_json::from_value(s["rows"].clone()).unwrap();
    assert_eq!(rows, vec![0, 7, 200]);
    let cells = n.div_ceil(pool);
    let mut worst = 0f64;
    let mut off = |a: f64, b: f64| worst = worst.max((a - b).abs());
    let layers_full = full["attention"].as_array().unwrap();
    let layers_summ = s["layers"].as_array().unwrap();
    assert_eq!(layers_summ.len(), 3);
    for (l, (lf, ls)) in layers_full.iter().zip(layers_summ).enumerate() {
        assert_eq!(ls["layer"], [0, 17, 29][l]);
        for (h, (hf, hs)) in lf
            .as_array()
            .unwrap()
            .iter()
            .zip(ls["heads"].as_array().unwrap())
            .enumerate()
        {
            let m: Vec<Vec<f64>> = hf.as_array().unwrap().iter().map(floats).collect();
            let (mut distance, mut pooled) = (vec![0f64; edges.len()], vec![0f64; cells * cells]);
            let (mut sink_sum, mut entropy_sum) = (0f64, 0f64);
            for (i, row) in m.iter().enumerate() {
                let mut keys: Vec<(usize, f64)> = row
                    .iter()
                    .copied()
                    .enumerate()
                    .filter(|(_, w)| *w > 0.0)
                    .collect();
                keys.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                keys.truncate(8);
                let want: Vec<usize> = keys.iter().map(|k| k.0).collect();
                let got: Vec<usize> = serde_json::from_value(hs["top_keys"][i].clone()).unwrap();
                assert_eq!(got, want, "layer {l} head {h} query {i}: top keys");
                for (k, w) in floats(&hs["top_weights"][i]).iter().zip(&keys) {
                    off(*k, w.1);
                }
                let entropy: f64 = row.iter().filter(|w| **w > 0.0).map(|w| -w * w.ln()).sum();
                off(hs["entropy"][i].as_f64().unwrap(), entropy);
                off(hs["sink"][i].as_f64().unwrap(), row[0]);
                sink_sum += row[0];
                entropy_sum += entropy;
                for (j, w) in row.iter().enumerate() {
                    let d = i - j.min(i) + j.saturating_sub(i);
                    let bin = edges.iter().rposition(|&e| e <= d).unwrap();
                    distance[bin] += w / n as f64;
                    pooled[(i / pool) * cells + j / pool] += w;
                }
            }
            off(hs["sink_mean"].as_f64().unwrap(), sink_sum / n as f64);
            off(hs["entropy_mean"].as_f64().unwrap(), entropy_sum / n as f64);
            for (a, b) in floats(&hs["distance"]).iter().zip(&distance) {
                off(*a, *b);
            }
            let got_pooled: Vec<f64> = hs["pooled"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(floats)
                .collect();
            assert_eq!(got_pooled.len(), pooled.len());
            for (a, b) in got_pooled.iter().zip(&pooled) {
                off(*a, *b);
            }
            for (r, &q) in rows.iter().enumerate() {
                let got = floats(&hs["rows"][r]);
                assert_eq!(got.len(), n);
                for (a, b) in got.iter().zip(&m[q]) {
                    off(*a, *b);
                }
            }
        }
    }
    // f32 values written and read back: within 1e-6 of the plain loops' f64 sums.
    assert!(worst <= 1e-6, "summaries off by {worst:e}");
    // The terminal view: every summarised layer, the last one head by head, the tokens asked
    // for with their keys.
    assert!(out.contains("Summarised attention"), "{out}");
    for layer in ["    0 ", "   17 ", "   29 "] {
        assert!(out.lines().any(|l| l.starts_with(layer)), "{layer}: {out}");
    }
    assert!(out.contains("Layer 29 head by head"), "{out}");
    assert!(
        out.lines().any(|l| l.trim_start().starts_with("200 ")),
        "{out}"
    );
    // `attnviz render` draws matrices: a summarised file says what it holds instead.
    let file = dir.path().join("summ.json");
    refused(
        &run(&["render", file.to_str().unwrap()]),
        "holds a summarised run",
    );
}

#[test]
fn what_needs_the_matrices_is_refused_in_one_line() {
    let gguf = smollm2_gguf();
    let model = gguf.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("a.png");
    refused(
        &run(&[
            "-m",
            model,
            "Hi there",
            "--summarise",
            "--png",
            png.to_str().unwrap(),
        ]),
        "--summarise keeps no attention matrix",
    );
    refused(
        &run(&["-m", model, "Hi there", "--summarise", "--generate", "3"]),
        "--generate and --chat need the full attention",
    );
    refused(
        &run(&["-m", model, "Hi there", "--summarise", "--alti"]),
        "--alti needs the full attention",
    );
    refused(
        &run(&["-m", model, "Hi there", "--summarise", "--query", "2,x"]),
        "give token numbers",
    );
    refused(
        &run(&["-m", model, "Hi", "--summarise", "--top-keys", "0"]),
        "--top-keys 0 keeps nothing",
    );
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "one\ntwo\n").unwrap();
    refused(
        &run(&[
            "-m",
            model,
            "--input",
            input.to_str().unwrap(),
            "--summarise",
        ]),
        "corpus mode",
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "only the input file"
    );
}

/// gpt-oss's learned sink (tests/fixtures/tiny-gpt_oss): each query's share on it, kept while
/// summarising, equals the share the same layers captured in full leave (`sink_shares`),
/// within 1e-6; the terminal gives it a column.
#[test]
fn a_learned_sink_s_share_is_kept_in_the_summary() {
    let model = crate::fidelity::reference::fixture("tiny-gpt_oss");
    let model = model.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (full, summ) = (dir.path().join("full.json"), dir.path().join("summ.json"));
    let text = "the quick brown fox jumps over the lazy dog and runs away";
    let base = ["-m", model, text, "--full-precision", "--json"];
    ok(
        &run(&[&base[..], &[full.to_str().unwrap()]].concat()),
        "full capture",
    );
    let out = ok(
        &run(&[&base[..], &[summ.to_str().unwrap(), "--summarise"]].concat()),
        "summarised",
    );
    let (full, summ) = (json(&full), json(&summ));
    let shares = full["sink_shares"]
        .as_array()
        .expect("gpt-oss writes sink_shares");
    let layers = summ["summary"]["layers"].as_array().unwrap();
    assert_eq!(layers.len(), shares.len());
    let mut worst = 0f64;
    for (l, layer) in layers.iter().enumerate() {
        for (h, head) in layer["heads"].as_array().unwrap().iter().enumerate() {
            let got = floats(&head["learned_sink"]);
            let want = floats(&shares[l][h]);
            assert_eq!(got.len(), want.len());
            assert!(
                want.iter().any(|&w| w > 0.01),
                "the fixture's sinks take a share"
            );
            for (a, b) in got.iter().zip(&want) {
                worst = worst.max((a - b).abs());
            }
        }
    }
    assert!(worst <= 1e-6, "learned sink shares off by {worst:e}");
    assert!(out.contains("learned"), "{out}");
}

/// `--html` of a summarised run writes the summaries' report (the browser test
/// `tests/browser/summary.test.mjs` holds its views to the JSON written beside it); `--report`
/// still needs the matrices and is refused in one line.
fn write_summary_report(dir: &Path) {
    let gguf = smollm2_gguf();
    let text = format!("<b>bold</b> &amp; {}", long_text());
    let (html, json) = (dir.join("summary.html"), dir.join("summary.json"));
    ok(
        &run(&[
            "-m",
            gguf.to_str().unwrap(),
            &text,
            "--summarise",
            "--layers",
            "0,15,29",
            "--query",
            "3,400",
            "--html",
            html.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
            "-q",
        ]),
        "summarised report",
    );
}

#[test]
fn a_summarised_run_writes_its_html_report() {
    let dir = tempfile::tempdir().unwrap();
    write_summary_report(dir.path());
    let page = std::fs::read_to_string(dir.path().join("summary.html")).unwrap();
    let summary = &json(&dir.path().join("summary.json"))["summary"];
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(
        page.len() < 2_000_000,
        "{} bytes for 446 tokens × 3 layers",
        page.len()
    );
    // The input's markup is text: in the title escaped, in the metadata as \u003c.
    assert!(page.contains("<title>attnviz — &lt;b&gt;bold&lt;/b&gt; &amp;amp;"));
    assert!(!page.contains("<b>"));
    let start = page.find("id=\"attnviz-meta\">").unwrap() + "id=\"attnviz-meta\">".len();
    let end = start + page[start..].find("</script>").unwrap();
    let meta: Value = serde_json::from_str(&page[start..end]).unwrap();
    assert_eq!(meta["pool"], summary["pool"]);
    assert_eq!(meta["queries"], summary["queries"]);
    assert_eq!(meta["layers"], serde_json::json!([0, 15, 29]));
    assert_eq!(
        meta["detail"], 2,
        "the last summarised layer, as the terminal shows"
    );
    assert_eq!(meta["rows"], summary["rows"]);
    let report = dir.path().join("folder");
    let gguf = smollm2_gguf();
    refused(
        &run(&[
            "-m",
            gguf.to_str().unwrap(),
            "Hi there",
            "--summarise",
            "--report",
            report.to_str().unwrap(),
        ]),
        "--summarise keeps no attention matrix",
    );
    assert!(!report.exists());
}

#[test]
#[ignore = "browser suite: scripts/test.sh runs it with --include-ignored"]
fn summarised_report_in_headless_chromium() {
    let dir = crate::support::cli::repo().join("tests/artifacts/summary");
    std::fs::create_dir_all(&dir).unwrap();
    write_summary_report(&dir);
    crate::support::cli::assert_browsers_ready(&[(
        "/usr/bin/chromium",
        "chromium chromium-driver",
    )]);
    crate::support::cli::node_test("summary.test.mjs", &[("ATTNVIZ_ARTIFACTS", &dir)]);
}
