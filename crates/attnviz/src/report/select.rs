//! [`Choose`]: the layer and head a run's single-head outputs show, checked against the
//! attention (or the model) that has them.

use crate::attention::{Attention, AttentionKind, HeadSel, ModelInfo, Selection, SelectionError};

/// The layer and head asked for, before they are checked against an attention's own layers and
/// heads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choose {
    /// The layer, by its number in the model; `None`: the last (captured) one.
    pub layer: Option<usize>,
    /// The head, or the mean over heads.
    pub head: HeadSel,
    /// The layers the run captures (ascending), when it captures only some: the layer must be
    /// one of them, and the selection is its place among them.
    pub captured: Option<Vec<usize>>,
}

impl Default for Choose {
    fn default() -> Self {
        Choose {
            layer: None,
            head: HeadSel::Mean,
            captured: None,
        }
    }
}

/// Which list of layers a [`SelectionFault::NotAmong`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Among {
    /// The layers a run captures ([`Choose::captured`]).
    Captured,
    /// The layers a file holds.
    File,
}

/// A selection that does not fit the attention. `name` names the attention (the model, or the
/// model's kind of attention).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectionFault {
    /// A layer to capture that the model does not have.
    #[error("captured layer {layer} is out of range: {name} has {layers} layers")]
    CapturedOutOfRange {
        /// The attention's name.
        name: String,
        /// The layer asked for.
        layer: usize,
        /// How many there are.
        layers: usize,
    },
    /// The layer is not one of those captured or held.
    #[error("layer {layer} is not among the layers {numbers:?}")]
    NotAmong {
        /// The layer asked for.
        layer: usize,
        /// The layers there are.
        numbers: Vec<usize>,
        /// Which list they are.
        among: Among,
    },
    /// The layer is out of range.
    #[error("layer {layer} is out of range: {name} has {layers} layers")]
    Layer {
        /// The attention's name.
        name: String,
        /// The layer asked for.
        layer: usize,
        /// How many there are.
        layers: usize,
    },
    /// The head is out of range.
    #[error("head {head} is out of range: {name} has {heads} heads")]
    Head {
        /// The attention's name.
        name: String,
        /// The head asked for.
        head: usize,
        /// How many there are per layer.
        heads: usize,
    },
}

impl Choose {
    /// The selection over the attention of `kind` of a model described by `info` (an
    /// encoder–decoder's kinds have their own layer and head counts).
    pub fn of(&self, info: &ModelInfo, kind: AttentionKind) -> Result<Selection, SelectionFault> {
        let name = match kind {
            AttentionKind::SelfAttention => info.name().to_string(),
            AttentionKind::Cross => format!("{}'s cross-attention", info.name()),
            k => format!("{}'s {}", info.name(), k.as_str()),
        };
        if let Some(layers) = &self.captured {
            if let Some(&layer) = layers.iter().find(|&&l| l >= info.layers) {
                return Err(SelectionFault::CapturedOutOfRange {
                    name,
                    layer,
                    layers: info.layers,
                });
            }
            let captured = ModelInfo {
                layers: layers.len(),
                ..info.clone()
            };
            return self.among_named(&name, &captured, layers, Among::Captured);
        }
        let layer = self.layer.unwrap_or(info.layers.saturating_sub(1));
        check(&name, info, Selection::new(layer, self.head))
    }

    /// The selection over attention that holds only the model's layers `numbers` (`info` has
    /// that many): the layer is one of them (default: the last), and the selection is its place
    /// among them.
    pub fn among(
        &self,
        info: &ModelInfo,
        numbers: &[usize],
        among: Among,
    ) -> Result<Selection, SelectionFault> {
        self.among_named(info.name(), info, numbers, among)
    }

    /// The selection over `att`: attention that holds some layers only (a file's, a capture
    /// of some layers) is indexed by their numbers ([`Choose::among`]), any other by
    /// [`Choose::of`] its model and kind.
    pub fn for_attention(&self, att: &Attention) -> Result<Selection, SelectionFault> {
        let whole = att.layer_numbers().iter().copied().eq(0..att.layers());
        if whole {
            self.of(&att.model, att.kind)
        } else {
            self.among(&att.model, att.layer_numbers(), Among::File)
        }
    }

    fn among_named(
        &self,
        name: &str,
        info: &ModelInfo,
        numbers: &[usize],
        among: Among,
    ) -> Result<Selection, SelectionFault> {
        let layer = self.layer.unwrap_or(*numbers.last().unwrap_or(&0));
        let Some(slot) = numbers.iter().position(|&l| l == layer) else {
            return Err(SelectionFault::NotAmong {
                layer,
                numbers: numbers.to_vec(),
                among,
            });
        };
        let Selection { head, .. } = check(name, info, Selection::new(slot, self.head))?;
        Ok(Selection::new(slot, head))
    }
}

fn check(name: &str, info: &ModelInfo, selection: Selection) -> Result<Selection, SelectionFault> {
    info.check_selection(selection).map_err(|e| match e {
        SelectionError::Layer { layer, layers } => SelectionFault::Layer {
            name: name.to_string(),
            layer,
            layers,
        },
        SelectionError::Head { head, heads } => SelectionFault::Head {
            name: name.to_string(),
            head,
            heads,
        },
    })
}
