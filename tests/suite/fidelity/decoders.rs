//! Fidelity of the decoder families (GPT-2, Llama, Qwen2, Qwen3, Mistral, SmolLM3, Gemma 2/3) against Hugging Face
//! transformers, on the tiny random checkpoints `tests/reference/make_families.py` made (eager
//! attention, float32): everything `families::check_fixture` checks for encoders (every layer
//! and head under the causal mask, the last hidden state, q/k after the rotary embedding, a padded
//! batch, the tokenizer), plus the logits at the last position and greedy generation with the KV
//! cache: the same 16 tokens as `model.generate`, and the attention over prompt + generated
//! tokens.
//!
//! `cargo test --release --test suite fidelity::decoders -- --nocapture` prints max |Δ| per case.

use std::collections::HashMap;

use attnviz::model::Model;
use serde::Deserialize;

use super::families::{check_fixture, FamilyReference};
use super::reference::{
    compare_attention, fixture, layer_head_pos, ok, MaxDiff, TensorRef, ATTENTION_TOL, HIDDEN_TOL,
    QUERY_KEY_TOL,
};

/// Logits are sums over the hidden size: HF's own float32-vs-float64 gap reaches 4e-5 on these
/// models (README), so they get a looser bound than the attention.
const LOGITS_TOL: f32 = 1e-4;

#[derive(Debug, Deserialize)]
struct GenerationCase {
    name: String,
    text: String,
    input_ids: Vec<u32>,
    generated_ids: Vec<u32>,
    sequence: Vec<u32>,
    stopped_at_eos: bool,
    tensors: HashMap<String, TensorRef>,
}

#[derive(Debug, Deserialize)]
struct Generations {
    generations: Vec<GenerationCase>,
}

fn generations(label: &str) -> Vec<GenerationCase> {
    let path = super::reference::repo().join(format!("tests/reference/{label}.json"));
    let text = ok(std::fs::read_to_string(&path), path.display());
    let g: Generations = ok(serde_json::from_str(&text), path.display());
    g.generations
}

/// Everything for one decoder fixture; panics listing every mismatch.
pub(super) fn check_decoder(folder: &str, label: &str) {
    check_fixture(folder, label);
    let reference = FamilyReference::load(label);
    let model = ok(Model::from_dir(&fixture(folder)), folder);
    check_next_tokens(&model, folder, &reference, label);
}

/// A GGUF copy of a tiny fixture (`tests/fixtures/gguf/`, written by make_gguf.py in llama.cpp's
/// layout) through `Model::from_gguf`: its tokenizer from the metadata, every layer and head,
/// q/k, logits and generation against the fixture's transformers references.
pub(super) fn check_gguf(file: &str, label: &str) {
    let reference = FamilyReference::load(label);
    let path = super::reference::repo()
        .join("tests/fixtures/gguf")
        .join(file);
    let model = ok(Model::from_gguf(&path), file);
    let arch = model.architecture().clone();
    let mut problems = Vec::new();
    for case in &reference.cases {
        let enc = ok(
            model
                .tokenizer()
                .encode(&case.text, None, case.max_len, case.truncate),
            &case.name,
        );
        if enc.ids != case.input_ids {
            problems.push(format!(
                "[{file}] {}: token ids {:?}, transformers {:?}",
                case.name, enc.ids, case.input_ids
            ));
        }
        let n = case.n;
        let out = ok(
            model.forward(&case.input_ids, &vec![0; n], true),
            &case.name,
        );
        let want = reference.values(&case.tensors["attentions"]);
        let (d, lines) = compare_attention(&out.weights, &want, arch.layers, arch.heads, n);
        problems.extend(
            lines
                .into_iter()
                .map(|l| format!("[{file}] {} {l}", case.name)),
        );
        let hidden = MaxDiff::of(&out.hidden, &reference.values(&case.tensors["hidden"]));
        if hidden.exceeds(HIDDEN_TOL) {
            problems.push(format!(
                "[{file}] {} hidden {:.3e}",
                case.name, hidden.value
            ));
        }
        let qk = out.query_key.as_ref().unwrap();
        let mut qk_diff = 0f32;
        for (ours, what) in [(&qk.queries, "query"), (&qk.keys, "key")] {
            if let Some(t) = case.tensors.get(what) {
                let m = MaxDiff::of(ours, &reference.values(t));
                qk_diff = qk_diff.max(m.value);
                if m.exceeds(QUERY_KEY_TOL) {
                    problems.push(format!("[{file}] {} {what} {:.3e}", case.name, m.value));
                }
            }
        }
        eprintln!(
            "[{file}] {:<12} n={n:<3} attention max |Δ| {:.2e}; hidden {:.2e}; q/k {:.2e}",
            case.name, d.value, hidden.value, qk_diff
        );
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    check_next_tokens(&model, file, &reference, label);
}

/// Logits at the last position and greedy generation against the references.
fn check_next_tokens(model: &Model, folder: &str, reference: &FamilyReference, label: &str) {
    let arch = model.architecture().clone();
    let mut problems = Vec::new();

    for case in &reference.cases {
        let Some(want) = case.tensors.get("logits").map(|t| reference.values(t)) else {
            continue;
        };
        let logits = ok(model.next_token_logits(&case.input_ids), &case.name);
        let d = MaxDiff::of(&logits, &want);
        eprintln!(
            "[{folder}] {:<12} logits max |Δ| {:.2e} (token {})",
            case.name, d.value, d.index
        );
        if d.exceeds(LOGITS_TOL) {
            problems.push(format!(
                "[{folder}] {} logits: max |Δ| {:.3e} > {LOGITS_TOL:e} at token {}",
                case.name, d.value, d.index
            ));
        }
    }

    let gens = generations(label);
    assert!(gens.len() >= 3, "[{label}] three generation prompts");
    for g in &gens {
        let new = g.generated_ids.len();
        let out = ok(
            model.generate(&g.input_ids, new, &mut |_| {}),
            format!("[{folder}] {}: generate", g.name),
        );
        eprintln!(
            "[{folder}] {:<12} generated {:?} (transformers {:?})",
            g.name,
            out.generated(),
            g.generated_ids
        );
        if out.ids != g.sequence {
            problems.push(format!(
                "[{folder}] {}: generated {:?}, transformers {:?}",
                g.name,
                out.generated(),
                g.generated_ids
            ));
        }
        assert_eq!(
            out.stopped_at_eos, g.stopped_at_eos,
            "[{folder}] {}",
            g.name
        );
        // The attention over prompt + generated tokens, from one pass over the whole sequence.
        let n = g.sequence.len();
        let fwd = ok(
            model.forward(&g.sequence, &vec![0; n], false),
            format!("[{folder}] {}: forward", g.name),
        );
        let want = reference.values(&g.tensors["attentions"]);
        let (d, lines) = compare_attention(&fwd.weights, &want, arch.layers, arch.heads, n);
        eprintln!(
            "[{folder}] {:<12} n={n:<3} attention over prompt + generated max |Δ| {:.2e} ({})",
            g.name,
            d.value,
            layer_head_pos(d.index, arch.heads, n, n).replace("component", "key")
        );
        problems.extend(
            lines
                .into_iter()
                .map(|l| format!("[{folder}] {} {l}", g.name)),
        );
        let hidden = MaxDiff::of(&fwd.hidden, &reference.values(&g.tensors["hidden"]));
        if hidden.exceeds(HIDDEN_TOL) {
            problems.push(format!(
                "[{folder}] {} hidden: max |Δ| {:.3e}",
                g.name, hidden.value
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problem(s) against HF transformers (attention tolerance {ATTENTION_TOL:e}):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn tiny_gpt2_matches_hf() {
    check_decoder("tiny-gpt2", "tiny-gpt2");
}

#[test]
fn tiny_gpt2_without_prefix_matches_hf() {
    // GPT2Model's keys without `transformer.`, as the hub's gpt2 stores them.
    check_decoder("tiny-gpt2-bare", "tiny-gpt2");
}

#[test]
fn tiny_llama_with_gqa_and_linear_rope_matches_hf() {
    check_decoder("tiny-llama", "tiny-llama");
}

#[test]
fn tiny_llama_tied_with_llama3_rope_matches_hf() {
    check_decoder("tiny-llama-tied", "tiny-llama-tied");
}

#[test]
fn tiny_qwen2_with_qkv_bias_matches_hf() {
    check_decoder("tiny-qwen2", "tiny-qwen2");
}

#[test]
fn tiny_mistral_multi_query_matches_hf() {
    check_decoder("tiny-mistral", "tiny-mistral");
}

#[test]
fn tiny_llama_gguf_matches_hf() {
    // llama.cpp's layout: q/k rows permuted, SentencePiece vocabulary in the metadata, linear
    // RoPE scaling, untied output.
    check_gguf("tiny-llama.gguf", "tiny-llama");
}

#[test]
fn tiny_qwen2_gguf_matches_hf() {
    // qwen2 architecture: q/k/v biases, byte-level BPE with Qwen2's pre-tokenizer, tied.
    check_gguf("tiny-qwen2.gguf", "tiny-qwen2");
}

#[test]
fn tiny_mistral_window_matches_hf() {
    // sliding_window 6 on both layers, every input longer than it.
    check_decoder("tiny-mistral-window", "tiny-mistral-window");
}

#[test]
fn tiny_qwen3_matches_hf() {
    // q/k RMSNorm per head before RoPE, head_dim 16 ≠ 32/4, layers 1 and 2 sliding (window 7).
    check_decoder("tiny-qwen3", "tiny-qwen3");
}

#[test]
fn tiny_smollm3_with_nope_layers_matches_hf() {
    // Layer 3 of 5 applies no RoPE (no_rope_layers [1, 1, 1, 0, 1]): rotating it there, or
    // leaving the other layers unrotated, moves its attention far beyond the bound.
    check_decoder("tiny-smollm3", "tiny-smollm3");
}

#[test]
fn tiny_smollm3_gguf_matches_hf() {
    // llama.cpp's smollm3 architecture: q/k permuted as llama's, and no key for the NoPE
    // layers (every fourth, fixed in llama.cpp); held to transformers on the safetensors copy.
    check_gguf("tiny-smollm3.gguf", "tiny-smollm3");
}

#[test]
fn tiny_gemma_matches_hf() {
    // Gemma 1: √hidden embeddings, (1 + w) norms at Llama's two places (no post-norms),
    // GeGLU (tanh, from the legacy `hidden_act: "gelu"`), scores × head_dim^-½, one kv head.
    check_decoder("tiny-gemma", "tiny-gemma");
}

#[test]
fn tiny_gemma2_matches_hf() {
    // √hidden embeddings, (1 + w) norms, post-norms, GeGLU (tanh), query_pre_attn_scalar,
    // attention and final soft-capping, layers 0 and 2 sliding (window 5).
    check_decoder("tiny-gemma2", "tiny-gemma2");
}

#[test]
fn tiny_gemma3_matches_hf() {
    // q/k norms (1 + w), 5 sliding layers (window 6) to 1 global, local and global RoPE bases
    // (linear scaling on the global layer).
    check_decoder("tiny-gemma3", "tiny-gemma3");
}

#[test]
fn multimodal_gemma3_runs_its_text_tower() {
    // Gemma3ForConditionalGeneration (model_type gemma3, text_config nested, weights under
    // language_model.model. beside a SigLIP tower): make_gemma3_multimodal.py built it from
    // tiny-gemma3's text weights and checked with transformers that its text-only forward pass
    // is tiny-gemma3's, so tiny-gemma3's references hold for it.
    let path = super::reference::repo().join("tests/reference/tiny-gemma3-mm.json");
    let text = ok(std::fs::read_to_string(&path), path.display());
    let manifest: serde_json::Value = ok(serde_json::from_str(&text), path.display());
    let checks = manifest["same_as_text_model"].as_array().expect("checks");
    assert_eq!(checks.len(), 6, "every case and generation of tiny-gemma3");
    for check in checks {
        for key in ["attention_max_abs", "last_hidden_max_abs", "logits_max_abs"] {
            let d = check[key].as_f64().expect(key);
            assert!(d <= 1e-6, "{check}: {key}");
        }
    }
    let keys = manifest["keys"].as_array().expect("keys");
    assert!(keys
        .iter()
        .any(|k| k.as_str().unwrap().starts_with("vision_tower.")));
    check_decoder("tiny-gemma3-mm", "tiny-gemma3");
}

#[test]
fn tiny_phi3_matches_hf() {
    // Fused qkv_proj and gate_up_proj, half of each head rotated, longrope (short factors up to
    // 16 positions, long beyond: every case is longer, the prompts of generation shorter),
    // sliding_window 12 on both layers.
    check_decoder("tiny-phi3", "tiny-phi3");
}

#[test]
fn tiny_qwen3_128_and_its_gguf_match_hf() {
    // head_dim 128 (≠ 64/2); its GGUF (qwen3 architecture, attn_q_norm/attn_k_norm,
    // key_length 128) loads in transformers to exactly these weights.
    check_decoder("tiny-qwen3-128", "tiny-qwen3-128");
    check_gguf("tiny-qwen3.gguf", "tiny-qwen3-128");
}

#[test]
fn llama3_rope_freqs_in_gguf_match_hf() {
    // tiny-llama-tied (llama3 rope scaling) written as llama.cpp's converter writes Llama 3.1:
    // no scaling metadata, the per-frequency divisors as rope_freqs.weight. transformers' GGUF
    // loader ignores that tensor, so the reference is the safetensors fixture's (whose
    // rope_parameters the divisors were computed from).
    check_gguf("tiny-llama-tied.gguf", "tiny-llama-tied");
}

#[test]
fn sliding_windows_are_computed_per_layer_and_recorded() {
    // tiny-mistral: sliding_window 100 on every layer, 128 positions: a longer input runs.
    let model = ok(Model::from_dir(&fixture("tiny-mistral")), "tiny-mistral");
    let arch = model.architecture();
    assert_eq!((arch.window(0), arch.window(1)), (Some(100), Some(100)));
    assert_eq!(
        model.max_positions(),
        48,
        "tokenizer_config's model_max_length"
    );
    let ids = vec![5u32; 101];
    let out = ok(model.forward(&ids, &vec![0; 101], false), "101 tokens");
    let n = 101;
    // The last query sees keys 1..=100 only: key 0 is outside its window, exactly 0.
    let last = &out.weights[(n - 1) * n..n * n];
    assert_eq!(last[0], 0.0);
    assert!(last[1] > 0.0);
    // Each layer's window as the reference script read the config.
    for label in [
        "tiny-qwen3",
        "tiny-gemma2",
        "tiny-gemma3",
        "tiny-mistral-window",
    ] {
        let path = super::reference::repo().join(format!("tests/reference/{label}.json"));
        let text = ok(std::fs::read_to_string(&path), path.display());
        let json: serde_json::Value = ok(serde_json::from_str(&text), path.display());
        let want: Vec<Option<usize>> = ok(
            serde_json::from_value(json["layer_windows"].clone()),
            "layer_windows",
        );
        let model = ok(Model::from_dir(&fixture(label)), label);
        let arch = model.architecture();
        let got: Vec<Option<usize>> = (0..arch.layers).map(|l| arch.window(l)).collect();
        assert_eq!(got, want, "{label}");
    }
}

#[test]
fn decoders_refuse_pairs_and_too_long_generations() {
    let model = ok(Model::from_dir(&fixture("tiny-gpt2")), "tiny-gpt2");
    let err = model
        .encode("a", Some("b"), &Default::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("decoder (GPT-2), which reads one text"),
        "{err}"
    );
    // 48 positions: a 40-token prompt leaves room for 8.
    let err = model
        .generate(&[5; 40], 9, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("generate at most 8 tokens"), "{err}");
    assert_eq!(
        ok(model.generate(&[5; 40], 8, &mut |_| {}), "8 tokens")
            .ids
            .len(),
        48
    );
    // The encoder families have no next-token side.
    let bert = ok(Model::from_dir(&fixture("tiny-bert")), "tiny-bert");
    let err = bert
        .generate(&[2, 5], 3, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("only decoder models"), "{err}");
}

/// The units of generated tokens (labels, roles, word ids, surfaces) match what the tokenizer
/// gives when the whole text is read as a prompt, wherever reading it back gives the same ids
/// (the tiny random models often generate token sequences the tokenizer would spell otherwise;
/// SmolLM2's generations read back exactly).
#[test]
fn generated_units_match_the_tokenizers_own_reading() {
    // Compare, returning whether the text read back to the same ids.
    let compare = |model: &Model, what: &str, prompt_text: &str, plain: bool, generated: &[u32]| {
        let tok = model.tokenizer();
        let prompt = if plain {
            ok(tok.encode_without_specials(prompt_text, 4096, false), what)
        } else {
            ok(tok.encode(prompt_text, None, 4096, false), what)
        };
        let ours = tok.continuation(&prompt, generated);
        // Read back: the prompt's text followed by the generated tokens' surfaces.
        let text = format!(
            "{prompt_text}{}",
            ours.surfaces[prompt.ids.len()..].concat()
        );
        let reread = if plain {
            tok.encode_without_specials(&text, 4096, false)
        } else {
            tok.encode(&text, None, 4096, false)
        };
        match reread {
            Ok(r) if r.ids == ours.ids => {
                assert_eq!(ours.tokens, r.tokens, "{what}");
                assert_eq!(ours.roles, r.roles, "{what}: roles");
                assert_eq!(ours.word_ids, r.word_ids, "{what}: word ids");
                assert_eq!(ours.surfaces, r.surfaces, "{what}: surfaces");
                true
            }
            _ => {
                eprintln!("{what}: reads back to other ids");
                false
            }
        }
    };
    let mut compared = 0;
    for (folder, label) in [
        ("tiny-gpt2", "tiny-gpt2"),
        ("tiny-llama", "tiny-llama"),
        ("tiny-qwen2", "tiny-qwen2"),
        ("tiny-llama-tied", "tiny-llama-tied"),
    ] {
        let model = ok(Model::from_dir(&fixture(folder)), folder);
        for g in generations(label) {
            let what = format!("[{folder}] {}", g.name);
            compared += usize::from(compare(&model, &what, &g.text, false, &g.generated_ids));
        }
    }
    let smollm2 = ok(
        Model::from_gguf(&crate::support::models::smollm2::smollm2_gguf()),
        "SmolLM2",
    );
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(super::reference::repo().join("tests/reference/smollm2.json"))
            .unwrap(),
    )
    .unwrap();
    let mut smol = 0;
    for g in reference["generations"].as_array().unwrap() {
        let generated: Vec<u32> = serde_json::from_value(g["generated_ids"].clone()).unwrap();
        let what = format!("[smollm2] {}", g["name"]);
        let text = g["prompt_text"].as_str().unwrap();
        smol += usize::from(compare(&smollm2, &what, text, true, &generated));
    }
    eprintln!("{compared} tiny and {smol} SmolLM2 generations read back to the same ids, compared");
    assert_eq!(smol, 3, "SmolLM2's generations read back exactly");
}

/// tiny-phi3 with its config.json edited by `edit`, in a new temporary folder.
fn phi3_variant(edit: impl FnOnce(&mut serde_json::Value)) -> tempfile::TempDir {
    let dir = crate::support::cli::copy_fixture("tiny-phi3");
    let path = dir.path().join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    dir
}

/// Attention and hidden state of `model` on a fixed input longer than longrope's original
/// positions and one shorter, bit for bit.
fn phi3_outputs(model: &Model) -> Vec<(Vec<f32>, Vec<f32>)> {
    [(1..=20).collect::<Vec<u32>>(), vec![5, 9, 33, 7]]
        .iter()
        .map(|ids| {
            let out = ok(model.forward(ids, &vec![0; ids.len()], false), "forward");
            (out.weights, out.hidden)
        })
        .collect()
}

#[test]
fn phi3_partial_rotary_is_read_from_either_config_layout() {
    // transformers 5 keeps partial_rotary_factor inside rope_parameters (as tiny-phi3's own
    // config, which transformers 5.24 wrote and whose outputs tiny_phi3_matches_hf checks);
    // transformers 4 wrote it at the top level. Both mean the same model.
    let reference = ok(Model::from_dir(&fixture("tiny-phi3")), "tiny-phi3");
    let top_level = phi3_variant(|c| {
        let factor = c["rope_parameters"]
            .as_object_mut()
            .unwrap()
            .remove("partial_rotary_factor")
            .unwrap();
        c["partial_rotary_factor"] = factor;
    });
    let moved = ok(
        Model::from_dir(top_level.path()),
        "longrope, factor at the top level",
    );
    assert_eq!(
        phi3_outputs(&moved),
        phi3_outputs(&reference),
        "longrope: the same model"
    );
    // Default (unscaled) RoPE, half of each head rotated: the layout transformers 5 writes…
    let default_rope = |c: &mut serde_json::Value| {
        c["rope_parameters"] = serde_json::json!({
            "rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
        });
    };
    let inside = phi3_variant(default_rope);
    // … and the one transformers 4 wrote.
    let outside = phi3_variant(|c| {
        default_rope(c);
        c["rope_parameters"]
            .as_object_mut()
            .unwrap()
            .remove("partial_rotary_factor");
        c["partial_rotary_factor"] = serde_json::json!(0.5);
    });
    let inside = ok(
        Model::from_dir(inside.path()),
        "default rope, transformers 5 layout",
    );
    let outside = ok(Model::from_dir(outside.path()), "default rope, top level");
    assert_eq!(inside.architecture(), outside.architecture());
    let (a, b) = (phi3_outputs(&inside), phi3_outputs(&outside));
    assert_eq!(a, b, "default rope: the same model in both layouts");
    // Unscaled RoPE is not longrope: the factors changed the attention.
    assert_ne!(a, phi3_outputs(&reference));
}
