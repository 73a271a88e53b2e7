//! Hostile files for `attnviz render` (issue 20, requirement 14): a small `.npz` that declares
//! far more weights than fit, an encoder–decoder file of which only one kind is needed, and
//! metadata that contradicts the arrays. Every run is limited to 1 GiB of address space
//! (`ulimit -v`) and 60 s, so a reader that inflated first and checked afterwards fails here;
//! a refusal is exit status 1, one line that names the file, and nothing written.
//! `scripts/hostile/render.py` writes the full-size cases (2²⁸ weights) for
//! `scripts/measure-hostile.sh`; `crates/formats/src/import/tests.rs` tests the reader in process.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Output;

use crate::support::cli::{assert_clean_failure, fixture, run, run_limited, stderr};

fn npy_header(descr: &str, shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let dims = if shape.len() == 1 {
        format!("{},", dims[0])
    } else {
        dims.join(", ")
    };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({dims}), }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out
}

fn strings(tokens: &[String]) -> Vec<u8> {
    let width = tokens.iter().map(|t| t.chars().count()).max().unwrap_or(1);
    let mut out = npy_header(&format!("<U{width}"), &[tokens.len()]);
    for t in tokens {
        let mut chars: Vec<u32> = t.chars().map(u32::from).collect();
        chars.resize(width, 0);
        out.extend(chars.iter().flat_map(|c| c.to_le_bytes()));
    }
    out
}

fn f32s(shape: &[usize], values: &[f32]) -> Vec<u8> {
    let mut out = npy_header("<f4", shape);
    out.extend(values.iter().flat_map(|v| v.to_le_bytes()));
    out
}

/// Row-normalised weights `[1, 1, n, n]`, each row `1/n`.
fn uniform(n: usize) -> Vec<f32> {
    vec![1.0 / n as f32; n * n]
}

fn tokens(n: usize, prefix: &str) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// A deflated `.npz` of `entries`; `big` is streamed (an `attention` of `[1, 1, n, n]` whose
/// every weight is `1/n`) so the test never holds it.
fn write_npz(path: &Path, big: Option<(&str, usize)>, entries: &[(&str, Vec<u8>)]) {
    let file = fs::File::create(path).unwrap();
    let mut zip = zip::ZipWriter::new(file);
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(true);
    if let Some((name, n)) = big {
        zip.start_file(format!("{name}.npy"), opts).unwrap();
        zip.write_all(&npy_header("<f4", &[1, 1, n, n])).unwrap();
        let row: Vec<u8> = (0..n)
            .flat_map(|_| (1.0 / n as f32).to_le_bytes())
            .collect();
        for _ in 0..n {
            zip.write_all(&row).unwrap();
        }
    }
    for (name, bytes) in entries {
        zip.start_file(format!("{name}.npy"), opts).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
}

/// Flip bytes near the end of `entry`'s compressed data in the `.npz` at `path`, well after
/// its `.npy` header: reading the header still works, decoding the data does not.
fn corrupt_data_of(path: &Path, entry: &str) {
    let (start, len) = {
        let mut archive = zip::ZipArchive::new(fs::File::open(path).unwrap()).unwrap();
        let f = archive.by_name(&format!("{entry}.npy")).unwrap();
        (f.data_start().expect("a data offset"), f.compressed_size())
    };
    assert!(len > 4096, "{entry}: {len} compressed bytes");
    let mut bytes = fs::read(path).unwrap();
    let at = (start + len - 1024) as usize;
    for b in &mut bytes[at..at + 256] {
        *b ^= 0x5a;
    }
    fs::write(path, bytes).unwrap();
}

#[test]
fn a_file_that_declares_more_than_the_budget_is_refused_before_it_is_inflated() {
    // 8192² = 67 million weights (256 MiB as f32, 2 GB with the terminal view's links) in
    // 300 KB, and data that cannot be decoded: a reader that inflates before it checks fails
    // on the data (or the memory limit), not on the budget.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.npz");
    let n = 8192;
    write_npz(
        &path,
        Some(("attention", n)),
        &[("tokens", strings(&tokens(n, "t")))],
    );
    corrupt_data_of(&path, "attention");
    assert!(fs::metadata(&path).unwrap().len() < 1 << 20);
    let p = path.to_str().unwrap();
    let html = dir.path().join("a.html");
    let h = html.to_str().unwrap();

    let out = run_limited(&["render", p, "--max-memory", "128M", "--html", h]);
    assert_clean_failure(
        &out,
        "big.npz: its attention (67 million weights, attention [1, 1, 8192, 8192]) needs about",
    );
    let err = stderr(&out);
    assert!(
        err.contains("more than the memory budget of 134 MB") && err.ends_with("--max-memory\n"),
        "{err}"
    );
    // The default: half of the 1 GiB address-space limit, below half of this machine.
    let out = run_limited(&["render", p]);
    assert_clean_failure(&out, "more than the default memory budget of 537 MB");
    assert!(!html.exists(), "nothing written");
    // With room for the weights alone (no view), the data is read, and found corrupt.
    let out = run_limited(&["render", p, "--max-memory", "900M", "-q"]);
    assert_unreadable(&out, "big.npz: attention: ");
}

/// A refusal of data that does not decode (an error of the deflate stream, or its checksum).
fn assert_unreadable(out: &Output, what: &str) {
    assert_clean_failure(out, what);
    let err = stderr(out);
    assert!(
        err.contains("cannot read the data") || err.contains("the data stops after"),
        "{err}"
    );
}

/// An encoder–decoder file for the terminal view or a figure has only the kind shown decoded:
/// a file whose other kinds cannot be decoded still draws it, and what it draws is what the
/// whole run's set draws.
#[test]
fn only_the_kind_shown_is_decoded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ed.npz");
    let (ne, nd) = (2048, 48);
    let cross: Vec<f32> = vec![1.0 / ne as f32; nd * ne];
    let decoder: Vec<f32> = (0..nd)
        .flat_map(|q| (0..nd).map(move |k| if k <= q { 1.0 / (q + 1) as f32 } else { 0.0 }))
        .collect();
    write_npz(
        &path,
        Some(("encoder_attention", ne)),
        &[
            ("decoder_attention", f32s(&[1, 1, nd, nd], &decoder)),
            ("cross_attention", f32s(&[1, 1, nd, ne], &cross)),
            ("encoder_tokens", strings(&tokens(ne, "e"))),
            ("decoder_tokens", strings(&tokens(nd, "d"))),
        ],
    );
    corrupt_data_of(&path, "encoder_attention");
    let p = path.to_str().unwrap();
    let out = run_limited(&["render", p, "--kind", "cross"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let svg = dir.path().join("d.svg");
    let out = run_limited(&[
        "render",
        p,
        "--kind",
        "decoder",
        "--svg",
        svg.to_str().unwrap(),
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(fs::read_to_string(&svg).unwrap().contains("<svg"));
    // The report holds every kind: the encoder is decoded, and found corrupt.
    let html = dir.path().join("r.html");
    let out = run_limited(&["render", p, "--html", html.to_str().unwrap()]);
    assert_unreadable(&out, "ed.npz: encoder_attention: ");
    assert!(!html.exists());

    // transformers' tiny BART: the kind read alone draws exactly what the whole set draws (an
    // HTML report makes attnviz read every kind).
    let bart = fixture("render/tiny-bart-single.npz");
    let b = bart.to_str().unwrap();
    for kind in ["encoder", "decoder", "cross"] {
        let html = dir.path().join(format!("{kind}.html"));
        let h = html.to_str().unwrap();
        let png = |name: &str, extra: &[&str]| -> Vec<u8> {
            let path = dir.path().join(name);
            let mut args = vec!["render", b, "--kind", kind, "--png", path.to_str().unwrap()];
            args.extend_from_slice(extra);
            args.push("-q");
            let out = run(&args);
            assert!(out.status.success(), "{kind}: {}", stderr(&out));
            fs::read(&path).unwrap()
        };
        let alone = png("alone.png", &[]);
        assert!(alone.starts_with(b"\x89PNG"), "{kind}");
        assert!(
            alone == png("all.png", &["--html", h]),
            "{kind}: the same figure"
        );
        let term = |extra: &[&str]| {
            let mut args = vec!["render", b, "--kind", kind, "--stats"];
            args.extend_from_slice(extra);
            let out = run(&args);
            assert!(out.status.success(), "{kind}: {}", stderr(&out));
            String::from_utf8(out.stdout).unwrap()
        };
        assert_eq!(
            term(&[]),
            term(&["--html", html.to_str().unwrap()]),
            "{kind}: the same terminal view and table"
        );
    }
}

fn json_doc(fields: serde_json::Value) -> String {
    let lower = serde_json::json!([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.25, 0.25, 0.5]]);
    let mut doc = serde_json::json!({
        "format": "attnviz-attention",
        "format_version": 2,
        "model": {"id": "hostile", "family": "llama", "layers": 1, "heads": 2},
        "kind": "self",
        "mask": "causal",
        "tokens": ["<s>", "a", "b"],
        "roles": ["start", "word", "word"],
        "attention": [[lower, lower]],
    });
    for (k, v) in fields.as_object().unwrap() {
        doc[k] = v.clone();
    }
    doc.to_string()
}

#[test]
fn metadata_that_contradicts_the_arrays_is_refused_in_one_line() {
    let full = serde_json::json!([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.25, 0.25, 0.5]]);
    let cases = [
        (
            "kv-head",
            serde_json::json!({"kv_head": [0, 7]}),
            "attention: kv_head says head 1 reads key/value head 7, but there are 2 heads",
        ),
        (
            "spans",
            serde_json::json!({"level": "word", "spans": [[0, 1], [1, 2], [2, 1_000_000_000_000u64]]}),
            "attention: span 2 of tokens, [2, 1000000000000], ends past the longest input",
        ),
        (
            "token-spans",
            serde_json::json!({"spans": [[0, 2], [2, 3], [3, 4]]}),
            "attention: span 0 of tokens, [0, 2], covers more than one token at token level",
        ),
        (
            "causal",
            serde_json::json!({"attention": [[full, full]]}),
            "attention says its mask is causal, but layer 0, head 0, query 0 attends to the \
             later key 1 with weight 0.5",
        ),
        (
            "word-ids",
            serde_json::json!({"word_ids": [null, 999_999_999_999_999_999u64, 1_000_000_000_000_000_000u64]}),
            "attention: unit 1 of tokens has word id 999999999999999999, but 3 units hold at most 3 words",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("a.html");
    for (name, fields, want) in cases {
        let path = dir.path().join(format!("{name}.json"));
        fs::write(&path, json_doc(fields)).unwrap();
        let out = run_limited(&[
            "render",
            path.to_str().unwrap(),
            "--words",
            "--html",
            html.to_str().unwrap(),
        ]);
        assert_clean_failure(&out, &format!("{name}.json: {want}"));
        assert!(!html.exists(), "{name}: nothing written");
    }
    // The same word ids in an .npz.
    let path = dir.path().join("w.npz");
    let mut ids = npy_header("<i8", &[3]);
    for id in [-1i64, 0, 1 << 60] {
        ids.extend_from_slice(&id.to_le_bytes());
    }
    write_npz(
        &path,
        None,
        &[
            ("attention", f32s(&[1, 1, 3, 3], &uniform(3))),
            ("tokens", strings(&tokens(3, "t"))),
            ("word_ids", ids),
        ],
    );
    let out = run_limited(&["render", path.to_str().unwrap(), "--words"]);
    assert_clean_failure(
        &out,
        "w.npz: attention: unit 2 of tokens has word id 1152921504606846976, but 3 units",
    );
}

#[test]
fn json_attention_is_checked_against_the_budget_as_it_streams() {
    let n = 64;
    let row: Vec<f32> = vec![1.0 / n as f32; n];
    let matrix: Vec<Vec<f32>> = (0..n).map(|_| row.clone()).collect();
    let doc = serde_json::json!({
        "format": "attnviz-attention",
        "format_version": 2,
        "model": {"id": "m", "layers": 2, "heads": 2},
        "tokens": tokens(n, "t"),
        "attention": [[matrix, matrix], [matrix, matrix]],
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.json");
    fs::write(&path, doc.to_string()).unwrap();
    let p = path.to_str().unwrap();
    // 16,384 weights; 20 KB pays for 5,000 of them in the terminal view (4 + 0 bytes a
    // weight, 28 a cell): refused while streaming, before the rest is read.
    let out = run_limited(&["render", p, "--max-memory", "20k"]);
    assert_clean_failure(&out, "a.json: its attention (more than");
    assert!(
        stderr(&out).contains("more than the memory budget of 20 kB"),
        "{}",
        stderr(&out)
    );
    // Every weight read, but the terminal view's 28 bytes a cell of the 64 × 64 matrix too.
    let out = run_limited(&["render", p, "--max-memory", "120k"]);
    assert_clean_failure(
        &out,
        "a.json: its attention (16384 weights, attention [2, 2, 64, 64])",
    );
    assert!(run_limited(&["render", p, "--max-memory", "200k"])
        .status
        .success());
}

#[test]
fn an_image_grid_larger_than_its_input_is_refused() {
    // [10⁹, 10⁹] aborted on a 4·10¹⁸-byte allocation: the grid is what the input makes in
    // patches, and is checked against it.
    let image = |grid: serde_json::Value| {
        serde_json::json!({"image": {
            "source": "a.png", "original": [8, 4], "input": [8, 4], "patch": 4, "grid": grid,
            "preprocessing": {"color": "rgb8", "resize": null, "crop": null, "rescale": null,
                              "normalize": null, "positions_from": null},
            "cells": [{"kind": "class"}, {"kind": "patch", "row": 0, "col": 0},
                      {"kind": "patch", "row": 0, "col": 1}]}})
    };
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("a.png");
    let path = dir.path().join("grid.json");
    fs::write(
        &path,
        json_doc(image(serde_json::json!([
            1_000_000_000u64,
            1_000_000_000u64
        ]))),
    )
    .unwrap();
    for extra in [&[][..], &["--png", png.to_str().unwrap()][..]] {
        let mut args = vec!["render", path.to_str().unwrap()];
        args.extend_from_slice(extra);
        assert_clean_failure(
            &run_limited(&args),
            "grid.json: its image has a 1000000000×1000000000 grid, but its 8×4 input in 4-pixel \
             patches makes 1×2",
        );
        assert!(!png.exists());
    }
    // The grid the input makes draws.
    fs::write(&path, json_doc(image(serde_json::json!([1, 2])))).unwrap();
    let out = run_limited(&["render", path.to_str().unwrap(), "-q"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// An attnviz JSON export whose token 1 is `bytes` bytes long.
fn long_token_doc(path: &Path, bytes: usize) {
    let long = "x".repeat(bytes);
    let doc = json_doc(serde_json::json!({"tokens": ["<s>", long, "b"]}));
    fs::write(path, doc).unwrap();
}

#[test]
fn a_huge_token_counts_in_the_estimate_and_reads_in_bounded_memory() {
    // One 50 MiB token cost 1.4 GiB in `render` and `diff` (an item of 32 bytes per character
    // of its display label, and serde's buffered copy of the fields it did not know): under
    // 1 GiB of address space it aborted. Its bytes now count in the estimate (16 each, against
    // half the address space), and a long token that fits is read and drawn.
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    long_token_doc(&big, 50 << 20);
    let small = dir.path().join("small.json");
    fs::write(&small, json_doc(serde_json::json!({}))).unwrap();
    let (b, s) = (big.to_str().unwrap(), small.to_str().unwrap());
    let html = dir.path().join("a.html");
    for args in [
        vec!["render", b, "-q"],
        vec!["render", b, "--html", html.to_str().unwrap()],
        vec!["diff", b, s],
    ] {
        let out = run_limited(&args);
        assert_clean_failure(&out, "big.json: its token labels and texts (more than");
        assert!(
            stderr(&out).contains("default memory budget"),
            "{}",
            stderr(&out)
        );
        assert!(!html.exists());
    }
    // A 4 MiB token fits: drawn, compared, and its label whole in the report.
    let long = dir.path().join("long.json");
    long_token_doc(&long, 4 << 20);
    let l = long.to_str().unwrap();
    let out = run_limited(&["render", l, "--html", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(fs::read_to_string(&html)
        .unwrap()
        .contains(&"x".repeat(4 << 20)));
    let out = run_limited(&["diff", l, s]);
    assert!(out.status.success(), "{}", stderr(&out));
    // A budget given is the one the labels count against.
    let out = run_limited(&["render", l, "-q", "--max-memory", "32M"]);
    assert_clean_failure(&out, "long.json: its token labels and texts (more than");
}
