//! What a file attnviz writes says of this machine: a local model's folder (or GGUF file) and
//! the input files are named by their names (or a hub id), never by where they are, unless
//! `--full-paths` asks. The models are given by their absolute paths, as a user's often are.

use std::fs;
use std::path::Path;

use crate::support::cli::{fixture, run, stderr, tiny};

/// Whether `file` holds `text` anywhere (a JSON string, markup, a safetensors header).
fn holds(file: &Path, text: &str) -> bool {
    let bytes = fs::read(file).unwrap();
    bytes.windows(text.len()).any(|w| w == text.as_bytes())
}

fn json(file: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(file).unwrap()).unwrap()
}

#[test]
fn exports_name_a_local_model_by_its_folder_or_file_not_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let gguf = fixture("gguf/tiny-llama.gguf");
    for (model, name) in [(tiny(), "tiny-bert"), (gguf, "tiny-llama.gguf")] {
        let path = model.display().to_string();
        assert!(model.is_absolute(), "{path}");
        for full in [false, true] {
            let out = |ext: &str| dir.path().join(format!("{name}-{full}.{ext}"));
            let (j, h, s) = (out("json"), out("html"), out("safetensors"));
            let mut args = vec![
                "-m",
                &path,
                "the quick brown fox",
                "--json",
                j.to_str().unwrap(),
                "--html",
                h.to_str().unwrap(),
                "--save-attention",
                s.to_str().unwrap(),
                "-q",
            ];
            if full {
                args.push("--full-paths");
            }
            let run = run(&args);
            assert!(run.status.success(), "{}", stderr(&run));
            let want = if full { path.as_str() } else { name };
            assert_eq!(json(&j)["model"]["id"], want, "{name} {full}");
            for file in [&j, &h, &s] {
                assert_eq!(holds(file, &path), full, "{} {full}", file.display());
            }
            assert!(holds(&h, name));
        }
    }
}

#[test]
fn corpus_files_name_the_model_and_the_input_by_their_names() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("lines.txt");
    fs::write(&input, "the cat sat .\nthe dog ran .\n").unwrap();
    let model = tiny().display().to_string();
    let folder = dir.path().display().to_string();
    for full in [false, true] {
        let out_dir = dir.path().join(format!("out-{full}"));
        let mut args = vec![
            "-m",
            &model,
            "--input",
            input.to_str().unwrap(),
            "--out-dir",
            out_dir.to_str().unwrap(),
            "-q",
        ];
        if full {
            args.push("--full-paths");
        }
        let run = run(&args);
        assert!(run.status.success(), "{}", stderr(&run));
        let summary = json(&out_dir.join("corpus_stats.json"));
        let (model_id, input_name) = if full {
            (model.clone(), input.display().to_string())
        } else {
            ("tiny-bert".to_string(), "lines.txt".to_string())
        };
        assert_eq!(summary["model"]["id"], model_id.as_str());
        assert_eq!(summary["input"], input_name.as_str());
        // The summary and the partial file name the model and the input; each sentence's
        // JSON, the model.
        let mut files = vec![
            (out_dir.join("corpus_stats.json"), vec![&model, &folder]),
            (out_dir.join("corpus_partial.json"), vec![&model, &folder]),
        ];
        for entry in fs::read_dir(out_dir.join("sentences")).unwrap() {
            files.push((entry.unwrap().path(), vec![&model]));
        }
        assert_eq!(files.len(), 4, "{files:?}");
        for (file, paths) in &files {
            for path in paths {
                assert_eq!(holds(file, path), full, "{} holds {path}", file.display());
            }
            assert!(!holds(file, &folder) || full, "{}", file.display());
        }
    }
}

#[test]
fn render_and_diff_name_their_files_by_their_names() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().display().to_string();
    // A JSON export that does not name its model (as another tool may write it): the file
    // names it.
    let export = dir.path().join("export.json");
    let made = run(&[
        "-m",
        tiny().to_str().unwrap(),
        "the quick brown fox",
        "--json",
        export.to_str().unwrap(),
        "-q",
    ]);
    assert!(made.status.success(), "{}", stderr(&made));
    let mut doc = json(&export);
    doc["model"].as_object_mut().unwrap().remove("id");
    let bare = dir.path().join("bare.json");
    fs::write(&bare, doc.to_string()).unwrap();
    for full in [false, true] {
        let (j, h, d) = (
            dir.path().join(format!("r-{full}.json")),
            dir.path().join(format!("r-{full}.html")),
            dir.path().join(format!("d-{full}.json")),
        );
        let mut args = vec![
            "render",
            bare.to_str().unwrap(),
            "--json",
            j.to_str().unwrap(),
            "--html",
            h.to_str().unwrap(),
            "-q",
        ];
        let mut diff = vec![
            "diff",
            export.to_str().unwrap(),
            bare.to_str().unwrap(),
            "--json",
            d.to_str().unwrap(),
            "-q",
        ];
        if full {
            args.push("--full-paths");
            diff.push("--full-paths");
        }
        let out = run(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        let out = run(&diff);
        assert!(out.status.success(), "{}", stderr(&out));
        let want = if full {
            bare.display().to_string()
        } else {
            "bare.json".to_string()
        };
        assert_eq!(json(&j)["model"]["id"], want.as_str());
        assert_eq!(json(&d)["b"]["source"], want.as_str());
        for file in [&j, &h, &d] {
            assert_eq!(holds(file, &folder), full, "{} {full}", file.display());
        }
    }
}
