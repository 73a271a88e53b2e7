//! Every model family through every surface of the `attnviz` binary, on the tiny random
//! checkpoints: the terminal view, JSON (checked against transformers' attention), PNG and SVG
//! figures, the HTML report with its neuron view, statistics, `--words`, `--no-special`, and
//! corpus mode.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::fidelity::families::FamilyReference;
use crate::fidelity::reference::{fixture, ATTENTION_TOL};

fn attnviz() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_attnviz"));
    cmd.env_remove("ATTNVIZ_MODEL")
        .env("HF_HUB_OFFLINE", "1")
        .env("NO_COLOR", "1");
    cmd
}

fn run(args: &[&str]) -> Output {
    attnviz().args(args).output().expect("attnviz runs")
}

fn ok(out: &Output, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The JSON's attention, flattened `[layers, heads, n, n]`.
fn attention(json: &Value) -> Vec<f32> {
    json["attention"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l.as_array().unwrap())
        .flat_map(|h| h.as_array().unwrap())
        .flat_map(|q| q.as_array().unwrap())
        .map(|v| v.as_f64().unwrap() as f32)
        .collect()
}

/// Everything the CLI offers, for the model in fixture `folder`, checked against the family's
/// references `label`.
fn every_surface(folder: &str, label: &str, family: &str) {
    let model = fixture(folder);
    let model = model.to_str().unwrap();
    let reference = FamilyReference::load(label);
    let special_id = |name: &str| reference.special_tokens.get(name).map(|(_, id)| *id);
    let (start_id, end_id) = (special_id("cls_token"), special_id("sep_token"));
    let tmp = tempfile::tempdir().unwrap();
    let at = |name: &str| tmp.path().join(name);

    // JSON of a sentence and of a pair: HF's tokens and attention, every layer and head.
    for case in reference.cases.iter().filter(|c| !c.truncate) {
        let path = at(&format!("{}.json", case.name));
        let mut args = vec![
            "-m",
            model,
            &case.text,
            "--json",
            path.to_str().unwrap(),
            "--full-precision",
            "--stats",
            "-q",
        ];
        if let Some(pair) = &case.pair {
            args.extend(["--pair", pair]);
        }
        ok(&run(&args), &format!("[{folder}] {} --json", case.name));
        let j = json(&path);
        let ids: Vec<u32> = serde_json::from_value(j["input_ids"].clone()).unwrap();
        assert_eq!(ids, case.input_ids, "[{folder}] {}", case.name);
        // What ran, and each token's role, against the family and HF's special-token mask.
        let what = format!("[{folder}] {}", case.name);
        assert_eq!(j["model"]["family"], family, "{what}");
        assert_eq!(j["kind"], "self", "{what}");
        assert_eq!(j["mask"], "bidirectional", "{what}");
        let heads = j["model"]["heads"].as_u64().unwrap();
        assert_eq!(j["kv_heads"], heads, "{what}");
        let kv_head: Vec<u64> = serde_json::from_value(j["kv_head"].clone()).unwrap();
        assert_eq!(kv_head, (0..heads).collect::<Vec<_>>(), "{what}");
        let special: Vec<bool> = serde_json::from_value(j["special"].clone()).unwrap();
        let roles: Vec<String> = serde_json::from_value(j["roles"].clone()).unwrap();
        for (i, (&id, &mask)) in case
            .input_ids
            .iter()
            .zip(&case.special_tokens_mask)
            .enumerate()
        {
            assert_eq!(special[i], mask == 1, "{what}: token {i}");
            let want = match () {
                _ if Some(id) == start_id && i == 0 => "start",
                _ if Some(id) == end_id => "end",
                _ if mask == 1 => "special",
                _ => "",
            };
            match want {
                "" => assert!(
                    ["word", "piece"].contains(&roles[i].as_str()),
                    "{what}: {i}"
                ),
                want => assert_eq!(roles[i], want, "{what}: token {i}"),
            }
        }
        let theirs = reference.values(&case.tensors["attentions"]);
        let ours = attention(&j);
        assert_eq!(ours.len(), theirs.len(), "[{folder}] {}", case.name);
        let worst = ours
            .iter()
            .zip(&theirs)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        eprintln!(
            "[{folder}] {}: CLI JSON vs HF max |Δ| = {worst:.2e}",
            case.name
        );
        assert!(
            worst <= ATTENTION_TOL,
            "[{folder}] {}: {worst:e}",
            case.name
        );

        // Shares to the sequence start and end, whatever their text: from HF's attention, by
        // HF's special token ids.
        let n = case.n;
        let heads = heads as usize;
        for (stat, id) in [("to_start", start_id), ("to_end", end_id)] {
            let keys: Vec<usize> = (0..n)
                .filter(|&k| Some(case.input_ids[k]) == id && (stat == "to_end" || k == 0))
                .collect();
            assert!(!keys.is_empty(), "{what}: no {stat} token");
            let table: Vec<Vec<f64>> = serde_json::from_value(j["stats"][stat].clone())
                .unwrap_or_else(|e| panic!("{what}: stats.{stat}: {e}"));
            for (l, row) in table.iter().enumerate() {
                for (h, &got) in row.iter().enumerate() {
                    let head = &theirs[(l * heads + h) * n * n..][..n * n];
                    let want = (0..n)
                        .map(|q| keys.iter().map(|&k| head[q * n + k] as f64).sum::<f64>())
                        .sum::<f64>()
                        / n as f64;
                    assert!(
                        (got - want).abs() <= 1e-5,
                        "{what}: {stat} layer {l} head {h}: {got} vs HF {want}"
                    );
                }
            }
        }
    }

    let pair = reference
        .cases
        .iter()
        .find(|c| c.pair.is_some() && !c.truncate)
        .expect("a pair case");
    let (text, second) = (pair.text.as_str(), pair.pair.as_deref().unwrap());

    // The terminal view and statistics.
    let terminal = ok(
        &run(&["-m", model, text, "--pair", second, "--stats"]),
        &format!("[{folder}] terminal"),
    );
    assert!(
        terminal.contains(folder),
        "[{folder}] names the model: {terminal}"
    );
    assert!(!terminal.contains('\x1b'), "plain text without a terminal");

    // --words, --no-special and a chosen head, to JSON on stdout.
    let words = ok(
        &run(&[
            "-m",
            model,
            text,
            "--pair",
            second,
            "--words",
            "--no-special",
            "--layer",
            "0",
            "--head",
            "1",
            "--json",
            "-",
        ]),
        &format!("[{folder}] --words --no-special"),
    );
    let words: Value = serde_json::from_str(&words).expect("JSON on stdout");
    assert_eq!(words["level"], "word", "[{folder}]");
    assert_eq!(words["special_excluded"], true, "[{folder}]");

    // Every figure, as PNG and SVG, and the HTML report with the neuron view.
    let report = at("report");
    ok(
        &run(&[
            "-m",
            model,
            text,
            "--pair",
            second,
            "--report",
            report.to_str().unwrap(),
            "--neuron",
            "-q",
        ]),
        &format!("[{folder}] --report"),
    );
    for figure in ["layer", "mean", "model", "rollout"] {
        let png = std::fs::read(report.join(format!("{figure}.png"))).unwrap();
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n"),
            "[{folder}] {figure}.png"
        );
        let svg = std::fs::read_to_string(report.join(format!("{figure}.svg"))).unwrap();
        assert!(svg.contains("<svg"), "[{folder}] {figure}.svg");
    }
    let head_png = at("head.png");
    ok(
        &run(&[
            "-m",
            model,
            text,
            "--figure",
            "head",
            "--layer",
            "1",
            "--head",
            "0",
            "--png",
            head_png.to_str().unwrap(),
            "-q",
        ]),
        &format!("[{folder}] --png"),
    );
    assert!(std::fs::read(&head_png).unwrap().starts_with(b"\x89PNG"));
    let html = std::fs::read_to_string(report.join("report.html")).unwrap();
    assert!(
        html.contains("<script") && html.contains(folder),
        "[{folder}] report.html"
    );
    assert_eq!(
        json(&report.join("attention.json"))["model"]["layers"],
        reference.cases[0].tensors["attentions"].shape[0],
        "[{folder}] every attention map in the report"
    );

    // Corpus mode: a sentence and a tab-separated pair.
    let input = at("corpus.txt");
    std::fs::write(&input, format!("{text}\n{text}\t{second}\n")).unwrap();
    let out_dir = at("corpus");
    ok(
        &run(&[
            "-m",
            model,
            "--input",
            input.to_str().unwrap(),
            "--out-dir",
            out_dir.to_str().unwrap(),
            "--words",
        ]),
        &format!("[{folder}] corpus mode"),
    );
    let stats = json(&out_dir.join("corpus_stats.json"));
    assert!(stats.is_object(), "[{folder}] corpus_stats.json");
    for line in ["000001.json", "000002.json"] {
        let sentence = json(&out_dir.join("sentences").join(line));
        assert_eq!(sentence["level"], "word", "[{folder}] {line}");
    }
}

#[test]
fn roberta_through_every_surface() {
    every_surface("tiny-roberta", "tiny-roberta", "RoBERTa");
}

#[test]
fn xlm_roberta_through_every_surface() {
    every_surface("tiny-xlm-roberta", "tiny-xlm-roberta", "XLM-RoBERTa");
}

#[test]
fn distilbert_through_every_surface() {
    every_surface("tiny-distilbert-mlm", "tiny-distilbert", "DistilBERT");
}

#[test]
fn albert_through_every_surface() {
    every_surface("tiny-albert-groups", "tiny-albert-groups", "ALBERT");
}

#[test]
fn electra_through_every_surface() {
    every_surface("tiny-electra-mlm", "tiny-electra", "ELECTRA");
}

#[test]
fn rxnmapper_smiles_through_the_cli() {
    // The real ALBERT with its SMILES tokenizer: the JSON carries rxnmapper's tokens and
    // transformers' attention for every layer and head.
    let dir = crate::support::models::rxnmapper::rxnmapper_dir();
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(
            crate::fidelity::reference::repo().join("tests/reference/rxnmapper.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let case = &reference["cases"][0];
    let text = case["text"].as_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("rxn.json");
    let terminal = ok(
        &run(&[
            "-m",
            dir.to_str().unwrap(),
            text,
            "--json",
            path.to_str().unwrap(),
            "--full-precision",
        ]),
        "rxnmapper",
    );
    assert!(
        terminal.contains(">>"),
        "the reaction arrow is one token: {terminal}"
    );
    let j = json(&path);
    assert_eq!(j["tokens"], case["tokens"]);
    assert_eq!(j["model"]["family"], "ALBERT");
    assert_eq!(j["mask"], "bidirectional");
    // rxnmapper's tokenizer wraps the reaction in [CLS] … [SEP].
    let roles = j["roles"].as_array().unwrap();
    assert_eq!(roles.first().unwrap(), "start");
    assert_eq!(roles.last().unwrap(), "end");
    assert!(roles[1..roles.len() - 1].iter().all(|r| r == "word"));
    let tensors = candle_core::safetensors::load(
        crate::fidelity::reference::repo().join("tests/reference/rxnmapper.safetensors"),
        &candle_core::Device::Cpu,
    )
    .unwrap();
    let theirs: Vec<f32> = tensors[case["attentions"]["tensor"].as_str().unwrap()]
        .flatten_all()
        .and_then(|t| t.to_vec1())
        .unwrap();
    let ours = attention(&j);
    assert_eq!(ours.len(), theirs.len());
    let worst = ours
        .iter()
        .zip(&theirs)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    eprintln!("rxnmapper: CLI JSON vs HF max |Δ| = {worst:.2e}");
    assert!(worst <= ATTENTION_TOL, "{worst:e}");
}
