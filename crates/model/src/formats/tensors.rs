//! Tensors by name, wherever they are stored: a checkpoint ([`Checkpoint`]) or a GGUF file
//! ([`TensorMap`]), behind one trait ([`Tensors`]); and the names themselves,
//! built from parts ([`Name`]) so that a family writes each of its names once.

use std::fmt;

use super::gguf::{gguf_expert_slice_for, gguf_tensor_name_for, GgufFile};
use super::validate::first_non_finite;
use super::weights::{Checkpoint, MatrixWeight, Weight};
use crate::error::{Error, InputError};

/// A module path inside a checkpoint, built from parts as candle's `VarBuilder::pp` builds one:
/// `Name::root().pp("encoder").pp("layer").pp(3)` is `encoder.layer.3`, whose tensors are
/// [`Name::weight`] (`encoder.layer.3.weight`) and [`Name::bias`]. A family keeps its names in
/// one table of these, which both its config checks and its loading read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Name(String);

impl Name {
    /// The empty path, inside which every name is built.
    pub fn root() -> Name {
        Name(String::new())
    }

    /// `self.part` (or `part` alone at the root): a module inside this one, or the index of a
    /// numbered one.
    pub fn pp(&self, part: impl fmt::Display) -> Name {
        if self.0.is_empty() {
            Name(part.to_string())
        } else {
            Name(format!("{}.{part}", self.0))
        }
    }

    /// The tensor `leaf` of this module (`….weight`, `….relative_attention_bias.weight`).
    pub fn tensor(&self, leaf: &str) -> String {
        self.pp(leaf).0
    }

    /// The module's `weight` tensor.
    pub fn weight(&self) -> String {
        self.tensor("weight")
    }

    /// The module's `bias` tensor.
    pub fn bias(&self) -> String {
        self.tensor("bias")
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a family reads its tensors, by the names transformers gives them inside the base model
/// (`layers.0.self_attn.q_proj.weight`): a checkpoint (whatever its key prefix) or a GGUF file's
/// dequantised tensors.
pub trait Tensors {
    /// Tensor `name`, checked to have `shape` and to be finite.
    fn weight(&self, name: &str, shape: &[usize]) -> Result<Weight, Error>;
    /// The shape of tensor `name`, if the source has it.
    fn shape(&self, name: &str) -> Option<Vec<usize>>;
    /// Matrix `name`, checked to have `shape` (`[outputs, inputs]`) and to be finite, as the
    /// source holds it: f32, or kept in its storage format where the kernels decode that
    /// (GGUF blocks, 16-bit floats).
    fn matrix(&self, name: &str, shape: &[usize]) -> Result<MatrixWeight, Error> {
        self.weight(name, shape).map(MatrixWeight::F32)
    }
    /// The language-model head stored outside the base model (`lm_head.weight`), when present,
    /// as [`Tensors::matrix`] reads it.
    fn lm_head(&self, shape: &[usize]) -> Result<Option<MatrixWeight>, Error>;
    /// Tensor `name` of unsigned bytes, checked to have `shape`, as stored (gpt-oss's MXFP4
    /// `*_blocks` and `*_scales` in a safetensors checkpoint); sources without such tensors
    /// say the tensor is missing.
    fn bytes(&self, name: &str, shape: &[usize]) -> Result<&[u8], Error> {
        let _ = shape;
        Err(InputError::NoTensor {
            origin: "this checkpoint".to_string(),
            name: name.to_string(),
        }
        .into())
    }
    /// Drop from the process the mapped pages of `bytes`, which [`Tensors::bytes`] gave and whose
    /// contents have been copied, so that the peak resident size does not count them on top of
    /// the copy. Sources that do not map their files do nothing.
    fn release_bytes(&self, bytes: &[u8]) {
        let _ = bytes;
    }
}

impl Tensors for Checkpoint {
    fn weight(&self, name: &str, shape: &[usize]) -> Result<Weight, Error> {
        Ok(Checkpoint::weight(self, name, shape)?)
    }

    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        self.shape_of(name).map(|(_, shape)| shape.to_vec())
    }

    fn matrix(&self, name: &str, shape: &[usize]) -> Result<MatrixWeight, Error> {
        Ok(Checkpoint::matrix(self, name, shape)?)
    }

    fn lm_head(&self, shape: &[usize]) -> Result<Option<MatrixWeight>, Error> {
        Ok(self
            .top_level_weight("lm_head.weight", shape)?
            .map(MatrixWeight::F32))
    }

    fn bytes(&self, name: &str, shape: &[usize]) -> Result<&[u8], Error> {
        Ok(Checkpoint::bytes(self, name, shape)?)
    }

    fn release_bytes(&self, bytes: &[u8]) {
        Checkpoint::release_bytes(self, bytes)
    }
}

/// A GGUF file's tensors under transformers' names (with the base model's `model.` prefix,
/// `lm_head.weight` outside it): matrices kept in their block format, in place in the file's
/// memory map ([`GgufFile::stored`]), everything else (norms, biases) dequantised to f32. One
/// expert's matrix under transformers' per-expert name (`layers.0.mlp.experts.5.gate_proj`) is
/// its slice of llama.cpp's merged tensor (`blk.0.ffn_gate_exps`, [`GgufFile::stored_slice`]).
pub struct TensorMap<'a> {
    file: &'a GgufFile,
    /// `general.architecture`, which decides the names' layout.
    arch: String,
    /// Named in errors.
    origin: String,
}

impl<'a> TensorMap<'a> {
    /// The tensors of `file`, named `origin` in messages.
    pub fn new(file: &'a GgufFile, origin: String) -> TensorMap<'a> {
        let arch = file.architecture().unwrap_or("llama").to_string();
        TensorMap { file, arch, origin }
    }

    /// The GGUF name of `full`, checked to be in the file with `shape`.
    fn locate(&self, full: &str, shape: &[usize]) -> Result<String, Error> {
        let missing = || InputError::NoTensor {
            origin: self.origin.clone(),
            name: full.to_string(),
        };
        let gguf = gguf_tensor_name_for(&self.arch, full).ok_or_else(missing)?;
        let info = self.file.tensor_info(&gguf).ok_or_else(missing)?;
        if info.shape != shape {
            return Err(InputError::TensorShape {
                origin: self.origin.clone(),
                name: full.to_string(),
                shape: info.shape.clone(),
                expected: shape.to_vec(),
            }
            .into());
        }
        Ok(gguf)
    }

    fn non_finite(&self, full: &str, index: usize, value: f32) -> Error {
        InputError::TensorNotFinite {
            origin: self.origin.clone(),
            name: full.to_string(),
            value,
            index,
        }
        .into()
    }

    fn take(&self, full: &str, shape: &[usize]) -> Result<Weight, Error> {
        let gguf = self.locate(full, shape)?;
        let t = self.file.dequantize(&gguf)?;
        if let Some(i) = first_non_finite(&t.data) {
            return Err(self.non_finite(full, i, t.data[i]));
        }
        Ok(Weight::owned(t.data, shape.to_vec()))
    }

    /// The merged tensor and expert index of the per-expert name `full`, checked to hold that
    /// expert as an `[outputs, inputs]` matrix of `shape`; `None` for other names.
    fn locate_expert(&self, full: &str, shape: &[usize]) -> Result<Option<(String, usize)>, Error> {
        let Some((gguf, expert)) = gguf_expert_slice_for(&self.arch, full) else {
            return Ok(None);
        };
        let info = self
            .file
            .tensor_info(&gguf)
            .ok_or_else(|| InputError::NoTensor {
                origin: self.origin.clone(),
                name: full.to_string(),
            })?;
        match info.shape.split_first() {
            Some((&n, rest)) if rest == shape && expert < n => Ok(Some((gguf, expert))),
            // Named as asked, with the merged tensor's shape and the one that would hold this
            // expert's matrix.
            _ => {
                let experts = info.shape.first().map_or(0, |&n| n).max(expert + 1);
                Err(InputError::TensorShape {
                    origin: self.origin.clone(),
                    name: full.to_string(),
                    shape: info.shape.clone(),
                    expected: [&[experts][..], shape].concat(),
                }
                .into())
            }
        }
    }

    fn take_matrix(&self, full: &str, shape: &[usize]) -> Result<MatrixWeight, Error> {
        if shape.len() != 2 {
            return self.take(full, shape).map(MatrixWeight::F32);
        }
        let m = match self.locate_expert(full, shape)? {
            Some((merged, expert)) => self.file.stored_slice(&merged, expert)?,
            None => self.file.stored(&self.locate(full, shape)?)?,
        };
        if let Some((i, value)) = m.first_non_finite() {
            return Err(self.non_finite(full, i, value));
        }
        Ok(MatrixWeight::Stored(m))
    }
}

impl Tensors for TensorMap<'_> {
    fn weight(&self, name: &str, shape: &[usize]) -> Result<Weight, Error> {
        self.take(&format!("model.{name}"), shape)
    }

    fn matrix(&self, name: &str, shape: &[usize]) -> Result<MatrixWeight, Error> {
        self.take_matrix(&format!("model.{name}"), shape)
    }

    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        let full = format!("model.{name}");
        if let Some((merged, expert)) = gguf_expert_slice_for(&self.arch, &full) {
            let shape = self.file.tensor_info(&merged)?.shape;
            return shape
                .split_first()
                .filter(|(n, _)| expert < **n)
                .map(|(_, rest)| rest.to_vec());
        }
        let gguf = gguf_tensor_name_for(&self.arch, &full)?;
        self.file.tensor_info(&gguf).map(|t| t.shape)
    }

    fn lm_head(&self, shape: &[usize]) -> Result<Option<MatrixWeight>, Error> {
        if !self.file.has_tensor("output.weight") {
            return Ok(None);
        }
        self.take_matrix("lm_head.weight", shape).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_built_from_parts() {
        let layer = Name::root().pp("encoder").pp("layer").pp(3);
        assert_eq!(&*layer, "encoder.layer.3");
        assert_eq!(
            layer.pp("attention").weight(),
            "encoder.layer.3.attention.weight"
        );
        assert_eq!(layer.bias(), "encoder.layer.3.bias");
        assert_eq!(Name::root().weight(), "weight");
        assert_eq!(Name::root().pp("shared").weight(), "shared.weight");
        assert_eq!(
            layer.tensor("relative_attention_bias.weight"),
            "encoder.layer.3.relative_attention_bias.weight"
        );
    }
}
