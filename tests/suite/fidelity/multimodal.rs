//! Fidelity of the vision-language families against transformers: for each case of
//! `tests/reference/make_llava.py`, `make_gemma3_vlm.py` and `make_paligemma.py` (one picture, a chat
//! prompt, two pictures; each picture resized, and cropped for LLaVA), the expanded input ids against the processor's, the pixels against its
//! image processor's, every vision-tower layer's and head's attention, and the language model's
//! attention over the whole sequence (image tokens included) at every layer and head, its last
//! hidden state and the logits after the last token (≤ 1e-5); and a greedy generation's ids
//! and its attention over prompt and generated tokens. Gemma 3's image tokens see each other in
//! full: the later image keys its rows weigh are counted against the reference's. The same
//! checks hold `tiny-llava-full` (`make_llava.py --variant full`): the `full` selection (class
//! token kept), two feature layers side by side, a projector without biases, a Mistral language
//! model with a sliding window shorter than the sequence, and llava-hf's key layout. PaliGemma's
//! whole prompt (pictures, BOS, text, newline) sees itself in full, the sliding window cutting
//! nothing inside it, and its generated tokens are causal; `tiny-paligemma1` (`make_paligemma.py
//! --variant gemma1`) is the first PaliGemma, with a Gemma 1 text model. The same checks hold
//! the fixtures as llama.cpp's pair of files (`tests/reference/make_mmproj.py`: a
//! text `.gguf` and an `mmproj-*.gguf`), and the Gemma 3 pair quantised (Q8_0, F16) against
//! transformers on the dequantised weights.

use std::collections::HashMap;
use std::path::Path;

use attnviz::attention::image::Cell;
use attnviz::model::{EncodeOptions, GenerateOptions, Model};
use attnviz::pixels::ImageSource;
use candle_core::Device;
use serde::Deserialize;

use super::reference::{fixture, ok, TensorRef, HIDDEN_TOL};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[derive(Deserialize)]
struct Manifest {
    cases: Vec<Case>,
    generations: Vec<GenerationCase>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    text: Option<String>,
    messages: Option<serde_json::Value>,
    images: Vec<String>,
    input_ids: Vec<u32>,
    image_token_runs: Vec<[usize; 2]>,
    /// Weights (layer, head, query, key) of image tokens on later image tokens of their run
    /// above 0 (Gemma 3's bidirectional blocks; absent for LLaVA).
    later_image_keys_seen: Option<usize>,
    /// Weights of prompt tokens on later prompt tokens above 0 (PaliGemma's prefix-LM mask;
    /// absent for the others).
    later_prefix_keys_seen: Option<usize>,
    tensors: HashMap<String, TensorRef>,
}

#[derive(Deserialize)]
struct GenerationCase {
    case: String,
    prompt_len: usize,
    generated_ids: Vec<u32>,
    sequence: Vec<u32>,
    tensors: HashMap<String, TensorRef>,
}

fn values(tensors: &HashMap<String, candle_core::Tensor>, what: &TensorRef) -> Vec<f32> {
    let t = &tensors[&what.tensor];
    assert_eq!(t.dims(), what.shape.as_slice(), "{}", what.tensor);
    ok(
        t.flatten_all().and_then(|t| t.to_vec1::<f32>()),
        &what.tensor,
    )
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

const TOL: f32 = 1e-5;

/// The user's text of a chat case (its one message's text part).
fn chat_text(messages: &serde_json::Value) -> String {
    messages[0]["content"]
        .as_array()
        .and_then(|parts| {
            parts
                .iter()
                .find(|p| p["type"] == "text")
                .and_then(|p| p["text"].as_str())
        })
        .expect("a chat case has one text part")
        .to_string()
}

/// What sets one vision-language fixture apart in these checks.
struct Fixture {
    name: &'static str,
    /// The reference's name under tests/reference (the fixture's own, or its GGUF pair's).
    reference: &'static str,
    /// The fixture as llama.cpp's pair of files under tests/fixtures/gguf (text model,
    /// projector), read instead of the folder.
    pair: Option<[&'static str; 2]>,
    /// The vision tower's layers (a LLaVA projector file keeps those up to the feature layer),
    /// held to the reference's first ones.
    tower_layers: usize,
    family: &'static str,
    /// The grid of image tokens of each picture.
    picture_grid: [usize; 2],
    /// The tower's first token.
    tower_first: Cell,
    /// The first image token's cell in each picture.
    first_cell: Cell,
    /// Whether the chat case runs through the chat template (tiny-llava's has a
    /// `{% generation %}` block the template engine does not take yet: its case runs the text
    /// the template gave).
    chat: bool,
}

const LLAVA: Fixture = Fixture {
    name: "tiny-llava",
    reference: "tiny-llava",
    pair: None,
    tower_layers: 3,
    family: "LLaVA",
    picture_grid: [4, 4],
    tower_first: Cell::Class,
    first_cell: Cell::Patch { row: 0, col: 0 },
    chat: false,
};

/// Each picture as its tiles and global view, each tile a run of 2 × 2 image tokens (a 4 × 4
/// patch grid pixel-shuffled), a Llama behind them.
const SMOLVLM: Fixture = Fixture {
    name: "tiny-smolvlm",
    reference: "tiny-smolvlm",
    pair: None,
    tower_layers: 2,
    family: "Idefics3",
    picture_grid: [2, 2],
    tower_first: Cell::Patch { row: 0, col: 0 },
    first_cell: Cell::Patch { row: 0, col: 0 },
    chat: true,
};

/// The same as llama.cpp's pair of files (projector type `idefics3`), held to the folder's
/// reference: the pixels prepared from the projector file's sizes.
const SMOLVLM_GGUF: Fixture = Fixture {
    pair: Some(["tiny-smolvlm.gguf", "mmproj-tiny-smolvlm.gguf"]),
    ..SMOLVLM
};

/// Idefics3's processor without splitting: each picture resized to one tile, written as the
/// global view's run alone.
const IDEFICS3: Fixture = Fixture {
    name: "tiny-idefics3",
    reference: "tiny-idefics3",
    ..SMOLVLM
};

const LLAVA_FULL: Fixture = Fixture {
    name: "tiny-llava-full",
    reference: "tiny-llava-full",
    pair: None,
    tower_layers: 3,
    family: "LLaVA",
    picture_grid: [4, 4],
    tower_first: Cell::Class,
    first_cell: Cell::Class,
    chat: false,
};

const PALIGEMMA: Fixture = Fixture {
    name: "tiny-paligemma",
    reference: "tiny-paligemma",
    pair: None,
    tower_layers: 2,
    family: "PaliGemma",
    picture_grid: [4, 4],
    tower_first: Cell::Patch { row: 0, col: 0 },
    first_cell: Cell::Patch { row: 0, col: 0 },
    chat: false,
};

const PALIGEMMA1: Fixture = Fixture {
    name: "tiny-paligemma1",
    reference: "tiny-paligemma1",
    ..PALIGEMMA
};

const GEMMA3: Fixture = Fixture {
    name: "tiny-gemma3-vlm",
    reference: "tiny-gemma3-vlm",
    pair: None,
    tower_layers: 2,
    family: "Gemma 3",
    picture_grid: [2, 2],
    tower_first: Cell::Patch { row: 0, col: 0 },
    first_cell: Cell::Patch { row: 0, col: 0 },
    chat: true,
};

/// tiny-gemma3-vlm's weights under a processor that asks for pan-and-scan (`make_gemma3_vlm.py
/// --variant pan-and-scan`): a long picture is given whole and then as its crops, each a framed
/// run of its own (a bidirectional block), written in the processor's words.
const GEMMA3_PAS: Fixture = Fixture {
    name: "tiny-gemma3-vlm-pas",
    reference: "tiny-gemma3-vlm-pas",
    ..GEMMA3
};

/// tiny-llava as `make_mmproj.py` writes it for llama.cpp: held to the folder's reference (the
/// projector file keeps the tower's first two layers, up to the feature layer).
const LLAVA_GGUF: Fixture = Fixture {
    reference: "tiny-llava",
    pair: Some(["tiny-llava.gguf", "mmproj-tiny-llava.gguf"]),
    tower_layers: 2,
    ..LLAVA
};

/// tiny-gemma3-vlm as `make_mmproj.py` writes it for llama.cpp: held to transformers on the same
/// weights under the text config llama.cpp reads from the file (`tiny-gemma3-vlm-gguf`).
const GEMMA3_GGUF: Fixture = Fixture {
    reference: "tiny-gemma3-vlm-gguf",
    pair: Some(["tiny-gemma3-vlm.gguf", "mmproj-tiny-gemma3-vlm.gguf"]),
    ..GEMMA3
};

impl Fixture {
    /// The fixture as its runs name it: the folder, or the pair's projector file.
    fn label(&self) -> &'static str {
        self.pair.map_or(self.name, |[_, mmproj]| mmproj)
    }
}

/// The same pair quantised (the text model's and the tower's matrices Q8_0, the input
/// projection F16): held to transformers on the dequantised weights
/// (`tiny-gemma3-vlm-gguf.Q8_0`), which the kernels decode from the blocks as they run.
const GEMMA3_GGUF_Q8: Fixture = Fixture {
    reference: "tiny-gemma3-vlm-gguf.Q8_0",
    pair: Some([
        "tiny-gemma3-vlm.Q8_0.gguf",
        "mmproj-tiny-gemma3-vlm.Q8_0.gguf",
    ]),
    ..GEMMA3
};

fn load_model(f: &Fixture) -> Model {
    model_from(f.name, f.pair)
}

/// Fixture `name`'s folder, or its `pair` of files under tests/fixtures/gguf.
fn model_from(name: &str, pair: Option<[&str; 2]>) -> Model {
    match pair {
        None => ok(Model::from_dir(&fixture(name)), name),
        Some([text, mmproj]) => {
            let dir = repo().join("tests/fixtures/gguf");
            ok(
                Model::from_gguf_pair(&dir.join(text), Some(&dir.join(mmproj)), None),
                text,
            )
        }
    }
}

fn load(f: &Fixture) -> (Manifest, HashMap<String, candle_core::Tensor>, Model) {
    let dir = repo().join("tests/reference");
    let json = format!("{}.json", f.reference);
    let m: Manifest = ok(
        serde_json::from_str(&ok(std::fs::read_to_string(dir.join(&json)), &json)),
        &json,
    );
    let weights = format!("{}.safetensors", f.reference);
    let tensors = ok(
        candle_core::safetensors::load(dir.join(&weights), &Device::Cpu),
        &weights,
    );
    (m, tensors, load_model(f))
}

/// Weights above 0 of each run's tokens on the run's later tokens, over layers and heads.
fn later_in_runs(weights: &[f32], n: usize, runs: &[[usize; 2]]) -> usize {
    let mut seen = 0;
    for map in weights.chunks_exact(n * n) {
        for &[start, len] in runs {
            for q in start..start + len {
                seen += (q + 1..start + len)
                    .filter(|&k| map[q * n + k] > 0.0)
                    .count();
            }
        }
    }
    seen
}

#[test]
fn tiny_llava_matches_hf_over_pictures_and_prompt() {
    matches_hf(&LLAVA);
}

#[test]
fn tiny_llava_with_full_selection_two_feature_layers_and_mistral_matches_hf() {
    matches_hf(&LLAVA_FULL);
}

#[test]
fn tiny_gemma3_vlm_matches_hf_over_pictures_and_prompt() {
    matches_hf(&GEMMA3);
}

#[test]
fn tiny_gemma3_vlm_with_pan_and_scan_matches_hf_crop_by_crop() {
    matches_hf(&GEMMA3_PAS);
    generates_as_hf(&GEMMA3_PAS);
}

#[test]
fn tiny_paligemma_matches_hf_under_its_prefix_lm_mask() {
    matches_hf(&PALIGEMMA);
}

#[test]
fn tiny_llava_gguf_and_mmproj_match_hf_over_pictures_and_prompt() {
    matches_hf(&LLAVA_GGUF);
}

#[test]
fn tiny_gemma3_vlm_gguf_and_mmproj_match_hf_over_pictures_and_prompt() {
    matches_hf(&GEMMA3_GGUF);
}

#[test]
fn tiny_gemma3_vlm_q8_0_pair_matches_hf_on_the_dequantised_weights() {
    // The files hold what the test says: Q8_0 blocks in both, F16 for the input projection.
    let dir = repo().join("tests/fixtures/gguf");
    let [text, mmproj] = GEMMA3_GGUF_Q8.pair.unwrap();
    let types = |name: &str| -> Vec<&'static str> {
        let file = ok(attnviz::model::gguf::GgufFile::open(&dir.join(name)), name);
        file.tensors().iter().map(|t| t.dtype).collect()
    };
    assert!(types(text).contains(&"Q8_0"));
    let projector = types(mmproj);
    assert!(projector.contains(&"Q8_0") && projector.contains(&"F16"));
    matches_hf(&GEMMA3_GGUF_Q8);
    generates_as_hf(&GEMMA3_GGUF_Q8);
}

fn matches_hf(f: &Fixture) {
    let (m, tensors, model) = load(f);
    assert!(model.is_multimodal());
    assert_eq!(model.family(), f.family);
    for case in &m.cases {
        let images: Vec<ImageSource> = case
            .images
            .iter()
            .map(|f| ImageSource::from(repo().join("tests/fixtures/images").join(f)))
            .collect();
        let (text, chat) = match (&case.text, &case.messages) {
            (_, Some(msgs)) if f.chat => (chat_text(msgs), true),
            (Some(t), _) => (t.clone(), false),
            _ => panic!("{}: neither text nor messages", case.name),
        };
        let run = ok(
            model.encode_with_images(
                &text,
                &images,
                &EncodeOptions {
                    towers: true,
                    ..EncodeOptions::default()
                },
                Some(GenerateOptions {
                    max_new_tokens: 0,
                    chat,
                }),
                &mut |_| {},
                &attnviz::cancel::Cancel::new(),
            ),
            &case.name,
        );
        let att = &run.encoding.attention;
        assert_eq!(
            att.queries().ids,
            case.input_ids,
            "{}: input ids",
            case.name
        );
        // The pictures' runs, and what each token of a run is.
        let runs: Vec<[usize; 2]> = att
            .pictures
            .iter()
            .map(|p| [p.first, p.image.cells.len()])
            .collect();
        assert_eq!(runs, case.image_token_runs, "{}", case.name);
        for p in att.pictures.iter() {
            assert_eq!(p.image.cells[0], f.first_cell);
            assert_eq!(p.image.grid, f.picture_grid);
        }
        // Which later keys the image tokens see: none under LLaVA's causal mask, their run's
        // under Gemma 3's blocks (as many as transformers' weights above 0).
        let later = later_in_runs(att.weights(), case.input_ids.len(), &case.image_token_runs);
        assert_eq!(
            later,
            case.later_image_keys_seen.unwrap_or(0),
            "{}",
            case.name
        );
        // PaliGemma's prompt sees itself in full: as many later keys as transformers weighs.
        let n = case.input_ids.len();
        match case.later_prefix_keys_seen {
            Some(want) => {
                assert_eq!(att.prefix, n, "{}: the prompt is the prefix", case.name);
                assert_eq!(
                    later_in_runs(att.weights(), n, &[[0, n]]),
                    want,
                    "{}",
                    case.name
                );
            }
            None => assert_eq!(att.prefix, 0, "{}", case.name),
        }
        // Pixels: each picture's frames (itself, or its tiles and global view), as the
        // processor made them.
        let want_pixels = values(&tensors, &case.tensors["pixel_values"]);
        let processor = model.image_processor().expect("an image processor");
        let mut frames = Vec::new();
        for (f, image) in case.images.iter().zip(&images) {
            let tiled = ok(
                processor.prepare_tiles_until(image, &attnviz::cancel::Cancel::new()),
                f,
            );
            if processor.tiles.is_none() {
                let rgb = ok(attnviz::pixels::decode(&image.shown()), f);
                assert!(tiled.frames[0] == processor.prepare(&rgb), "{f}");
            }
            frames.extend(tiled.frames);
        }
        let per = want_pixels.len() / frames.len();
        let mut dp = 0f32;
        for (i, frame) in frames.iter().enumerate() {
            dp = dp.max(max_diff(&frame.pixels, &want_pixels[i * per..][..per]));
        }
        // The tower's attention, frame by frame.
        let want_tower = values(&tensors, &case.tensors["vision_attentions"]);
        let per = want_tower.len() / frames.len();
        assert_eq!(run.towers.len(), frames.len());
        let mut dv = 0f32;
        for (i, tower) in run.towers.iter().enumerate() {
            assert_eq!(tower.layers(), f.tower_layers, "{}", case.name);
            // [layers, heads, n, n]: the first layers' weights lead the picture's.
            let got = tower.weights();
            dv = dv.max(max_diff(got, &want_tower[i * per..][..got.len()]));
            assert_eq!(tower.image.as_ref().unwrap().cells[0], f.tower_first);
        }
        let da = max_diff(
            att.weights(),
            &values(&tensors, &case.tensors["attentions"]),
        );
        let dh = max_diff(
            &run.encoding.hidden,
            &values(&tensors, &case.tensors["hidden"]),
        );
        eprintln!(
            "[{}] {}: pixels {dp:.2e}, tower attention {dv:.2e}, attention {da:.2e}, \
             hidden {dh:.2e}, later image keys seen {later}",
            f.label(),
            case.name
        );
        for (what, d, tol) in [
            ("pixels", dp, TOL),
            ("tower attention", dv, TOL),
            ("attention", da, TOL),
            // The suite's: transformers' own float32 hidden state is 1.7e-5 from float64's on
            // tiny-gemma3-vlm's chat case.
            ("hidden state", dh, HIDDEN_TOL),
        ] {
            assert!(d <= tol, "{}: {what} differs by {d}", case.name);
        }
    }
}

#[test]
fn tiny_smolvlm_matches_hf_tile_by_tile() {
    matches_hf(&SMOLVLM);
}

#[test]
fn tiny_smolvlm_generates_as_hf() {
    generates_as_hf(&SMOLVLM);
}

#[test]
fn tiny_smolvlm_gguf_and_mmproj_match_hf_tile_by_tile() {
    matches_hf(&SMOLVLM_GGUF);
    generates_as_hf(&SMOLVLM_GGUF);
}

/// A run captures the towers only when asked (a 896-pixel picture's would be 29 GB), and each
/// frame's capture is held to the budget: refused in one typed error, not an abort.
#[test]
fn the_tower_is_captured_only_when_asked_and_within_the_budget() {
    let model = load_model(&SMOLVLM);
    let image = ImageSource::from(repo().join("tests/fixtures/images/wide45x37.png"));
    let cancel = attnviz::cancel::Cancel::new();
    let run = |opts: EncodeOptions| {
        model.encode_with_images(
            "describe",
            std::slice::from_ref(&image),
            &opts,
            None,
            &mut |_| {},
            &cancel,
        )
    };
    let plain = ok(run(EncodeOptions::default()), "default");
    assert!(plain.towers.is_empty());
    let asked = ok(
        run(EncodeOptions {
            towers: true,
            ..EncodeOptions::default()
        }),
        "towers",
    );
    // Four tiles and the global view.
    assert_eq!(asked.towers.len(), 5);
    assert_eq!(
        asked.encoding.attention.weights(),
        plain.encoding.attention.weights()
    );
    // One frame's tower: 2 layers × 4 heads × 16² patches × 4 bytes = 8,192.
    let tight = |max: u64| EncodeOptions {
        towers: true,
        max_memory: Some(max),
        ..EncodeOptions::default()
    };
    match run(tight(8_191)) {
        Err(attnviz::model::Error::TooBig(e)) => assert_eq!(
            e.capture,
            attnviz::model::Capture::SelfAttention {
                layers: 2,
                heads: 4,
                tokens: 16,
                mixing: None,
            }
        ),
        other => panic!("not refused as too big: {:?}", other.err()),
    }
    let tower = |max: u64| {
        model.encode_tower(
            &image,
            &EncodeOptions {
                max_memory: Some(max),
                ..EncodeOptions::default()
            },
            &cancel,
        )
    };
    assert!(matches!(
        tower(8_191),
        Err(attnviz::model::Error::TooBig(_))
    ));
    assert_eq!(ok(tower(8_192), "tower").attention.layers(), 2);
}

#[test]
fn tiny_idefics3_without_splitting_matches_hf() {
    matches_hf(&IDEFICS3);
    generates_as_hf(&IDEFICS3);
}

#[test]
fn tiny_llava_generates_as_hf_and_captures_the_whole_sequence() {
    generates_as_hf(&LLAVA);
}

#[test]
fn tiny_gemma3_vlm_generates_as_hf_and_captures_the_whole_sequence() {
    generates_as_hf(&GEMMA3);
}

#[test]
fn tiny_paligemma1_with_gemma_1_matches_hf_under_its_prefix_lm_mask() {
    matches_hf(&PALIGEMMA1);
    generates_as_hf(&PALIGEMMA1);
}

/// The generated tokens are causal: the prefix stays the prompt's.
#[test]
fn tiny_paligemma_generates_as_hf_with_a_causal_answer() {
    generates_as_hf(&PALIGEMMA);
}

#[test]
fn tiny_llava_gguf_and_mmproj_generate_as_hf() {
    generates_as_hf(&LLAVA_GGUF);
}

#[test]
fn tiny_gemma3_vlm_gguf_and_mmproj_generate_as_hf() {
    generates_as_hf(&GEMMA3_GGUF);
}

fn generates_as_hf(f: &Fixture) {
    let (m, tensors, model) = load(f);
    for g in &m.generations {
        let case = m.cases.iter().find(|c| c.name == g.case).unwrap();
        let images: Vec<ImageSource> = case
            .images
            .iter()
            .map(|f| ImageSource::from(repo().join("tests/fixtures/images").join(f)))
            .collect();
        let run = ok(
            model.encode_with_images(
                case.text.as_deref().unwrap(),
                &images,
                &EncodeOptions::default(),
                Some(GenerateOptions {
                    max_new_tokens: g.generated_ids.len(),
                    chat: false,
                }),
                &mut |_| {},
                &attnviz::cancel::Cancel::new(),
            ),
            &g.case,
        );
        let generation = run.encoding.generation.as_ref().expect("it generated");
        assert_eq!(generation.generated(), g.generated_ids.as_slice());
        let att = &run.encoding.attention;
        assert_eq!(att.queries().ids, g.sequence);
        let generated = &att.queries().generated;
        assert_eq!(
            generated.iter().filter(|&&x| x).count(),
            g.generated_ids.len()
        );
        assert!(!generated[g.prompt_len - 1] && generated[g.prompt_len]);
        assert!(att.prefix == 0 || att.prefix == g.prompt_len);
        let want = values(&tensors, &g.tensors["attentions"]);
        let da = max_diff(att.weights(), &want);
        eprintln!("[{}] generation {}: attention {da:.2e}", f.label(), g.case);
        assert!(
            da <= TOL,
            "generation {}: attention differs by {da}",
            g.case
        );
    }
}

/// `tests/reference/make_qwen2_5_vl.py`'s manifest.
#[derive(Deserialize)]
struct QwenManifest {
    cases: Vec<QwenCase>,
    generations: Vec<GenerationCase>,
}

#[derive(Deserialize)]
struct QwenCase {
    name: String,
    text: String,
    /// The user's text of a case run through the chat template.
    chat: Option<String>,
    images: Vec<String>,
    input_ids: Vec<u32>,
    image_token_positions: Vec<usize>,
    /// Each picture's windowed calls' lengths in transformers' tower.
    windows: Vec<Vec<usize>>,
    tensors: HashMap<String, serde_json::Value>,
}

const QWEN_VL: &str = "tiny-qwen2_5_vl";
const QWEN2_VL: &str = "tiny-qwen2_vl";
const QWEN_VL_GGUF: [&str; 2] = ["tiny-qwen2_5_vl.gguf", "mmproj-tiny-qwen2_5_vl.gguf"];
const QWEN2_VL_GGUF: [&str; 2] = ["tiny-qwen2_vl.gguf", "mmproj-tiny-qwen2_vl.gguf"];
const VISION_MARKS: &str = "<|vision_start|><|image_pad|><|vision_end|>";

fn qwen_tensor(
    tensors: &HashMap<String, candle_core::Tensor>,
    what: &serde_json::Value,
) -> Vec<f32> {
    let what: TensorRef = ok(serde_json::from_value(what.clone()), "tensor entry");
    values(tensors, &what)
}

fn qwen_images(case: &QwenCase) -> Vec<ImageSource> {
    case.images
        .iter()
        .map(|f| ImageSource::from(repo().join("tests/fixtures/images").join(f)))
        .collect()
}

/// Qwen2.5-VL (`make_qwen2_5_vl.py`): smart_resize'd pixels in the processor's merge-window
/// order, the expanded ids (a prompt without marks gets them where the processor's users put
/// them; the chat case through the checkpoint's template), every vision layer and head in
/// patch raster order (windowed layers of two windows, zero outside a query's window, and a
/// full layer), and the language model's attention over the whole sequence under M-RoPE's
/// positions, within 1e-5; its last hidden state within the suite's bound.
#[test]
fn tiny_qwen2_5_vl_matches_hf_with_windows_merged_tokens_and_mrope() {
    qwen_vl_matches_hf(QWEN_VL, None, "Qwen2.5-VL", [true, false, true]);
}

/// The same checkpoint as llama.cpp's pair of files (`make_mmproj.py`: the `qwen2vl` text file
/// with its M-RoPE sections, the `qwen2.5vl_merger` projector with the Conv3d as two kernels),
/// held to the folder's reference: pixels, every tower layer and head, the language model's
/// attention, the ids and the generation within 1e-5.
#[test]
fn tiny_qwen2_5_vl_gguf_and_mmproj_match_hf() {
    qwen_vl_matches_hf(
        QWEN_VL,
        Some(QWEN_VL_GGUF),
        "Qwen2.5-VL",
        [true, false, true],
    );
    qwen_vl_generates_as_hf(QWEN_VL, Some(QWEN_VL_GGUF));
}

/// Qwen2-VL (`make_qwen2_5_vl.py --variant qwen2_vl`): the same checks, its tower's LayerNorm
/// and quick-GELU blocks attending over the whole picture on every layer, its checkpoint in
/// Qwen's layout (`visual.`, the text model under `model.`).
#[test]
fn tiny_qwen2_vl_matches_hf_without_windows() {
    qwen_vl_matches_hf(QWEN2_VL, None, "Qwen2-VL", [false, false, false]);
    qwen_vl_generates_as_hf(QWEN2_VL, None);
}

/// Qwen2-VL as llama.cpp's pair of files (projector type `qwen2vl_merger`: LayerNorms with
/// their biases, the quick-GELU MLP as `ffn_up`/`ffn_down`, no windows), held to the folder's
/// reference as Qwen2.5-VL's pair is.
#[test]
fn tiny_qwen2_vl_gguf_and_mmproj_match_hf() {
    qwen_vl_matches_hf(
        QWEN2_VL,
        Some(QWEN2_VL_GGUF),
        "Qwen2-VL",
        [false, false, false],
    );
    qwen_vl_generates_as_hf(QWEN2_VL, Some(QWEN2_VL_GGUF));
}

/// The Qwen-VL checks on fixture `name` (or its `pair` of files) of `family`, whose 3 tower
/// layers are `windowed` or not.
fn qwen_vl_matches_hf(name: &str, pair: Option<[&str; 2]>, family: &str, windowed: [bool; 3]) {
    let dir = repo().join("tests/reference");
    let json = format!("{name}.json");
    let m: QwenManifest = ok(
        serde_json::from_str(&ok(std::fs::read_to_string(dir.join(&json)), &json)),
        &json,
    );
    let weights = format!("{name}.safetensors");
    let tensors = ok(
        candle_core::safetensors::load(dir.join(&weights), &Device::Cpu),
        &weights,
    );
    let model = model_from(name, pair);
    assert!(model.is_multimodal());
    assert_eq!(model.family(), family);
    let processor = model.image_processor().expect("an image processor");
    for case in &m.cases {
        let images = qwen_images(case);
        // One picture and its marks in front: the prompt without them gets the same.
        let (text, chat) = match &case.chat {
            Some(t) => (t.clone(), true),
            None if case.images.len() == 1 => (
                case.text
                    .strip_prefix(VISION_MARKS)
                    .expect("the marks lead")
                    .to_string(),
                false,
            ),
            None => (case.text.clone(), false),
        };
        let run = ok(
            model.encode_with_images(
                &text,
                &images,
                &EncodeOptions {
                    towers: true,
                    ..EncodeOptions::default()
                },
                Some(GenerateOptions {
                    max_new_tokens: 0,
                    chat,
                }),
                &mut |_| {},
                &attnviz::cancel::Cancel::new(),
            ),
            &case.name,
        );
        let att = &run.encoding.attention;
        assert_eq!(
            att.queries().ids,
            case.input_ids,
            "{}: input ids",
            case.name
        );
        let positions: Vec<usize> = att
            .pictures
            .iter()
            .flat_map(|p| p.first..p.first + p.image.cells.len())
            .collect();
        assert_eq!(positions, case.image_token_positions, "{}", case.name);
        for p in att.pictures.iter() {
            // 84 x 56 px: 6 x 4 patches of 14, merged 2 x 2 into 3 x 2 tokens of 28 px.
            assert_eq!((p.image.grid, p.image.patch), ([2, 3], 28), "{}", case.name);
            assert_eq!(p.image.cells[5], Cell::Patch { row: 1, col: 2 });
            assert!(!p.bidirectional);
        }
        // Pixels, as the processor lays them out.
        let want_pixels = qwen_tensor(&tensors, &case.tensors["pixel_values"]);
        let mut got_pixels = Vec::new();
        for f in &case.images {
            let rgb = ok(
                attnviz::pixels::decode(&repo().join("tests/fixtures/images").join(f)),
                f,
            );
            let prepared = processor.prepare(&rgb);
            assert_eq!(
                [prepared.width, prepared.height],
                [84, 56],
                "{f} is resized"
            );
            got_pixels.extend(attnviz::pixels::merge_window_patches(
                &prepared.pixels,
                prepared.width,
                prepared.height,
                14,
                2,
                2,
            ));
        }
        let dp = max_diff(&got_pixels, &want_pixels);
        // The tower, picture by picture: more than one window, and zero outside them.
        let wanted = case.tensors["vision_attentions"]
            .as_array()
            .expect("one tensor per picture");
        assert_eq!(run.towers.len(), images.len());
        let mut dv = 0f32;
        for (i, tower) in run.towers.iter().enumerate() {
            let windows = if windowed.contains(&true) { 2 } else { 1 };
            assert_eq!(case.windows[i].len(), windows, "{}: windows", case.name);
            assert_eq!(tower.layers(), 3);
            // The capture says which layers attend within windows of 4 × 4 patches.
            let said = tower.image.as_ref().unwrap().windows.clone();
            let want_windows =
                windowed
                    .contains(&true)
                    .then(|| attnviz::attention::image::Windows {
                        side: 4,
                        layers: windowed.to_vec(),
                    });
            assert_eq!(said, want_windows, "{}", case.name);
            let got = tower.weights();
            let want = qwen_tensor(&tensors, &wanted[i]);
            dv = dv.max(max_diff(got, &want));
            let n = 24;
            let zeros = |layer: usize| {
                got[layer * 4 * n * n..][..4 * n * n]
                    .iter()
                    .filter(|&&w| w == 0.0)
                    .count()
            };
            // A windowed layer: a query of the 4 x 4 window sees 16 keys, one of the 4 x 2
            // window 8; a full layer sees all 24.
            let outside = |w: bool| if w { 4 * (16 * 8 + 8 * 16) } else { 0 };
            assert_eq!(
                [zeros(0), zeros(1), zeros(2)],
                windowed.map(outside),
                "{}",
                case.name
            );
            assert_eq!(
                want.iter().filter(|&&w| w == 0.0).count(),
                windowed.map(outside).iter().sum::<usize>(),
                "the reference's zeros are the windows'"
            );
        }
        let da = max_diff(
            att.weights(),
            &qwen_tensor(&tensors, &case.tensors["attentions"]),
        );
        let dh = max_diff(
            &run.encoding.hidden,
            &qwen_tensor(&tensors, &case.tensors["hidden"]),
        );
        eprintln!(
            "[{name}] {}: pixels {dp:.2e}, tower attention {dv:.2e}, attention {da:.2e}, \
             hidden {dh:.2e}",
            case.name
        );
        for (what, d, tol) in [
            ("pixels", dp, TOL),
            ("tower attention", dv, TOL),
            ("attention", da, TOL),
            ("hidden state", dh, HIDDEN_TOL),
        ] {
            assert!(d <= tol, "{}: {what} differs by {d}", case.name);
        }
    }
}

/// Greedy generation goes on from M-RoPE's rope delta: the same ids as transformers, and the
/// attention over prompt and generated tokens within 1e-5.
#[test]
fn tiny_qwen2_5_vl_generates_as_hf_from_its_rope_delta() {
    qwen_vl_generates_as_hf(QWEN_VL, None);
}

fn qwen_vl_generates_as_hf(name: &str, pair: Option<[&str; 2]>) {
    let dir = repo().join("tests/reference");
    let json = format!("{name}.json");
    let m: QwenManifest = ok(
        serde_json::from_str(&ok(std::fs::read_to_string(dir.join(&json)), &json)),
        &json,
    );
    let weights = format!("{name}.safetensors");
    let tensors = ok(
        candle_core::safetensors::load(dir.join(&weights), &Device::Cpu),
        &weights,
    );
    let model = model_from(name, pair);
    assert!(!m.generations.is_empty());
    for g in &m.generations {
        let case = m.cases.iter().find(|c| c.name == g.case).unwrap();
        let run = ok(
            model.encode_with_images(
                &case.text,
                &qwen_images(case),
                &EncodeOptions::default(),
                Some(GenerateOptions {
                    max_new_tokens: g.generated_ids.len(),
                    chat: false,
                }),
                &mut |_| {},
                &attnviz::cancel::Cancel::new(),
            ),
            &g.case,
        );
        let generation = run.encoding.generation.as_ref().expect("it generated");
        assert_eq!(generation.generated(), g.generated_ids.as_slice());
        let att = &run.encoding.attention;
        assert_eq!(att.queries().ids, g.sequence);
        assert!(
            !att.queries().generated[g.prompt_len - 1] && att.queries().generated[g.prompt_len]
        );
        let da = max_diff(att.weights(), &values(&tensors, &g.tensors["attentions"]));
        eprintln!("[{name}] generation {}: attention {da:.2e}", g.case);
        assert!(
            da <= TOL,
            "generation {}: attention differs by {da}",
            g.case
        );
    }
}
