//! Our encoder against an independent implementation: candle-transformers' BertModel (a
//! dev-dependency, never in attnviz's forward path), on tiny random checkpoints with each
//! supported activation.

use crate::support::engine as engine_support;

use attnviz::model::Model;
use candle_core::{DType, Device, Tensor};
use candle_transformers::models::bert::{BertModel, Config, HiddenAct, PositionEmbeddingType};
use engine_support::*;

fn oracle_hidden(
    tiny: &Tiny,
    tensors: &[(String, Tensor)],
    act: HiddenAct,
    ids: &[u32],
    types: &[u32],
) -> Vec<f32> {
    let config = Config {
        vocab_size: tiny.vocab,
        hidden_size: tiny.hidden,
        num_hidden_layers: tiny.layers,
        num_attention_heads: tiny.heads,
        intermediate_size: tiny.intermediate,
        hidden_act: act,
        hidden_dropout_prob: 0.0,
        max_position_embeddings: tiny.positions,
        type_vocab_size: tiny.types,
        initializer_range: 0.02,
        layer_norm_eps: 1e-12,
        pad_token_id: 0,
        position_embedding_type: PositionEmbeddingType::Absolute,
        use_cache: false,
        classifier_dropout: None,
        model_type: Some("bert".into()),
    };
    let map = tensors.iter().cloned().collect();
    let vb = candle_nn::VarBuilder::from_tensors(map, DType::F32, &Device::Cpu);
    let model = BertModel::load(vb, &config).unwrap();
    let ids = Tensor::new(ids, &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let types = Tensor::new(types, &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    model
        .forward(&ids, &types, None)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap()
}

#[test]
fn hidden_state_matches_candle_transformers_for_each_activation() {
    let ids = [2u32, 5, 6, 7, 8, 5, 9, 13, 3, 17, 18, 19, 21, 22, 23, 3];
    let types = [0u32, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1];
    let tiny = Tiny::default();
    for (seed, (name, act)) in [
        ("gelu", HiddenAct::Gelu),
        ("gelu_new", HiddenAct::GeluApproximate),
        ("gelu_pytorch_tanh", HiddenAct::GeluApproximate),
        ("relu", HiddenAct::Relu),
    ]
    .into_iter()
    .enumerate()
    {
        let tmp = tempfile::tempdir().unwrap();
        let tensors = tiny_tensors(&tiny, 100 + seed as u64);
        write_model(tmp.path(), &tiny_config(&tiny, name), &tensors);
        let ours = Model::from_dir(tmp.path())
            .unwrap()
            .forward(&ids, &types, false)
            .unwrap();
        let want = oracle_hidden(&tiny, &tensors, act, &ids, &types);
        let diff = max_diff(&ours.hidden, &want);
        assert!(diff <= 1e-5, "{name}: max |Δ| {diff}");
    }
    // The activations differ enough that a mix-up would show.
    let tensors = tiny_tensors(&tiny, 100);
    let erf = oracle_hidden(&tiny, &tensors, HiddenAct::Gelu, &ids, &types);
    let tanh = oracle_hidden(&tiny, &tensors, HiddenAct::GeluApproximate, &ids, &types);
    assert!(max_diff(&erf, &tanh) > 1e-4);
}
