//! The feature extractor's settings, from a checkpoint's `preprocessor_config.json`.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Whisper's log-mel settings (transformers' `WhisperFeatureExtractor` attributes). The
/// default is every Whisper size but large-v3: 80 mel bins, 16 kHz, 25 ms frames every 10 ms,
/// 30-second windows of 3,000 frames.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureConfig {
    /// Mel bins: 80, or 128 for large-v3.
    pub feature_size: usize,
    /// The rate the samples are at (16,000).
    pub sampling_rate: u32,
    /// Samples between frames (160).
    pub hop_length: usize,
    /// FFT length and window length (400).
    pub n_fft: usize,
    /// Seconds in a window (30).
    pub chunk_length: usize,
    /// Samples in a window (`chunk_length × sampling_rate`, 480,000).
    pub n_samples: usize,
    /// Frames in a window (`n_samples / hop_length`, 3,000).
    pub nb_max_frames: usize,
}

impl Default for FeatureConfig {
    fn default() -> Self {
        FeatureConfig {
            feature_size: 80,
            sampling_rate: 16_000,
            hop_length: 160,
            n_fft: 400,
            chunk_length: 30,
            n_samples: 480_000,
            nb_max_frames: 3_000,
        }
    }
}

/// Why a `preprocessor_config.json` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FeatureConfigError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: crate::small_file::ReadError,
    },
    /// Not JSON, or not an object.
    #[error("{} is not a JSON object ({problem})", path.display())]
    NotJson {
        /// The file.
        path: PathBuf,
        /// The parser's reason.
        problem: String,
    },
    /// A field with a value the extractor cannot run with.
    #[error("{}: `{field}` is {value}, {why}", path.display())]
    Field {
        /// The file.
        path: PathBuf,
        /// The field.
        field: &'static str,
        /// Its value as written.
        value: String,
        /// What it must be.
        why: &'static str,
    },
}

/// The largest config file read (they are under 1 KB; older ones embed the 80×201 filters).
const MAX_CONFIG_BYTES: u64 = 16 << 20;

impl FeatureConfig {
    /// Reads `preprocessor_config.json`: the fields it has override the defaults (missing ones
    /// keep them, as transformers' constructor defaults do); `n_samples` and `nb_max_frames`
    /// are derived from the others when absent. Values are checked: positive, `n_fft` at
    /// most 8,192, `hop_length` at most `n_fft`, `feature_size` at most 512, a window of at
    /// most 10 minutes, and consistent (`n_samples == chunk_length × sampling_rate`,
    /// `nb_max_frames == n_samples / hop_length`).
    pub fn from_file(path: &Path) -> Result<FeatureConfig, FeatureConfigError> {
        let bytes = crate::small_file::read_bytes(
            path,
            MAX_CONFIG_BYTES,
            "a preprocessor_config.json is a few kilobytes",
        )
        .map_err(|source| FeatureConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let value: Value =
            serde_json::from_slice(&bytes).map_err(|e| FeatureConfigError::NotJson {
                path: path.to_path_buf(),
                problem: e.to_string(),
            })?;
        Self::from_json(&value).map_err(|(field, value, why)| FeatureConfigError::Field {
            path: path.to_path_buf(),
            field,
            value,
            why,
        })
    }

    /// [`FeatureConfig::from_file`] on parsed JSON; the error names the field, its value and
    /// what it must be.
    pub fn from_json(v: &Value) -> Result<FeatureConfig, (&'static str, String, &'static str)> {
        let d = FeatureConfig::default();
        let field = |name: &'static str, default: usize, max: usize| match v.get(name) {
            None | Some(Value::Null) => Ok(default),
            Some(x) => match x.as_u64() {
                Some(n) if n >= 1 && n <= max as u64 => Ok(n as usize),
                _ => Err((
                    name,
                    x.to_string(),
                    "not a whole number in the range it allows",
                )),
            },
        };
        if !v.is_object() {
            return Err(("(root)", v.to_string(), "must be a JSON object"));
        }
        let feature_size = field("feature_size", d.feature_size, 512)?;
        let sampling_rate = field("sampling_rate", d.sampling_rate as usize, 192_000)? as u32;
        let n_fft = field("n_fft", d.n_fft, 8_192)?;
        let hop_length = field("hop_length", d.hop_length, n_fft)?;
        let chunk_length = field("chunk_length", d.chunk_length, 600)?;
        let n_samples_derived = chunk_length * sampling_rate as usize;
        let n_samples = field("n_samples", n_samples_derived, usize::MAX)?;
        if n_samples != n_samples_derived {
            return Err((
                "n_samples",
                n_samples.to_string(),
                "must equal chunk_length × sampling_rate",
            ));
        }
        let nb_max_frames = field("nb_max_frames", n_samples / hop_length, usize::MAX)?;
        if nb_max_frames != n_samples / hop_length {
            return Err((
                "nb_max_frames",
                nb_max_frames.to_string(),
                "must equal n_samples / hop_length",
            ));
        }
        Ok(FeatureConfig {
            feature_size,
            sampling_rate,
            hop_length,
            n_fft,
            chunk_length,
            n_samples,
            nb_max_frames,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn large_v3_config_reads_128_bins() {
        let cfg = FeatureConfig::from_json(&json!({
            "feature_size": 128, "sampling_rate": 16000, "hop_length": 160, "n_fft": 400,
            "chunk_length": 30, "n_samples": 480000, "nb_max_frames": 3000,
            "feature_extractor_type": "WhisperFeatureExtractor"
        }))
        .unwrap();
        assert_eq!(cfg.feature_size, 128);
        assert_eq!(cfg.nb_max_frames, 3000);
    }

    #[test]
    fn missing_fields_take_transformers_defaults() {
        assert_eq!(
            FeatureConfig::from_json(&json!({})).unwrap(),
            FeatureConfig::default()
        );
    }

    #[test]
    fn bad_fields_name_themselves() {
        for (cfg, field) in [
            (json!({"feature_size": 0}), "feature_size"),
            (json!({"n_fft": -3}), "n_fft"),
            (json!({"hop_length": 500}), "hop_length"),
            (json!({"n_samples": 480001}), "n_samples"),
            (json!({"nb_max_frames": 2999}), "nb_max_frames"),
            (json!({"sampling_rate": "16k"}), "sampling_rate"),
            (json!([1, 2]), "(root)"),
        ] {
            assert_eq!(
                FeatureConfig::from_json(&cfg).unwrap_err().0,
                field,
                "{cfg}"
            );
        }
    }
}
