//! Corpus mode on an encoder–decoder with targets (issue 21): each line's target is
//! teacher-forced, the corpus statistics are those of one attention kind (cross-attention by
//! default), checked against the single-sentence CLI run with `--target` on each line; the kind
//! is recorded, shards of different kinds are not merged, and a line without a target is a bad
//! line.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::support::cli::{attnviz, fixture, run_corpus, stderr};
use crate::support::data::read_json;

fn bart() -> PathBuf {
    fixture("tiny-bart")
}

/// Source and target of each line.
const LINES: &[(&str, &str)] = &[
    ("The cat sat on the mat.", "A cat was sitting there."),
    ("Where is the station?", "The station is near."),
    ("Attention looks at tokens.", "Heads attend."),
];

fn corpus(dir: &Path, name: &str, input: &str, out: &str, flags: &[&str]) -> Output {
    let file = dir.join(name);
    fs::write(&file, input).unwrap();
    run_corpus(&bart(), &file, &dir.join(out), flags)
}

fn tsv() -> String {
    LINES.iter().map(|(s, t)| format!("{s}\t{t}\n")).collect()
}

/// The JSON the single-sentence CLI writes for `source` teacher-forced with `target`.
fn cli_json(dir: &Path, i: usize, source: &str, target: &str, flags: &[&str]) -> (Vec<u8>, Value) {
    let path = dir.join(format!("cli-{i}.json"));
    let out = attnviz()
        .arg("-m")
        .arg(bart())
        .arg(source)
        .arg("--target")
        .arg(target)
        .arg("--json")
        .arg(&path)
        .args(flags)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let bytes = fs::read(&path).unwrap();
    let doc = serde_json::from_slice(&bytes).unwrap();
    (bytes, doc)
}

/// The statistics the corpus averages (those of `docs/stats.md` that apply to every kind).
const STATS: [&str; 9] = [
    "entropy",
    "entropy_norm",
    "distance",
    "to_start",
    "to_end",
    "to_punct",
    "to_self",
    "to_prev",
    "to_next",
];

/// Check `summary`'s mean, per-row mean and sentence counts of every statistic against the
/// per-line `docs` section `kind` (the single-sentence CLI's), cell by cell; returns the
/// number of cells compared with a value.
fn check_means(summary: &Value, docs: &[Value], kind: &str) -> usize {
    let stats = &summary["stats"];
    let per_row = &summary["stats_per_row"];
    let layers = docs[0][kind]["stats"]["entropy"].as_array().unwrap().len();
    let heads = docs[0][kind]["stats"]["entropy"][0]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(stats["entropy"].as_array().unwrap().len(), layers);
    assert_eq!(stats["entropy"][0].as_array().unwrap().len(), heads);
    let mut compared = 0;
    for name in STATS {
        for l in 0..layers {
            for h in 0..heads {
                let values: Vec<(f64, f64)> = docs
                    .iter()
                    .filter_map(|d| {
                        let s = &d[kind]["stats"];
                        Some((s[name][l][h].as_f64()?, s["rows"][l][h].as_f64().unwrap()))
                    })
                    .collect();
                let got = stats[name][l][h].as_f64();
                if values.is_empty() {
                    assert_eq!(got, None, "{kind} {name}[{l}][{h}] has no value per line");
                    continue;
                }
                let n = values.len() as f64;
                let mean = values.iter().map(|v| v.0).sum::<f64>() / n;
                let rows: f64 = values.iter().map(|v| v.1).sum();
                let weighted = values.iter().map(|v| v.0 * v.1).sum::<f64>() / rows;
                let got = got.unwrap_or_else(|| panic!("{kind} {name}[{l}][{h}] missing"));
                assert!(
                    (got - mean).abs() <= 1e-12 * mean.abs().max(1e-3),
                    "{kind} {name}[{l}][{h}]: {got} vs {mean}"
                );
                let row = per_row[name][l][h].as_f64().unwrap();
                assert!(
                    (row - weighted).abs() <= 1e-12 * weighted.abs().max(1e-3),
                    "per-row {kind} {name}[{l}][{h}]"
                );
                compared += 1;
            }
        }
    }
    compared
}

#[test]
fn corpus_with_targets_averages_the_cross_attention_of_each_teacher_forced_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = corpus(dir.path(), "in.tsv", &tsv(), "out", &["--quiet"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = read_json(&dir.path().join("out/corpus_stats.json"));
    assert_eq!(summary["sentences"], 3);
    assert_eq!(summary["bad_lines"]["count"], 0);
    assert_eq!(summary["options"]["kind"], "cross");
    assert_eq!(summary["options"]["targets"], true);
    let partial = read_json(&dir.path().join("out/corpus_partial.json"));
    assert!(
        partial.to_string().contains("\"kind\":\"cross\""),
        "the partial file records the kind"
    );

    let mut docs = Vec::new();
    for (i, (source, target)) in LINES.iter().enumerate() {
        let (bytes, doc) = cli_json(dir.path(), i, source, target, &[]);
        let file = dir.path().join(format!("out/sentences/{:06}.json", i + 1));
        assert!(
            fs::read(&file).unwrap() == bytes,
            "line {}: the per-sentence file differs from the CLI's --target --json",
            i + 1
        );
        assert_eq!(doc["target"], *target);
        docs.push(doc);
    }
    let compared = check_means(&summary, &docs, "cross");
    assert!(compared > 0, "no statistic had a value");
    // The tokens counted are the cross-attention's query rows: the decoder's tokens.
    let tokens: u64 = docs
        .iter()
        .map(|d| d["cross"]["tokens"].as_array().unwrap().len() as u64)
        .sum();
    assert_eq!(summary["tokens"], tokens);
}

#[test]
fn kind_picks_the_attention_and_jsonl_gives_targets_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl: String = LINES
        .iter()
        .map(|(s, t)| format!("{}\n", serde_json::json!({"text": s, "target": t})))
        .collect();
    let out = corpus(
        dir.path(),
        "in.jsonl",
        &jsonl,
        "out",
        &["--quiet", "--kind", "decoder", "--per-sentence", "none"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = read_json(&dir.path().join("out/corpus_stats.json"));
    assert_eq!(summary["options"]["kind"], "decoder");
    let docs: Vec<Value> = LINES
        .iter()
        .enumerate()
        .map(|(i, (s, t))| cli_json(dir.path(), i, s, t, &[]).1)
        .collect();
    assert!(check_means(&summary, &docs, "decoder") > 0);

    // Without targets an encoder–decoder's corpus is its encoder's, as before.
    let plain: String = LINES.iter().map(|(s, _)| format!("{s}\n")).collect();
    let out = corpus(dir.path(), "plain.txt", &plain, "enc", &["--quiet"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = read_json(&dir.path().join("enc/corpus_stats.json"));
    assert_eq!(summary["options"]["kind"], "encoder");
    assert_eq!(summary["options"]["targets"], false);
    assert!(check_means(&summary, &docs, "encoder") > 0);

    // Self-attention is no kind of an encoder–decoder.
    let out = corpus(dir.path(), "in.tsv", &tsv(), "self", &["--kind", "self"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("--kind self") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn a_line_without_a_target_is_a_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let input = format!(
        "{}\t{}\nNo target here.\n{}\t{}\n",
        LINES[0].0, LINES[0].1, LINES[1].0, LINES[1].1
    );
    let out = corpus(dir.path(), "in.tsv", &input, "out", &["--quiet"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("line 2: no target"), "{err}");
    let summary = read_json(&dir.path().join("out/corpus_stats.json"));
    assert_eq!(summary["sentences"], 2);
    assert_eq!(summary["bad_lines"]["by_kind"]["no-target"], 1);
    assert_eq!(summary["bad_lines"]["listed"][0]["line"], 2);

    let out = corpus(
        dir.path(),
        "in.tsv",
        &input,
        "stop",
        &["--quiet", "--on-bad-line", "stop"],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("line 2: no target"),
        "{}",
        stderr(&out)
    );

    // A pair is refused for BART, as a bad line that says what to give instead.
    let out = corpus(
        dir.path(),
        "pair.jsonl",
        "{\"text\": \"a\", \"pair\": \"b\", \"target\": \"c\"}\n{\"text\": \"a\", \"target\": \"c\"}\n",
        "pair",
        &["--quiet"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = read_json(&dir.path().join("pair/corpus_stats.json"));
    assert_eq!(summary["bad_lines"]["by_kind"]["pair-unsupported"], 1);
    assert_eq!(summary["sentences"], 1);

    // A target for an encoder is a bad line.
    let file = dir.path().join("bert.jsonl");
    fs::write(
        &file,
        "{\"text\": \"a b\"}\n{\"text\": \"a\", \"target\": \"c\"}\n",
    )
    .unwrap();
    let out = attnviz()
        .arg("-m")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-bert"))
        .arg("--input")
        .arg(&file)
        .arg("--out-dir")
        .arg(dir.path().join("bert"))
        .arg("--quiet")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("line 2: a target, but targets are for encoder–decoder models"),
        "{}",
        stderr(&out)
    );
    let summary = read_json(&dir.path().join("bert/corpus_stats.json"));
    assert_eq!(summary["bad_lines"]["by_kind"]["target-unsupported"], 1);
    assert!(summary["options"].get("kind").is_none());
}

#[test]
fn shards_of_different_kinds_are_not_merged() {
    let dir = tempfile::tempdir().unwrap();
    let a = corpus(
        dir.path(),
        "in.tsv",
        &tsv(),
        "a",
        &["--quiet", "--shard", "1/2", "--per-sentence", "none"],
    );
    assert!(a.status.success(), "{}", stderr(&a));
    let b = corpus(
        dir.path(),
        "in.tsv",
        &tsv(),
        "b",
        &[
            "--quiet",
            "--shard",
            "2/2",
            "--per-sentence",
            "none",
            "--kind",
            "encoder",
        ],
    );
    assert!(b.status.success(), "{}", stderr(&b));
    let merged = dir.path().join("merged.json");
    let out = attnviz()
        .arg("merge")
        .arg(dir.path().join("a"))
        .arg(dir.path().join("b"))
        .arg("--out")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("encoder attention") && err.contains("cross attention"),
        "{err}"
    );
    assert!(err.contains("--kind") && err.lines().count() == 1, "{err}");
    assert!(!merged.exists());

    // The same kind merges.
    let c = corpus(
        dir.path(),
        "in.tsv",
        &tsv(),
        "c",
        &["--quiet", "--shard", "2/2", "--per-sentence", "none"],
    );
    assert!(c.status.success(), "{}", stderr(&c));
    let out = attnviz()
        .arg("merge")
        .arg(dir.path().join("a"))
        .arg(dir.path().join("c"))
        .arg("--out")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read_json(&merged)["options"]["kind"], "cross");
}
