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
    let cases: [(&str, fn(&mut serde_json::Value)); 3] = [
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
