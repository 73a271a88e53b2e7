//! The rotary embedding's settings as config.json writes them: `rope_parameters`
//! (transformers 5) or `rope_theta` with `rope_scaling` (4.x), both spellings of the type, for
//! every family with rotary positions.

use serde_json::Value;

use crate::formats::config::{
    ConfigError, ConfigFile, ConfigProblem, Expected, Field, FieldValue, Instead, RopeProblem,
    Unsupported,
};
use crate::kernels::RopeScaling;

pub use crate::kernels::rotary::{rope_factor_in_range, RopeFactorError, MAX_ROPE_FACTOR};

/// The most positions a rotary model is taken to have: no tensor backs
/// `max_position_embeddings`, so it is bounded here (Qwen2.5-1M has 1,010,000).
pub const MAX_ROTARY_POSITIONS: usize = 1 << 20;

/// The RoPE settings of a config: `rope_parameters` (transformers 5) or `rope_theta` with
/// `rope_scaling` (4.x), both spellings of the type (`rope_type`, `type`).
pub fn read_rope(file: &ConfigFile) -> Result<(f64, RopeScaling), ConfigError> {
    read_rope_of(file, Partial::Refused)
}

/// Whether a family rotates part of each head (Phi-3 reads `partial_rotary_factor` itself)
/// or refuses a factor other than 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partial {
    /// The family reads the factor (from `rope_parameters`, where transformers 5 writes it, or
    /// the top level): leave it to the family.
    Read,
    /// A factor other than 1 is refused as not supported.
    Refused,
}

/// [`read_rope`] for a family that handles `partial_rotary_factor` as `partial` says.
pub fn read_rope_of(
    file: &ConfigFile,
    partial: Partial,
) -> Result<(f64, RopeScaling), ConfigError> {
    read_rope_based(file, partial, 10000.0)
}

/// [`read_rope_of`] for a family whose config class has another default base when the config
/// states none (SmolLM3's 2,000,000).
pub fn read_rope_based(
    file: &ConfigFile,
    partial: Partial,
    default_theta: f64,
) -> Result<(f64, RopeScaling), ConfigError> {
    let params = match file
        .get("rope_parameters")
        .or_else(|| file.get("rope_scaling"))
    {
        None => None,
        Some(Value::Object(map)) => Some(map),
        Some(other) => {
            return Err(file.invalid(ConfigProblem::WrongType {
                field: Field::Top("rope_parameters/rope_scaling"),
                value: FieldValue::Json(other.clone()),
                expected: Expected::Object,
            }))
        }
    };
    read_rope_in_of(file, params, "rope_theta", default_theta, partial)
}

/// The RoPE settings in `params` (one object of `rope_parameters`: Gemma 3 has one per layer
/// type), its base from `params.rope_theta`, else the config's `theta_key`, else
/// `default_theta`.
pub fn read_rope_in(
    file: &ConfigFile,
    params: Option<&serde_json::Map<String, Value>>,
    theta_key: &'static str,
    default_theta: f64,
) -> Result<(f64, RopeScaling), ConfigError> {
    read_rope_in_of(file, params, theta_key, default_theta, Partial::Refused)
}

fn read_rope_in_of(
    file: &ConfigFile,
    params: Option<&serde_json::Map<String, Value>>,
    theta_key: &'static str,
    default_theta: f64,
    partial: Partial,
) -> Result<(f64, RopeScaling), ConfigError> {
    let number = |key: &'static str| -> Result<Option<f64>, ConfigError> {
        match params.and_then(|p| p.get(key)).filter(|v| !v.is_null()) {
            None => Ok(None),
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() && x > 0.0 => Ok(Some(x)),
                _ => Err(file.invalid(ConfigProblem::WrongType {
                    field: Field::Rope(key),
                    value: FieldValue::Json(v.clone()),
                    expected: Expected::PositiveNumber,
                })),
            },
        }
    };
    let theta = match number("rope_theta")? {
        Some(t) => t,
        None => match file.number(theta_key)? {
            Some(t) if t.is_finite() && t > 0.0 => t,
            Some(t) => {
                return Err(file.invalid(ConfigProblem::WrongType {
                    field: Field::Top(theta_key),
                    value: FieldValue::Number(t),
                    expected: Expected::PositiveNumber,
                }))
            }
            None => default_theta,
        },
    };
    let kind = params
        .and_then(|p| p.get("rope_type").or_else(|| p.get("type")))
        .filter(|v| !v.is_null());
    let kind = match kind {
        None => "default".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(file.invalid(ConfigProblem::NotA {
                field: Field::Rope("type"),
                value: FieldValue::Json(other.clone()),
                expected: Expected::Name,
            }))
        }
    };
    if let (Some(f), Partial::Refused) = (number("partial_rotary_factor")?, partial) {
        if f != 1.0 {
            return Err(file.unsupported(Unsupported::Value {
                field: "partial_rotary_factor",
                value: Some(FieldValue::Number(f)),
                note: Some("RoPE on part of each head"),
                instead: Instead::Nothing,
            }));
        }
    }
    let required = |key: &'static str| -> Result<f64, ConfigError> {
        number(key)?.ok_or_else(|| {
            file.invalid(RopeProblem::Needs {
                rope_type: kind.clone(),
                key,
            })
        })
    };
    let factor = || -> Result<f64, ConfigError> {
        let f = required("factor")?;
        rope_factor_in_range(f).map_err(|why| file.invalid(RopeProblem::Factor(why)))?;
        Ok(f)
    };
    let scaling = match kind.as_str() {
        "default" => RopeScaling::None,
        "linear" => RopeScaling::Linear { factor: factor()? },
        "llama3" => {
            let s = RopeScaling::Llama3 {
                factor: factor()?,
                low_freq_factor: required("low_freq_factor")?,
                high_freq_factor: required("high_freq_factor")?,
                original_max_position_embeddings: required("original_max_position_embeddings")?,
            };
            if let RopeScaling::Llama3 {
                low_freq_factor,
                high_freq_factor,
                ..
            } = s
            {
                if high_freq_factor <= low_freq_factor {
                    return Err(file.invalid(RopeProblem::Llama3Frequencies {
                        low: low_freq_factor,
                        high: high_freq_factor,
                    }));
                }
            }
            s
        }
        other => {
            return Err(file.unsupported(Unsupported::Value {
                field: "RoPE scaling type",
                value: Some(FieldValue::Name(other.to_string())),
                note: None,
                instead: Instead::Runs("attnviz runs default, linear and llama3 rotary embeddings"),
            }))
        }
    };
    Ok((theta, scaling))
}
