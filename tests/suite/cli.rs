//! The `attnviz` binary end to end: what it writes must agree with Hugging Face transformers'
//! reference outputs (tests/reference, written by make_reference.py), and bad input must give a
//! one-line error, a non-zero exit status, no panic and no half-written file.

use crate::fidelity::reference;

use std::process::Stdio;

use crate::support::cli::{assert_clean_failure, attnviz, run, stderr};

use reference::{minilm_dir, Case, Reference, ATTENTION_TOL};
use serde_json::Value;

fn case<'a>(r: &'a Reference, name: &str) -> &'a Case {
    r.cases
        .iter()
        .find(|c| c.name == name)
        .expect("reference case")
}

/// The JSON export must carry HF's tokens and, for every layer, head, query and key, HF's
/// attention to within 1e-5.
fn assert_json_matches(json: &Value, r: &Reference, c: &Case) {
    let tokens: Vec<&str> = json["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(tokens, c.tokens, "{}", c.name);
    let ids: Vec<u32> = serde_json::from_value(json["input_ids"].clone()).unwrap();
    assert_eq!(ids, c.input_ids);
    let types: Vec<u32> = serde_json::from_value(json["token_type_ids"].clone()).unwrap();
    assert_eq!(types, c.token_type_ids);
    let b_start = c.token_type_ids.iter().position(|&t| t == 1);
    assert_eq!(
        json["sentence_b_start"].as_u64().map(|v| v as usize),
        b_start
    );

    let expected = r.values(c.attentions.as_ref().unwrap());
    let got: Vec<f32> = json["attention"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l.as_array().unwrap())
        .flat_map(|h| h.as_array().unwrap())
        .flat_map(|q| q.as_array().unwrap())
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(got.len(), expected.len(), "{}", c.name);
    let worst = got
        .iter()
        .zip(&expected)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    eprintln!("{}: CLI JSON vs HF max |Δ| = {worst:.3e}", c.name);
    assert!(worst <= ATTENTION_TOL, "{}: max |Δ| {worst:e}", c.name);
}

#[test]
fn json_export_matches_hf_for_a_sentence_and_a_pair() {
    let model = minilm_dir();
    let r = Reference::load("minilm");
    let dir = tempfile::tempdir().unwrap();
    for name in ["fox", "pair", "cjk_emoji"] {
        let c = case(&r, name);
        let path = dir.path().join(format!("{name}.json"));
        let mut args = vec![
            "-m",
            model.to_str().unwrap(),
            &c.text,
            "--json",
            path.to_str().unwrap(),
            "--full-precision",
            "-q",
        ];
        if let Some(pair) = &c.pair {
            args.extend(["--pair", pair]);
        }
        let out = run(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(out.stdout.is_empty(), "-q prints nothing");
        let json: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(json["model"]["layers"], r.config.layers);
        assert_eq!(json["model"]["heads"], r.config.heads);
        assert_eq!(json["numbering"], "0-based");
        assert_eq!(
            json["stats"]["label"].as_array().map(Vec::len),
            Some(r.config.layers)
        );
        assert_json_matches(&json, &r, c);
    }
}

#[test]
fn stdin_text_and_json_on_stdout() {
    let model = minilm_dir();
    let r = Reference::load("minilm");
    let c = case(&r, "accents");
    let mut child = attnviz()
        .args(["-m", model.to_str().unwrap(), "-", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    writeln!(child.stdin.take().unwrap(), "{}", c.text).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // stdout carries only the JSON (no terminal view mixed in); 6 significant digits by default
    let json: Value = serde_json::from_slice(&out.stdout).expect("stdout is pure JSON");
    assert_eq!(json["precision"], "6 significant digits");
    assert_json_matches(&json, &r, c);
}

#[test]
fn terminal_view_is_plain_and_fits_80_columns() {
    let model = minilm_dir();
    let out = run(&[
        "-m",
        model.to_str().unwrap(),
        "The quick brown fox jumps over the lazy dog.",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains('\x1b'), "NO_COLOR gives plain text");
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "wider than 80: {line}");
    }
    assert!(
        text.contains("layer 5") && text.contains("mean of 12 heads"),
        "{text}"
    );
    assert!(text.contains("Most attended"));

    let out = run(&[
        "-m",
        model.to_str().unwrap(),
        "The quick brown fox.",
        "--color",
        "always",
        "--layer",
        "0",
        "--head",
        "3",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("\x1b[48;2;"),
        "--color always gives 24-bit colour"
    );
    assert!(text.contains("layer 0") && text.contains("head 3"));
}

#[test]
fn too_long_input_fails_with_the_count_or_truncates_with_a_note() {
    let model = minilm_dir();
    let r = Reference::load("minilm");
    let long = r
        .tokenize_only
        .iter()
        .find(|c| c.name == "paragraph_x3_truncated")
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("long.json");
    let out = run(&[
        "-m",
        model.to_str().unwrap(),
        &long.text,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_clean_failure(&out, &format!("{} tokens", long.untruncated_len));
    assert!(stderr(&out).contains("--truncate"));
    assert!(!json.exists(), "no output file after a failure");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no temp files"
    );

    let out = run(&[
        "-m",
        model.to_str().unwrap(),
        &long.text,
        "--truncate",
        "--json",
        json.to_str().unwrap(),
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("{} tokens", long.untruncated_len)));
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let tokens: Vec<String> = serde_json::from_value(v["tokens"].clone()).unwrap();
    assert_eq!(tokens, long.tokens, "truncated like HF");
}

#[test]
fn bad_input_gives_one_line_errors_and_keeps_old_files() {
    let model = minilm_dir();
    let m = model.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.json");
    std::fs::write(&old, "previous contents").unwrap();
    let o = old.to_str().unwrap();

    assert_clean_failure(&run(&["-m", m, "   "]), "empty");
    assert_clean_failure(
        &run(&["-m", m, "text", "--layer", "6", "--json", o]),
        "--layer 6",
    );
    assert_clean_failure(
        &run(&["-m", m, "text", "--head", "12", "--json", o]),
        "--head 12",
    );
    assert_clean_failure(
        &run(&["-m", m, "text", "--json", "/no/such/folder/x.json"]),
        "does not exist",
    );
    assert_clean_failure(
        &run(&["-m", m, "text", "--json", "-", "--png", "-"]),
        "standard output",
    );
    // The library's source errors name no flag; the CLI adds `--model DIR`.
    let out = run(&["-m", "/no/such/model", "text"]);
    assert_clean_failure(&out, "/no/such/model");
    assert!(
        stderr(&out).contains("pass --model DIR"),
        "{}",
        stderr(&out)
    );
    let out = run(&["-m", "bert-base-uncased", "text"]);
    assert_clean_failure(&out, "--model DIR");
    assert_eq!(std::fs::read_to_string(&old).unwrap(), "previous contents");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temp files left"
    );
}

#[test]
fn report_folder_holds_json_and_every_figure() {
    let model = minilm_dir();
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let out = run(&[
        "-m",
        model.to_str().unwrap(),
        "The cat sat on the mat.",
        "--pair",
        "It purred.",
        "--report",
        report.to_str().unwrap(),
        "--head",
        "2",
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    for name in ["head", "layer", "mean", "model", "rollout"] {
        for ext in ["png", "svg"] {
            let path = report.join(format!("{name}.{ext}"));
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            match ext {
                "png" => assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", path.display()),
                _ => assert!(String::from_utf8(bytes).unwrap().contains("<svg")),
            }
        }
    }
    let json: Value =
        serde_json::from_slice(&std::fs::read(report.join("attention.json")).unwrap()).unwrap();
    assert_eq!(json["pair"], "It purred.");
    let page = std::fs::read_to_string(report.join("report.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("It purred."));
}

#[test]
fn stats_table_moves_to_stderr_when_json_takes_stdout() {
    let model = minilm_dir();
    let out = run(&[
        "-m",
        model.to_str().unwrap(),
        "The cat sat on the mat.",
        "--json",
        "-",
        "--stats",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&out.stdout).expect("stdout is pure JSON");
    let layers = json["model"]["layers"].as_u64().unwrap() as usize;
    let err = stderr(&out);
    // one grid row per layer, numbered from 0, in the table on stderr
    for l in 0..layers {
        assert!(err.contains(&format!("layer {l} ")), "{err}");
    }
}

#[test]
fn flags_that_need_another_flag_are_refused_in_one_line_before_any_load() {
    // No model is loaded (it does not exist), so each line comes from the plan step.
    let m = "/no/such/model";
    for (args, mentions) in [
        (
            &["--per-sentence", "none"][..],
            "--per-sentence only applies to corpus mode",
        ),
        (&["--out-dir", "x"], "--out-dir only applies to corpus mode"),
        (
            &["--on-bad-line", "stop"],
            "--on-bad-line only applies to corpus mode",
        ),
        (&["text", "--neuron"], "--neuron applies to the HTML report"),
        (
            &["text", "--colormap", "magma"],
            "--colormap applies to images",
        ),
        (&["text", "--figure", "model"], "--figure applies to --png"),
        (
            &["text", "--full-precision"],
            "--full-precision applies to the JSON",
        ),
        (
            &["text", "--quiet", "--top", "2"],
            "--top sets the terminal view",
        ),
        (&["--force"], "--force only applies to corpus mode"),
        (
            &["text", "--out-dir", "x"],
            "--out-dir only applies to corpus mode",
        ),
        (&["--input", "in.txt"], "--input needs --out-dir"),
        (
            &["--input", "in.txt", "--out-dir", "o", "--png", "a.png"],
            "--png is for a single input",
        ),
        (
            &[
                "--input",
                "in.txt",
                "--out-dir",
                "o",
                "--per-sentence",
                "none",
                "--full-precision",
            ],
            "--per-sentence none writes none",
        ),
        (
            &["text", "--svg", "a.svg", "--dpi", "300"],
            "--dpi applies to PNG images",
        ),
        (
            &["text", "--png", "a.png", "--html-precision", "8"],
            "--html-precision applies to the HTML report",
        ),
        (
            &["text", "--json-include", "rollout"],
            "--json-include adds sections to the JSON export",
        ),
        (
            &["text", "--quiet", "--color", "always"],
            "--color sets the terminal view",
        ),
        (&["--pair", "b"], "give TEXT"),
        (&[], "give TEXT"),
    ] {
        let mut argv = vec!["-m", m];
        argv.extend_from_slice(args);
        assert_clean_failure(&run(&argv), mentions);
    }
}

/// A rollout of some layers is refused once the model's layers are known, before the input is
/// read or the model runs: the text `-` is never read from standard input, which stays open.
#[test]
fn a_rollout_of_some_layers_is_refused_before_the_input_is_read() {
    let model = minilm_dir();
    let mut child = attnviz()
        .args(["-m", model.to_str().unwrap(), "-", "--layers", "0"])
        .args(["--figure", "rollout", "--png", "never.png"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Standard input is held open and never written: a run that read it first would wait on
    // it for ever, so it is stopped (and the test fails) if it has not ended in two minutes, a
    // bound far above the load's time and not a measure of speed.
    let stdin = child.stdin.take();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(120) {
            child.kill().unwrap();
            panic!("attnviz waited on standard input instead of refusing the rollout");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("attention rollout multiplies every layer"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}
