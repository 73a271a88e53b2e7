//! Small CLI gaps: the report's head figure with the default `--head mean`, the JSON export's
//! optional `means` and `rollout` sections (`--json-include`), and one clear line for corpus-mode
//! flags given without `--input`.

use std::fs;

use serde_json::Value;

use crate::support::cli::{assert_clean_failure, attnviz, minilm, run, stderr, tiny};

#[test]
fn report_with_the_default_head_mean_draws_the_most_focused_head() {
    let m = minilm();
    let dir = tempfile::tempdir().unwrap();
    let rep = dir.path().join("rep");
    let out = run(&[
        "-m",
        m.to_str().unwrap(),
        "The cat sat on the mat because it was tired.",
        "--report",
        rep.to_str().unwrap(),
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("wrote 12 files"), "{}", stderr(&out));
    // The head the figure names is the one with the lowest mean entropy in the last layer among
    // the heads not labelled a sink, by the statistics in the report's own JSON.
    let json: Value =
        serde_json::from_slice(&fs::read(rep.join("attention.json")).unwrap()).unwrap();
    let entropy: Vec<f64> = json["stats"]["entropy"][5]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let labels: Vec<&str> = json["stats"]["label"][5]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let sink = |h: usize| matches!(labels[h], "first-token-sink" | "special-sink");
    let focused = (0..entropy.len())
        .filter(|&h| !sink(h))
        .min_by(|&a, &b| entropy[a].total_cmp(&entropy[b]))
        .unwrap();
    assert!(labels.iter().any(|l| l.ends_with("sink")), "{labels:?}");
    let svg = fs::read_to_string(rep.join("head.svg")).unwrap();
    assert!(
        svg.contains(&format!(
            "layer 5 · head {focused} (most focused: lowest entropy, sink heads left out)"
        )),
        "head.svg does not name head {focused}"
    );
    assert!(fs::read(rep.join("head.png"))
        .unwrap()
        .starts_with(b"\x89PNG"));
}

/// `a · b` for row-major `n × n` matrices, in f64.
fn matmul(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        for k in 0..n {
            for j in 0..n {
                out[i * n + j] += a[i * n + k] * b[k * n + j];
            }
        }
    }
    out
}

#[test]
fn json_include_adds_layer_means_and_rollout_checked_against_the_attention() {
    let m = minilm();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.json");
    let out = run(&[
        "-m",
        m.to_str().unwrap(),
        "The quick brown fox jumps over the lazy dog.",
        "--json",
        path.to_str().unwrap(),
        "--json-include",
        "means,rollout",
        "--full-precision",
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    let att = json["attention"].as_array().unwrap();
    let (layers, heads) = (att.len(), att[0].as_array().unwrap().len());
    let n = json["tokens"].as_array().unwrap().len();
    let cell = |v: &Value, q: usize, k: usize| v[q][k].as_f64().unwrap();
    // Independently: the mean of the heads, then rollout = Π (½·mean + ½·I), later layers left.
    let mut rollout: Option<Vec<f64>> = None;
    let (mut worst_mean, mut worst_rollout) = (0f64, 0f64);
    for l in 0..layers {
        let mut mean = vec![0.0; n * n];
        for head in att[l].as_array().unwrap() {
            for q in 0..n {
                for k in 0..n {
                    mean[q * n + k] += cell(head, q, k) / heads as f64;
                }
            }
        }
        let mut hat = mean.iter().map(|v| 0.5 * v).collect::<Vec<_>>();
        for i in 0..n {
            hat[i * n + i] += 0.5;
        }
        let r = match &rollout {
            None => hat,
            Some(prev) => matmul(&hat, prev, n),
        };
        for q in 0..n {
            for k in 0..n {
                worst_mean =
                    worst_mean.max((cell(&json["means"][l], q, k) - mean[q * n + k]).abs());
                worst_rollout =
                    worst_rollout.max((cell(&json["rollout"][l], q, k) - r[q * n + k]).abs());
            }
        }
        rollout = Some(r);
    }
    eprintln!("means max |Δ| {worst_mean:.2e}, rollout max |Δ| {worst_rollout:.2e}");
    assert!(worst_mean < 1e-6 && worst_rollout < 1e-5);
    assert_eq!(json["means"].as_array().unwrap().len(), layers);
    assert_eq!(json["rollout"].as_array().unwrap().len(), layers);

    // Word level: the sections follow the view (one row per word).
    let out = run(&[
        "-m",
        m.to_str().unwrap(),
        "Unbelievably tired cats.",
        "--words",
        "--json",
        path.to_str().unwrap(),
        "--json-include",
        "rollout",
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    let n = json["tokens"].as_array().unwrap().len();
    assert_eq!(json["rollout"][0].as_array().unwrap().len(), n);
    assert!(json.get("means").is_none());
}

#[test]
fn json_include_reaches_corpus_mode_files() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    fs::write(&input, "the quick brown fox .\n").unwrap();
    let out = attnviz()
        .arg("-m")
        .arg(tiny())
        .arg("--input")
        .arg(&input)
        .arg("--out-dir")
        .arg(dir.path().join("out"))
        .args(["--json-include", "means", "-q"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value =
        serde_json::from_slice(&fs::read(dir.path().join("out/sentences/000001.json")).unwrap())
            .unwrap();
    assert_eq!(json["means"].as_array().unwrap().len(), 3);
}

#[test]
fn corpus_flags_without_input_give_one_clear_line() {
    let m = tiny();
    let m = m.to_str().unwrap();
    for flag in [
        &["--out-dir", "x"][..],
        &["--on-bad-line", "stop"],
        &["--per-sentence", "json"],
        &["--force"],
    ] {
        let mut args = vec!["-m", m, "the fox ."];
        args.extend_from_slice(flag);
        let out = run(&args);
        assert_clean_failure(
            &out,
            &format!("{} only applies to corpus mode; add --input FILE", flag[0]),
        );
    }
    assert_clean_failure(
        &run(&["-m", m, "the fox .", "--json-include", "means"]),
        "add --json FILE or --report DIR",
    );
    assert_clean_failure(
        &run(&["-m", m, "--input", "x.txt"]),
        "--input needs --out-dir DIR",
    );
}
