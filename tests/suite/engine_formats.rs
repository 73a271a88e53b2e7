//! The same tiny random BERT saved by PyTorch as safetensors, as a zip `pytorch_model.bin`, and
//! as a legacy (pre-1.6) pickle `pytorch_model.bin` (the last two with the `bert.` prefix,
//! gamma/beta names and ignorable extras); written by tests/fixtures/checkpoint_formats/make.py.
//! All three must read as identical tensors, and so give the same encoder.

use std::path::PathBuf;

use attnviz::model::Model;

use crate::support::engine::{assert_same_forward, assert_same_tensors};

fn fixture(name: &str) -> PathBuf {
    crate::support::cli::fixture("checkpoint_formats").join(name)
}

#[test]
fn safetensors_zip_and_legacy_pickle_agree() {
    // [CLS] the cat sat on the mat . [SEP] it was tired [SEP]
    let ids = [2u32, 5, 6, 7, 8, 5, 9, 13, 3, 17, 18, 19, 3];
    let types = [0u32, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1];
    let run = |name: &str| {
        let model = Model::from_dir(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        model.forward(&ids, &types, true).unwrap()
    };
    let st = run("safetensors");
    assert_eq!(st.weights.len(), 2 * 2 * 13 * 13);
    for name in ["zip", "legacy"] {
        assert_same_tensors(&fixture("safetensors"), &fixture(name));
        assert_same_forward(&st, &run(name), name);
    }
}
