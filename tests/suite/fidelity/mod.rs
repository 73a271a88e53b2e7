//! Fidelity: our BERT against Hugging Face transformers (and candle-transformers), every layer and
//! every head.
//!
//! References come from `tests/reference/make_reference.py` (HF transformers, eager attention,
//! float32), committed as `tests/reference/*.{json,safetensors}`. The real-model tests need
//! all-MiniLM-L6-v2: run `scripts/fetch-minilm.sh` first (or set `ATTNVIZ_MINILM_DIR`); they fail,
//! never skip, without it. Run in release (`cargo test --release --test suite fidelity:: -- --nocapture`
//! prints the max |Δ| of every case).

mod decoders;
mod deepseek;
pub mod families;
mod gguf_hybrid;
mod gguf_moe;
mod gguf_quantized;
mod gpt_oss;
mod moe;
mod multimodal;
mod oracle;
mod qwen3_5;
mod qwen3_next;
pub mod reference;
mod rxnmapper;
mod seq2seq;
mod smollm2;
mod vision;
mod whisper;

use std::path::Path;

use attnviz::model::{Forward, Model};
use attnviz::tokenize::TextTokenizer;

use oracle::Oracle;
use reference::{
    compare_attention, fixture, layer_head_pos, minilm_dir, ok, row_col, Case, MaxDiff, Reference,
    ATTENTION_TOL, HIDDEN_TOL, QUERY_KEY_TOL,
};

fn load_model(dir: &Path) -> Model {
    ok(Model::from_dir(dir), format!("loading {}", dir.display()))
}

/// The model's shape must be the one the references were made with.
fn check_info(model: &Model, reference: &Reference) {
    let info = model.info();
    let want = &reference.config;
    assert_eq!(
        (info.layers, info.heads, info.hidden_size, info.head_dim),
        (want.layers, want.heads, want.hidden_size, want.head_dim),
        "[{}] model shape (layers, heads, hidden, head_dim)",
        reference.label
    );
    assert_eq!(
        model.max_positions(),
        want.max_position_embeddings,
        "[{}] max positions",
        reference.label
    );
}

/// Our tokenizer must give exactly HF's tokens, ids, type ids and special-token flags, and report
/// truncation with the untruncated length. Returns the mismatches.
fn check_tokenization(tokenizer: &TextTokenizer, label: &str, case: &Case) -> Vec<String> {
    let what = format!("[{label}] {}", case.name);
    let enc = ok(
        tokenizer.encode(
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
    expect(
        "tokens",
        enc.tokens == case.tokens,
        format!("{:?}", enc.tokens),
        format!("{:?}", case.tokens),
    );
    expect(
        "token type ids",
        enc.type_ids == case.token_type_ids,
        format!("{:?}", enc.type_ids),
        format!("{:?}", case.token_type_ids),
    );
    let hf_special: Vec<bool> = case.special_tokens_mask.iter().map(|&m| m == 1).collect();
    expect(
        "special-token flags",
        enc.special == hf_special,
        format!("{:?}", enc.special),
        format!("{hf_special:?}"),
    );
    // Our word ids run across the pair (sentence B's words continue after A's); HF numbers each
    // sentence from 0. Shift HF's sentence-B ids by A's word count to compare.
    let words_in_a = case
        .word_ids
        .iter()
        .zip(&case.token_type_ids)
        .filter(|(_, &t)| t == 0)
        .filter_map(|(w, _)| w.map(|w| w + 1))
        .max()
        .unwrap_or(0);
    let hf_words: Vec<Option<usize>> = case
        .word_ids
        .iter()
        .zip(&case.token_type_ids)
        .map(|(w, &t)| w.map(|w| if t == 1 { w + words_in_a } else { w }))
        .collect();
    expect(
        "word ids",
        enc.word_ids == hf_words,
        format!("{:?}", enc.word_ids),
        format!("{hf_words:?}"),
    );
    let hf_truncated = case.truncate.then_some(case.untruncated_len);
    expect(
        "truncated_from",
        enc.truncated_from == hf_truncated,
        format!("{:?}", enc.truncated_from),
        format!("{hf_truncated:?}"),
    );
    problems
}

/// Runs our forward pass on HF's ids and compares every layer and head's attention and the last
/// hidden state. Returns the mismatches.
fn check_forward(model: &Model, reference: &Reference, case: &Case) -> Vec<String> {
    let out = ok(
        model.forward(&case.input_ids, &case.token_type_ids, false),
        format!("[{}] {}: forward", reference.label, case.name),
    );
    compare_forward(reference, case, &out, "")
}

/// Compares one forward output with HF's attention (every layer and head) and last hidden state;
/// prints the largest |Δ| and returns the mismatches.
fn compare_forward(reference: &Reference, case: &Case, out: &Forward, how: &str) -> Vec<String> {
    let label = &reference.label;
    let (attn_ref, hidden_ref) = match (&case.attentions, &case.hidden) {
        (Some(a), Some(h)) => (reference.values(a), reference.values(h)),
        _ => panic!("[{label}] {}: no reference tensors", case.name),
    };
    let name = format!("{}{how}", case.name);
    let cfg = &reference.config;
    let n = case.n;
    let (attn, mut problems) = compare_attention(&out.weights, &attn_ref, cfg.layers, cfg.heads, n);
    for line in &mut problems {
        *line = format!("[{label}] {name} attention {line}");
    }
    assert_eq!(
        out.hidden.len(),
        n * cfg.hidden_size,
        "[{label}] {name}: hidden size"
    );
    let hidden = MaxDiff::of(&out.hidden, &hidden_ref);
    let attn_at = layer_head_pos(attn.index, cfg.heads, n, n).replace("component", "key");
    let hidden_at = row_col(hidden.index, cfg.hidden_size);
    eprintln!(
        "[{label}] {name:<24} n={n:<4} attention max |Δ| {:.2e} ({attn_at}); hidden max |Δ| {:.2e} ({hidden_at})",
        attn.value, hidden.value
    );
    if hidden.exceeds(HIDDEN_TOL) {
        problems.push(format!(
            "[{label}] {name} last hidden state: max |Δ| {:.3e} > {HIDDEN_TOL:e} at {hidden_at} \
             (ours {}, HF {})",
            hidden.value, out.hidden[hidden.index], hidden_ref[hidden.index]
        ));
    }
    problems
}

/// All reference cases in one padded batch: the padding mask must leave every sequence's
/// attention and hidden state equal to HF's unpadded run.
fn check_padded_batch(dir: &Path, reference: &Reference) {
    let model = load_model(dir);
    let batch: Vec<(&[u32], &[u32])> = reference
        .cases
        .iter()
        .map(|c| (c.input_ids.as_slice(), c.token_type_ids.as_slice()))
        .collect();
    let lengths: Vec<usize> = reference.cases.iter().map(|c| c.n).collect();
    assert!(
        lengths.iter().min() < lengths.iter().max(),
        "[{}] the batch needs sequences of different lengths to exercise padding",
        reference.label
    );
    let outs = ok(model.forward_batch(&batch, false), "forward_batch");
    assert_eq!(
        outs.len(),
        batch.len(),
        "forward_batch returned the wrong number of outputs"
    );
    let mut problems = Vec::new();
    for (case, out) in reference.cases.iter().zip(&outs) {
        problems.extend(compare_forward(reference, case, out, " (padded batch)"));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Tokenization and forward pass of every reference case, then tokenization of the
/// tokenize-only cases. Panics listing every mismatch.
fn check_all(dir: &Path, reference: &Reference) {
    let model = load_model(dir);
    check_info(&model, reference);
    let mut problems = Vec::new();
    for case in &reference.cases {
        problems.extend(check_tokenization(
            model.tokenizer(),
            &reference.label,
            case,
        ));
        problems.extend(check_forward(&model, reference, case));
    }
    for case in &reference.tokenize_only {
        problems.extend(check_tokenization(
            model.tokenizer(),
            &reference.label,
            case,
        ));
    }
    assert!(
        problems.is_empty(),
        "{} problem(s) against HF transformers (attention tolerance {ATTENTION_TOL:e}, hidden \
         {HIDDEN_TOL:e}):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The captured query and key vectors must be HF's query/key projections, per layer and head.
fn check_query_key(dir: &Path, reference: &Reference) {
    let model = load_model(dir);
    let cfg = &reference.config;
    let label = &reference.label;
    let mut problems = Vec::new();
    let mut checked = 0;
    for case in &reference.cases {
        let (Some(q_ref), Some(k_ref)) = (&case.query, &case.key) else {
            continue;
        };
        let out = ok(
            model.forward(&case.input_ids, &case.token_type_ids, true),
            format!("[{label}] {}: forward with query/key", case.name),
        );
        let qk = out.query_key.unwrap_or_else(|| {
            panic!(
                "[{label}] {}: query/key requested, none returned",
                case.name
            )
        });
        let at = |d: MaxDiff| layer_head_pos(d.index, cfg.heads, case.n, cfg.head_dim);
        let q = MaxDiff::of(&qk.queries, &reference.values(q_ref));
        let k = MaxDiff::of(&qk.keys, &reference.values(k_ref));
        // Capturing must not change the attention itself.
        let (attn, attn_problems) = compare_attention(
            &out.weights,
            &reference.values(case.attentions.as_ref().unwrap()),
            cfg.layers,
            cfg.heads,
            case.n,
        );
        eprintln!(
            "[{label}] {:<24} query max |Δ| {:.2e} ({}); key max |Δ| {:.2e} ({}); attention with capture {:.2e}",
            case.name, q.value, at(q), k.value, at(k), attn.value
        );
        for (name, d) in [("query", q), ("key", k)] {
            if d.exceeds(QUERY_KEY_TOL) {
                problems.push(format!(
                    "[{label}] {} {name}: max |Δ| {:.3e} > {QUERY_KEY_TOL:e} at {}",
                    case.name,
                    d.value,
                    at(d)
                ));
            }
        }
        problems.extend(
            attn_problems
                .into_iter()
                .map(|p| format!("[{label}] {} attention with capture: {p}", case.name)),
        );
        checked += 1;
    }
    assert!(checked > 0, "[{label}] no case has query/key references");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Our last hidden state against candle-transformers' BertModel on the same weights files, and
/// that oracle against HF (so a disagreement can be placed).
fn check_oracle(dir: &Path, reference: &Reference) {
    let model = load_model(dir);
    let oracle = Oracle::load(dir);
    let label = &reference.label;
    let h = reference.config.hidden_size;
    let mut problems = Vec::new();
    for case in &reference.cases {
        let ours = ok(
            model.forward(&case.input_ids, &case.token_type_ids, false),
            format!("[{label}] {}: forward", case.name),
        )
        .hidden;
        let theirs = oracle.hidden(&case.input_ids, &case.token_type_ids);
        let hf = reference.values(case.hidden.as_ref().unwrap());
        let d = MaxDiff::of(&ours, &theirs);
        let d_hf = MaxDiff::of(&theirs, &hf);
        eprintln!(
            "[{label}] {:<24} hidden max |Δ| ours vs candle-transformers {:.2e} ({}); candle-transformers vs HF {:.2e}",
            case.name,
            d.value,
            row_col(d.index, h),
            d_hf.value
        );
        if d.exceeds(HIDDEN_TOL) {
            problems.push(format!(
                "[{label}] {}: ours vs candle-transformers max |Δ| {:.3e} > {HIDDEN_TOL:e} at {}",
                case.name,
                d.value,
                row_col(d.index, h)
            ));
        }
        if d_hf.exceeds(HIDDEN_TOL) {
            problems.push(format!(
                "[{label}] {}: the oracle itself is off: candle-transformers vs HF max |Δ| {:.3e}",
                case.name, d_hf.value
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// (a) The tiny random BERT made by make_reference.py
// ---------------------------------------------------------------------------------------------

#[test]
fn tiny_bert_safetensors_matches_hf() {
    check_all(&fixture("tiny-bert"), &Reference::load("tiny-bert"));
}

#[test]
fn tiny_bert_legacy_bin_matches_hf() {
    // pytorch_model.bin (torch zip format), `bert.` prefix, LayerNorm gamma/beta, cls.* heads,
    // int64 position_ids, config.json in transformers-5.x style. Same weights, same references.
    check_all(&fixture("tiny-bert-legacy"), &Reference::load("tiny-bert"));
}

#[test]
fn tiny_bert_pre_1_6_pickle_matches_hf() {
    // The legacy checkpoint again, saved with `_use_new_zipfile_serialization=False`.
    check_all(&fixture("tiny-bert-pickle"), &Reference::load("tiny-bert"));
}

#[test]
fn tiny_bert_padded_batch_matches_hf() {
    check_padded_batch(&fixture("tiny-bert"), &Reference::load("tiny-bert"));
}

#[test]
fn tiny_bert_query_key_match_hf() {
    check_query_key(&fixture("tiny-bert"), &Reference::load("tiny-bert"));
}

#[test]
fn tiny_bert_matches_candle_transformers() {
    check_oracle(&fixture("tiny-bert"), &Reference::load("tiny-bert"));
}

#[test]
fn tiny_bert_legacy_matches_candle_transformers() {
    check_oracle(&fixture("tiny-bert-legacy"), &Reference::load("tiny-bert"));
}

// ---------------------------------------------------------------------------------------------
// (b) The real all-MiniLM-L6-v2
// ---------------------------------------------------------------------------------------------

#[test]
fn minilm_matches_hf_on_every_sentence() {
    let reference = Reference::load("minilm");
    let paragraph = reference.cases.iter().map(|c| c.n).max().unwrap_or(0);
    assert!(
        paragraph >= 200,
        "the references need a paragraph of 200+ tokens, longest is {paragraph}"
    );
    check_all(&minilm_dir(), &reference);
}

#[test]
fn minilm_vocab_txt_tokenizer_matches_hf() {
    // The vocab.txt path (used when a model has no tokenizer.json) on the real 30522-entry
    // vocabulary: accents, CJK, emoji, pairs and truncation must come out as HF's tokenizer says.
    let reference = Reference::load("minilm");
    let tokenizer = ok(
        TextTokenizer::from_vocab(&minilm_dir()),
        "building the tokenizer from vocab.txt",
    );
    let problems: Vec<String> = reference
        .cases
        .iter()
        .chain(&reference.tokenize_only)
        .flat_map(|case| check_tokenization(&tokenizer, "minilm vocab.txt", case))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn minilm_padded_batch_matches_hf() {
    check_padded_batch(&minilm_dir(), &Reference::load("minilm"));
}

#[test]
fn minilm_query_key_match_hf() {
    check_query_key(&minilm_dir(), &Reference::load("minilm"));
}

#[test]
fn minilm_matches_candle_transformers() {
    check_oracle(&minilm_dir(), &Reference::load("minilm"));
}
