//! The decoder families through the `attnviz` binary, on the tiny random checkpoints and the real
//! SmolLM2 GGUF: the JSON export against transformers (causal mask, key/value-head map), every
//! figure and the HTML report with the neuron view (q/k after RoPE over fewer key/value heads),
//! statistics, `--words`, corpus mode (with shards and `attnviz merge`), `--generate` (the same tokens as transformers' `generate`
//! and the attention over prompt + generated tokens, flagged), `--chat`, `--layers` and
//! `--max-memory`.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::fidelity::families::FamilyReference;
use crate::fidelity::reference::{fixture, ATTENTION_TOL};
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

fn ok(out: &Output, what: &str) -> (String, String) {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{what}: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    (String::from_utf8(out.stdout.clone()).expect("UTF-8"), err)
}

/// A refusal: exit status 1, one line on stderr containing `needle`, no panic.
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

fn ids(v: &Value) -> Vec<u32> {
    serde_json::from_value(v.clone()).unwrap()
}

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

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max)
}

/// The manifest's generations (prompt ids, sequence, attention tensor name).
fn generations(label: &str) -> Vec<Value> {
    let path = crate::fidelity::reference::repo().join(format!("tests/reference/{label}.json"));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["generations"].as_array().unwrap().clone()
}

/// Every surface for a tiny decoder fixture, checked against its references.
fn decoder_surfaces(folder: &str, label: &str, kv_head: &[usize]) {
    let model = fixture(folder);
    let model = model.to_str().unwrap();
    let reference = FamilyReference::load(label);
    let tmp = tempfile::tempdir().unwrap();
    let at = |name: &str| tmp.path().join(name);
    let layers = reference.cases[0].tensors["attentions"].shape[0];

    // JSON: transformers' tokens and attention, the causal mask and the head map.
    for case in reference.cases.iter().filter(|c| !c.truncate) {
        let path = at(&format!("{}.json", case.name));
        let p = path.to_str().unwrap();
        ok(
            &run(&[
                "-m",
                model,
                &case.text,
                "--json",
                p,
                "--full-precision",
                "-q",
            ]),
            &format!("[{folder}] {} --json", case.name),
        );
        let j = json(&path);
        assert_eq!(
            ids(&j["input_ids"]),
            case.input_ids,
            "[{folder}] {}",
            case.name
        );
        assert_eq!(j["mask"], "causal");
        // Each layer's mask and window, as the reference script read them from the config.
        let manifest: Value = serde_json::from_str(
            &std::fs::read_to_string(
                crate::fidelity::reference::repo().join(format!("tests/reference/{label}.json")),
            )
            .unwrap(),
        )
        .unwrap();
        if let Some(windows) = manifest["layer_windows"].as_array() {
            let masks = j["layer_masks"].as_array().unwrap();
            assert_eq!(masks.len(), windows.len(), "[{folder}] layer_masks");
            for (l, (m, w)) in masks.iter().zip(windows).enumerate() {
                assert_eq!(m["layer"], l);
                assert_eq!(&m["window"], w, "[{folder}] layer {l}");
                let kind = if w.is_null() {
                    "causal"
                } else {
                    "sliding_window"
                };
                assert_eq!(m["mask"], kind, "[{folder}] layer {l}");
            }
        }
        assert_eq!(
            ids(&j["kv_head"]),
            kv_head.iter().map(|&h| h as u32).collect::<Vec<_>>()
        );
        let d = max_diff(
            &attention(&j),
            &reference.values(&case.tensors["attentions"]),
        );
        eprintln!("[{folder}] {}: CLI JSON vs HF max |Δ| = {d:.2e}", case.name);
        assert!(d <= ATTENTION_TOL, "[{folder}] {}: {d:e}", case.name);
    }
    let text = reference.cases[0].text.as_str();

    // The terminal view with statistics; --words and --no-special to JSON on stdout.
    let (terminal, _) = ok(&run(&["-m", model, text, "--stats"]), "terminal");
    assert!(
        terminal.contains(folder) && terminal.contains("layer"),
        "{terminal}"
    );
    let (words, _) = ok(
        &run(&["-m", model, text, "--words", "--no-special", "--json", "-"]),
        "--words",
    );
    let words: Value = serde_json::from_str(&words).unwrap();
    assert_eq!(words["level"], "word");

    // Every figure and the HTML report with the neuron view.
    let report = at("report");
    ok(
        &run(&[
            "-m",
            model,
            text,
            "--report",
            report.to_str().unwrap(),
            "--neuron",
            "-q",
        ]),
        "--report",
    );
    for figure in ["head", "layer", "mean", "model", "rollout"] {
        let png = std::fs::read(report.join(format!("{figure}.png"))).unwrap();
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n"),
            "[{folder}] {figure}.png"
        );
        let svg = std::fs::read_to_string(report.join(format!("{figure}.svg"))).unwrap();
        assert!(svg.contains("<svg"), "[{folder}] {figure}.svg");
    }
    let html = std::fs::read_to_string(report.join("report.html")).unwrap();
    assert!(html.contains("\"kv_head\"") && html.contains("\"mask\":\"causal\""));

    // --generate: transformers' greedy tokens, flagged, and the attention over all of them.
    let g = &generations(label)[0];
    let path = at("generated.json");
    let new = g["generated_ids"].as_array().unwrap().len().to_string();
    let (_, err) = ok(
        &run(&[
            "-m",
            model,
            g["text"].as_str().unwrap(),
            "--generate",
            &new,
            "--json",
            path.to_str().unwrap(),
            "--full-precision",
            "-q",
        ]),
        "--generate",
    );
    assert!(err.contains(&format!("generated {new} tokens")), "{err}");
    let j = json(&path);
    assert_eq!(
        ids(&j["input_ids"]),
        ids(&g["sequence"]),
        "[{folder}] generated ids"
    );
    let prompt = g["prompt_len"].as_u64().unwrap() as usize;
    let flags: Vec<bool> = serde_json::from_value(j["generated"].clone()).unwrap();
    assert!(
        flags.iter().enumerate().all(|(i, &f)| f == (i >= prompt)),
        "{flags:?}"
    );
    let name = g["tensors"]["attentions"]["tensor"].as_str().unwrap();
    let shape: Vec<usize> =
        serde_json::from_value(g["tensors"]["attentions"]["shape"].clone()).unwrap();
    let want = reference.values(&crate::fidelity::reference::TensorRef {
        tensor: name.to_string(),
        shape,
    });
    let d = max_diff(&attention(&j), &want);
    eprintln!("[{folder}] --generate {new}: attention vs HF max |Δ| = {d:.2e}");
    assert!(d <= ATTENTION_TOL, "[{folder}] --generate: {d:e}");

    // --layers: one layer, numbered as in the model, equal to the full run's.
    let one = at("one.json");
    ok(
        &run(&[
            "-m",
            model,
            text,
            "--layers",
            &(layers - 1).to_string(),
            "--json",
            one.to_str().unwrap(),
            "--full-precision",
            "-q",
        ]),
        "--layers",
    );
    let j = json(&one);
    assert_eq!(ids(&j["layer_numbers"]), vec![(layers - 1) as u32]);
    assert_eq!(j["model"]["layers"], 1);
    let full = reference.values(&reference.cases[0].tensors["attentions"]);
    let per = full.len() / layers;
    assert!(max_diff(&attention(&j), &full[(layers - 1) * per..]) <= ATTENTION_TOL);

    // `attnviz render` reads that export back as it was: the layer numbers (which --layer
    // names), the position scheme, the causal mask and the head map.
    let (back, _) = ok(
        &run(&["render", one.to_str().unwrap(), "--json", "-", "-q"]),
        "render",
    );
    let back: Value = serde_json::from_str(&back).unwrap();
    for field in ["layer_numbers", "positions", "mask", "kv_head", "tokens"] {
        assert_eq!(back[field], j[field], "[{folder}] render keeps {field}");
    }
    refused(
        &run(&["render", one.to_str().unwrap(), "--layer", "0", "-q"]),
        "not among the file's layers",
    );

    corpus_with_shards(model, folder, text, tmp.path());
}

/// Corpus mode on `model` (a pair line is refused as a bad line: decoders read one text), its
/// causal statistics averaged (first-token share defined, next-token share null), and two
/// shards merged into one run's summary byte for byte.
fn corpus_with_shards(model: &str, folder: &str, text: &str, tmp: &Path) {
    let at = |name: &str| tmp.join(name);
    let input = at("corpus.txt");
    std::fs::write(
        &input,
        format!("{text}\n{text}\tand a pair\nA second line.\nAnd a third, longer one.\n"),
    )
    .unwrap();
    let out_dir = at("corpus");
    let (_, err) = ok(
        &run(&[
            "-m",
            model,
            "--input",
            input.to_str().unwrap(),
            "--out-dir",
            out_dir.to_str().unwrap(),
        ]),
        "corpus",
    );
    assert!(err.contains("line 2"), "{err}");
    assert!(out_dir.join("sentences/000001.json").is_file());
    assert!(!out_dir.join("sentences/000002.json").exists());
    assert!(out_dir.join("sentences/000004.json").is_file());
    // The causal statistics survive averaging: the first-token share is defined for every head,
    // the next-token share for none (null, not 0).
    let summary_path = out_dir.join("corpus_stats.json");
    let summary = json(&summary_path);
    for section in ["stats", "stats_sd", "stats_per_row"] {
        let cells = |stat: &str| -> Vec<Value> {
            summary[section][stat]
                .as_array()
                .unwrap_or_else(|| panic!("[{folder}] {section}.{stat}"))
                .iter()
                .flat_map(|l| l.as_array().unwrap().clone())
                .collect()
        };
        assert!(
            cells("to_first").iter().all(Value::is_number),
            "[{folder}] {section}"
        );
        assert!(
            cells("to_next").iter().all(Value::is_null),
            "[{folder}] {section}"
        );
    }

    // Two shards (lines 1 and 3; 2, the bad one, and 4) merged give one run's summary byte for
    // byte.
    let mut partials = Vec::new();
    for k in 1..=2 {
        let shard_dir = at(&format!("shard{k}"));
        ok(
            &run(&[
                "-m",
                model,
                "--input",
                input.to_str().unwrap(),
                "--out-dir",
                shard_dir.to_str().unwrap(),
                "--shard",
                &format!("{k}/2"),
                "-q",
            ]),
            "corpus --shard",
        );
        partials.push(shard_dir.join("corpus_partial.json"));
    }
    let merged = at("merged.json");
    let mut args = vec!["merge"];
    args.extend(partials.iter().map(|p| p.to_str().unwrap()));
    args.extend(["--out", merged.to_str().unwrap(), "-q"]);
    ok(&run(&args), "merge");
    assert!(
        std::fs::read(&merged).unwrap() == std::fs::read(&summary_path).unwrap(),
        "[{folder}] merged shards differ from one run"
    );
}

#[test]
fn gpt2_through_every_surface() {
    decoder_surfaces("tiny-gpt2", "tiny-gpt2", &[0, 1, 2, 3]);
}

#[test]
fn llama_through_every_surface() {
    decoder_surfaces("tiny-llama", "tiny-llama", &[0, 0, 1, 1]);
}

#[test]
fn llama3_tied_through_every_surface() {
    decoder_surfaces("tiny-llama-tied", "tiny-llama-tied", &[0, 0, 0, 1, 1, 1]);
}

#[test]
fn qwen2_through_every_surface() {
    decoder_surfaces("tiny-qwen2", "tiny-qwen2", &[0, 0, 1, 1]);
}

#[test]
fn mistral_through_every_surface() {
    decoder_surfaces("tiny-mistral", "tiny-mistral", &[0, 0, 0, 0]);
}

#[test]
fn mistral_window_through_every_surface() {
    decoder_surfaces("tiny-mistral-window", "tiny-mistral-window", &[0, 0, 1, 1]);
}

#[test]
fn qwen3_through_every_surface() {
    decoder_surfaces("tiny-qwen3", "tiny-qwen3", &[0, 0, 1, 1]);
}

#[test]
fn gemma2_through_every_surface() {
    decoder_surfaces("tiny-gemma2", "tiny-gemma2", &[0, 0, 1, 1]);
}

#[test]
fn gemma3_through_every_surface() {
    decoder_surfaces("tiny-gemma3", "tiny-gemma3", &[0, 0, 0, 0]);
}

#[test]
fn phi3_through_every_surface() {
    decoder_surfaces("tiny-phi3", "tiny-phi3", &[0, 0, 1, 1]);
}

#[test]
fn chat_wraps_the_prompt_in_the_checkpoints_template() {
    // ChatML (Qwen2, Qwen3), Gemma's turns (with its BOS in the template) and Phi-3's tags.
    for label in ["tiny-qwen2", "tiny-qwen3", "tiny-gemma2", "tiny-phi3"] {
        let reference: Value = serde_json::from_str(
            &std::fs::read_to_string(
                crate::fidelity::reference::repo().join(format!("tests/reference/{label}.json")),
            )
            .unwrap(),
        )
        .unwrap();
        let example = &reference["chat_example"];
        let user = example["messages"][0]["content"].as_str().unwrap();
        let model = fixture(label);
        let want = ids(&example["input_ids"]);
        // The tiny SentencePiece vocabularies spell Gemma's turn markers letter by letter: 62
        // tokens, over the fixture's 48, so that one is cut and compared as far as it goes.
        let mut args = vec!["-m", model.to_str().unwrap(), user, "--chat", "--json", "-"];
        if want.len() > 48 {
            args.push("--truncate");
        }
        let (out, _) = ok(&run(&args), "--chat");
        let j: Value = serde_json::from_str(&out).unwrap();
        // transformers' apply_chat_template(tokenize=True): the same ids, no BOS added.
        let got = ids(&j["input_ids"]);
        assert_eq!(got.len(), want.len().min(48), "[{label}]");
        assert_eq!(got, want[..got.len()], "[{label}]");
        if want.len() <= 48 {
            assert_eq!(j["text"], example["text"], "[{label}]");
        }
    }
    // A checkpoint without a template says so.
    let gpt2 = fixture("tiny-gpt2");
    refused(
        &run(&["-m", gpt2.to_str().unwrap(), "Hi", "--chat"]),
        "carries no chat template",
    );
}

#[test]
fn generation_and_capture_flags_are_checked() {
    let gpt2 = fixture("tiny-gpt2");
    let gpt2 = gpt2.to_str().unwrap();
    let bert = fixture("tiny-bert");
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("a.json");
    let json = json.to_str().unwrap();
    // An encoder does not generate.
    refused(
        &run(&["-m", bert.to_str().unwrap(), "a b", "--generate", "3"]),
        "only decoder models",
    );
    // More tokens than the model's 48 positions leave room for.
    refused(
        &run(&["-m", gpt2, "The quick brown fox", "--generate", "48"]),
        "no room for a prompt",
    );
    refused(
        &run(&["-m", gpt2, "The quick brown fox", "--generate", "40"]),
        "generate at most",
    );
    // A pair with a decoder.
    refused(&run(&["-m", gpt2, "a", "--pair", "b"]), "reads one text");
    // Layers out of range, or --layer outside --layers; nothing written.
    refused(
        &run(&["-m", gpt2, "a b", "--layers", "0,2", "--json", json]),
        "--layers 2 is out of range",
    );
    refused(
        &run(&[
            "-m", gpt2, "a b", "--layers", "0", "--layer", "1", "--json", json,
        ]),
        "not among the captured --layers 0",
    );
    // Rollout needs every layer.
    refused(
        &run(&[
            "-m",
            gpt2,
            "a b",
            "--layers",
            "1",
            "--json-include",
            "rollout",
            "--json",
            json,
        ]),
        "rollout",
    );
    // A capture over the budget is refused before the model runs, suggesting --layers.
    refused(
        &run(&["-m", gpt2, "a b c", "--max-memory", "100", "--json", json]),
        "--layers",
    );
    assert!(!Path::new(json).exists(), "nothing written");
    // Flags for a single input are refused in corpus mode.
    let out = run(&[
        "-m",
        gpt2,
        "--input",
        "-",
        "--out-dir",
        tmp.path().to_str().unwrap(),
        "--generate",
        "2",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--generate is for a single input"));
}

#[test]
fn smollm2_gguf_generates_transformers_tokens_through_the_cli() {
    let gguf = smollm2_gguf();
    let gguf = gguf.to_str().unwrap();
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(
            crate::fidelity::reference::repo().join("tests/reference/smollm2.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for g in reference["generations"].as_array().unwrap() {
        let path = tmp.path().join("g.json");
        let mut args = vec![
            "-m",
            gguf,
            "--generate",
            "16",
            "--json",
            path.to_str().unwrap(),
            "-q",
        ];
        let user;
        let text;
        match g["chat"].as_array() {
            Some(messages) => {
                user = messages[0]["content"].as_str().unwrap().to_string();
                args.extend(["--chat", &user]);
            }
            None => {
                text = g["prompt_text"].as_str().unwrap().to_string();
                args.push(&text);
            }
        }
        let (_, err) = ok(&run(&args), g["name"].as_str().unwrap());
        let j = json(&path);
        assert_eq!(
            ids(&j["input_ids"]),
            ids(&g["sequence"]),
            "{}: {err}",
            g["name"]
        );
        assert_eq!(j["model"]["family"], "Llama");
        assert_eq!(ids(&j["kv_head"]), vec![0, 0, 0, 1, 1, 1, 2, 2, 2]);
        let flags: Vec<bool> = serde_json::from_value(j["generated"].clone()).unwrap();
        assert_eq!(flags.iter().filter(|&&f| f).count(), 16);
    }
}

#[test]
fn smollm2_gguf_in_corpus_mode_with_shards() {
    let gguf = smollm2_gguf();
    let tmp = tempfile::tempdir().unwrap();
    corpus_with_shards(
        gguf.to_str().unwrap(),
        "smollm2",
        "The capital of France is Paris.",
        tmp.path(),
    );
    // The partial file identifies the model by the GGUF file itself (config, weights and
    // tokenizer in one).
    let part = json(&tmp.path().join("shard1/corpus_partial.json"));
    let weights = &part["model_files"]["weights"][0];
    assert_eq!(
        weights["file"],
        crate::support::models::smollm2::SMOLLM2_FILE
    );
    assert_eq!(weights["bytes"], std::fs::metadata(&gguf).unwrap().len());
    assert_eq!(weights["sha256"].as_str().map(str::len), Some(64));
}
