//! Fidelity of Qwen3.5 and Qwen3.5-MoE against Hugging Face transformers, on the tiny random
//! checkpoints `tests/reference/make_qwen3_5.py` made (eager attention and experts,
//! transformers' torch fallbacks of the gated delta rule and the causal convolution, float32):
//! `tiny-qwen3_5`, saved as `Qwen3_5ForConditionalGeneration` (a vision tower beside the
//! language model, the text model's fields in `text_config`), dense, layers linear, full,
//! linear, full; `tiny-qwen3_5_moe`, saved as `Qwen3_5MoeForCausalLM`, layers full, linear,
//! linear, full, routed experts with a gated shared expert in every layer, the head tied.
//!
//! Both are held to Qwen3-Next's checks (`fidelity::qwen3_next`): the full layers' attention
//! every head and row within 1e-5, the hidden state within 1e-5 and every position's logits
//! within 1e-5 of the largest, the routers' choices identical and weights within 1e-5; each
//! gated delta layer's values and recurrence within 1e-5, its token-mixing matrix within 1e-5
//! of the script's own (numpy, forward in time from the rule's q, k, g and β) and, times
//! transformers' values, within 1e-5 of transformers' rule output.
//!
//! `cargo test --release --test suite fidelity::qwen3_5 -- --nocapture` prints max |Δ| per case.

use attnviz::model::{EncodeOptions, Model};

use super::qwen3_next::{matches_hf, mixing_reproduces_hf};
use super::reference::{fixture, ok, repo};

#[test]
fn tiny_qwen3_5_from_its_vision_language_checkpoint_matches_hf() {
    matches_hf("tiny-qwen3_5");
}

#[test]
fn tiny_qwen3_5_moe_matches_hf() {
    matches_hf("tiny-qwen3_5_moe");
}

#[test]
fn tiny_qwen3_5_gated_delta_mixing_reproduces_hf() {
    mixing_reproduces_hf("tiny-qwen3_5");
    mixing_reproduces_hf("tiny-qwen3_5_moe");
}

/// The views number the captured layers as the model does and say that the gated delta layers
/// are token mixing, not softmax; the vision tower is not run: an image is refused in one line.
#[test]
fn qwen3_5_views_say_the_gated_delta_layers_are_not_softmax() {
    use crate::support::cli::run;
    let text = "The cat sat on the mat.";
    for (label, family, full, linear) in [
        ("tiny-qwen3_5", "Qwen3.5", [1, 3], [0, 2]),
        ("tiny-qwen3_5_moe", "Qwen3.5-MoE", [0, 3], [1, 2]),
    ] {
        let model = ok(Model::from_dir(&fixture(label)), label);
        assert_eq!(model.family(), family);
        let enc = ok(model.encode(text, None, &EncodeOptions::default()), label);
        assert_eq!(enc.attention.layer_numbers(), full);
        let other = enc.attention.non_softmax.as_ref().expect("gated delta");
        assert_eq!(
            (other.kind.as_str(), other.layers.as_slice()),
            ("gated delta", &linear[..])
        );
        let path = fixture(label);
        let path = path.to_str().unwrap();
        let layer = full[1].to_string();
        let view = run(&["-m", path, text, "--layer", &layer, "--head", "0"]);
        assert!(
            view.status.success(),
            "{}",
            String::from_utf8_lossy(&view.stderr)
        );
        // The title wraps with the fixture's path: read it as one line.
        let shown = String::from_utf8(view.stdout)
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let title = format!(
            "layers {}, {} — gated delta: token mixing, not softmax, signed, drawn apart",
            linear[0], linear[1]
        );
        assert!(shown.contains(&title), "{shown}");
    }
    // The vision-language checkpoint's tower is not run: a picture is refused in one line.
    let path = fixture("tiny-qwen3_5");
    let picture = repo().join("tests/fixtures/images/own32.png");
    let refused = run(&[
        "-m",
        path.to_str().unwrap(),
        text,
        "--image",
        picture.to_str().unwrap(),
    ]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("does not run its vision tower yet, so it reads text, not images"),
        "{err}"
    );
}
