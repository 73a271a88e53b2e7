use std::io::Read;

use super::*;
use crate::attention::fixtures::{softmax_of_random, synthetic};
use crate::attention::QueryKey;

const INJECTION: &str = "</script><script>alert(1)</script><img src=x onerror=alert(2)>";

fn render(att: &Attention, opts: &HtmlOptions) -> String {
    let mut out = Vec::new();
    write_html(att, opts, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The text between `<script …id="ID">` and the next `</script>`.
pub(super) fn script_block<'a>(html: &'a str, id: &str) -> &'a str {
    let open = format!("id=\"{id}\">");
    let start = html.find(&open).unwrap_or_else(|| panic!("no #{id}")) + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    &html[start..end]
}

pub(super) fn meta_of(html: &str) -> serde_json::Value {
    serde_json::from_str(script_block(html, "attnviz-meta")).unwrap()
}

pub(super) fn raw_payload(html: &str, meta: &serde_json::Value) -> Vec<u8> {
    let bytes = STANDARD.decode(script_block(html, "attnviz-data")).unwrap();
    if meta["payload"]["compression"] == "gzip" {
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_end(&mut raw)
            .unwrap();
        raw
    } else {
        bytes
    }
}

/// Decode a u16 or f32 section from the raw payload, from the documented layout.
pub(super) fn section(raw: &[u8], meta: &serde_json::Value, name: &str) -> Vec<f64> {
    let s = meta["payload"]["sections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no section {name}"));
    let (off, len) = (
        s["offset"].as_u64().unwrap() as usize,
        s["length"].as_u64().unwrap() as usize,
    );
    let (lo, hi) = (s["lo"].as_f64().unwrap(), s["hi"].as_f64().unwrap());
    match s["dtype"].as_str().unwrap() {
        "u16" => (0..len)
            .map(|i| {
                let v = raw[off + i] as u32 | (raw[off + len + i] as u32) << 8;
                lo + v as f64 * (hi - lo) / 65535.0
            })
            .collect(),
        "u8" => (0..len)
            .map(|i| lo + raw[off + i] as f64 * (hi - lo) / 255.0)
            .collect(),
        "f32" => (0..len)
            .map(|i| {
                let b = [0, 1, 2, 3].map(|p| raw[off + p * len + i]);
                f32::from_le_bytes(b) as f64
            })
            .collect(),
        other => panic!("dtype {other}"),
    }
}

#[test]
fn template_has_every_slot_exactly_once() {
    for slot in Slot::ALL {
        assert_eq!(
            TEMPLATE.matches(&slot.to_string()).count(),
            1,
            "slot {slot} must appear exactly once, or the data would be stored twice"
        );
    }
    assert_eq!(
        TEMPLATE.matches("@@ATTNVIZ:").count(),
        Slot::ALL.len(),
        "unknown slot in the template"
    );
    let pieces = template_pieces();
    let slots = pieces
        .iter()
        .filter(|p| matches!(p, Piece::Slot(_)))
        .count();
    assert_eq!(slots, Slot::ALL.len());
}

#[test]
fn inline_assets_cannot_end_their_elements() {
    let js = script().to_ascii_lowercase();
    for bad in ["</script", "<!--", "<script"] {
        assert!(
            !js.contains(bad),
            "the joined script (assets/report/*.js) contains {bad}"
        );
    }
    assert!(!CSS.to_ascii_lowercase().contains("</style"));
}

#[test]
fn comment_lines_are_dropped_and_code_is_kept_whole() {
    let src = "  // a line comment\n\
               let a = 1; // kept: code comes first\n\
               /* one-line block */\n\
               /** a block\n * over lines\n */\n\
               \tlet b = '//not a comment';\n\
               /* before */ let c = 3;\n\
               /* open\n close */ let d = 4;\n\
               \n\
               }\n";
    assert_eq!(
        drop_comment_lines(src),
        "let a = 1; // kept: code comes first\nlet b = '//not a comment';\n\
         /* before */ let c = 3;\nlet d = 4;\n}\n"
    );
}

#[test]
fn the_report_carries_every_script_file_less_its_comments() {
    let code = |s: &str| {
        s.lines()
            .map(str::trim)
            .filter(|l| {
                !l.is_empty() && !l.starts_with("//") && !l.starts_with('*') && !l.starts_with("/*")
            })
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    // Every code line of the sources, in order, and nothing else.
    assert_eq!(code(script()), code(JS_SOURCE));
    assert!(
        script().len() * 10 < JS_SOURCE.len() * 9,
        "comments and indentation are dropped"
    );
}

#[test]
fn injection_sentence_is_only_text() {
    let mut att = synthetic(&["[CLS]", INJECTION, "<b>&amp;", "[SEP]"], 2, 3);
    att.text = INJECTION.into();
    att.pair = Some("\u{2028}'\"&<!--".into());
    let opts = HtmlOptions {
        settings: vec![(INJECTION.into(), INJECTION.into())],
        ..HtmlOptions::default()
    };
    let html = render(&att, &opts);
    // Exactly the template's three script elements, and no injected markup anywhere.
    assert_eq!(html.matches("<script").count(), 3);
    assert_eq!(html.matches("</script>").count(), 3);
    assert!(!html.contains("<img"));
    assert!(!html.contains("alert(1)</script>"));
    // The title is HTML-escaped.
    assert!(html.contains("<title>attnviz — &lt;/script&gt;&lt;script&gt;alert(1)"));
    // The metadata is still valid JSON carrying the strings unchanged.
    let meta = meta_of(&html);
    assert_eq!(meta["text"], INJECTION);
    assert_eq!(meta["tokens"][1], INJECTION);
    assert_eq!(meta["tokens"][2], "<b>&amp;");
    assert_eq!(meta["pair"], "\u{2028}'\"&<!--");
    assert_eq!(meta["settings"][0][1], INJECTION);
    let block = script_block(&html, "attnviz-meta");
    for bad in ['<', '>', '&', '\u{2028}'] {
        assert!(!block.contains(bad), "meta block contains {bad:?}");
    }
}

#[test]
fn csp_lists_the_inline_script_and_style() {
    let html = render(
        &synthetic(&["[CLS]", "a", "[SEP]"], 1, 1),
        &HtmlOptions::default(),
    );
    let csp_start = html.find("Content-Security-Policy\" content=\"").unwrap();
    let csp = &html[csp_start..][..html[csp_start..].find("\">").unwrap()];
    assert!(csp.contains("default-src 'none'"));
    let js_start = html.rfind("<script>").unwrap() + "<script>".len();
    let js = &html[js_start..js_start + html[js_start..].find("</script>").unwrap()];
    let css_start = html.find("<style>").unwrap() + "<style>".len();
    let css = &html[css_start..css_start + html[css_start..].find("</style>").unwrap()];
    for (kind, code) in [("script-src", js), ("style-src", css)] {
        let want = format!(
            "{kind} 'sha256-{}'",
            STANDARD.encode(Sha256::digest(code.as_bytes()))
        );
        assert!(csp.contains(&want), "{want} missing from {csp}");
    }
}

#[test]
fn payload_holds_the_weights_once_within_the_stated_error() {
    let att = softmax_of_random(9, 2, 3, 4);
    for (compress, precision, bound) in [
        (true, Precision::U16, 0.5 / 65535.0),
        (false, Precision::U16, 0.5 / 65535.0),
        (true, Precision::U8, 0.5 / 255.0),
    ] {
        let opts = HtmlOptions {
            compress,
            precision,
            ..HtmlOptions::default()
        };
        let html = render(&att, &opts);
        let meta = meta_of(&html);
        let raw = raw_payload(&html, &meta);
        let sections = meta["payload"]["sections"].as_array().unwrap();
        assert_eq!(sections.len(), 1, "no vectors unless asked");
        assert_eq!(
            raw.len(),
            att.weights().len() * if precision == Precision::U8 { 1 } else { 2 }
        );
        let got = section(&raw, &meta, "attention");
        let worst = got
            .iter()
            .zip(att.weights())
            .map(|(g, &w)| (g - w as f64).abs())
            .fold(0.0, f64::max);
        assert!(worst <= bound * 1.0001, "{worst} > {bound}");
        assert!((sections[0]["max_error"].as_f64().unwrap() - bound).abs() < 1e-12);
        // Stored once: the only long base64 run in the file is the payload itself.
        let b64 = script_block(&html, "attnviz-data");
        assert_eq!(html.matches(b64).count(), 1);
    }
}

#[test]
fn neuron_vectors_are_embedded_exactly_when_asked() {
    let att = softmax_of_random(7, 2, 2, 4);
    let html = render(
        &att,
        &HtmlOptions {
            neuron: true,
            ..HtmlOptions::default()
        },
    );
    let meta = meta_of(&html);
    assert_eq!(meta["neuron"]["available"], true);
    let raw = raw_payload(&html, &meta);
    let qk = att.query_key.as_ref().unwrap();
    let q = section(&raw, &meta, "query");
    let k = section(&raw, &meta, "key");
    assert!(q.iter().zip(&qk.queries).all(|(a, &b)| *a == b as f64));
    assert!(k.iter().zip(&qk.keys).all(|(a, &b)| *a == b as f64));
    // Not asked: not embedded, and the page is told why.
    let meta = meta_of(&render(&att, &HtmlOptions::default()));
    assert_eq!(meta["neuron"]["available"], false);
    assert!(meta["neuron"]["reason"]
        .as_str()
        .unwrap()
        .contains("neuron view"));
    assert_eq!(meta["payload"]["sections"].as_array().unwrap().len(), 1);
    // Asked but not captured.
    let plain = synthetic(&["[CLS]", "a", "[SEP]"], 1, 1);
    let meta = meta_of(&render(
        &plain,
        &HtmlOptions {
            neuron: true,
            ..HtmlOptions::default()
        },
    ));
    assert_eq!(meta["neuron"]["available"], false);
    assert!(meta["neuron"]["reason"]
        .as_str()
        .unwrap()
        .contains("not captured"));
}

#[test]
fn analysis_matrices_and_stats_travel_to_the_page() {
    let att = synthetic(&["[CLS]", "a", "b", "[SEP]"], 2, 3);
    let n = att.len();
    let rollout: Vec<Vec<f32>> = (0..2)
        .map(|l| (0..n * n).map(|i| ((i + l) % 5) as f32 / 4.0).collect())
        .collect();
    let odd = vec![(0..n * n).map(|i| i as f32 - 3.0).collect::<Vec<f32>>()];
    let opts = HtmlOptions {
        analysis: HtmlAnalysis {
            stats: vec![HeadStatistic {
                id: "entropy".into(),
                label: "Entropy (nats)".into(),
                description: "How spread out each row is.".into(),
                values: vec![vec![0.5, 1.0, f32::NAN], vec![0.1, 0.2, 0.3]],
            }],
            head_labels: Some(vec![
                vec!["".into(), "previous token".into(), "".into()],
                vec!["".into(), "".into(), "[SEP] sink".into()],
            ]),
            matrices: vec![
                ExtraMatrix {
                    id: "rollout".into(),
                    label: "Attention rollout".into(),
                    description: "Abnar & Zuidema 2020.".into(),
                    layers: rollout.clone(),
                    shares: false,
                },
                ExtraMatrix {
                    id: "odd".into(),
                    label: "Odd".into(),
                    description: "Not a probability.".into(),
                    layers: odd.clone(),
                    shares: false,
                },
            ],
            lens: None,
            ..HtmlAnalysis::default()
        },
        ..HtmlOptions::default()
    };
    let html = render(&att, &opts);
    let meta = meta_of(&html);
    let a = &meta["analysis"];
    assert_eq!(a["stats"][0]["values"][1][2].as_f64().unwrap() as f32, 0.3);
    assert!(a["stats"][0]["values"][0][2].is_null(), "NaN becomes null");
    assert_eq!(a["head_labels"][0][1], "previous token");
    assert_eq!(a["matrices"][0]["per_layer"], true);
    assert_eq!(a["matrices"][1]["per_layer"], false);
    let raw = raw_payload(&html, &meta);
    let got = section(&raw, &meta, "matrix:rollout");
    let want: Vec<f32> = rollout.concat();
    assert!(got
        .iter()
        .zip(&want)
        .all(|(g, &w)| (g - w as f64).abs() <= 0.5 / 65535.0 + 1e-9));
    // A matrix outside [0, 1] gets its own range, and keeps the same relative precision.
    let got = section(&raw, &meta, "matrix:odd");
    let step = (12.0 - -3.0) / 65535.0;
    assert!(got
        .iter()
        .zip(&odd[0])
        .all(|(g, &w)| (g - w as f64).abs() <= step / 2.0 + 1e-6));
}

#[test]
fn bad_options_are_refused_before_anything_is_written() {
    let att = synthetic(&["[CLS]", "a", "[SEP]"], 2, 3);
    let n2 = att.len() * att.len();
    let cases: Vec<(HtmlOptions, &str)> = vec![
        (
            HtmlOptions {
                layer: 2,
                ..HtmlOptions::default()
            },
            "layer 2 does not exist: the model has layers 0–1",
        ),
        (
            HtmlOptions {
                head: 3,
                ..HtmlOptions::default()
            },
            "head 3 does not exist",
        ),
        (
            HtmlOptions {
                threshold: Some(1.5),
                ..HtmlOptions::default()
            },
            "threshold 1.5",
        ),
        (
            HtmlOptions {
                analysis: HtmlAnalysis {
                    stats: vec![HeadStatistic {
                        id: "x".into(),
                        label: "X".into(),
                        description: String::new(),
                        values: vec![vec![0.0; 3]],
                    }],
                    ..HtmlAnalysis::default()
                },
                ..HtmlOptions::default()
            },
            "statistic `x` must have 2 layers × 3 heads",
        ),
        (
            HtmlOptions {
                analysis: HtmlAnalysis {
                    matrices: vec![ExtraMatrix {
                        id: "m".into(),
                        label: "M".into(),
                        description: String::new(),
                        layers: vec![vec![0.0; n2 - 1]],
                        shares: false,
                    }],
                    ..HtmlAnalysis::default()
                },
                ..HtmlOptions::default()
            },
            "matrix `m` must be 3 × 3",
        ),
        (
            HtmlOptions {
                analysis: HtmlAnalysis {
                    // Two positions for a report of three units.
                    lens: Some(crate::analysis::LogitLens {
                        stages: vec!["embeddings".into()],
                        positions: vec!["a".into(), "b".into()],
                        k: 1,
                        top: vec![vec![
                            vec![crate::analysis::lens::LensToken {
                                id: 0,
                                text: "a".into(),
                                prob: 1.0,
                            }];
                            2
                        ]],
                    }),
                    ..HtmlAnalysis::default()
                },
                ..HtmlOptions::default()
            },
            "the logit lens must have 3 positions",
        ),
        (
            HtmlOptions {
                analysis: HtmlAnalysis {
                    matrices: vec![
                        ExtraMatrix {
                            id: "m".into(),
                            label: "M".into(),
                            description: String::new(),
                            layers: vec![vec![0.0; n2]],
                            shares: false,
                        };
                        2
                    ],
                    ..HtmlAnalysis::default()
                },
                ..HtmlOptions::default()
            },
            "id `m` is used twice",
        ),
    ];
    for (opts, want) in cases {
        let mut out = Vec::new();
        let err = write_html(&att, &opts, &mut out).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains(want), "{err} lacks {want}");
        assert!(out.is_empty(), "wrote {} bytes before failing", out.len());
    }
}

#[test]
fn file_convenience_writes_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.html");
    let att = synthetic(&["[CLS]", "a", "[SEP]"], 1, 2);
    write_html_file(&att, &HtmlOptions::default(), &path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("<!DOCTYPE html>"));
    // A failing write leaves the old file alone and no temporary behind.
    let bad = HtmlOptions {
        layer: 9,
        ..HtmlOptions::default()
    };
    let err = write_html_file(&att, &bad, &path).unwrap_err();
    assert!(err.to_string().contains("report.html"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn escapes() {
    assert_eq!(
        escape_html("<a href='x'>&\"</a>"),
        "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
    );
    assert_eq!(
        escape_json_for_script("{\"t\":\"</script>&\u{2028}\"}"),
        r#"{"t":"\u003c/script\u003e\u0026\u2028"}"#
    );
}

#[test]
fn scripts_the_system_may_lack_get_embedded_font_subsets() {
    let plain = render(
        &synthetic(&["[CLS]", "a", "[SEP]"], 1, 1),
        &HtmlOptions::default(),
    );
    assert!(
        !plain.contains("@font-face"),
        "an ASCII report embeds no font"
    );
    let mut att = synthetic(&["[CLS]", "한국", "🚀", "東", "naïve", "[SEP]"], 1, 1);
    att.text = "한국 🚀 東 naïve".into();
    let html = render(&att, &HtmlOptions::default());
    let csp_start = html.find("Content-Security-Policy\" content=\"").unwrap();
    let csp = &html[csp_start..][..html[csp_start..].find("\">").unwrap()];
    assert!(csp.contains("font-src data:;"), "{csp}");
    let faces = html.matches("@font-face").count();
    assert_eq!(faces, 4, "Hangul, emoji, CJK and Latin (ï) subsets");
    for range in ["U+D55C", "U+1F680", "U+6771", "U+EF"] {
        assert!(html.contains(range), "{range} missing");
    }
    assert!(html.contains(
        ":root{--attnviz-fonts:\"attnviz-sans\", \"attnviz-hangul\", \"attnviz-cjk\", \"attnviz-emoji\", sans-serif}"
    ));
    // the page's body font list ends with them
    assert!(html.contains("Arial, var(--attnviz-fonts, sans-serif)"));
}

#[test]
fn metadata_describes_units_by_role_for_any_family() {
    let att = crate::attention::fixtures::synthetic_pair(
        &["<s>", "ĠThe", "Ġc", "at", "</s>", "</s>", "ĠIt", "</s>"],
        5,
        1,
        2,
    );
    let meta = meta_of(&render(&att, &HtmlOptions::default()));
    assert_eq!(meta["format"], 2);
    assert_eq!(meta["model"]["family"], "BERT");
    assert_eq!(meta["kind"], "self");
    assert_eq!(meta["mask"], "bidirectional");
    assert_eq!(meta["kv_head"], serde_json::json!([0, 1]));
    assert_eq!(
        meta["roles"],
        serde_json::json!(["start", "word", "word", "piece", "end", "end", "word", "end"])
    );
    assert_eq!(
        meta["segments"],
        serde_json::json!([0, 0, 0, 0, 0, 1, 1, 1])
    );
    assert_eq!(meta["sentence_b_start"], 5);
    assert_eq!(meta["surfaces"][2], " c");
    assert!(
        meta.get("special").is_none(),
        "roles replace the special flags"
    );
    let cross = Attention::cross(
        crate::attention::fixtures::info(1, 1),
        "a".into(),
        None,
        crate::attention::fixtures::units_for(&["<s>", "Ġa"]),
        crate::attention::fixtures::units_for(&["<s>", "Ġb", "</s>"]),
        vec![0.5; 6],
    )
    .unwrap();
    // Cross-attention alone draws too: its key units travel beside the query units.
    let meta = meta_of(&render(&cross, &HtmlOptions::default()));
    assert_eq!(meta["tokens"], serde_json::json!(["<s>", "Ġa"]));
    assert_eq!(
        meta["keys"]["tokens"],
        serde_json::json!(["<s>", "Ġb", "</s>"])
    );
    assert_eq!(meta["payload"]["sections"][0]["length"], 6);
}

/// The three kinds of an encoder–decoder run, each with its own options, in one report.
fn render_set(set: &crate::attention::AttentionSet, open: usize, neuron: bool) -> String {
    let opts: Vec<HtmlOptions> = set
        .iter()
        .map(|a| HtmlOptions {
            neuron,
            layer: a.layers() - 1,
            ..HtmlOptions::default()
        })
        .collect();
    let kinds: Vec<(&Attention, &HtmlOptions)> = set.iter().zip(&opts).collect();
    let mut out = Vec::new();
    write_html_kinds(&kinds, open, set.target(), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn an_encoder_decoder_report_holds_every_kind_with_its_own_units_and_shape() {
    let source = ["<s>", "ĠThe", "Ġcat", "Ġsat", "Ġdown", "</s>"];
    let target = ["</s>", "<s>", "ĠDie", "ĠKatze", "</s>"];
    let set = crate::attention::fixtures::encoder_decoder(&source, &target, 2, 3, 2, target.len());
    let html = render_set(&set, 2, false);
    let meta = meta_of(&html);
    // No single kind at the top level: the page lays the chosen kind over the shared fields.
    assert!(meta.get("tokens").is_none() && meta.get("kind").is_none());
    assert_eq!(meta["open_kind"], "cross");
    assert_eq!(meta["target"], "</s> <s> ĠDie ĠKatze </s>");
    assert_eq!(meta["text"], source.join(" "));
    let kinds = meta["kinds"].as_array().unwrap();
    let names: Vec<&str> = kinds.iter().map(|k| k["kind"].as_str().unwrap()).collect();
    assert_eq!(names, ["encoder", "decoder", "cross"]);
    // (layers, heads, query units, key units, mask) per kind, from the set itself.
    let raw = raw_payload(&html, &meta);
    for (k, att) in kinds.iter().zip(set.iter()) {
        let (nq, nk) = (att.n_queries(), att.n_keys());
        assert_eq!(k["model"]["layers"], att.layers());
        assert_eq!(k["model"]["heads"], att.heads());
        assert_eq!(k["tokens"].as_array().unwrap().len(), nq);
        assert_eq!(k["mask"], att.mask.as_str());
        let keys = if att.is_square() {
            assert!(
                k["keys"].is_null(),
                "{}: keys are the queries",
                att.kind.as_str()
            );
            &k["tokens"]
        } else {
            &k["keys"]["tokens"]
        };
        assert_eq!(keys.as_array().unwrap().len(), nk);
        // Each kind's weights are its own section, [layers, heads, queries, keys] in order.
        let name = k["sections"]["attention"].as_str().unwrap();
        assert_eq!(name, format!("attention:{}", att.kind.as_str()));
        let got = section(&raw, &meta, name);
        assert_eq!(got.len(), att.layers() * att.heads() * nq * nk);
        let worst = got
            .iter()
            .zip(att.weights())
            .map(|(g, &w)| (g - w as f64).abs())
            .fold(0.0, f64::max);
        assert!(worst <= 0.5 / 65535.0 + 1e-12, "{name}: {worst}");
        // Statistics-free options: the head opened is the kind's last layer.
        assert_eq!(k["initial"]["layer"], att.layers() - 1);
    }
    assert_eq!(kinds[0]["tokens"], serde_json::json!(source));
    assert_eq!(kinds[1]["tokens"], serde_json::json!(target));
    assert_eq!(kinds[2]["tokens"], serde_json::json!(target));
    assert_eq!(kinds[2]["keys"]["tokens"], serde_json::json!(source));
    assert_eq!(kinds[1]["mask"], "causal");
    // No vectors asked for: each kind says so.
    for k in kinds {
        assert_eq!(k["neuron"]["available"], false);
    }
    // The same kind twice is refused, and nothing is written.
    let opts = HtmlOptions::default();
    let enc = set.iter().next().unwrap();
    let mut out = Vec::new();
    let err = write_html_kinds(&[(enc, &opts), (enc, &opts)], 0, None, &mut out).unwrap_err();
    assert!(err.to_string().contains("twice"), "{err}");
    assert!(out.is_empty());
}

#[test]
fn an_encoder_decoder_report_escapes_user_text_in_every_token_list() {
    let bad = INJECTION;
    let source = ["<s>", bad, "Ġ</script>", "</s>"];
    let target = ["</s>", "<!--", bad, "</s>"];
    let set = crate::attention::fixtures::encoder_decoder(&source, &target, 1, 1, 1, target.len());
    let html = render_set(&set, 0, false);
    // The page's markup holds no token: every one is in the escaped metadata.
    assert_eq!(
        html.matches("</script>").count(),
        3,
        "only the three script elements end"
    );
    assert!(!html.contains("<img"));
    let meta = meta_of(&html);
    let kinds = meta["kinds"].as_array().unwrap();
    // Decoded, each list holds the very text (escaping changed only its spelling).
    assert_eq!(kinds[0]["tokens"][1], bad);
    assert_eq!(kinds[1]["tokens"][2], bad);
    assert_eq!(kinds[2]["tokens"][1], "<!--");
    assert_eq!(kinds[2]["keys"]["tokens"][2], "Ġ</script>");
    assert!(meta["target"].as_str().unwrap().contains(bad));
    let title = html
        .split("<title>")
        .nth(1)
        .unwrap()
        .split("</title>")
        .next()
        .unwrap();
    assert!(!title.contains('<'), "{title}");
}

#[test]
fn neuron_scale_travels_per_kind() {
    let source = ["<s>", "Ġa", "Ġb", "</s>"];
    let target = ["</s>", "Ġc", "</s>"];
    let set = crate::attention::fixtures::encoder_decoder(&source, &target, 1, 1, 1, target.len());
    let mut atts: Vec<Attention> = set.iter().cloned().collect();
    let d = atts[0].model.head_dim;
    for (i, a) in atts.iter_mut().enumerate() {
        let (nq, nk) = (a.n_queries(), a.n_keys());
        let qk = QueryKey {
            queries: vec![0.5; a.layers() * a.heads() * nq * d],
            keys: vec![0.25; a.layers() * a.kv_heads() * nk * d],
            // T5's kinds say 1; the others leave the usual 1/√d.
            scale: (i == 2).then_some(1.0),
        };
        *a = a.clone().with_query_key(Some(qk)).unwrap();
    }
    let opts = HtmlOptions {
        neuron: true,
        ..HtmlOptions::default()
    };
    let kinds: Vec<(&Attention, &HtmlOptions)> = atts.iter().map(|a| (a, &opts)).collect();
    let mut out = Vec::new();
    write_html_kinds(&kinds, 1, None, &mut out).unwrap();
    let html = String::from_utf8(out).unwrap();
    let meta = meta_of(&html);
    let kinds = meta["kinds"].as_array().unwrap();
    // Not given: the page's usual 1/√d.
    assert!(kinds[0]["scale"].is_null());
    assert_eq!(kinds[2]["scale"], 1.0);
    assert_eq!(kinds[2]["neuron"]["available"], true);
    // Cross-attention's keys are the encoder's tokens: 4 of them, its queries the 3 decoder's.
    let raw = raw_payload(&html, &meta);
    assert_eq!(section(&raw, &meta, "key:cross").len(), 4 * d);
    assert_eq!(section(&raw, &meta, "query:cross").len(), 3 * d);
}

#[test]
fn metadata_of_a_decoder_gives_mask_positions_sink_kv_map_and_generated_units() {
    let tokens = ["ĠThe", "Ġcat", "Ġsat", "."];
    let att = crate::attention::fixtures::decoder(&tokens, 1, vec![0, 0, 1, 1], 3);
    let base = crate::attention::fixtures::synthetic(&tokens, 1, 4);
    let meta = meta_of(&render(&att, &HtmlOptions::default()));
    assert_eq!(meta["mask"], "causal");
    assert_eq!(meta["positions"], "rotary");
    assert_eq!(meta["sink"], 0);
    assert_eq!(meta["kv_head"], serde_json::json!([0, 0, 1, 1]));
    assert_eq!(
        meta["generated"],
        serde_json::json!([false, false, false, true])
    );
    // An encoder's report: no sink, absolute positions.
    let meta = meta_of(&render(&base, &HtmlOptions::default()));
    assert!(meta["sink"].is_null());
    assert_eq!(meta["positions"], "absolute");
}

/// A 2 × 3 patch grid of 4-pixel patches after a class token, over an 12 × 8 picture whose
/// pixels are known.
fn with_picture() -> Attention {
    crate::attention::fixtures::with_picture("cat.png")
}

#[test]
fn image_report_embeds_the_picture_and_labels_patches_by_position() {
    let att = with_picture();
    let html = render(
        &att,
        &HtmlOptions {
            view: View::Image,
            query: Some(5),
            ..HtmlOptions::default()
        },
    );
    let meta = meta_of(&html);
    assert_eq!(meta["initial"]["view"], "image");
    assert_eq!(meta["initial"]["query"], 5);
    assert_eq!(
        meta["display"],
        serde_json::json!(["CLS", "r0c0", "r0c1", "r0c2", "r1c0", "r1c1", "r1c2"])
    );
    // The raw labels stay the model's (`row,col`, as --query and the JSON export write them).
    assert_eq!(meta["tokens"][4], "1,0");
    let image = &meta["image"];
    assert_eq!(image["grid"], serde_json::json!([2, 3]));
    assert_eq!(image["cells"][0]["kind"], "class");
    assert_eq!(
        image["cells"][6],
        serde_json::json!({"kind": "patch", "row": 1, "col": 2})
    );
    // The picture is the model's input pixels, losslessly, as a data: PNG.
    let uri = image["picture"].as_str().unwrap();
    let png = STANDARD
        .decode(uri.strip_prefix("data:image/png;base64,").unwrap())
        .unwrap();
    let decoded = image::load_from_memory(&png).unwrap().to_rgb8();
    assert_eq!((decoded.width(), decoded.height()), (12, 8));
    assert_eq!(decoded.as_raw(), &att.image.as_ref().unwrap().view);
    // Only a picture's report lets data: images in.
    let csp = |html: &str| {
        let at = html.find("Content-Security-Policy\" content=\"").unwrap();
        html[at..][..html[at..].find("\">").unwrap()].to_string()
    };
    assert!(csp(&html).contains("img-src data:;"), "{}", csp(&html));
    let plain = render(&synthetic(&["a", "b"], 1, 1), &HtmlOptions::default());
    assert!(!csp(&plain).contains("img-src"), "{}", csp(&plain));
    assert!(meta_of(&plain)["image"].is_null());
}

#[test]
fn image_view_falls_back_to_the_head_view_without_a_picture_and_checks_the_query() {
    let plain = synthetic(&["a", "b"], 1, 1);
    let html = render(
        &plain,
        &HtmlOptions {
            view: View::Image,
            ..HtmlOptions::default()
        },
    );
    assert_eq!(meta_of(&html)["initial"]["view"], "head");
    let mut out = Vec::new();
    let err = write_html(
        &with_picture(),
        &HtmlOptions {
            query: Some(7),
            ..HtmlOptions::default()
        },
        &mut out,
    )
    .unwrap_err();
    assert!(err.to_string().contains("query token 7"), "{err}");
    assert!(out.is_empty());
}

#[test]
fn the_in_place_data_is_the_blocks_the_report_carries_and_its_policy_is_the_shell() {
    let source = ["<s>", "ĠThe", "Ġcat", "Ġsat", "</s>"];
    let target = ["</s>", "<s>", "ĠDie", "ĠKatze", "</s>"];
    let set = crate::attention::fixtures::encoder_decoder(&source, &target, 2, 3, 2, target.len());
    let opts: Vec<HtmlOptions> = set.iter().map(|_| HtmlOptions::default()).collect();
    let kinds: Vec<(&Attention, &HtmlOptions)> = set.iter().zip(&opts).collect();
    let mut out = Vec::new();
    write_html_kinds(&kinds, 1, set.target(), &mut out).unwrap();
    let html = String::from_utf8(out).unwrap();
    let data = html_kinds_data(&kinds, 1, set.target()).unwrap();
    // The page reads both blocks as text: the same JSON and the same base64.
    let block: serde_json::Value = meta_of(&html);
    let given: serde_json::Value = serde_json::from_str(&data.meta).unwrap();
    assert_eq!(given, block);
    assert_eq!(data.data, script_block(&html, "attnviz-data"));
    // The shell is the digest of the page's policy, as written in its markup.
    let open = "http-equiv=\"Content-Security-Policy\" content=\"";
    let start = html.find(open).unwrap() + open.len();
    let csp = &html[start..start + html[start..].find('"').unwrap()];
    let hex: String = Sha256::digest(csp.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(data.shell, hex);
    // Another text of the same characters has the same shell; one that needs a font does not.
    let other = crate::attention::fixtures::encoder_decoder(&source[..4], &target, 2, 3, 2, 5);
    let other_opts: Vec<HtmlOptions> = other.iter().map(|_| HtmlOptions::default()).collect();
    let other_kinds: Vec<(&Attention, &HtmlOptions)> = other.iter().zip(&other_opts).collect();
    let same = html_kinds_data(&other_kinds, 1, other.target()).unwrap();
    assert_eq!(same.shell, data.shell);
    assert_ne!(same.data, data.data);
    let korean = ["<s>", "Ġ고양이", "</s>"];
    let far = crate::attention::fixtures::encoder_decoder(&korean, &target, 2, 3, 2, 5);
    let far_opts: Vec<HtmlOptions> = far.iter().map(|_| HtmlOptions::default()).collect();
    let far_kinds: Vec<(&Attention, &HtmlOptions)> = far.iter().zip(&far_opts).collect();
    assert_ne!(
        html_kinds_data(&far_kinds, 1, far.target()).unwrap().shell,
        data.shell
    );
}

/// Value-weighted and norm-aware attention tells the page its weights are shares of the row
/// (its colour bars say so).
#[test]
fn reweighted_attention_tells_the_page_it_holds_shares() {
    let mut att = synthetic(&["[CLS]", "a", "b", "[SEP]"], 1, 2);
    assert_eq!(
        meta_of(&render(&att, &HtmlOptions::default()))["shares"],
        false
    );
    att.holds = crate::attention::Holds::ValueWeighted;
    assert_eq!(
        meta_of(&render(&att, &HtmlOptions::default()))["shares"],
        true
    );
}

/// A mixture-of-experts model's router reaches the page (choices, weights and load in the
/// metadata, probabilities as a payload section within the stated error), and a learned sink's
/// shares travel as their own section; a model without them carries neither.
#[test]
fn router_and_sink_shares_travel_to_the_page() {
    use crate::attention::{Router, RouterLayer};
    let tokens = ["ĠThe", "Ġcat", "Ġsat"];
    let base = crate::attention::fixtures::decoder(&tokens, 1, vec![0, 0], 0);
    let meta = meta_of(&render(&base, &HtmlOptions::default()));
    assert!(meta["router"].is_null() && meta["sections"]["sinks"].is_null());
    let probs = vec![0.5, 0.3, 0.2, 0.1, 0.1, 0.8, 0.25, 0.25, 0.5];
    let router = Router {
        experts: 3,
        top_k: 2,
        renormalised: false,
        tokens: tokens.iter().map(|t| t.to_string()).collect(),
        layers: vec![RouterLayer {
            layer: 0,
            probs: probs.clone(),
            chosen: vec![0, 1, 2, 0, 2, 1],
            weights: vec![0.5, 0.3, 0.8, 0.1, 0.5, 0.25],
        }],
    };
    // Rows that leave a share to a sink.
    let scaled: Vec<f32> = base.weights().iter().map(|w| w * 0.75).collect();
    let att = base
        .derive(
            crate::attention::Level::Token,
            false,
            base.queries().clone(),
            None,
            scaled,
        )
        .unwrap()
        .with_sinks_from_rows(true)
        .with_router(Some(router))
        .unwrap();
    let html = render(&att, &HtmlOptions::default());
    let meta = meta_of(&html);
    let r = &meta["router"];
    assert_eq!(r["experts"], 3);
    assert_eq!(
        r["layers"][0]["chosen"],
        serde_json::json!([0, 1, 2, 0, 2, 1])
    );
    assert_eq!(r["layers"][0]["load"], serde_json::json!([2, 2, 2]));
    let raw = raw_payload(&html, &meta);
    let step = 1.0 / 65535.0;
    let stored = section(&raw, &meta, meta["sections"]["router"].as_str().unwrap());
    assert_eq!(stored.len(), probs.len());
    for (s, p) in stored.iter().zip(&probs) {
        assert!((s - *p as f64).abs() <= step / 2.0 + 1e-9, "{s} vs {p}");
    }
    let sinks = section(&raw, &meta, meta["sections"]["sinks"].as_str().unwrap());
    let want = att.sink_shares().unwrap();
    assert_eq!(sinks.len(), want.len());
    for (s, w) in sinks.iter().zip(want) {
        assert!((s - 0.25).abs() <= step && (s - *w as f64).abs() <= step / 2.0 + 1e-7);
    }
}
