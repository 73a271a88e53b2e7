//! Capture once, look many times: `--save-attention FILE.safetensors` (each layer streamed to
//! the file as it is computed) and `attnviz render FILE.safetensors` (reading only the layers
//! asked for), and the masks of sliding-window layers read back from JSON and from the saved
//! file, so a windowed layer draws the same masked cells however it reached the renderer.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::fidelity::reference::fixture;
use crate::support::cli::{assert_clean_failure, run, stderr};

/// Mistral with a window of 6 on both layers: longer inputs than the window.
const WINDOWED: &str = "tiny-mistral-window";
const TEXT: &str = "one two three four five six seven eight nine ten";

fn ok(out: &Output, what: &str) -> String {
    let err = stderr(out);
    assert!(out.status.success(), "{what}: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    String::from_utf8(out.stdout.clone()).expect("UTF-8")
}

fn model() -> PathBuf {
    fixture(WINDOWED)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_windowed_layer_from_json_draws_the_same_masked_cells() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("w.json");
    let m = model();
    ok(
        &run(&["-m", s(&m), TEXT, "--json", s(&json), "-q"]),
        "--json",
    );
    for (layer, head) in [("0", "0"), ("1", "2")] {
        let direct_svg = tmp.path().join(format!("d{layer}.svg"));
        let json_svg = tmp.path().join(format!("j{layer}.svg"));
        let direct = ok(
            &run(&[
                "-m",
                s(&m),
                TEXT,
                "--layer",
                layer,
                "--head",
                head,
                "--svg",
                s(&direct_svg),
            ]),
            "direct",
        );
        let from_json = ok(
            &run(&[
                "render",
                s(&json),
                "--layer",
                layer,
                "--head",
                head,
                "--svg",
                s(&json_svg),
            ]),
            "render JSON",
        );
        // The terminal view leaves cells outside the window blank and says so.
        assert!(direct.contains("sliding window 6"), "{direct}");
        assert_eq!(direct, from_json, "layer {layer}: terminal view");
        let (d, j) = (
            std::fs::read_to_string(&direct_svg).unwrap(),
            std::fs::read_to_string(&json_svg).unwrap(),
        );
        assert!(d.contains("outside the window"), "the SVG names the window");
        assert_eq!(d, j, "layer {layer}: the SVG, hatched cells included");
    }
}

#[test]
fn json_masks_are_read_into_the_value() {
    use attnviz::import::{read, ReadOptions};
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("w.json");
    ok(
        &run(&["-m", s(&model()), TEXT, "--json", s(&json), "-q"]),
        "--json",
    );
    let imported = read(&json, &ReadOptions::default()).unwrap();
    let att = &imported.kinds[0];
    assert_eq!(att.windows(), &[Some(6), Some(6)]);
    let n = att.len();
    assert!(n > 12, "longer than the window: {n}");
    // Query 10 sees keys 5..=10 only.
    assert!(att.is_masked_in(0, 10, 4) && !att.is_masked_in(0, 10, 5));
    assert!(!att.is_masked_in(0, 10, 10) && att.is_masked_in(0, 10, 11));
}

#[test]
fn json_with_wrong_layer_masks_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("w.json");
    ok(
        &run(&["-m", s(&model()), TEXT, "--json", s(&json), "-q"]),
        "--json",
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, Edit); 3] = [
        // A window narrower than the one the weights were computed with hides real weights.
        ("outside it", |d| d["layer_masks"][1]["window"] = 2.into()),
        ("entries for 2 layers", |d| {
            d["layer_masks"].as_array_mut().unwrap().pop();
        }),
        ("window of at least 1", |d| {
            d["layer_masks"][0]["window"] = 0.into()
        }),
    ];
    for (needle, edit) in cases {
        let mut bad = doc.clone();
        edit(&mut bad);
        let path = tmp.path().join("bad.json");
        std::fs::write(&path, serde_json::to_vec(&bad).unwrap()).unwrap();
        assert_clean_failure(&run(&["render", s(&path), "-q"]), needle);
    }
}

/// The interpreter with numpy, safetensors and transformers (`tests/reference/requirements.txt`):
/// `ATTNVIZ_REF_PYTHON` (then it must have them), else `.cache/venv-ref/bin/python` in the
/// repository (made as `tests/reference/README.md` says) when that one imports all three (a venv
/// made there for something else is passed over).
fn reference_python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ATTNVIZ_REF_PYTHON") {
        let p = PathBuf::from(p);
        return p.exists().then_some(p);
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/venv-ref/bin/python");
    let imports = std::process::Command::new(&p)
        .args(["-c", "import numpy, safetensors, transformers"])
        .output()
        .is_ok_and(|o| o.status.success());
    imports.then_some(p)
}

#[test]
fn a_saved_capture_renders_as_the_run_and_reads_in_python() {
    let tmp = tempfile::tempdir().unwrap();
    let (saved, saved16, json) = (
        tmp.path().join("a.safetensors"),
        tmp.path().join("h.safetensors"),
        tmp.path().join("d.json"),
    );
    let m = model();
    ok(
        &run(&["-m", s(&m), TEXT, "--save-attention", s(&saved), "-q"]),
        "save",
    );
    ok(
        &run(&[
            "-m",
            s(&m),
            TEXT,
            "--save-attention",
            s(&saved16),
            "--save-dtype",
            "f16",
            "-q",
        ]),
        "save f16",
    );
    ok(
        &run(&[
            "-m",
            s(&m),
            TEXT,
            "--json",
            s(&json),
            "--full-precision",
            "-q",
        ]),
        "json",
    );
    // Nothing but the outputs is left in the folder.
    let mut names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a.safetensors", "d.json", "h.safetensors"]);
    // The JSON rendered from the saved capture is the run's own, bit for bit.
    let again = tmp.path().join("again.json");
    ok(
        &run(&[
            "render",
            s(&saved),
            "--json",
            s(&again),
            "--full-precision",
            "-q",
        ]),
        "render saved",
    );
    let (mut a, b): (serde_json::Value, serde_json::Value) = (
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap(),
        serde_json::from_slice(&std::fs::read(&again).unwrap()).unwrap(),
    );
    // The induction probe is a run of the model; `render` has no model, so its statistics are
    // the run's without it.
    if let Some(s) = a["stats"].as_object_mut() {
        s.remove("induction");
    }
    for field in [
        "attention",
        "tokens",
        "display",
        "layer_masks",
        "layer_numbers",
        "stats",
        "kv_head",
        "mask",
    ] {
        assert_eq!(a[field], b[field], "{field}");
    }
    // The terminal view of one layer read alone equals the run's.
    let direct = ok(
        &run(&["-m", s(&m), TEXT, "--layer", "1", "--head", "2"]),
        "direct",
    );
    let from_saved = ok(
        &run(&[
            "render",
            s(&saved),
            "--layers",
            "1",
            "--layer",
            "1",
            "--head",
            "2",
        ]),
        "render --layers 1",
    );
    // The title lists the layers held (all, or the one read); the rest is the same.
    let body = |t: &str| t.split_once(" · head").map(|(_, b)| b.to_string()).unwrap();
    assert!(
        from_saved.starts_with("tiny-mistral-window · layer 1 (1)"),
        "{from_saved}"
    );
    assert_eq!(body(&direct), body(&from_saved));
    let Some(python) = reference_python() else {
        eprintln!("no reference Python (ATTNVIZ_REF_PYTHON): the safetensors/transformers check is skipped");
        return;
    };
    let script = crate::fidelity::reference::repo().join("tests/reference/check_saved_capture.py");
    for (file, tol) in [(&saved, "0"), (&saved16, "5e-4")] {
        let out = std::process::Command::new(&python)
            .arg(&script)
            .args([s(file), s(&json), tol])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{said}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(said.contains("transformers loader checked"), "{said}");
    }
}

#[test]
fn streaming_needs_one_layer_of_memory() {
    // Two layers of 4 heads over 36 tokens: 20 736 bytes each. A budget of one and a half
    // layers refuses the capture held in memory and lets the streamed one through.
    let tmp = tempfile::tempdir().unwrap();
    let saved = tmp.path().join("a.safetensors");
    let m = model();
    let held = run(&[
        "-m",
        s(&m),
        TEXT,
        "--max-memory",
        "31104",
        "-q",
        "--json",
        s(&tmp.path().join("x.json")),
    ]);
    assert_clean_failure(&held, "--max-memory");
    ok(
        &run(&[
            "-m",
            s(&m),
            TEXT,
            "--max-memory",
            "31104",
            "--save-attention",
            s(&saved),
            "-q",
        ]),
        "streamed",
    );
    assert!(saved.exists());
}

/// The bytes of `file` and where its header ends.
fn parts(file: &Path) -> (Vec<u8>, usize, serde_json::Value) {
    let b = std::fs::read(file).unwrap();
    let n = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
    let h = serde_json::from_slice(&b[8..8 + n]).unwrap();
    (b, 8 + n, h)
}

#[test]
fn damaged_layers_are_not_read_unless_asked_for() {
    let tmp = tempfile::tempdir().unwrap();
    let saved = tmp.path().join("a.safetensors");
    ok(
        &run(&["-m", s(&model()), TEXT, "--save-attention", s(&saved), "-q"]),
        "save",
    );
    let (bytes, start, header) = parts(&saved);
    let offsets = |l: usize| -> [usize; 2] {
        serde_json::from_value(header[format!("self.layer.{l}.attention")]["data_offsets"].clone())
            .unwrap()
    };
    // Layer 0 holds NaN: layer 1 alone still renders, the whole file is refused.
    let mut nan = bytes.clone();
    nan[start + offsets(0)[0]..start + offsets(0)[0] + 64].fill(0xff);
    let nan_file = tmp.path().join("nan.safetensors");
    std::fs::write(&nan_file, &nan).unwrap();
    ok(
        &run(&["render", s(&nan_file), "--layers", "1", "--stats", "-q"]),
        "layer 1 of nan",
    );
    assert_clean_failure(&run(&["render", s(&nan_file), "-q"]), "NaN");
    // Cut off inside layer 1: layer 0 renders, layer 1 is refused.
    let cut = tmp.path().join("cut.safetensors");
    std::fs::write(&cut, &bytes[..start + offsets(1)[0] + 100]).unwrap();
    ok(
        &run(&["render", s(&cut), "--layers", "0", "--stats", "-q"]),
        "layer 0 of cut",
    );
    assert_clean_failure(&run(&["render", s(&cut), "--layers", "1", "-q"]), "cut off");
    // A layer that is not saved, and a selection of a file that holds one array.
    assert_clean_failure(
        &run(&["render", s(&saved), "--layers", "5", "-q"]),
        "not among",
    );
    // A header length past the file.
    let mut huge = bytes.clone();
    huge[..8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let huge_file = tmp.path().join("huge.safetensors");
    std::fs::write(&huge_file, &huge).unwrap();
    assert_clean_failure(&run(&["render", s(&huge_file), "-q"]), "huge.safetensors");
    // A shape that does not match the metadata, written in the header's own room.
    let mut edited = header.clone();
    edited["self.layer.0.attention"]["shape"] = serde_json::json!([4, 36, 35]);
    let text = serde_json::to_vec(&edited).unwrap();
    assert!(text.len() <= start - 8);
    let mut shaped = bytes.clone();
    shaped[8..start].fill(b' ');
    shaped[8..8 + text.len()].copy_from_slice(&text);
    let shaped_file = tmp.path().join("shape.safetensors");
    std::fs::write(&shaped_file, &shaped).unwrap();
    assert_clean_failure(&run(&["render", s(&shaped_file), "-q"]), "has shape");
}

/// `header` written as the header of a file whose data are `bytes[start..]`.
fn with_header(path: &Path, header: &serde_json::Value, bytes: &[u8], start: usize) {
    let text = serde_json::to_vec(header).unwrap();
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&text);
    out.extend_from_slice(&bytes[start..]);
    std::fs::write(path, out).unwrap();
}

#[test]
fn layers_over_the_same_bytes_are_refused() {
    // Layer 1's record pointing at layer 0's bytes drew layer 0 twice, silently.
    let tmp = tempfile::tempdir().unwrap();
    let saved = tmp.path().join("a.safetensors");
    ok(
        &run(&["-m", s(&model()), TEXT, "--save-attention", s(&saved), "-q"]),
        "save",
    );
    let (bytes, start, mut header) = parts(&saved);
    header["self.layer.1.attention"]["data_offsets"] =
        header["self.layer.0.attention"]["data_offsets"].clone();
    let twice = tmp.path().join("twice.safetensors");
    with_header(&twice, &header, &bytes, start);
    assert_clean_failure(
        &crate::support::cli::run_limited(&["render", s(&twice), "-q"]),
        "twice.safetensors: tensors self.layer.0.attention and self.layer.1.attention share the \
         bytes from 0 to",
    );
}

#[test]
fn a_header_of_a_hundred_megabytes_is_read_in_bounded_memory() {
    // 95 MB of tensor records beside the capture's own: parsed into a JSON tree the header
    // took 1.1–2.0 GiB, past the 1 GiB of address space this runs in. Read as it streams, it
    // is a record each, and the capture draws.
    let tmp = tempfile::tempdir().unwrap();
    let saved = tmp.path().join("a.safetensors");
    ok(
        &run(&["-m", s(&model()), TEXT, "--save-attention", s(&saved), "-q"]),
        "save",
    );
    let (bytes, start, header) = parts(&saved);
    let mut text = serde_json::to_string(&header).unwrap();
    text.pop();
    let mut i = 0;
    while text.len() < 95_000_000 {
        text.push_str(&format!(
            r#","unused.{i}":{{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}"#
        ));
        i += 1;
    }
    text.push('}');
    let big = tmp.path().join("big.safetensors");
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&bytes[start..]);
    std::fs::write(&big, out).unwrap();
    let out = crate::support::cli::run_limited(&["render", s(&big), "--stats", "-q"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Its parse counts in the estimate: a budget below it is refused before the parse.
    assert_clean_failure(
        &crate::support::cli::run_limited(&["render", s(&big), "-q", "--max-memory", "100M"]),
        "big.safetensors: its safetensors header (95 MB)",
    );
}

/// Qwen3-Next's full-attention layers are the model's layers 1 and 3 (0 and 2 are gated
/// delta): a saved capture, and a JSON export, keep those numbers when drawn again.
#[test]
fn a_hybrid_capture_keeps_the_models_layer_numbers_after_a_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let m = fixture("tiny-qwen3_next");
    let text = "hello world foo";
    let live_json = tmp.path().join("live.json");
    let saved = tmp.path().join("saved.safetensors");
    let live = ok(
        &run(&["-m", s(&m), text, "--json", s(&live_json)]),
        "live --json",
    );
    let saving = ok(
        &run(&["-m", s(&m), text, "--save-attention", s(&saved)]),
        "--save-attention",
    );
    let first = |out: &str| out.lines().next().unwrap_or("").to_string();
    // Drawn while saving, the view reads its one layer back: the same layer by the same
    // number (the list after it names the layers read).
    let shown = |out: &str| first(out).split(" (").next().unwrap_or("").to_string();
    assert_eq!(shown(&saving), shown(&live), "drawn while saving");
    let read = |p: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    let numbers = read(&live_json)["layer_numbers"].clone();
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(m.join("config.json")).unwrap()).unwrap();
    let full: Vec<usize> = config["layer_types"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, t)| t.as_str() == Some("full_attention"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(numbers, serde_json::json!(full), "the live run's numbers");
    for source in [&saved, &live_json] {
        let again = tmp.path().join("again.json");
        let drawn = ok(
            &run(&["render", s(source), "--json", s(&again)]),
            "render --json",
        );
        let doc = read(&again);
        assert_eq!(doc["layer_numbers"], numbers, "{}", source.display());
        let masks: Vec<&serde_json::Value> = doc["layer_masks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| &m["layer"])
            .collect();
        assert_eq!(serde_json::json!(masks), numbers, "{}", source.display());
        assert_eq!(first(&drawn), first(&live), "{}", source.display());
        for layer in &full {
            let l = layer.to_string();
            let live = ok(&run(&["-m", s(&m), text, "--layer", &l]), "live --layer");
            let drawn = ok(
                &run(&["render", s(source), "--layer", &l]),
                "render --layer",
            );
            assert_eq!(
                first(&drawn),
                first(&live),
                "layer {l}, {}",
                source.display()
            );
        }
    }
}
