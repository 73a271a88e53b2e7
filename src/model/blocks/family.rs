//! What a family is, as data the shared code reads: a [`Family`] is a static (its name, how to
//! recognise its config, where its checkpoints' key prefix shows) with a function that reads
//! its config into a [`FamilyConfig`], which says which config values size which tensors and
//! builds the family's [`Network`].

use crate::model::error::Error;
use crate::model::formats::config::{ConfigError, ConfigFile};
use crate::model::formats::validate::{ConfigCount, ConfigDim};
use crate::model::formats::weights::{Anchor, Checkpoint};

use super::network::Network;

/// One model family: how to recognise its config and read its checkpoints.
pub struct Family {
    /// Its name for people (`RoBERTa`).
    pub name: &'static str,
    /// The `model_type` values it runs (`roberta`).
    pub model_types: &'static [&'static str],
    /// Class-name prefixes in `architectures` that mark its configs when `model_type` is
    /// missing (`Roberta` for `RobertaForMaskedLM`).
    pub class_prefixes: &'static [&'static str],
    /// The tensor whose stored name reveals the checkpoint's key prefix.
    pub anchor: Anchor,
    /// Read its config from config.json.
    pub config: fn(&ConfigFile) -> Result<Box<dyn FamilyConfig>, ConfigError>,
}

/// A family's configuration, read and checked.
pub trait FamilyConfig {
    /// The config values that size tensors, as the tensor dimensions they must equal, and the
    /// counts of numbered blocks the checkpoint must hold.
    fn checks(&self) -> (Vec<ConfigDim>, Vec<ConfigCount>);

    /// Build the network from the checkpoint (after [`FamilyConfig::checks`] passed), reading
    /// and checking every tensor it needs.
    fn build(&self, ckpt: &Checkpoint) -> Result<Box<dyn Network>, Error>;
}
