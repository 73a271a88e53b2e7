//! Word merging: the Rust merge (`attnviz::analysis`) and the report page's
//! (`crates/render/assets/report/words.js`) against the same expectations, `tests/word_merge_cases.json`.

use attnviz::analysis::{word_groups, word_label};
use attnviz::attention::{Role, Units};
use serde_json::Value;

use crate::support::cli::node_test;
use crate::support::data::{json_file, strings};

fn cases() -> Vec<Value> {
    json_file("tests/word_merge_cases.json")["cases"]
        .as_array()
        .unwrap()
        .clone()
}

fn units(case: &Value) -> Units {
    let tokens = strings(&case["tokens"]);
    let n = tokens.len();
    let segments: Vec<u32> = case["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap() as u32)
        .collect();
    let roles = strings(&case["roles"])
        .iter()
        .map(|r| Role::from_name(r).unwrap_or_else(|| panic!("unknown role {r}")))
        .collect();
    let word_ids = case["word_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_u64().map(|w| w as usize))
        .collect();
    let mut units = Units::tokens(
        tokens,
        (0..n as u32).collect(),
        segments.clone(),
        segments,
        roles,
        word_ids,
        strings(&case["surfaces"]),
    );
    if let Some(generated) = case["generated"].as_array() {
        units.generated = generated.iter().map(|g| g.as_bool().unwrap()).collect();
    }
    units
}

#[test]
fn rust_merge_meets_the_shared_cases() {
    let cases = cases();
    assert!(cases.len() >= 8);
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let all = units(case);
        let keep: Vec<usize> = match case["keep"].as_array() {
            Some(k) => k.iter().map(|i| i.as_u64().unwrap() as usize).collect(),
            None => (0..all.len()).collect(),
        };
        let kept = all.select(&keep);
        let groups = word_groups(&kept);
        let got: Vec<(Vec<usize>, String)> = groups
            .iter()
            .map(|g| {
                let tokens = g.clone().map(|i| keep[i]).collect();
                let label = word_label(&kept.labels[g.clone()], &kept.surfaces[g.clone()]);
                (tokens, label)
            })
            .collect();
        let want: Vec<(Vec<usize>, String)> = case["words"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| {
                let tokens = w["tokens"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| i.as_u64().unwrap() as usize)
                    .collect();
                (tokens, w["label"].as_str().unwrap().to_string())
            })
            .collect();
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn page_merge_meets_the_shared_cases() {
    let text = node_test("words.test.mjs", &[]);
    assert!(text.contains("merge: wordpiece"), "{text}");
}
