//! Statistics under a sliding window count the keys a query really sees: the numpy reference
//! `tests/reference/windowed_stats.py` computes them from transformers' attention of the tiny
//! Mistral with a window of 6 (`tests/reference/analysis/windowed.json`); attnviz computes them
//! from the same weights, labelled by its own run, and in the JSON export of its own run.

use attnviz::analysis;
use attnviz::import::{read, ReadOptions};
use serde_json::Value;

use crate::fidelity::families::FamilyReference;
use crate::fidelity::reference::{fixture, repo};
use crate::support::cli::run;

fn expected() -> Value {
    let path = repo().join("tests/reference/analysis/windowed.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

#[test]
fn windowed_statistics_match_numpy() {
    let want = expected();
    let text = want["text"].as_str().unwrap();
    let reference = FamilyReference::load("tiny-mistral-window");
    let case = reference.cases.iter().find(|c| c.name == "single").unwrap();
    let hf = reference.values(&case.tensors["attentions"]);

    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("w.json");
    let model = fixture("tiny-mistral-window");
    let out = run(&[
        "-m",
        model.to_str().unwrap(),
        text,
        "--json",
        json.to_str().unwrap(),
        "--full-precision",
        "-q",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exported: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let ours = read(&json, &ReadOptions::default())
        .unwrap()
        .kinds
        .remove(0);
    assert_eq!(ours.windows(), &[Some(6), Some(6)]);
    // transformers' weights, labelled and masked as attnviz's run.
    let hf_att = ours
        .derive(ours.level, false, ours.queries().clone(), None, hf)
        .unwrap();
    let from_hf = analysis::head_stats(&hf_att);
    let from_run = analysis::head_stats(&ours);
    let mut causal_only_differs = false;
    for (l, layer) in want["layers"].as_array().unwrap().iter().enumerate() {
        for (h, w) in layer.as_array().unwrap().iter().enumerate() {
            let got = &from_hf[l][h];
            let pairs = [
                ("entropy", got.entropy),
                ("entropy_norm", got.entropy_norm),
                ("distance", got.distance),
                ("to_first", got.to_first),
                ("to_self", got.to_self),
                ("to_prev", got.to_prev),
            ];
            for (name, value) in pairs {
                let d = (value - f(&w[name])).abs();
                assert!(
                    d <= 1e-6,
                    "layer {l} head {h} {name}: {value} vs numpy {}",
                    w[name]
                );
                // attnviz's own run (within the fidelity tolerance of transformers' weights).
                let run_value = match name {
                    "entropy" => from_run[l][h].entropy,
                    "entropy_norm" => from_run[l][h].entropy_norm,
                    _ => continue,
                };
                assert!(
                    (run_value - value).abs() <= 1e-4,
                    "run: layer {l} head {h} {name}"
                );
                let json_value = f(&exported["stats"][name][l][h]);
                assert!(
                    (json_value - run_value).abs() <= 1e-6,
                    "JSON stats {name} [{l}][{h}]"
                );
            }
            assert_eq!(got.rows, w["rows"].as_u64().unwrap() as usize);
            causal_only_differs |=
                (f(&w["entropy_norm_causal_only"]) - got.entropy_norm).abs() > 0.05;
        }
    }
    // What counting by the causal mask alone gives is far from it: the test can tell.
    assert!(causal_only_differs);
}
