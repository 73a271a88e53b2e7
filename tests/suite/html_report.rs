//! The HTML report in real browsers.
//!
//! Writes reports into `tests/artifacts/html/` (git-ignored), each with a `*.expect.json` sidecar
//! holding the exact f32 weights it was made from, then runs the node test files in
//! `tests/browser/`: `report.test.mjs` drives headless Chromium (`/usr/bin/chromium`, through
//! playwright-core) and `firefox.test.mjs` headless Firefox ESR (puppeteer-core over WebDriver
//! BiDi). They derive every expected count from the sidecar, independently of the page's own
//! decoding. Screenshots land in `tests/artifacts/html/screens/`.
//!
//! Both tests are `#[ignore]`d so that a plain `cargo test` on a machine without browsers says
//! "ignored" rather than "ok"; `scripts/test.sh` installs the browsers and node drivers and runs
//! them with `--include-ignored`.

use crate::support::attention as support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use attnviz::model::{EncodeOptions, Model};
use attnviz::render::html::{
    write_html_file, ExtraMatrix, HeadStatistic, HtmlAnalysis, HtmlOptions, Precision, View,
};
use attnviz::Attention;
use support::{minilm_dir, random_attention, write_expectations};

const INJECTION: &str = "</script><script>alert(1)</script><img src=x onerror=alert(2)>";

use crate::support::cli::{assert_browsers_ready, node_test, repo};

fn write_case(dir: &Path, name: &str, att: &Attention, opts: &HtmlOptions) {
    write_html_file(att, opts, &dir.join(format!("{name}.html"))).unwrap();
    write_expectations(&dir.join(format!("{name}.expect.json")), att, opts);
}

/// The query and key vectors of a report (`[layer][head][token][dim]`, f32 as written), for the
/// neuron view's scores and colour scales. Only for the small reports that use them.
fn write_vectors(dir: &Path, name: &str, att: &Attention) {
    let qk = att.query_key.as_ref().expect("captured query/key vectors");
    let value = serde_json::json!({ "queries": qk.queries, "keys": qk.keys });
    std::fs::write(
        dir.join(format!("{name}.vectors.json")),
        serde_json::to_string(&value).unwrap(),
    )
    .unwrap();
}

/// Mean row entropy of every head, in nats: a real statistic for the stats panel test.
fn entropy(att: &Attention) -> Vec<Vec<f32>> {
    let n = att.len();
    (0..att.layers())
        .map(|l| {
            (0..att.heads())
                .map(|h| {
                    let m = att.head(l, h);
                    let total: f32 = m.iter().filter(|&&p| p > 0.0).map(|&p| -p * p.ln()).sum();
                    total / n as f32
                })
                .collect()
        })
        .collect()
}

fn write_cases(dir: &Path) {
    let sentence = [
        "[CLS]", "the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", ".",
        "[SEP]",
    ];
    let single = random_attention(
        "The quick brown fox jumps over the lazy dog.",
        None,
        &sentence,
        None,
        (6, 12, 32),
        7,
    );
    write_case(
        dir,
        "single",
        &single,
        &HtmlOptions {
            neuron: true,
            settings: vec![("Command".into(), "attnviz --html single.html".into())],
            ..HtmlOptions::default()
        },
    );

    // The other storage paths: 8-bit weights, no compression.
    write_case(
        dir,
        "single-u8-raw",
        &single,
        &HtmlOptions {
            precision: Precision::U8,
            compress: false,
            ..HtmlOptions::default()
        },
    );

    let pair_tokens = [
        "[CLS]", "the", "cat", "sat", "on", "the", "mat", ".", "[SEP]", "it", "was", "tired", ".",
        "[SEP]",
    ];
    let pair = random_attention(
        "The cat sat on the mat.",
        Some("It was tired."),
        &pair_tokens,
        Some(9),
        (4, 6, 16),
        11,
    );
    let mean: Vec<Vec<f32>> = (0..pair.layers()).map(|l| pair.head_mean(l)).collect();
    write_case(
        dir,
        "pair",
        &pair,
        &HtmlOptions {
            neuron: true,
            analysis: HtmlAnalysis {
                stats: vec![HeadStatistic {
                    id: "entropy".into(),
                    label: "Entropy (nats)".into(),
                    description: "Mean entropy of the attention rows.".into(),
                    values: entropy(&pair),
                }],
                head_labels: Some(
                    (0..pair.layers())
                        .map(|l| {
                            (0..pair.heads())
                                .map(|h| {
                                    if (l + h) % 5 == 0 {
                                        "broad".into()
                                    } else {
                                        String::new()
                                    }
                                })
                                .collect()
                        })
                        .collect(),
                ),
                matrices: vec![ExtraMatrix {
                    id: "mean_check".into(),
                    label: "Head mean (from Rust)".into(),
                    description: "The mean over heads, computed in Rust.".into(),
                    layers: mean,
                    shares: false,
                }],
                lens: None,
                ..HtmlAnalysis::default()
            },
            ..HtmlOptions::default()
        },
    );

    let injection_tokens = ["[CLS]", INJECTION, "[SEP]", "<b>bold</b>", "&amp;", "[SEP]"];
    let injection = random_attention(
        INJECTION,
        Some(INJECTION),
        &injection_tokens,
        Some(3),
        (2, 2, 8),
        3,
    );
    write_case(
        dir,
        "injection",
        &injection,
        &HtmlOptions {
            title: Some(INJECTION.into()),
            settings: vec![(INJECTION.into(), INJECTION.into())],
            view: View::Matrix,
            ..HtmlOptions::default()
        },
    );
}

/// Heads that share links, over byte-level pieces with a repeated word: heads 0 and 1 put all of
/// every row on the first token (the links they share), head 2 all on the token itself. The
/// browser test reads the head view's pixels where the two heads share a link, and the labels.
fn write_shared_links_case(dir: &Path) {
    use attnviz::attention::{LabelScheme, Role, Units};
    let tokens = ["The", "Ġcat", "Ġsat", "Ġon", "Ġthe", "Ġcat"];
    let n = tokens.len();
    let units = Units::tokens(
        tokens.iter().map(|t| t.to_string()).collect(),
        (0..n as u32).collect(),
        vec![0; n],
        vec![0; n],
        vec![Role::Word; n],
        (0..n).map(Some).collect(),
        ["The", " cat", " sat", " on", " the", " cat"]
            .iter()
            .map(|t| t.to_string())
            .collect(),
    )
    .relabel(LabelScheme::ByteLevel);
    let mut weights = Vec::new();
    for h in 0..3 {
        for q in 0..n {
            for k in 0..n {
                let on = if h < 2 { k == 0 } else { k == q };
                weights.push(if on { 1.0 } else { 0.0 });
            }
        }
    }
    let att = Attention::new(
        attnviz::ModelInfo {
            id: "test/shared-links".into(),
            revision: None,
            name: None,
            family: "GPT-2".into(),
            layers: 1,
            heads: 3,
            hidden_size: 12,
            head_dim: 4,
        },
        "The cat sat on the cat".into(),
        None,
        units,
        weights,
    )
    .unwrap();
    write_case(dir, "shared-links", &att, &HtmlOptions::default());
}

/// Real SmolLM2-135M attention on "The quick brown fox jumps over the lazy dog." as
/// transformers computed it (`tests/reference/smollm2.safetensors`, `make_real.py`): layers 0,
/// 15 and 29 with their query and key vectors after RoPE (9 query heads over 3 key/value heads),
/// causal. The test marks the last three tokens as generated, to check how every view shows
/// generated tokens (the reference text was read, not generated).
fn smollm2_causal() -> Attention {
    use attnviz::attention::{MaskKind, PositionScheme, Role, Units};
    use attnviz::{ModelInfo, QueryKey};
    let dir = repo().join("tests/reference");
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("smollm2.json")).unwrap()).unwrap();
    let tensors =
        candle_core::safetensors::load(dir.join("smollm2.safetensors"), &candle_core::Device::Cpu)
            .unwrap();
    let flat = |name: &str| -> Vec<f32> { tensors[name].flatten_all().unwrap().to_vec1().unwrap() };
    let case = &meta["cases"][0];
    assert_eq!(case["name"], "fox");
    let labels: Vec<String> = case["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    let n = labels.len();
    let surfaces = labels.iter().map(|t| t.replace('Ġ', " ")).collect();
    let mut units = Units::tokens(
        labels,
        case["input_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap() as u32)
            .collect(),
        vec![0; n],
        vec![0; n],
        vec![Role::Word; n],
        (0..n).map(Some).collect(),
        surfaces,
    );
    for g in &mut units.generated[n - 3..] {
        *g = true;
    }
    let (heads, kv, d) = (9, 3, 64);
    let layers: Vec<usize> = case["qk_layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_u64().unwrap() as usize)
        .collect();
    let all = flat("fox.attentions");
    let per = heads * n * n;
    let weights = layers
        .iter()
        .flat_map(|&l| all[l * per..(l + 1) * per].to_vec())
        .collect();
    Attention::new(
        ModelInfo {
            id: "HuggingFaceTB/SmolLM2-135M-Instruct".into(),
            revision: None,
            name: Some("SmolLM2-135M-Instruct (layers 0, 15, 29)".into()),
            family: "Llama".into(),
            layers: layers.len(),
            heads,
            hidden_size: 576,
            head_dim: d,
        },
        case["text"].as_str().unwrap().into(),
        None,
        units,
        weights,
    )
    .unwrap()
    .with_mask(MaskKind::Causal)
    .with_positions(PositionScheme::Rotary)
    .with_kv_heads((0..heads).map(|h| h / (heads / kv)).collect())
    .unwrap()
    .with_query_key(Some(QueryKey {
        queries: flat("fox.query"),
        keys: flat("fox.key"),
        scale: None,
    }))
    .unwrap()
}

/// Decoder reports: real SmolLM2 attention (causal, grouped-query attention, RoPE, generated
/// tokens marked), and an encoder's random attention flagged causal, whose masked cells hold
/// weights well above zero: what the views leave out or hatch there, they leave out because the
/// value says the cells are masked, not because they are 0.
fn write_causal_cases(dir: &Path) {
    let causal = smollm2_causal();
    write_vectors(dir, "causal", &causal);
    write_case(
        dir,
        "causal",
        &causal,
        &HtmlOptions {
            neuron: true,
            layer: 2,
            ..HtmlOptions::default()
        },
    );
    let sentence = [
        "[CLS]", "the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", ".",
        "[SEP]",
    ];
    let junk = random_attention(
        "The quick brown fox jumps over the lazy dog.",
        None,
        &sentence,
        None,
        (2, 4, 16),
        5,
    )
    .with_mask(attnviz::attention::MaskKind::Causal);
    write_case(dir, "causal-junk", &junk, &HtmlOptions::default());
}

/// Reports of the real all-MiniLM-L6-v2 on real sentences, with its captured query/key vectors.
fn write_real_cases(dir: &Path) {
    let model = Model::from_dir(&minilm_dir()).expect("load all-MiniLM-L6-v2");
    let opts = EncodeOptions {
        truncate: false,
        capture_query_key: true,
        ..EncodeOptions::default()
    };
    let cases: [(&str, &str, Option<&str>); 3] = [
        (
            "real-pair",
            "The quick brown fox jumps over the lazy dog.",
            Some("It was not amused, so it ran away."),
        ),
        ("real-injection", INJECTION, None),
        (
            "real-paragraph",
            "Attention lets every token look at every other token. In BERT, each of the twelve \
             heads in a layer learns its own way of looking: some heads attend to the previous or \
             the next word, some collect everything on the separator token, and a few follow \
             syntax, linking verbs to their objects or pronouns to the nouns they stand for. \
             Visualising these patterns head by head, layer by layer, is how researchers such as \
             Clark and colleagues found out what BERT looks at, and it is still the quickest way \
             to build an intuition for what a Transformer does with a sentence. Façade, naïve \
             café: accents survive lower-casing, and rare words split into word pieces.",
            None,
        ),
    ];
    for (name, text, pair) in cases {
        let enc = model.encode(text, pair, &opts).expect("encode");
        if name == "real-pair" {
            write_vectors(dir, name, &enc.attention);
        }
        if name == "real-paragraph" {
            // What `--words --no-special` should produce: the page opens merged and hidden.
            write_case(
                dir,
                "real-paragraph-initial",
                &enc.attention,
                &HtmlOptions {
                    hide_special: true,
                    words: true,
                    view: View::Matrix,
                    ..HtmlOptions::default()
                },
            );
        }
        write_case(
            dir,
            name,
            &enc.attention,
            &HtmlOptions {
                neuron: true,
                settings: vec![(
                    "Command".into(),
                    format!("attnviz {text:?} --html {name}.html --neuron"),
                )],
                ..HtmlOptions::default()
            },
        );
    }
}

/// A report of the real SmolLM2 (GGUF, 9 query heads over 3 key/value heads, causal) after
/// generating 8 tokens, with its query/key vectors after RoPE, capturing layers 0, 14, 15 and
/// 29 only.
fn write_decoder_case(dir: &Path) {
    let model =
        Model::from_gguf(&crate::support::models::smollm2::smollm2_gguf()).expect("SmolLM2");
    let opts = EncodeOptions {
        capture_query_key: true,
        layers: Some(vec![0, 14, 15, 29]),
        ..EncodeOptions::default()
    };
    let generate = attnviz::model::GenerateOptions {
        max_new_tokens: 8,
        chat: false,
    };
    let enc = model
        .encode_generated("The capital of France is", &opts, generate, &mut |_| {})
        .expect("generate");
    write_case(
        dir,
        "real-decoder",
        &enc.attention,
        &HtmlOptions {
            neuron: true,
            ..HtmlOptions::default()
        },
    );
}

/// Reports of encoder–decoder runs on the tiny random BART and T5, written by the CLI, each with
/// the CLI's JSON export of the same run (full precision) for `encdec.test.mjs` to expect from:
/// a long source over a short target, the reverse (generated), and T5 (no 1/√d scaling).
fn write_encoder_decoder_cases(dir: &Path) {
    let fixture = |m: &str| repo().join("tests/fixtures").join(m);
    let cases: [(&str, &str, &str, &[&str]); 3] = [
        (
            "encdec-long-source",
            "tiny-bart",
            "The quick brown fox jumps over the lazy dog.",
            &["--target", "Der Hund."],
        ),
        (
            "encdec-long-target",
            "tiny-bart",
            "Hi there.",
            &["--generate", "26"],
        ),
        (
            "encdec-t5",
            "tiny-t5",
            "Hello world, how are you?",
            &["--target", "Hallo Welt.", "--kind", "encoder"],
        ),
    ];
    for (name, model, text, extra) in cases {
        let html = dir.join(format!("{name}.html"));
        let json = dir.join(format!("{name}.json"));
        let out = crate::support::cli::attnviz()
            .arg("-m")
            .arg(fixture(model))
            .arg(text)
            .args(extra)
            .arg("--html")
            .arg(&html)
            .arg("--json")
            .arg(&json)
            .args(["--full-precision", "--neuron", "-q"])
            .output()
            .expect("attnviz runs");
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The report of a vision model's run (tiny random DeiT: CLS, DIST and 4 × 4 patches) on an
/// 80 × 64 picture, written by the CLI, beside the CLI's JSON export of the same run (full
/// precision, with the rollout) for `image.test.mjs` to expect from; and those of two
/// vision-language models (tiny LLaVA, tiny Gemma 3) for its picture views and bands.
fn write_image_cases(dir: &Path) {
    let out = crate::support::cli::attnviz()
        .arg("-m")
        .arg(repo().join("tests/fixtures/tiny-deit"))
        .arg("--image")
        .arg(repo().join("tests/fixtures/images/big80x64.png"))
        .arg("--html")
        .arg(dir.join("image-deit.html"))
        .arg("--json")
        .arg(dir.join("image-deit.json"))
        .args(["--full-precision", "--json-include", "rollout", "-q"])
        .output()
        .expect("attnviz runs");
    assert!(
        out.status.success(),
        "image-deit: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A vision-language model (tiny random LLaVA) asked for token 30's look at its picture.
    let out = crate::support::cli::attnviz()
        .arg("-m")
        .arg(repo().join("tests/fixtures/tiny-llava"))
        .arg("--image")
        .arg(repo().join("tests/fixtures/images/big80x64.png"))
        .arg("USER: <image>\nWhere is the red part? ASSISTANT:")
        .args(["--query", "30", "--html"])
        .arg(dir.join("image-llava.html"))
        .arg("--json")
        .arg(dir.join("image-llava.json"))
        .args(["--full-precision", "-q"])
        .output()
        .expect("attnviz runs");
    assert!(
        out.status.success(),
        "image-llava: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Gemma 3 (tiny random): a picture whose 4 image tokens see each other in full.
    let out = crate::support::cli::attnviz()
        .arg("-m")
        .arg(repo().join("tests/fixtures/tiny-gemma3-vlm"))
        .arg("--image")
        .arg(repo().join("tests/fixtures/images/wide45x37.png"))
        .arg("<start_of_image>What is in this picture?")
        .arg("--html")
        .arg(dir.join("image-gemma3.html"))
        .arg("--json")
        .arg(dir.join("image-gemma3.json"))
        .args(["--full-precision", "-q"])
        .output()
        .expect("attnviz runs");
    assert!(
        out.status.success(),
        "image-gemma3: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // SmolVLM (tiny random): a picture cut into 2 × 2 tiles and its global view, each a run of
    // its own, drawn as the tiles put back together.
    let out = crate::support::cli::attnviz()
        .arg("-m")
        .arg(repo().join("tests/fixtures/tiny-smolvlm"))
        .arg("--image")
        .arg(repo().join("tests/fixtures/images/big80x64.png"))
        .arg("Where is the red part?")
        .args(["--query", "47", "--html"])
        .arg(dir.join("image-smolvlm.html"))
        .arg("--json")
        .arg(dir.join("image-smolvlm.json"))
        .args(["--full-precision", "-q"])
        .output()
        .expect("attnviz runs");
    assert!(
        out.status.success(),
        "image-smolvlm: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Reports written with the logit lens (a tiny GPT-2, a tiny Llama), beside the
/// CLI's JSON export of the same run for `lens.test.mjs` to expect from, and one without it.
fn write_lens_cases(dir: &Path) {
    for (name, model, text, lens) in [
        ("lens-gpt2", "tiny-gpt2", "the cat sat on the mat", true),
        ("lens-llama", "tiny-llama", "the cat sat on the mat", true),
        (
            "lens-gpt2-none",
            "tiny-gpt2",
            "the cat sat on the mat",
            false,
        ),
    ] {
        let mut cmd = crate::support::cli::attnviz();
        cmd.arg("-m")
            .arg(repo().join("tests/fixtures").join(model))
            .arg(text)
            .arg("--html")
            .arg(dir.join(format!("{name}.html")))
            .arg("--json")
            .arg(dir.join(format!("{name}.json")))
            .args(["--full-precision", "-q"]);
        if lens {
            cmd.arg("--lens");
        }
        let out = cmd.output().expect("attnviz runs");
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Reports of the tiny random mixture-of-experts models (Qwen3-MoE, whose layer 1 is dense;
/// gpt-oss, with learned attention sinks; Qwen3-Next, with gated delta layers) beside the CLI's
/// JSON export of the same run, for `router.test.mjs` to expect from (`router`, `sink_shares`,
/// `non_softmax`).
fn write_router_cases(dir: &Path) {
    for (name, model) in [
        ("router-qwen3_moe", "tiny-qwen3_moe"),
        ("router-gpt_oss", "tiny-gpt_oss"),
        ("mixing-qwen3_next", "tiny-qwen3_next"),
    ] {
        let out = crate::support::cli::attnviz()
            .arg("-m")
            .arg(repo().join("tests/fixtures").join(model))
            .arg("The quick brown fox jumps over the lazy dog")
            .arg("--html")
            .arg(dir.join(format!("{name}.html")))
            .arg("--json")
            .arg(dir.join(format!("{name}.json")))
            .args(["--full-precision", "-q"])
            .output()
            .expect("attnviz runs");
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A report written with head attribution and (mean) ablation (a tiny GPT-2), its sentence
/// carrying markup that must stay text, beside the CLI's JSON export of the same run for
/// `heads.test.mjs` to expect from.
fn write_heads_case(dir: &Path) {
    let out = crate::support::cli::attnviz()
        .arg("-m")
        .arg(repo().join("tests/fixtures/tiny-gpt2"))
        .arg(r#"the cat <span id="typed">sat</span> on the mat"#)
        .args(["--attribution", "--ablate", "mean"])
        .arg("--html")
        .arg(dir.join("heads-gpt2.html"))
        .arg("--json")
        .arg(dir.join("heads-gpt2.json"))
        .args([
            "--json-include",
            "head_attribution,head_ablation",
            "--full-precision",
            "-q",
        ])
        .output()
        .expect("attnviz runs");
    assert!(
        out.status.success(),
        "heads-gpt2: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A speech run's report (the tiny random Whisper on a second of tone and a second of silence,
/// the file's name carrying markup) beside the CLI's JSON export of the same run, for
/// `speech.test.mjs` to expect from.
fn write_speech_case(dir: &Path) {
    let wav = dir.join("a<b id=\"typed\">x.wav");
    crate::cli_whisper::write_wav(&wav, 1.0);
    let out = crate::support::cli::attnviz()
        .arg("-m")
        .arg(repo().join("tests/fixtures/tiny-whisper"))
        .arg("--audio")
        .arg(&wav)
        .args(["--language", "en", "--generate", "8", "--html"])
        .arg(dir.join("speech-whisper.html"))
        .arg("--json")
        .arg(dir.join("speech-whisper.json"))
        .args(["--full-precision", "-q"])
        .output()
        .expect("attnviz runs");
    assert!(
        out.status.success(),
        "speech-whisper: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The reports both browser suites read, written once per test run.
fn artifacts() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = repo().join("tests/artifacts/html");
        std::fs::create_dir_all(dir.join("screens")).unwrap();
        write_cases(&dir);
        write_shared_links_case(&dir);
        write_causal_cases(&dir);
        write_real_cases(&dir);
        write_decoder_case(&dir);
        write_encoder_decoder_cases(&dir);
        write_image_cases(&dir);
        write_lens_cases(&dir);
        write_heads_case(&dir);
        write_speech_case(&dir);
        write_router_cases(&dir);
        dir
    })
}

/// Run one of the node test files in `tests/browser/` against the reports; `browser` is the
/// executable it drives and `apt` the Debian packages that provide it.
fn run_browser_suite(file: &str, browser: &str, apt: &str) {
    let dir = artifacts();
    assert_browsers_ready(&[(browser, apt)]);
    node_test(file, &[("ATTNVIZ_ARTIFACTS", dir)]);
}

#[test]
#[ignore = "browser suite: scripts/test.sh runs it with --include-ignored"]
fn report_views_in_headless_chromium() {
    run_browser_suite(
        "report.test.mjs",
        "/usr/bin/chromium",
        "chromium chromium-driver",
    );
}

#[test]
#[ignore = "browser suite: scripts/test.sh runs it with --include-ignored"]
fn encoder_decoder_report_in_headless_chromium_and_firefox() {
    run_browser_suite(
        "encdec.test.mjs",
        "/usr/bin/chromium",
        "chromium chromium-driver",
    );
}

#[test]
#[ignore = "browser suite: scripts/test.sh runs it with --include-ignored"]
fn report_views_in_headless_firefox() {
    run_browser_suite("firefox.test.mjs", "/usr/bin/firefox-esr", "firefox-esr");
}

#[test]
#[ignore = "browser suite: scripts/test.sh runs it with --include-ignored"]
fn image_report_in_headless_chromium_and_firefox() {
    run_browser_suite(
        "image.test.mjs",
        "/usr/bin/chromium",
        "chromium chromium-driver",
    );
}

#[test]
#[ignore = "browser suite: scripts/test.sh runs it with --include-ignored"]
fn lens_report_in_headless_chromium_and_firefox() {
    run_browser_suite(
        "lens.test.mjs",
        "/usr/bin/chromium",
        "chromium chromium-driver",
    );
}

#[test]
#[ignore = "browser suite: scripts/test.sh runs it with --include-ignored"]
fn router_and_sink_column_in_headless_chromium() {
    run_browser_suite(
        "router.test.mjs",
        "/usr/bin/chromium",
        "chromium chromium-driver",
    );
}

#[test]
#[ignore = "browser suite: scripts/test.sh runs it with --include-ignored"]
fn heads_report_in_headless_chromium_and_firefox() {
    run_browser_suite(
        "heads.test.mjs",
        "/usr/bin/chromium",
        "chromium chromium-driver",
    );
}

#[test]
#[ignore = "browser suite: scripts/test.sh runs it with --include-ignored"]
fn speech_report_in_headless_chromium_and_firefox() {
    assert_browsers_ready(&[("/usr/bin/firefox-esr", "firefox-esr")]);
    run_browser_suite(
        "speech.test.mjs",
        "/usr/bin/chromium",
        "chromium chromium-driver",
    );
}
