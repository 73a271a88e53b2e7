//! Value-weighted and norm-aware attention (Kobayashi et al. 2020, 2021) against
//! `tests/reference/make_norm_weights.py`, which builds every contribution vector from
//! transformers' own modules with PyTorch hooks: the tiny BERT, GPT-2 and Llama (grouped-query
//! attention, RoPE) fixtures, and real all-MiniLM-L6-v2 and SmolLM2-135M (GGUF). Run in
//! release; `-- --nocapture` prints each case's largest difference.

use std::path::PathBuf;

use serde::Deserialize;

use attnviz::analysis::{norm_weights, reweighted, Weighting};
use attnviz::model::{EncodeOptions, Model};

use crate::support::models::minilm::minilm_dir;
use crate::support::models::smollm2::smollm2_gguf;

/// Sizes: |Δ| ≤ TOL · max(1, |reference|) (residual-stream norms reach the hundreds); shares
/// of a row: |Δ| ≤ TOL.
const TOL: f64 = 1e-4;

#[derive(Deserialize)]
struct File {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    text: String,
    input_ids: Vec<u32>,
    layers: Vec<usize>,
    heads: usize,
    /// `[layers][heads][n][n]`.
    value_weighted: Vec<Vec<Vec<Vec<f64>>>>,
    norm_aware: Vec<Vec<Vec<Vec<f64>>>>,
}

fn reference() -> File {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference/norm_weights.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn model(name: &str) -> Model {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    match name {
        "minilm" => Model::from_dir(&minilm_dir()).unwrap(),
        "smollm2" => Model::from_gguf(&smollm2_gguf()).unwrap(),
        tiny => Model::from_dir(&root.join("tests/fixtures").join(tiny)).unwrap(),
    }
}

/// Largest size difference (relative above 1) and largest share difference.
fn compare(ours: &[f32], shares: &[f32], want: &[Vec<Vec<f64>>], n: usize) -> (f64, f64) {
    let (mut size, mut share) = (0f64, 0f64);
    for (h, head) in want.iter().enumerate() {
        for (i, row) in head.iter().enumerate() {
            let total: f64 = row.iter().sum();
            for (j, &w) in row.iter().enumerate() {
                let at = (h * n + i) * n + j;
                size = size.max((ours[at] as f64 - w).abs() / w.abs().max(1.0));
                share = share.max((shares[at] as f64 - w / total).abs());
            }
        }
    }
    (size, share)
}

fn check(case: &Case) {
    let model = model(&case.name);
    let opts = EncodeOptions {
        capture_values: true,
        layers: Some(case.layers.clone()),
        ..EncodeOptions::default()
    };
    let enc = model.encode(&case.text, None, &opts).unwrap();
    let att = &enc.attention;
    assert_eq!(
        att.queries().ids,
        case.input_ids,
        "[{}] our tokens differ from the reference's",
        case.name
    );
    assert_eq!(att.heads(), case.heads, "[{}] heads", case.name);
    let weights = norm_weights(att, enc.values.as_ref().expect("values were asked for")).unwrap();
    let n = case.input_ids.len();
    let per_layer = case.heads * n * n;
    for (which, want, sizes) in [
        (
            Weighting::ValueWeighted,
            &case.value_weighted,
            &weights.value_weighted,
        ),
        (Weighting::NormAware, &case.norm_aware, &weights.norm_aware),
    ] {
        let shown = reweighted(att, &weights, which).unwrap();
        for (l, layer) in want.iter().enumerate() {
            let at = l * per_layer..(l + 1) * per_layer;
            let (size, share) = compare(&sizes[at.clone()], &shown.weights()[at], layer, n);
            println!(
                "[{}] {} layer {}: max |Δ| size {size:.2e}, share {share:.2e}",
                case.name,
                which.title(),
                case.layers[l]
            );
            assert!(
                size <= TOL && share <= TOL,
                "[{}] {} layer {}: size |Δ| {size:.2e}, share |Δ| {share:.2e} over {TOL:e}",
                case.name,
                which.title(),
                case.layers[l]
            );
        }
    }
}

fn case(name: &str) -> Case {
    reference()
        .cases
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no reference case {name}"))
}

#[test]
fn tiny_bert_matches_transformers() {
    check(&case("tiny-bert"));
}

#[test]
fn tiny_gpt2_matches_transformers() {
    check(&case("tiny-gpt2"));
}

#[test]
fn tiny_llama_with_grouped_query_attention_matches_transformers() {
    check(&case("tiny-llama"));
}

#[test]
fn minilm_matches_transformers() {
    check(&case("minilm"));
}

#[test]
fn smollm2_matches_transformers() {
    check(&case("smollm2"));
}

#[test]
fn nothing_is_kept_unless_asked() {
    let model = model("tiny-bert");
    let enc = model
        .encode("the cat", None, &EncodeOptions::default())
        .unwrap();
    assert!(enc.values.is_none());
}

/// `--weighting` draws each row's shares of what reaches the query: the figures' colour bars
/// say "share of the row", the JSON export records it, and `render` of that export says so too.
#[test]
fn weighted_views_are_captioned_as_shares_and_render_keeps_it() {
    use crate::support::cli::{run, stderr, tiny};
    let dir = tempfile::tempdir().unwrap();
    let at = |n: &str| dir.path().join(n).display().to_string();
    let model = tiny().display().to_string();
    for (weighting, shares) in [
        (None, false),
        (Some("value-weighted"), true),
        (Some("norm-aware"), true),
    ] {
        let (svg, json) = (at("run.svg"), at("run.json"));
        let mut args = vec![
            "-m",
            &model,
            "the cat sat",
            "--svg",
            &svg,
            "--json",
            &json,
            "-q",
        ];
        if let Some(w) = weighting {
            args.extend(["--weighting", w]);
        }
        let out = run(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        let said = |path: &str| {
            let svg = std::fs::read_to_string(path).unwrap();
            (
                svg.contains("share of the row"),
                svg.contains("attention weight"),
            )
        };
        assert_eq!(said(&svg), (shares, !shares), "{weighting:?}");
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(
            doc["attention_holds"],
            weighting.unwrap_or("raw"),
            "{weighting:?}"
        );
        let again = at("again.svg");
        let out = run(&["render", &json, "--svg", &again, "-q"]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(said(&again), (shares, !shares), "render of {weighting:?}");
    }
}
