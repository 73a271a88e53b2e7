//! Fidelity of the vision-language families against transformers: for each case of
//! `tests/reference/make_llava.py` (one picture, a chat prompt, two pictures; each picture
//! resized and cropped), the expanded input ids against the processor's, the pixels against its
//! image processor's, every vision-tower layer's and head's attention, and the language model's
//! attention over the whole sequence (image tokens included) at every layer and head, its last
//! hidden state and the logits after the last token (≤ 1e-5); and a greedy generation's ids
//! and its attention over prompt and generated tokens. The same checks hold `tiny-llava-full`
//! (`make_llava.py --variant full`): the `full` selection (class token kept), two feature layers
//! side by side, a projector without biases, a Mistral language model with a sliding window
//! shorter than the sequence, and llava-hf's key layout.

use std::collections::HashMap;
use std::path::Path;

use attnviz::attention::image::Cell;
use attnviz::model::{EncodeOptions, GenerateOptions, Model};
use attnviz::pixels::ImageSource;
use candle_core::Device;
use serde::Deserialize;

use super::reference::{fixture, ok, TensorRef};

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

/// How a fixture's pictures enter the sequence.
struct ImageTokens {
    /// The first image token of each picture.
    first: Cell,
    /// Image tokens per picture.
    per_picture: usize,
}

#[test]
fn tiny_llava_matches_hf_over_pictures_and_prompt() {
    matches_hf(
        "tiny-llava",
        ImageTokens {
            first: Cell::Patch { row: 0, col: 0 },
            per_picture: 16,
        },
    );
}

#[test]
fn tiny_llava_with_full_selection_two_feature_layers_and_mistral_matches_hf() {
    matches_hf(
        "tiny-llava-full",
        ImageTokens {
            first: Cell::Class,
            per_picture: 17,
        },
    );
}

/// Every case of the fixture `name`'s reference: ids, pixels, the tower's attention, the
/// language model's attention and last hidden state.
fn matches_hf(name: &str, expect: ImageTokens) {
    let dir = repo().join("tests/reference");
    let json = format!("{name}.json");
    let m: Manifest = ok(
        serde_json::from_str(&ok(std::fs::read_to_string(dir.join(&json)), &json)),
        &json,
    );
    let weights = format!("{name}.safetensors");
    let tensors = ok(
        candle_core::safetensors::load(dir.join(&weights), &Device::Cpu),
        &weights,
    );
    let model = ok(Model::from_dir(&fixture(name)), format!("loading {name}"));
    assert!(model.is_multimodal());
    assert_eq!(model.family(), "LLaVA");
    for case in &m.cases {
        let images: Vec<ImageSource> = case
            .images
            .iter()
            .map(|f| ImageSource::from(repo().join("tests/fixtures/images").join(f)))
            .collect();
        let (text, chat) = match (&case.text, &case.messages) {
            (Some(t), _) => (t.clone(), false),
            (None, Some(msgs)) => (chat_text(msgs), true),
            _ => panic!("{}: neither text nor messages", case.name),
        };
        let run = ok(
            model.encode_with_images(
                &text,
                &images,
                &EncodeOptions::default(),
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
            assert_eq!(p.image.cells[0], expect.first, "{}", case.name);
            assert_eq!(p.image.cells.len(), expect.per_picture, "{}", case.name);
            assert_eq!(p.image.grid, [4, 4]);
        }
        // Pixels: each picture's, as the processor made them.
        let want_pixels = values(&tensors, &case.tensors["pixel_values"]);
        let per = want_pixels.len() / images.len();
        let processor = model.image_processor().expect("an image processor");
        let mut dp = 0f32;
        for (i, f) in case.images.iter().enumerate() {
            let path = repo().join("tests/fixtures/images").join(f);
            let rgb = ok(attnviz::pixels::decode(&path), f);
            let prepared = processor.prepare(&rgb);
            dp = dp.max(max_diff(&prepared.pixels, &want_pixels[i * per..][..per]));
        }
        // The tower's attention, picture by picture.
        let want_tower = values(&tensors, &case.tensors["vision_attentions"]);
        let per = want_tower.len() / images.len();
        assert_eq!(run.towers.len(), images.len());
        let mut dv = 0f32;
        for (i, tower) in run.towers.iter().enumerate() {
            dv = dv.max(max_diff(tower.weights(), &want_tower[i * per..][..per]));
            assert_eq!(tower.image.as_ref().unwrap().cells[0], Cell::Class);
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
            "[{name}] {}: pixels {dp:.2e}, tower attention {dv:.2e}, attention {da:.2e}, \
             hidden {dh:.2e}",
            case.name
        );
        for (what, d) in [
            ("pixels", dp),
            ("tower attention", dv),
            ("attention", da),
            ("hidden state", dh),
        ] {
            assert!(d <= TOL, "{}: {what} differs by {d}", case.name);
        }
    }
}

#[test]
fn tiny_llava_generates_as_hf_and_captures_the_whole_sequence() {
    let dir = repo().join("tests/reference");
    let m: Manifest = ok(
        serde_json::from_str(&ok(
            std::fs::read_to_string(dir.join("tiny-llava.json")),
            "tiny-llava.json",
        )),
        "tiny-llava.json",
    );
    let tensors = ok(
        candle_core::safetensors::load(dir.join("tiny-llava.safetensors"), &Device::Cpu),
        "tiny-llava.safetensors",
    );
    let model = ok(
        Model::from_dir(&fixture("tiny-llava")),
        "loading tiny-llava",
    );
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
        let want = values(&tensors, &g.tensors["attentions"]);
        let da = max_diff(att.weights(), &want);
        eprintln!("[tiny-llava] generation {}: attention {da:.2e}", g.case);
        assert!(
            da <= TOL,
            "generation {}: attention differs by {da}",
            g.case
        );
    }
}
