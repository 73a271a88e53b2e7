//! Fidelity of every encoder family against Hugging Face transformers, on the tiny random
//! checkpoints `tests/reference/make_families.py` made (eager attention, float32): every layer
//! and every head, the last hidden state, the captured query/key vectors, all cases again in
//! one padded batch, and the tokenizer, for every fixture layout (the bare model as safetensors,
//! and the masked-LM class's `.bin` with the family prefix).
//!
//! `cargo test --release --test suite fidelity::families -- --nocapture` prints max |Δ| per case.

use std::collections::HashMap;
use std::path::Path;

use attnviz::model::{EncodeOptions, Forward, Model};
use candle_core::Device;
use serde::Deserialize;

use super::reference::{
    compare_attention, fixture, layer_head_pos, ok, repo, row_col, MaxDiff, TensorRef,
    ATTENTION_TOL, HIDDEN_TOL, QUERY_KEY_TOL,
};

/// One case of a family manifest: HF's tokenization and the names of its tensors.
#[derive(Debug, Deserialize)]
pub struct FamilyCase {
    pub name: String,
    pub text: String,
    pub pair: Option<String>,
    pub max_len: usize,
    pub truncate: bool,
    pub untruncated_len: usize,
    pub tokens: Vec<String>,
    pub input_ids: Vec<u32>,
    /// `None` where HF's tokenizer returns none (the model then sees zeros).
    pub token_type_ids: Option<Vec<u32>>,
    pub special_tokens_mask: Vec<u8>,
    pub word_ids: Option<Vec<Option<usize>>>,
    pub n: usize,
    pub tensors: HashMap<String, TensorRef>,
}

impl FamilyCase {
    /// The segment ids HF's model received.
    pub fn model_types(&self) -> Vec<u32> {
        self.token_type_ids
            .clone()
            .unwrap_or_else(|| vec![0; self.input_ids.len()])
    }
}

#[derive(Debug, Deserialize)]
struct Manifest {
    model_type: String,
    special_tokens: HashMap<String, (String, u32)>,
    config: HashMap<String, serde_json::Value>,
    versions: HashMap<String, String>,
    tensors: String,
    cases: Vec<FamilyCase>,
}

/// A family's references: `tests/reference/tiny-<family>.{json,safetensors}`.
pub struct FamilyReference {
    pub label: String,
    pub model_type: String,
    pub config: HashMap<String, serde_json::Value>,
    /// HF's special tokens: name (`cls_token`) → (token, id).
    pub special_tokens: HashMap<String, (String, u32)>,
    /// The unknown token's id.
    pub unk: Option<u32>,
    pub cases: Vec<FamilyCase>,
    tensors: HashMap<String, candle_core::Tensor>,
}

impl FamilyReference {
    pub fn load(label: &str) -> FamilyReference {
        let dir = repo().join("tests/reference");
        let path = dir.join(format!("{label}.json"));
        let text = ok(std::fs::read_to_string(&path), path.display());
        let m: Manifest = ok(serde_json::from_str(&text), path.display());
        let tensors = ok(
            candle_core::safetensors::load(dir.join(&m.tensors), &Device::Cpu),
            &m.tensors,
        );
        eprintln!(
            "[{label}] references from torch {} / transformers {}",
            m.versions.get("torch").map_or("?", String::as_str),
            m.versions.get("transformers").map_or("?", String::as_str)
        );
        FamilyReference {
            label: label.to_string(),
            model_type: m.model_type,
            config: m.config,
            unk: m.special_tokens.get("unk_token").map(|(_, id)| *id),
            special_tokens: m.special_tokens.clone(),
            cases: m.cases,
            tensors,
        }
    }

    pub fn values(&self, what: &TensorRef) -> Vec<f32> {
        let t = self
            .tensors
            .get(&what.tensor)
            .unwrap_or_else(|| panic!("{}: no tensor {}", self.label, what.tensor));
        assert_eq!(t.dims(), what.shape.as_slice(), "{}", what.tensor);
        ok(
            t.flatten_all().and_then(|t| t.to_vec1::<f32>()),
            &what.tensor,
        )
    }

    fn tensor(&self, case: &FamilyCase, name: &str) -> Option<Vec<f32>> {
        case.tensors.get(name).map(|t| self.values(t))
    }

    fn count(&self, field: &str) -> usize {
        self.config[field]
            .as_u64()
            .unwrap_or_else(|| panic!("config {field}")) as usize
    }
}

/// The layers × heads × hidden the references have: one attention map per layer run.
fn shape(case: &FamilyCase) -> (usize, usize, usize) {
    let attn = &case.tensors["attentions"];
    let hidden = &case.tensors["hidden"];
    (attn.shape[0], attn.shape[1], hidden.shape[1])
}

/// Which tokens are sentence B: those after the special tokens that end sentence A.
fn in_sentence_b(special: &[u8]) -> Vec<bool> {
    let (mut seen_a, mut in_b) = (false, false);
    special
        .iter()
        .map(|&s| {
            if s == 1 {
                if seen_a {
                    in_b = true;
                }
                false
            } else {
                seen_a = true;
                in_b
            }
        })
        .collect()
}

/// Our tokenizer against HF's: tokens, ids, segments, special tokens, word ids, truncation.
fn check_tokenization(
    model: &Model,
    label: &str,
    case: &FamilyCase,
    unk: Option<u32>,
) -> Vec<String> {
    let what = format!("[{label}] {}", case.name);
    let enc = ok(
        model.tokenizer().encode(
            &case.text,
            case.pair.as_deref(),
            case.max_len,
            case.truncate,
        ),
        format!("{what}: encode"),
    );
    let mut problems = Vec::new();
    let mut expect = |field: &str, equal: bool, ours: String, hf: String| {
        if !equal {
            problems.push(format!(
                "{what}: {field} differ\n  ours {ours}\n  HF   {hf}"
            ));
        }
    };
    expect(
        "input ids",
        enc.ids == case.input_ids,
        format!("{:?}", enc.ids),
        format!("{:?}", case.input_ids),
    );
    // HF names an unknown piece by the unknown token (`convert_ids_to_tokens`); the tokenizers
    // library keeps the text it stands for (SentencePiece unigram), a better label. The ids
    // above must agree; the labels of unknown pieces may differ.
    let same_labels = enc.tokens.len() == case.tokens.len()
        && enc
            .tokens
            .iter()
            .zip(&case.tokens)
            .zip(&case.input_ids)
            .all(|((ours, hf), &id)| ours == hf || Some(id) == unk);
    expect(
        "tokens",
        same_labels,
        format!("{:?}", enc.tokens),
        format!("{:?}", case.tokens),
    );
    let hf_special: Vec<bool> = case.special_tokens_mask.iter().map(|&m| m == 1).collect();
    expect(
        "special-token flags",
        enc.special == hf_special,
        format!("{:?}", enc.special),
        format!("{hf_special:?}"),
    );
    match &case.token_type_ids {
        Some(types) => expect(
            "token type ids",
            &enc.type_ids == types,
            format!("{:?}", enc.type_ids),
            format!("{types:?}"),
        ),
        // HF's tokenizer gives none, so its model sees zeros: ours must not pass the
        // tokenizer's segments to the model either.
        None => expect(
            "segment ids passed to the model",
            !model.architecture().tokenizer_types,
            "the tokenizer's".into(),
            "none (zeros)".into(),
        ),
    }
    if let Some(hf_words) = &case.word_ids {
        // Our word ids run across the pair; HF numbers each sentence from 0.
        let b = in_sentence_b(&case.special_tokens_mask);
        let words_in_a = hf_words
            .iter()
            .zip(&b)
            .filter(|(_, &b)| !b)
            .filter_map(|(w, _)| w.map(|w| w + 1))
            .max()
            .unwrap_or(0);
        let hf_words: Vec<Option<usize>> = hf_words
            .iter()
            .zip(&b)
            .map(|(w, &b)| w.map(|w| if b { w + words_in_a } else { w }))
            .collect();
        // Equal, or (a SentencePiece tokenizer without word splitting, as Llama's, for which
        // HF gives the whole text one word id) split further only where a token starts after
        // whitespace: every word boundary HF has, ours has.
        let refines = enc.word_ids.len() == hf_words.len()
            && (1..hf_words.len()).all(|i| {
                let (ours, hf) = (&enc.word_ids, &hf_words);
                let starts = |w: &[Option<usize>]| w[i].is_some() && w[i] != w[i - 1];
                (ours[i].is_none() == hf[i].is_none())
                    && (!starts(hf) || starts(ours))
                    && (!starts(ours) || starts(hf) || enc.tokens[i].starts_with(['▁', 'Ġ', ' ']))
            });
        expect(
            "word ids",
            enc.word_ids == hf_words || refines,
            format!("{:?}", enc.word_ids),
            format!("{hf_words:?}"),
        );
    }
    let hf_truncated = case.truncate.then_some(case.untruncated_len);
    expect(
        "truncated_from",
        enc.truncated_from == hf_truncated,
        format!("{:?}", enc.truncated_from),
        format!("{hf_truncated:?}"),
    );
    problems
}

/// One output against HF's attention (every layer and head) and last hidden state.
fn compare(
    label: &str,
    reference: &FamilyReference,
    case: &FamilyCase,
    out: &Forward,
    how: &str,
) -> Vec<String> {
    let (layers, heads, hidden_size) = shape(case);
    let n = case.n;
    let name = format!("{}{how}", case.name);
    let attn_ref = reference.tensor(case, "attentions").unwrap();
    let hidden_ref = reference.tensor(case, "hidden").unwrap();
    let (attn, mut problems) = compare_attention(&out.weights, &attn_ref, layers, heads, n);
    for line in &mut problems {
        *line = format!("[{label}] {name} attention {line}");
    }
    assert_eq!(
        out.hidden.len(),
        n * hidden_size,
        "[{label}] {name}: hidden size"
    );
    let hidden = MaxDiff::of(&out.hidden, &hidden_ref);
    let attn_at = layer_head_pos(attn.index, heads, n, n).replace("component", "key");
    let hidden_at = row_col(hidden.index, hidden_size);
    eprintln!(
        "[{label}] {name:<34} n={n:<3} attention max |Δ| {:.2e} ({attn_at}); hidden max |Δ| {:.2e} ({hidden_at})",
        attn.value, hidden.value
    );
    if hidden.exceeds(HIDDEN_TOL) {
        problems.push(format!(
            "[{label}] {name} last hidden state: max |Δ| {:.3e} > {HIDDEN_TOL:e} at {hidden_at}",
            hidden.value
        ));
    }
    problems
}

fn load(dir: &Path) -> Model {
    ok(Model::from_dir(dir), format!("loading {}", dir.display()))
}

/// Everything for one fixture folder against the family's references: the model's shape, the
/// tokenizer, the forward pass on HF's ids, the whole pipeline (`Model::encode`), the captured
/// query/key vectors, and all cases in one padded batch. Panics listing every mismatch.
pub fn check_fixture(folder: &str, label: &str) {
    let reference = FamilyReference::load(label);
    let model = load(&fixture(folder));
    let arch = model.architecture();
    let first = &reference.cases[0];
    let (layers, heads, hidden) = shape(first);
    assert_eq!(
        (arch.layers, arch.heads, arch.hidden_size),
        (layers, heads, hidden),
        "[{folder}] layers (attention maps), heads, hidden size"
    );
    assert_eq!(
        arch.model_type, reference.model_type,
        "[{folder}] model_type"
    );
    assert_eq!(
        arch.vocab_size,
        reference.count("vocab_size"),
        "[{folder}] vocabulary"
    );
    assert_eq!(
        model.max_positions(),
        first.max_len,
        "[{folder}] the longest input is the tokenizer's model_max_length"
    );

    let mut problems = Vec::new();
    for case in &reference.cases {
        problems.extend(check_tokenization(&model, folder, case, reference.unk));
        let out = ok(
            model.forward(&case.input_ids, &case.model_types(), false),
            format!("[{folder}] {}: forward", case.name),
        );
        problems.extend(compare(folder, &reference, case, &out, ""));
        // The whole pipeline: our tokenizer, our choice of segment ids, our forward pass.
        let opts = EncodeOptions {
            truncate: case.truncate,
            capture_query_key: false,
            ..EncodeOptions::default()
        };
        if let Ok(enc) = model.encode(&case.text, case.pair.as_deref(), &opts) {
            let out = Forward {
                weights: enc.attention.weights().to_vec(),
                hidden: enc.hidden,
                query_key: None,
                routing: Vec::new(),
            };
            problems.extend(compare(folder, &reference, case, &out, " (encode)"));
        } else {
            problems.push(format!("[{folder}] {}: Model::encode failed", case.name));
        }
    }

    // Query and key vectors, where the references have them.
    let mut checked = 0;
    for case in &reference.cases {
        let (Some(q_ref), Some(k_ref)) = (
            reference.tensor(case, "query"),
            reference.tensor(case, "key"),
        ) else {
            continue;
        };
        let out = ok(
            model.forward(&case.input_ids, &case.model_types(), true),
            format!("[{folder}] {}: forward with query/key", case.name),
        );
        let qk = out.query_key.as_ref().expect("query/key requested");
        let d = arch.head_dim;
        let at = |m: MaxDiff| layer_head_pos(m.index, heads, case.n, d);
        let q = MaxDiff::of(&qk.queries, &q_ref);
        let k = MaxDiff::of(&qk.keys, &k_ref);
        eprintln!(
            "[{folder}] {:<34} query max |Δ| {:.2e} ({}); key max |Δ| {:.2e} ({})",
            case.name,
            q.value,
            at(q),
            k.value,
            at(k)
        );
        for (what, m) in [("query", q), ("key", k)] {
            if m.exceeds(QUERY_KEY_TOL) {
                problems.push(format!(
                    "[{folder}] {} {what}: max |Δ| {:.3e} > {QUERY_KEY_TOL:e} at {}",
                    case.name,
                    m.value,
                    at(m)
                ));
            }
        }
        problems.extend(compare(folder, &reference, case, &out, " (with query/key)"));
        checked += 1;
    }
    assert!(checked > 0, "[{folder}] no case has query/key references");

    // All cases in one padded batch.
    let types: Vec<Vec<u32>> = reference
        .cases
        .iter()
        .map(FamilyCase::model_types)
        .collect();
    let batch: Vec<(&[u32], &[u32])> = reference
        .cases
        .iter()
        .zip(&types)
        .map(|(c, t)| (c.input_ids.as_slice(), t.as_slice()))
        .collect();
    let lengths: Vec<usize> = reference.cases.iter().map(|c| c.n).collect();
    assert!(
        lengths.iter().min() < lengths.iter().max(),
        "[{folder}] the batch needs sequences of different lengths"
    );
    let outs = ok(model.forward_batch(&batch, false), "forward_batch");
    for (case, out) in reference.cases.iter().zip(&outs) {
        problems.extend(compare(folder, &reference, case, out, " (padded batch)"));
    }

    assert!(
        problems.is_empty(),
        "{} problem(s) against HF transformers (attention tolerance {ATTENTION_TOL:e}, hidden \
         {HIDDEN_TOL:e}):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn tiny_roberta_safetensors_matches_hf() {
    check_fixture("tiny-roberta", "tiny-roberta");
}

#[test]
fn tiny_roberta_mlm_bin_with_prefix_matches_hf() {
    // RobertaForMaskedLM's state dict: `roberta.` prefix, lm_head.*, zip pytorch_model.bin.
    check_fixture("tiny-roberta-mlm", "tiny-roberta");
}

#[test]
fn tiny_xlm_roberta_matches_hf() {
    check_fixture("tiny-xlm-roberta", "tiny-xlm-roberta");
}

#[test]
fn tiny_distilbert_safetensors_matches_hf() {
    check_fixture("tiny-distilbert", "tiny-distilbert");
}

#[test]
fn tiny_distilbert_mlm_bin_with_prefix_matches_hf() {
    check_fixture("tiny-distilbert-mlm", "tiny-distilbert");
}

#[test]
fn tiny_albert_safetensors_matches_hf() {
    check_fixture("tiny-albert", "tiny-albert");
}

#[test]
fn tiny_albert_mlm_bin_with_prefix_matches_hf() {
    check_fixture("tiny-albert-mlm", "tiny-albert");
}

/// ALBERT was pre-trained with segment ids (sentence-order prediction, `type_vocab_size` 2):
/// a pair's second sentence and its `[SEP]` get segment 1, as in transformers when
/// `token_type_ids` are passed (`make_families.py` passes them; transformers 5's tokenizer no
/// longer returns them). `Model::encode` matches that reference on the pair, and the same ids
/// run with zeros miss it by far more than the tolerance: the match is the segments' doing.
#[test]
fn tiny_albert_pairs_get_segment_ids() {
    for label in ["tiny-albert", "tiny-albert-groups"] {
        let reference = FamilyReference::load(label);
        let model = load(&fixture(label));
        assert!(model.architecture().tokenizer_types, "[{label}]");
        let case = reference
            .cases
            .iter()
            .find(|c| c.name == "pair")
            .expect("a pair case");
        let types = case
            .token_type_ids
            .as_ref()
            .expect("segment ids passed to HF");
        assert!(
            types.contains(&0) && types.contains(&1),
            "[{label}] {types:?}"
        );
        let enc = ok(
            model.encode(&case.text, case.pair.as_deref(), &EncodeOptions::default()),
            format!("[{label}] encode"),
        );
        assert_eq!(
            &enc.attention.queries().type_ids,
            types,
            "[{label}] segment ids"
        );
        let out = Forward {
            weights: enc.attention.weights().to_vec(),
            hidden: enc.hidden,
            query_key: None,
            routing: Vec::new(),
        };
        let problems = compare(label, &reference, case, &out, " (encode)");
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        let zeros = ok(
            model.forward(&case.input_ids, &vec![0; case.n], false),
            format!("[{label}] forward with zeros"),
        );
        let attn_ref = reference.tensor(case, "attentions").unwrap();
        let off = MaxDiff::of(&zeros.weights, &attn_ref).value;
        eprintln!("[{label}] pair run with zeros for segments: attention max |Δ| {off:.2e}");
        assert!(off > 100.0 * ATTENTION_TOL, "[{label}] zeros give {off:e}");
    }
}

#[test]
fn tiny_albert_with_layer_groups_matches_hf() {
    // 4 layers over 2 groups of 2 inner layers: 8 attention maps per input.
    check_fixture("tiny-albert-groups", "tiny-albert-groups");
}

#[test]
fn tiny_electra_safetensors_matches_hf() {
    check_fixture("tiny-electra", "tiny-electra");
}

#[test]
fn tiny_electra_discriminator_bin_with_prefix_matches_hf() {
    // ElectraForPreTraining, as google/electra-small-discriminator ships.
    check_fixture("tiny-electra-mlm", "tiny-electra");
}
