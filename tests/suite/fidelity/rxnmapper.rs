//! A real non-BERT checkpoint offline: rxnmapper's ALBERT (AlbertForMaskedLM, a pre-1.6 pickle
//! `pytorch_model.bin` with the `albert.` prefix; 12 layers sharing one, hidden 256, embedding
//! 128, 8 heads) with its SMILES tokenizer, against transformers on three reaction SMILES
//! (`tests/reference/make_real.py`). Needs `scripts/fetch-rxnmapper.sh`; fails, never skips,
//! without it.

use std::collections::HashMap;

use attnviz::model::{EncodeOptions, Model};
use candle_core::Device;
use serde::Deserialize;

use super::reference::{layer_head_pos, ok, repo, row_col, MaxDiff, TensorRef};
use super::reference::{ATTENTION_TOL, HIDDEN_TOL, QUERY_KEY_TOL};
use crate::support::models::rxnmapper::rxnmapper_dir;

#[derive(Debug, Deserialize)]
struct Case {
    name: String,
    text: String,
    tokens: Vec<String>,
    input_ids: Vec<u32>,
    token_type_ids: Vec<u32>,
    special_tokens_mask: Vec<u8>,
    unknown: Vec<String>,
    n: usize,
    attentions: Option<TensorRef>,
    rows: Option<TensorRef>,
    attentions_rows: Option<TensorRef>,
    #[serde(default)]
    qk_layers: Vec<usize>,
    query: Option<TensorRef>,
    key: Option<TensorRef>,
    hidden: TensorRef,
}

#[derive(Debug, Deserialize)]
struct Manifest {
    config: HashMap<String, serde_json::Value>,
    tensors: String,
    cases: Vec<Case>,
}

struct Reference {
    manifest: Manifest,
    tensors: HashMap<String, candle_core::Tensor>,
}

impl Reference {
    fn load() -> Reference {
        let dir = repo().join("tests/reference");
        let text = ok(
            std::fs::read_to_string(dir.join("rxnmapper.json")),
            "rxnmapper.json",
        );
        let manifest: Manifest = ok(serde_json::from_str(&text), "rxnmapper.json");
        let tensors = ok(
            candle_core::safetensors::load(dir.join(&manifest.tensors), &Device::Cpu),
            &manifest.tensors,
        );
        Reference { manifest, tensors }
    }

    fn f32s(&self, t: &TensorRef) -> Vec<f32> {
        let v = &self.tensors[&t.tensor];
        assert_eq!(v.dims(), t.shape.as_slice(), "{}", t.tensor);
        ok(v.flatten_all().and_then(|v| v.to_vec1::<f32>()), &t.tensor)
    }

    fn rows(&self, t: &TensorRef) -> Vec<usize> {
        let v = &self.tensors[&t.tensor];
        assert_eq!(v.dims(), t.shape.as_slice(), "{}", t.tensor);
        let v = ok(
            v.to_dtype(candle_core::DType::I64)
                .and_then(|v| v.flatten_all())
                .and_then(|v| v.to_vec1::<i64>()),
            &t.tensor,
        );
        v.into_iter().map(|r| r as usize).collect()
    }

    fn count(&self, field: &str) -> usize {
        self.manifest.config[field].as_u64().expect(field) as usize
    }
}

#[test]
fn rxnmapper_albert_matches_transformers_on_reaction_smiles() {
    let reference = Reference::load();
    let model = ok(Model::from_dir(&rxnmapper_dir()), "loading rxnmapper");
    let arch = model.architecture();
    assert_eq!(arch.family, "ALBERT");
    let (layers, heads, hidden, d) = (
        reference.count("layers"),
        reference.count("heads"),
        reference.count("hidden_size"),
        reference.count("head_dim"),
    );
    assert_eq!(
        (arch.layers, arch.heads, arch.hidden_size, arch.head_dim),
        (layers, heads, hidden, d)
    );
    let unk = 11;
    let mut problems = Vec::new();
    for case in &reference.manifest.cases {
        let label = format!("[rxnmapper] {}", case.name);
        // The SMILES tokenizer: regex pieces looked up whole, [CLS] … [SEP].
        let enc = ok(
            model.tokenizer().encode(&case.text, None, 512, false),
            format!("{label}: tokenize"),
        );
        assert_eq!(enc.ids, case.input_ids, "{label}: ids");
        assert_eq!(enc.type_ids, case.token_type_ids, "{label}: type ids");
        let special: Vec<bool> = case.special_tokens_mask.iter().map(|&m| m == 1).collect();
        assert_eq!(enc.special, special, "{label}: special tokens");
        for ((ours, theirs), &id) in enc.tokens.iter().zip(&case.tokens).zip(&case.input_ids) {
            // Unknown pieces: transformers keeps their text, the tokenizers library says [UNK].
            assert!(
                ours == theirs || id == unk,
                "{label}: token {ours} vs {theirs}"
            );
        }
        let unknown: Vec<&String> = case
            .tokens
            .iter()
            .zip(&enc.ids)
            .filter(|(_, &id)| id == unk)
            .map(|(t, _)| t)
            .collect();
        assert_eq!(
            unknown,
            case.unknown.iter().collect::<Vec<_>>(),
            "{label}: unknown"
        );

        let n = case.n;
        let out = ok(
            model.forward(&case.input_ids, &case.token_type_ids, true),
            format!("{label}: forward"),
        );
        // Attention: every row where the reference has them all, else 8 rows per layer and head
        // (always the first and last), against their whole rows.
        let mut worst = MaxDiff::default();
        let mut at = String::new();
        let mut compared = 0;
        let mut check_row = |l: usize, h: usize, r: usize, theirs: &[f32]| {
            let ours = &out.weights[((l * heads + h) * n + r) * n..][..n];
            let m = MaxDiff::of(ours, theirs);
            compared += 1;
            if m.value > worst.value {
                worst = m;
                at = format!("layer {l} head {h} query {r} key {}", m.index);
            }
        };
        if let Some(full) = &case.attentions {
            let all = reference.f32s(full);
            for l in 0..layers {
                for h in 0..heads {
                    for r in 0..n {
                        check_row(l, h, r, &all[((l * heads + h) * n + r) * n..][..n]);
                    }
                }
            }
        } else {
            let rows = reference.rows(case.rows.as_ref().unwrap());
            let values = reference.f32s(case.attentions_rows.as_ref().unwrap());
            let per = rows.len() / (layers * heads);
            for l in 0..layers {
                for h in 0..heads {
                    for i in 0..per {
                        let k = (l * heads + h) * per + i;
                        check_row(l, h, rows[k], &values[k * n..][..n]);
                    }
                }
            }
        }
        let hidden_ref = reference.f32s(&case.hidden);
        let hid = MaxDiff::of(&out.hidden, &hidden_ref);
        eprintln!(
            "{label:<34} n={n:<3} attention max |Δ| {:.2e} ({at}, {compared} rows); hidden max |Δ| {:.2e} ({})",
            worst.value,
            hid.value,
            row_col(hid.index, hidden)
        );
        if worst.exceeds(ATTENTION_TOL) {
            problems.push(format!(
                "{label}: attention max |Δ| {:.3e} at {at}",
                worst.value
            ));
        }
        if hid.exceeds(HIDDEN_TOL) {
            problems.push(format!("{label}: hidden max |Δ| {:.3e}", hid.value));
        }
        // Query/key vectors of the layers the reference kept.
        if let (Some(q), Some(k)) = (&case.query, &case.key) {
            let qk = out.query_key.as_ref().unwrap();
            let per_layer = heads * n * d;
            let pick = |all: &[f32]| -> Vec<f32> {
                case.qk_layers
                    .iter()
                    .flat_map(|&l| all[l * per_layer..][..per_layer].to_vec())
                    .collect()
            };
            for (what, ours, theirs) in [
                ("query", pick(&qk.queries), reference.f32s(q)),
                ("key", pick(&qk.keys), reference.f32s(k)),
            ] {
                let m = MaxDiff::of(&ours, &theirs);
                let at = layer_head_pos(m.index, heads, n, d);
                eprintln!(
                    "{label:<34} {what} (layers {:?}) max |Δ| {:.2e} ({at})",
                    case.qk_layers, m.value
                );
                if m.exceeds(QUERY_KEY_TOL) {
                    problems.push(format!("{label}: {what} max |Δ| {:.3e} at {at}", m.value));
                }
            }
        }
        // The whole pipeline gives the same numbers.
        let encoded = ok(
            model.encode(&case.text, None, &EncodeOptions::default()),
            format!("{label}: encode"),
        );
        assert_eq!(
            encoded.attention.weights(),
            out.weights.as_slice(),
            "{label}: encode"
        );
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
