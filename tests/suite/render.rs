//! `attnviz render FILE`: attention from a file (attnviz JSON v1 and v2, `.npz`,
//! `.safetensors`) read back exactly, drawn on every surface, and bad files refused in one line.
//!
//! The fixtures in `tests/fixtures/render/` are written by `make_render_fixtures.py` from the
//! committed transformers references (`tests/reference/tiny-bert.*`, `tiny-bart.*`), so the
//! weights compared here come from an independent implementation.

use std::fs;
use std::path::PathBuf;

use attnviz::attention::{AttentionKind, Level, MaskKind, Role};
use attnviz::import::{self, ReadOptions};

use crate::fidelity::reference::Reference;
use crate::support::cli::{assert_clean_failure, run, stderr, tiny, tree};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/render")
        .join(name)
}

fn read(name: &str) -> import::Imported {
    import::read(&fixture(name), &ReadOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// transformers' attention and tokens for tiny-bert's `pair` case.
fn hf_pair() -> (Vec<f32>, Vec<String>) {
    let r = Reference::load("tiny-bert");
    let case = r.cases.iter().find(|c| c.name == "pair").unwrap();
    (
        r.values(case.attentions.as_ref().unwrap()),
        case.tokens.clone(),
    )
}

#[test]
fn npz_and_safetensors_hold_transformers_weights_exactly() {
    let (want, tokens) = hf_pair();
    for name in ["tiny-bert-pair.npz", "tiny-bert-pair.safetensors"] {
        let imported = read(name);
        assert!(
            imported.warnings.is_empty(),
            "{name}: {:?}",
            imported.warnings
        );
        let [att] = imported.kinds.as_slice() else {
            panic!("{name}: one kind")
        };
        assert_eq!(att.kind, AttentionKind::SelfAttention);
        assert_eq!((att.layers(), att.heads(), att.len()), (3, 4, 16), "{name}");
        assert_eq!(att.weights(), want.as_slice(), "{name}: bit for bit");
        assert_eq!(att.tokens(), tokens.as_slice(), "{name}");
        assert_eq!(att.sentence_b_start(), Some(8), "{name}");
        assert_eq!(
            att.text, "where did the cat sit?",
            "{name}: text from the tokens"
        );
        assert_eq!(
            att.pair.as_deref(),
            Some("the cat sat on the mat."),
            "{name}"
        );
        let q = att.queries();
        assert_eq!(
            (q.roles[0], q.roles[7], q.roles[15]),
            (Role::Start, Role::End, Role::End)
        );
        assert_eq!(att.mask, MaskKind::Bidirectional);
    }
}

#[test]
fn half_precision_batched_and_compressed_npz() {
    let (want, _) = hf_pair();
    let imported = read("tiny-bert-pair-f16.npz");
    assert!(
        imported.warnings.is_empty(),
        "f16 rounding is within the f16 tolerance: {:?}",
        imported.warnings
    );
    let att = &imported.kinds[0];
    let worst = att
        .weights()
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(worst <= 5e-4, "f16 is within 5e-4: {worst}");
}

#[test]
fn tokens_from_a_file_replace_the_files() {
    let tokens = import::read_token_file(&fixture("tiny-bert-pair-tokens.txt")).unwrap();
    let mut upper: Vec<String> = tokens.iter().map(|t| t.to_uppercase()).collect();
    upper[1] = "WHERE".into();
    let imported = import::read(
        &fixture("tiny-bert-pair.safetensors"),
        &ReadOptions {
            tokens: Some(upper.clone()),
            ..ReadOptions::default()
        },
    )
    .unwrap();
    assert_eq!(imported.kinds[0].tokens(), upper.as_slice());
    let e = import::read(
        &fixture("tiny-bert-pair.npz"),
        &ReadOptions {
            tokens: Some(upper[..3].to_vec()),
            ..ReadOptions::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("has 16 queries but 3 tokens are given"), "{e}");
}

/// Every number of a JSON export's `attention`, parsed independently (serde_json's tree).
fn json_attention(path: &std::path::Path) -> (serde_json::Value, Vec<f32>) {
    let doc: serde_json::Value = serde_json::from_slice(&fs::read(path).unwrap()).unwrap();
    let mut flat = Vec::new();
    for l in doc["attention"].as_array().unwrap() {
        for h in l.as_array().unwrap() {
            for q in h.as_array().unwrap() {
                for k in q.as_array().unwrap() {
                    flat.push(k.as_f64().unwrap() as f32);
                }
            }
        }
    }
    (doc, flat)
}

#[test]
fn json_version_1_reads_with_roles_from_its_special_flags() {
    let path = fixture("tiny-bert-pair-v1.json");
    let (doc, flat) = json_attention(&path);
    assert_eq!(doc["format_version"], 1);
    let imported = read("tiny-bert-pair-v1.json");
    assert_eq!(imported.format, "attnviz JSON, format version 1");
    let att = &imported.kinds[0];
    assert_eq!(att.weights(), flat.as_slice());
    assert_eq!(att.model.id, "tests/fixtures/tiny-bert");
    assert_eq!((att.model.hidden_size, att.model.head_dim), (32, 8));
    assert_eq!(att.text, "Where did the cat sit?");
    assert_eq!(att.sentence_b_start(), Some(8));
    let q = att.queries();
    assert_eq!(q.roles[0], Role::Start);
    assert_eq!(q.roles[7], Role::End);
    assert_eq!(q.segments[8], 1);
    // Written by attnviz's own engine, which agrees with transformers to 1e-5.
    let (want, _) = hf_pair();
    let worst = flat
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(worst <= 1e-5, "{worst}");

    let words = read("tiny-bert-pieces-v1-words.json");
    let w = &words.kinds[0];
    assert_eq!(w.level, Level::Word);
    assert_eq!(w.tokens()[1], "unbelievably");
    assert_eq!(w.queries().spans[1], 1..4);
    assert!(w.queries().ids.is_empty());
}

#[test]
fn json_version_2_round_trips_through_render() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.json");
    let second = dir.path().join("second.json");
    let tiny = tiny();
    let out = run(&[
        "-m",
        tiny.to_str().unwrap(),
        "Unbelievably, the runners kept playing.",
        "-p",
        "It rained.",
        "--json",
        first.to_str().unwrap(),
        "--full-precision",
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(&[
        "render",
        first.to_str().unwrap(),
        "--json",
        second.to_str().unwrap(),
        "--full-precision",
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "nothing to warn about");
    let (mut a, wa) = json_attention(&first);
    let (b, wb) = json_attention(&second);
    assert_eq!(wa, wb);
    // The induction probe is a run of the model; `render` has no model, so its statistics are
    // the run's without it.
    if let Some(s) = a["stats"].as_object_mut() {
        s.remove("induction");
    }
    for field in [
        "format_version",
        "model",
        "kind",
        "mask",
        "kv_head",
        "text",
        "pair",
        "level",
        "tokens",
        "input_ids",
        "token_type_ids",
        "segments",
        "roles",
        "special",
        "word_ids",
        "surfaces",
        "spans",
        "generated",
        "sentence_b_start",
        "stats",
    ] {
        assert_eq!(a[field], b[field], "{field}");
    }
}

#[test]
fn every_surface_draws_a_rendered_file() {
    let dir = tempfile::tempdir().unwrap();
    for input in ["tiny-bert-pair.npz", "tiny-bert-pair-v1.json"] {
        let d = dir.path().join(input);
        fs::create_dir(&d).unwrap();
        let p = |f: &str| d.join(f).to_str().unwrap().to_string();
        let file = fixture(input);
        let out = run(&[
            "render",
            file.to_str().unwrap(),
            "--png",
            &p("head.png"),
            "--svg",
            &p("model.svg"),
            "--figure",
            "model",
            "--html",
            &p("page.html"),
            "--json",
            &p("a.json"),
            "--report",
            &p("rep"),
            "--stats",
            "--layer",
            "1",
            "--head",
            "2",
            "--words",
        ]);
        assert!(out.status.success(), "{input}: {}", stderr(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("layer 1"), "{input}: {stdout}");
        assert!(
            stdout.contains("Head labels; layers x heads"),
            "{input}: the stats table"
        );
        assert!(fs::read(d.join("head.png"))
            .unwrap()
            .starts_with(b"\x89PNG"));
        assert!(fs::read_to_string(d.join("model.svg"))
            .unwrap()
            .contains("<svg"));
        let page = fs::read_to_string(d.join("page.html")).unwrap();
        assert!(page.contains("id=\"attnviz-meta\""), "{input}");
        assert!(
            page.contains("tiny-bert"),
            "{input}: the source in the page"
        );
        let files = tree(&d.join("rep"));
        assert!(files.contains(&"report.html".to_string()), "{files:?}");
        let doc: serde_json::Value =
            serde_json::from_slice(&fs::read(d.join("a.json")).unwrap()).unwrap();
        assert_eq!(doc["level"], "word");
    }
}

#[test]
fn encoder_decoder_files_choose_a_kind() {
    let imported = read("tiny-bart-single.npz");
    assert_eq!(imported.kind_names(), ["encoder", "decoder", "cross"]);
    let cross = imported.kind(AttentionKind::Cross).unwrap();
    assert_eq!((cross.n_queries(), cross.n_keys()), (32, 30));
    let decoder = imported.kind(AttentionKind::Decoder).unwrap();
    assert_eq!(
        decoder.mask,
        MaskKind::Causal,
        "found from the zeros above the diagonal"
    );
    // transformers' cross-attention, from the committed reference.
    let reference =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference/tiny-bart.safetensors");
    let tensors = candle_core::safetensors::load(&reference, &candle_core::Device::Cpu).unwrap();
    let want: Vec<f32> = tensors["single.cross.attentions"]
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    assert_eq!(cross.weights(), want.as_slice());
    assert_eq!(cross.keys().labels[0], "<s>");
    assert_eq!(cross.queries().labels[0], "</s>");
    let file = fixture("tiny-bart-single.npz");
    let f = file.to_str().unwrap();
    // Without --kind, cross-attention, as for a model run; --kind picks another.
    for argv in [&["render", f][..], &["render", f, "--kind", "cross"]] {
        let out = run(argv);
        assert!(out.status.success(), "{argv:?}: {}", stderr(&out));
        let title = String::from_utf8_lossy(&out.stdout);
        let title = title.lines().next().unwrap_or_default();
        assert!(
            title.contains(" · cross · ") && title.contains("32 × 30 tokens"),
            "{argv:?}: {title}"
        );
    }
    let out = run(&["render", f, "--kind", "encoder"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let title = String::from_utf8_lossy(&out.stdout);
    let title = title.lines().next().unwrap_or_default();
    assert!(
        title.contains(" · encoder · ") && title.contains("· 30 tokens"),
        "{title}"
    );
    let out = run(&[
        "render",
        fixture("tiny-bert-pair.npz").to_str().unwrap(),
        "--kind",
        "cross",
    ]);
    assert_clean_failure(&out, "holds no cross attention (it holds self)");
}

/// The tiny random BART checkpoint.
fn tiny_bart() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-bart")
}

#[test]
fn encoder_decoder_json_version_3_renders_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    let p = |f: &str| dir.path().join(f).to_str().unwrap().to_string();
    let model = tiny_bart();
    // A long source over a short target: cross-attention is far from square.
    let out = run(&[
        "-m",
        model.to_str().unwrap(),
        "The quick brown fox jumps over a dog.",
        "--target",
        "A fox.",
        "--json",
        &p("run.json"),
        "--full-precision",
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(&[
        "render",
        &p("run.json"),
        "--json",
        &p("again.json"),
        "--full-precision",
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "nothing to warn about");
    let read = |f: &str| -> serde_json::Value {
        serde_json::from_slice(&fs::read(dir.path().join(f)).unwrap()).unwrap()
    };
    let (a, b) = (read("run.json"), read("again.json"));
    assert_eq!(a["format_version"], 3);
    for field in ["format_version", "text", "target", "level", "kinds"] {
        assert_eq!(a[field], b[field], "{field}");
    }
    for kind in ["encoder", "decoder", "cross"] {
        for field in [
            "kind",
            "mask",
            "positions",
            "layer_numbers",
            "text",
            "tokens",
            "roles",
            "word_ids",
            "generated",
            "key_tokens",
            "key_roles",
            "stats",
            "attention",
        ] {
            assert_eq!(a[kind][field], b[kind][field], "{kind}.{field}");
        }
    }
    let (nt, ns) = (
        a["cross"]["tokens"].as_array().unwrap().len(),
        a["cross"]["key_tokens"].as_array().unwrap().len(),
    );
    assert!(ns > nt + 10, "a long source: {ns} over {nt}");
    // The single-kind surfaces draw the kind --kind picks (cross-attention without it).
    let file = p("run.json");
    let cases = [
        (None, " · cross · ", format!("· {nt} × {ns} tokens")),
        (
            Some("cross"),
            " · cross · ",
            format!("· {nt} × {ns} tokens"),
        ),
        (Some("encoder"), " · encoder · ", format!("· {ns} tokens")),
        (
            Some("decoder"),
            " · decoder · ",
            format!("· {nt} tokens · causal"),
        ),
    ];
    for (kind, name, size) in cases {
        let png = p(&format!("{}.png", kind.unwrap_or("default")));
        let mut argv = vec!["render", &file, "--png", &png, "--stats"];
        if let Some(k) = kind {
            argv.extend(["--kind", k]);
        }
        let out = run(&argv);
        assert!(out.status.success(), "{kind:?}: {}", stderr(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let title = stdout.lines().next().unwrap_or_default();
        assert!(
            title.contains(name) && title.contains(&size),
            "{kind:?}: {name} and {size} in {title}"
        );
        assert!(stdout.contains("Head labels; layers x heads"), "{kind:?}");
        assert!(fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    }
    // --kind is checked against the file.
    let out = run(&[
        "render",
        fixture("tiny-bert-pair.npz").to_str().unwrap(),
        "--kind",
        "encoder",
    ]);
    assert_clean_failure(&out, "holds no encoder attention (it holds self)");
}

#[test]
fn bad_files_get_one_line_and_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("x.html");
    let h = html.to_str().unwrap();
    let cases = [
        (
            "bad-rank.npz",
            "attention has rank 3 (shape [4, 16, 16]); give [layers, heads, queries, keys]",
        ),
        (
            "bad-tokens.npz",
            "attention has 16 queries but 15 tokens are given",
        ),
        (
            "bad-nan.npz",
            "attention holds NaN at layer 1, head 2, query 3, key 4",
        ),
        ("bad-scores.npz", "not scores"),
        ("bad-object.npz", "object array"),
    ];
    for (name, want) in cases {
        let out = run(&["render", fixture(name).to_str().unwrap(), "--html", h]);
        assert_clean_failure(&out, want);
        assert!(!html.exists(), "{name}: no output written");
    }
    let out = run(&["render", dir.path().join("missing.npz").to_str().unwrap()]);
    assert_clean_failure(&out, "cannot read");
    // Rows that don't sum to 1: drawn, with a warning that says by how much.
    let out = run(&[
        "render",
        fixture("bad-rows.npz").to_str().unwrap(),
        "--html",
        h,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with("warning: ")
            && err.contains("64 of 192 rows don't sum to 1")
            && err.contains("sums to 0.900000 (off by 1.00e-1)"),
        "{err}"
    );
    assert!(html.exists());
}

#[test]
fn render_takes_output_flags_but_not_model_flags() {
    let f = fixture("tiny-bert-pair.npz");
    let f = f.to_str().unwrap();
    for flag in [
        &["--pair", "x"][..],
        &["--truncate"],
        &["--neuron"],
        &["--threads", "2"],
    ] {
        let mut argv = vec!["render", f];
        argv.extend_from_slice(flag);
        let out = run(&argv);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{flag:?}: clap refuses it: {}",
            stderr(&out)
        );
    }
    let out = run(&["render", f, "--layer", "3"]);
    assert_clean_failure(
        &out,
        "--layer 3 is out of range: tiny-bert-pair.npz has layers 0–2",
    );
    let out = run(&[
        "render",
        f,
        "--tokens",
        fixture("tiny-bart-single.npz").to_str().unwrap(),
    ]);
    assert_clean_failure(&out, "--tokens");
}

/// The metadata block of an HTML report.
fn html_meta(html: &str) -> serde_json::Value {
    let open = "id=\"attnviz-meta\">";
    let start = html.find(open).expect("a metadata block") + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end]).unwrap()
}

#[test]
fn encoder_decoder_html_report_holds_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    let p = |f: &str| dir.path().join(f).to_str().unwrap().to_string();
    let model = tiny_bart();
    // No --kind: the report holds all three and opens on cross-attention; the JSON of the same
    // run (another writer) says what each kind holds.
    let out = run(&[
        "-m",
        model.to_str().unwrap(),
        "The quick brown fox jumps over a dog.",
        "--target",
        "A <b>fox</b>.",
        "--html",
        &p("run.html"),
        "--json",
        &p("run.json"),
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value =
        serde_json::from_slice(&fs::read(p("run.json")).unwrap()).unwrap();
    let html = fs::read_to_string(p("run.html")).unwrap();
    assert!(!html.contains("<b>fox"), "user text is escaped");
    let meta = html_meta(&html);
    assert_eq!(meta["open_kind"], "cross");
    assert_eq!(meta["target"], "A <b>fox</b>.");
    let kinds = meta["kinds"].as_array().expect("every kind");
    let names: Vec<&str> = kinds.iter().map(|k| k["kind"].as_str().unwrap()).collect();
    assert_eq!(names, ["encoder", "decoder", "cross"]);
    let sections = meta["payload"]["sections"].as_array().unwrap();
    for k in kinds {
        let kind = k["kind"].as_str().unwrap();
        let j = &json[kind];
        assert_eq!(k["tokens"], j["tokens"], "{kind}");
        let (keys, want_keys) = if kind == "cross" {
            (&k["keys"]["tokens"], &j["key_tokens"])
        } else {
            assert!(k["keys"].is_null(), "{kind}: keys are its queries");
            (&k["tokens"], &j["tokens"])
        };
        assert_eq!(keys, want_keys, "{kind}");
        let (nq, nk) = (
            k["tokens"].as_array().unwrap().len(),
            keys.as_array().unwrap().len(),
        );
        let (l, h) = (
            k["model"]["layers"].as_u64().unwrap() as usize,
            k["model"]["heads"].as_u64().unwrap() as usize,
        );
        let name = format!("attention:{kind}");
        let s = sections
            .iter()
            .find(|s| s["name"] == name.as_str())
            .unwrap();
        assert_eq!(
            s["length"].as_u64().unwrap() as usize,
            l * h * nq * nk,
            "{kind}"
        );
        // Statistics per kind; cross-attention leads with its alignment figures.
        let stats = k["analysis"]["stats"].as_array().unwrap();
        assert_eq!(stats[0]["values"].as_array().unwrap().len(), l, "{kind}");
        if kind == "cross" {
            assert_eq!(stats[0]["id"], "argmax_share");
            let want = &j["stats"]["alignment"]["argmax_share"];
            let got = &stats[0]["values"];
            for (gl, wl) in got.as_array().unwrap().iter().zip(want.as_array().unwrap()) {
                for (g, w) in gl.as_array().unwrap().iter().zip(wl.as_array().unwrap()) {
                    assert!((g.as_f64().unwrap() - w.as_f64().unwrap()).abs() < 1e-5);
                }
            }
        }
    }
    assert!(
        kinds[2]["tokens"].as_array().unwrap().len()
            < kinds[2]["keys"]["tokens"].as_array().unwrap().len()
    );
    // --kind picks the kind the page opens on; `render` of the JSON writes the same report.
    for argv in [
        vec![
            "-m",
            model.to_str().unwrap(),
            "The quick brown fox.",
            "--target",
            "A fox.",
            "--kind",
            "decoder",
            "--html",
            &p("dec.html"),
            "-q",
        ],
        vec![
            "render",
            &p("run.json"),
            "--kind",
            "decoder",
            "--html",
            &p("dec.html"),
            "-q",
        ],
    ] {
        let out = run(&argv);
        assert!(out.status.success(), "{argv:?}: {}", stderr(&out));
        let meta = html_meta(&fs::read_to_string(p("dec.html")).unwrap());
        assert_eq!(meta["open_kind"], "decoder", "{argv:?}");
        assert_eq!(meta["kinds"].as_array().unwrap().len(), 3, "{argv:?}");
    }
    // --report: the page with every kind, and each kind's figures.
    let out = run(&[
        "-m",
        model.to_str().unwrap(),
        "The quick brown fox.",
        "--generate",
        "5",
        "--report",
        &p("rep"),
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let meta = html_meta(&fs::read_to_string(dir.path().join("rep/report.html")).unwrap());
    assert_eq!(meta["kinds"].as_array().unwrap().len(), 3);
    for kind in ["encoder", "decoder", "cross"] {
        assert!(
            dir.path().join(format!("rep/{kind}-head.png")).exists(),
            "{kind}"
        );
    }
}
