//! The arrays of an `.npz` or `.safetensors` file, by name, and how they become [`Arrays`].
//!
//! Names (bertviz's, where it has them):
//!
//! | name | what |
//! | --- | --- |
//! | `attention` | self-attention `[layers, heads, queries, keys]` |
//! | `tokens` | its tokens (strings) |
//! | `encoder_attention`, `decoder_attention`, `cross_attention` | an encoder–decoder's three kinds |
//! | `encoder_tokens`, `decoder_tokens` | their tokens (cross-attention: decoder queries × encoder keys) |
//! | `sentence_b_start` | optional: first token of sentence B (an integer) |
//! | `roles`, `encoder_roles`, `decoder_roles` | optional: each token's role (`start`, `end`, `pad`, `special`, `word`, `piece`) |
//! | `word_ids`, `encoder_word_ids`, `decoder_word_ids` | optional: each token's word index, −1 for none |
//! | `input_ids`, `encoder_input_ids`, `decoder_input_ids` | optional: vocabulary ids |
//! | `text`, `pair` | optional: the sentences |
//!
//! Arrays may also be `[layers, 1, heads, queries, keys]` (transformers' `outputs.attentions`
//! stacked, batch of one).

use crate::attention::{AttentionKind, Role};

use super::budget::{Budget, Cost, Declared, Estimate};
use super::{Arrays, FileError, ImportError, Tokens, ROW_SUM_TOLERANCE};

/// One array of a file.
#[derive(Debug, PartialEq)]
pub enum Value {
    /// Floating point, converted to f32.
    Floats {
        /// Its shape.
        shape: Vec<usize>,
        /// Its values, row-major.
        values: Vec<f32>,
        /// Whether it was stored in 16 bits (rows then sum to 1 less exactly).
        half: bool,
    },
    /// Integers (and bools).
    Ints {
        /// Its shape.
        shape: Vec<usize>,
        /// Its values.
        values: Vec<i64>,
    },
    /// Strings.
    Strings {
        /// Its shape.
        shape: Vec<usize>,
        /// Its values.
        values: Vec<String>,
    },
}

/// A file's arrays by name.
pub trait Store {
    /// What the array `name` will take once read, from the file's header alone (nothing is
    /// inflated or converted), or `None` when the file has no such array or its cost was paid
    /// already (a safetensors metadata string, in memory with the header).
    fn declared(&mut self, name: &str) -> Result<Option<Declared>, ImportError>;

    /// The array `name`, read (after its size was checked), or `None` when the file has none.
    fn get(&mut self, name: &str) -> Result<Option<Value>, ImportError>;
}

/// How to read a file's arrays: the memory they may take with the outputs' cost, and which
/// kinds of an encoder–decoder file to decode.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// The memory budget.
    pub budget: Budget,
    /// What the outputs cost per weight and per cell.
    pub cost: Cost,
    /// Decode only this kind's weights of a file that holds several kinds (the others'
    /// tokens are still read and checked); `None`, or a kind the file lacks: every kind.
    pub only: Option<AttentionKind>,
}

/// The attention arrays a file may hold, with their kinds.
const KINDS: [(&str, AttentionKind); 4] = [
    ("attention", AttentionKind::SelfAttention),
    ("encoder_attention", AttentionKind::Encoder),
    ("decoder_attention", AttentionKind::Decoder),
    ("cross_attention", AttentionKind::Cross),
];

/// The optional fields of tokens with `prefix` (``, `encoder_`, `decoder_`).
const TOKEN_FIELDS: [&str; 4] = ["tokens", "roles", "word_ids", "input_ids"];

/// Row sums of 16-bit weights are off by up to about this much.
const HALF_TOLERANCE: f32 = 2e-2;

/// The arrays of `store` that [`assemble`] reads as `plan` says, and the kinds the file holds:
/// checked against the budget from the headers alone.
fn plan_reads(
    store: &mut dyn Store,
    shown: &str,
    plan: &Plan,
) -> Result<(Vec<AttentionKind>, Vec<AttentionKind>), ImportError> {
    let mut held = Vec::new();
    let mut sizes = Vec::new();
    for (name, kind) in KINDS {
        if let Some(d) = store.declared(name)? {
            held.push(kind);
            sizes.push((name, kind, d));
        }
    }
    let decode: Vec<AttentionKind> = match plan.only {
        Some(k) if held.len() > 1 && held.contains(&k) => vec![k],
        _ => held.clone(),
    };
    let mut estimate = Estimate::default();
    for (name, kind, d) in &sizes {
        if decode.contains(kind) {
            estimate.add_attention(name, d);
        }
    }
    let mut fields = vec![
        "text".to_string(),
        "pair".to_string(),
        "sentence_b_start".into(),
    ];
    for prefix in ["", "encoder_", "decoder_"] {
        fields.extend(TOKEN_FIELDS.iter().map(|f| format!("{prefix}{f}")));
    }
    for field in fields {
        if let Some(d) = store.declared(&field)? {
            estimate.add(&d);
        }
    }
    estimate.check(shown, plan.cost, plan.budget)?;
    Ok((held, decode))
}

/// The attention arrays of `store` with their tokens (see the module docs), the kinds to
/// decode chosen and their memory checked by `plan`. Returns them and the kinds the file
/// holds.
pub fn assemble(store: &mut dyn Store, shown: &str, plan: &Plan) -> Result<Assembled, ImportError> {
    let (held, decode) = plan_reads(store, shown, plan)?;
    if held.contains(&AttentionKind::SelfAttention) {
        if let Some((name, _)) = KINDS[1..].iter().find(|(_, k)| held.contains(k)) {
            return Err(FileError::BothKinds {
                file: shown.to_string(),
                name,
            }
            .into());
        }
    }
    let text = string(store, shown, "text")?;
    let pair = string(store, shown, "pair")?;
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    if !decode.contains(&AttentionKind::SelfAttention) {
        // Not read.
    } else if let Some(a) = store.get("attention")? {
        let queries = tokens(store, shown, "", "tokens", "attention")?;
        out.push(arrays(
            shown,
            "attention",
            AttentionKind::SelfAttention,
            a,
            queries,
            None,
        )?);
    }
    let kinds = [
        ("encoder_attention", AttentionKind::Encoder),
        ("decoder_attention", AttentionKind::Decoder),
        ("cross_attention", AttentionKind::Cross),
    ];
    for (name, kind) in kinds {
        if !held.contains(&kind) {
            continue;
        }
        let (queries, keys) = match kind {
            AttentionKind::Encoder => (
                tokens(store, shown, "encoder_", "encoder_tokens", name)?,
                None,
            ),
            AttentionKind::Decoder => (
                tokens(store, shown, "decoder_", "decoder_tokens", name)?,
                None,
            ),
            _ => (
                tokens(store, shown, "decoder_", "decoder_tokens", name)?,
                Some(tokens(store, shown, "encoder_", "encoder_tokens", name)?),
            ),
        };
        if !decode.contains(&kind) {
            // Its tokens were read and checked; its weights are not needed.
            skipped.push(Skipped {
                kind,
                queries,
                text: None,
            });
            continue;
        }
        let Some(a) = store.get(name)? else { continue };
        out.push(arrays(shown, name, kind, a, queries, keys)?);
    }
    if out.is_empty() {
        return Err(FileError::NoAttention {
            file: shown.to_string(),
        }
        .into());
    }
    for a in &mut out {
        if a.kind != AttentionKind::Cross {
            a.text.clone_from(&text);
            a.pair.clone_from(&pair);
        }
    }
    for s in &mut skipped {
        if s.kind != AttentionKind::Cross {
            s.text.clone_from(&text);
        }
    }
    Ok(Assembled {
        arrays: out,
        skipped,
        held,
    })
}

/// What [`assemble`] read.
#[derive(Debug)]
pub struct Assembled {
    /// The decoded arrays.
    pub arrays: Vec<Arrays>,
    /// The kinds the file holds but whose weights were not decoded ([`Plan::only`]).
    pub skipped: Vec<Skipped>,
    /// Every kind the file holds.
    pub held: Vec<AttentionKind>,
}

/// A kind whose weights were not read: its tokens, and its text if the file gives one.
#[derive(Debug)]
pub struct Skipped {
    /// Which kind.
    pub kind: AttentionKind,
    /// Its query tokens.
    pub queries: Tokens,
    /// The file's `text`, for kinds other than cross-attention.
    pub text: Option<String>,
}

fn arrays(
    shown: &str,
    name: &str,
    kind: AttentionKind,
    value: Value,
    queries: Tokens,
    keys: Option<Tokens>,
) -> Result<Arrays, ImportError> {
    let Value::Floats {
        shape,
        values,
        half,
    } = value
    else {
        return Err(FileError::NotFloats {
            file: shown.to_string(),
            name: name.to_string(),
        }
        .into());
    };
    let shape = squeeze_batch(shown, name, &shape)?;
    Ok(Arrays {
        name: format!("{shown}: {name}"),
        kind,
        shape,
        weights: values,
        queries,
        keys,
        mask: None,
        text: None,
        pair: None,
        source: shown.to_string(),
        tolerance: if half {
            HALF_TOLERANCE
        } else {
            ROW_SUM_TOLERANCE
        },
        origin: None,
    })
}

/// `[layers, heads, queries, keys]` from a rank-4 shape, or a rank-5 one with a batch of 1.
pub fn squeeze_batch(shown: &str, name: &str, shape: &[usize]) -> Result<[usize; 4], ImportError> {
    match *shape {
        [l, h, q, k] => Ok([l, h, q, k]),
        [l, 1, h, q, k] => Ok([l, h, q, k]),
        [_, _, _, _, _] => Err(FileError::Batch {
            file: shown.to_string(),
            name: name.to_string(),
            shape: shape.to_vec(),
        }
        .into()),
        _ => Err(FileError::Rank {
            file: shown.to_string(),
            name: name.to_string(),
            shape: shape.to_vec(),
        }
        .into()),
    }
}

fn string(store: &mut dyn Store, shown: &str, name: &str) -> Result<Option<String>, ImportError> {
    match store.get(name)? {
        None => Ok(None),
        Some(Value::Strings { values, .. }) if values.len() == 1 => Ok(values.into_iter().next()),
        // A safetensors metadata string that happens to read as a number.
        Some(Value::Ints { shape, values }) if shape.is_empty() => Ok(Some(values[0].to_string())),
        Some(_) => Err(FileError::NotOneString {
            file: shown.to_string(),
            name: name.to_string(),
        }
        .into()),
    }
}

fn strings(
    store: &mut dyn Store,
    shown: &str,
    name: &str,
) -> Result<Option<Vec<String>>, ImportError> {
    match store.get(name)? {
        None => Ok(None),
        Some(Value::Strings { shape, values }) if shape.len() == 1 => Ok(Some(values)),
        Some(_) => Err(FileError::NotStrings {
            file: shown.to_string(),
            name: name.to_string(),
        }
        .into()),
    }
}

fn ints(store: &mut dyn Store, shown: &str, name: &str) -> Result<Option<Vec<i64>>, ImportError> {
    match store.get(name)? {
        None => Ok(None),
        Some(Value::Ints { shape, values }) if shape.len() <= 1 => Ok(Some(values)),
        Some(_) => Err(FileError::NotIntegers {
            file: shown.to_string(),
            name: name.to_string(),
        }
        .into()),
    }
}

/// The tokens `field` (with the optional `{prefix}roles`, …) that label `array`.
fn tokens(
    store: &mut dyn Store,
    shown: &str,
    prefix: &str,
    field: &str,
    array: &str,
) -> Result<Tokens, ImportError> {
    let Some(labels) = strings(store, shown, field)? else {
        return Err(ImportError::NoTokens {
            file: shown.to_string(),
            array: array.to_string(),
            field: field.to_string(),
        });
    };
    let roles = match strings(store, shown, &format!("{prefix}roles"))? {
        None => None,
        Some(names) => Some(parse_roles(shown, &names)?),
    };
    let word_ids = ints(store, shown, &format!("{prefix}word_ids"))?
        .map(|w| w.into_iter().map(|i| usize::try_from(i).ok()).collect());
    let ids = match ints(store, shown, &format!("{prefix}input_ids"))? {
        None => None,
        Some(v) => Some(
            v.into_iter()
                .map(u32::try_from)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| {
                    ImportError::from(FileError::NotATokenId {
                        file: shown.to_string(),
                        prefix: prefix.to_string(),
                    })
                })?,
        ),
    };
    let sentence_b_start = if prefix.is_empty() {
        match ints(store, shown, "sentence_b_start")? {
            None => None,
            Some(v) if v.len() == 1 && v[0] >= 0 => Some(v[0] as usize),
            Some(_) => {
                return Err(FileError::SentenceBField {
                    file: shown.to_string(),
                }
                .into())
            }
        }
    } else {
        None
    };
    Ok(Tokens {
        labels,
        roles,
        word_ids,
        ids,
        sentence_b_start,
        ..Tokens::default()
    })
}

/// Roles by name (`start`, `end`, `pad`, `special`, `word`, `piece`).
pub fn parse_roles(shown: &str, names: &[String]) -> Result<Vec<Role>, ImportError> {
    names
        .iter()
        .map(|n| {
            Role::from_name(n).ok_or_else(|| {
                ImportError::from(FileError::Role {
                    file: shown.to_string(),
                    role: n.clone(),
                })
            })
        })
        .collect()
}
