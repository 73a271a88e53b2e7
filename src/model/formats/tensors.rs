//! Tensors by name, wherever they are stored: a checkpoint ([`Checkpoint`]) or a GGUF file's
//! dequantised tensors ([`TensorMap`]), behind one trait ([`Tensors`]); and the names themselves,
//! built from parts ([`Name`]) so that a family writes each of its names once.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;

use super::validate::first_non_finite;
use super::weights::{Checkpoint, Weight};
use crate::model::error::Error;

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
    /// The language-model head stored outside the base model (`lm_head.weight`), when present.
    fn lm_head(&self, shape: &[usize]) -> Result<Option<Weight>, Error>;
}

impl Tensors for Checkpoint {
    fn weight(&self, name: &str, shape: &[usize]) -> Result<Weight, Error> {
        Ok(Checkpoint::weight(self, name, shape)?)
    }

    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        self.shape_of(name).map(|(_, shape)| shape.to_vec())
    }

    fn lm_head(&self, shape: &[usize]) -> Result<Option<Weight>, Error> {
        Ok(self.top_level_weight("lm_head.weight", shape)?)
    }
}

/// Tensors by name: shape and row-major values.
pub type NamedTensors = BTreeMap<String, (Vec<usize>, Vec<f32>)>;

/// Tensors already in memory (a GGUF file's, dequantised), taken out by name as they are used,
/// under transformers' names with the base model's `model.` prefix.
pub struct TensorMap {
    tensors: RefCell<NamedTensors>,
    /// Named in errors.
    origin: String,
}

impl TensorMap {
    /// `tensors` by transformers' full name (`model.layers.0.self_attn.q_proj.weight`), from
    /// `origin` (a file, for messages).
    pub fn new(tensors: NamedTensors, origin: String) -> TensorMap {
        TensorMap {
            tensors: RefCell::new(tensors),
            origin,
        }
    }

    fn take(&self, full: &str, shape: &[usize]) -> Result<Weight, Error> {
        let (found, values) = self
            .tensors
            .borrow_mut()
            .remove(full)
            .ok_or_else(|| Error::Input(format!("{} has no tensor {full}", self.origin)))?;
        if found != shape {
            return Err(Error::Input(format!(
                "{}: tensor {full} has shape {found:?}, expected {shape:?}",
                self.origin
            )));
        }
        if let Some(i) = first_non_finite(&values) {
            return Err(Error::Input(format!(
                "{}: tensor {full} holds {} at index {i}; the file is damaged",
                self.origin, values[i]
            )));
        }
        Ok(Weight::owned(values, shape.to_vec()))
    }
}

impl Tensors for TensorMap {
    fn weight(&self, name: &str, shape: &[usize]) -> Result<Weight, Error> {
        self.take(&format!("model.{name}"), shape)
    }

    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        self.tensors
            .borrow()
            .get(&format!("model.{name}"))
            .map(|(shape, _)| shape.clone())
    }

    fn lm_head(&self, shape: &[usize]) -> Result<Option<Weight>, Error> {
        if !self.tensors.borrow().contains_key("lm_head.weight") {
            return Ok(None);
        }
        self.take("lm_head.weight", shape).map(Some)
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
