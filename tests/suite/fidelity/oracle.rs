//! candle-transformers' BertModel as a second, independent oracle for the last hidden state.
//!
//! It is never in attnviz's forward path (issue 2, requirement 5); here it only reads the same
//! weights files and runs its own BERT.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};

use super::reference::{ok, weights_file};

/// candle-transformers' BERT loaded from a model folder.
pub struct Oracle {
    model: BertModel,
}

impl Oracle {
    /// Loads config.json and the weights (model.safetensors or pytorch_model.bin) of `dir`.
    pub fn load(dir: &Path) -> Oracle {
        let config_path = dir.join("config.json");
        let text = ok(std::fs::read_to_string(&config_path), config_path.display());
        let mut config: Config = ok(serde_json::from_str(&text), config_path.display());
        // Needed for it to find `bert.`-prefixed keys; all our fixtures are BERT.
        config.model_type.get_or_insert_with(|| "bert".to_string());
        let file = weights_file(dir);
        let vb = if file.extension().is_some_and(|e| e == "safetensors") {
            // SAFETY: the file is a committed fixture or the verified model; nothing modifies it
            // while the test runs.
            ok(
                unsafe { VarBuilder::from_mmaped_safetensors(&[&file], DType::F32, &Device::Cpu) },
                file.display(),
            )
        } else {
            ok(
                VarBuilder::from_pth(&file, DType::F32, &Device::Cpu),
                file.display(),
            )
        };
        let model = ok(BertModel::load(vb, &config), dir.display());
        Oracle { model }
    }

    /// Last hidden state `[n, hidden]`, flattened.
    pub fn hidden(&self, ids: &[u32], type_ids: &[u32]) -> Vec<f32> {
        let run = || -> candle_core::Result<Vec<f32>> {
            let ids = Tensor::new(ids, &Device::Cpu)?.unsqueeze(0)?;
            let type_ids = Tensor::new(type_ids, &Device::Cpu)?.unsqueeze(0)?;
            self.model
                .forward(&ids, &type_ids, None)?
                .squeeze(0)?
                .flatten_all()?
                .to_vec1::<f32>()
        };
        ok(run(), "candle-transformers BertModel forward")
    }
}
