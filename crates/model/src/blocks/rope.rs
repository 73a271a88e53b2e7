//! The rotary embedding's settings as config.json writes them: `rope_parameters`
//! (transformers 5) or `rope_theta` with `rope_scaling` (4.x), both spellings of the type, for
//! every family with rotary positions.

use serde_json::Value;

use crate::formats::config::{ConfigError, ConfigFile};
use crate::kernels::RopeScaling;

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
    let params = match file
        .get("rope_parameters")
        .or_else(|| file.get("rope_scaling"))
    {
        None => None,
        Some(Value::Object(map)) => Some(map),
        Some(other) => {
            return Err(file.invalid(format!(
                "rope_parameters/rope_scaling is {other}; it must be an object"
            )))
        }
    };
    read_rope_in_of(file, params, "rope_theta", 10000.0, partial)
}

/// The RoPE settings in `params` (one object of `rope_parameters`: Gemma 3 has one per layer
/// type), its base from `params.rope_theta`, else the config's `theta_key`, else
/// `default_theta`.
pub fn read_rope_in(
    file: &ConfigFile,
    params: Option<&serde_json::Map<String, Value>>,
    theta_key: &str,
    default_theta: f64,
) -> Result<(f64, RopeScaling), ConfigError> {
    read_rope_in_of(file, params, theta_key, default_theta, Partial::Refused)
}

fn read_rope_in_of(
    file: &ConfigFile,
    params: Option<&serde_json::Map<String, Value>>,
    theta_key: &str,
    default_theta: f64,
    partial: Partial,
) -> Result<(f64, RopeScaling), ConfigError> {
    let number = |key: &str| -> Result<Option<f64>, ConfigError> {
        match params.and_then(|p| p.get(key)).filter(|v| !v.is_null()) {
            None => Ok(None),
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() && x > 0.0 => Ok(Some(x)),
                _ => Err(file.invalid(format!("rope {key} is {v}; it must be a positive number"))),
            },
        }
    };
    let theta = match number("rope_theta")? {
        Some(t) => t,
        None => match file.number(theta_key)? {
            Some(t) if t.is_finite() && t > 0.0 => t,
            Some(t) => {
                return Err(
                    file.invalid(format!("{theta_key} is {t}; it must be a positive number"))
                )
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
        Some(other) => return Err(file.invalid(format!("rope type {other} is not a name"))),
    };
    if let (Some(f), Partial::Refused) = (number("partial_rotary_factor")?, partial) {
        if f != 1.0 {
            return Err(file.unsupported(format!(
                "partial_rotary_factor {f} (RoPE on part of each head) is not supported"
            )));
        }
    }
    let required = |key: &str| -> Result<f64, ConfigError> {
        number(key)?.ok_or_else(|| {
            file.invalid(format!("rope type '{kind}' needs {key} in rope_parameters"))
        })
    };
    let factor = || -> Result<f64, ConfigError> {
        let f = required("factor")?;
        rope_factor_in_range(f)
            .map_err(|why| file.invalid(format!("rope_scaling.factor {why}")))?;
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
                    return Err(file.invalid(format!(
                        "llama3 rope scaling needs high_freq_factor ({high_freq_factor}) above \
                         low_freq_factor ({low_freq_factor})"
                    )));
                }
            }
            s
        }
        other => {
            return Err(file.unsupported(format!(
                "RoPE scaling type '{other}' is not supported; attnviz runs default, linear \
                 and llama3 rotary embeddings"
            )))
        }
    };
    Ok((theta, scaling))
}

/// The largest RoPE scaling factor accepted (real ones are 2–64: positions are divided by it).
pub const MAX_ROPE_FACTOR: f64 = 1e6;

/// A RoPE scaling factor that is unusable: it divides every position, so it must be positive,
/// finite and not absurdly large (0 gave "weights overflow on this input"; −1e30 was accepted).
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
#[error("is {factor:?}; a RoPE scaling factor divides the positions, so it must be above 0 and at most {MAX_ROPE_FACTOR:e}")]
pub struct RopeFactorError {
    /// The factor refused.
    pub factor: f64,
}

/// Refuse a RoPE scaling factor out of range (see [`RopeFactorError`]).
pub fn rope_factor_in_range(factor: f64) -> Result<(), RopeFactorError> {
    if factor.is_finite() && factor > 0.0 && factor <= MAX_ROPE_FACTOR {
        Ok(())
    } else {
        Err(RopeFactorError { factor })
    }
}
