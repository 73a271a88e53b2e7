//! Greedy generation with a KV cache, and what a checkpoint says about it: the tokens that end a
//! generation (EOS) and the chat template that wraps a prompt.
//!
//! Decoding is transformers' `generate(do_sample=False, num_beams=1)`: the prompt runs once
//! (prefill; an encoder–decoder's prompt is its decoder start token), then each step feeds the
//! token just chosen against the cache of every earlier token's keys and values, and takes the
//! most likely next token (the first, on a tie, as `torch.argmax`). It stops after the requested
//! number of tokens, or after an EOS token, which is kept, as transformers keeps it. One loop
//! ([`greedy`]) serves both kinds of model.

use std::path::Path;

use serde_json::Value;

use crate::error::{ConfigFileProblem, Error, ForwardError, InputError};
use crate::formats::gguf::ChatError;
use crate::formats::gguf::ChatTemplate;
use crate::tokenize::TokenizerConfig;

/// What a checkpoint says about generating from it.
#[derive(Clone, Debug)]
pub struct GenerationConfig {
    /// The tokens that end a generation: `generation_config.json`'s `eos_token_id` (one or a
    /// list), else config.json's, else the tokenizer's EOS.
    pub eos_token_ids: Vec<u32>,
    /// The chat template, or why there is none usable.
    pub chat_template: Result<ChatTemplate, ChatUnavailable>,
    /// The longest generation an encoder–decoder makes by default, decoder start token
    /// included (`max_length`; transformers' default is 20).
    pub max_length: Option<usize>,
    /// The token forced as the first generated one (`forced_bos_token_id`: BART).
    pub forced_bos_token_id: Option<u32>,
    /// The token forced as the last one when the length limit is reached
    /// (`forced_eos_token_id`).
    pub forced_eos_token_id: Option<u32>,
}

impl GenerationConfig {
    /// Nothing known: no EOS, no chat template (encoders).
    pub fn none(origin: &str) -> GenerationConfig {
        GenerationConfig {
            eos_token_ids: Vec::new(),
            chat_template: Err(no_template(origin)),
            max_length: None,
            forced_bos_token_id: None,
            forced_eos_token_id: None,
        }
    }

    /// Read from a model folder: `generation_config.json` and `config.json` for EOS,
    /// `tokenizer_config.json` (`chat_template`, `bos_token`, `eos_token`) or
    /// `chat_template.jinja` (transformers 5 saves it there) for the template. Missing files
    /// leave their part empty; a file that is there but is not a regular file, too large, or not
    /// a JSON object, and a token id that is not an id below `vocab_size`, are an error naming
    /// the file and the field. A template that does not compile is reported when `--chat`
    /// asks for it.
    pub fn from_dir(
        config: &Path,
        tokenizer_dir: &Path,
        vocab_size: usize,
    ) -> Result<GenerationConfig, Error> {
        let settings = TokenizerConfig::read(tokenizer_dir).unwrap_or_default();
        Self::with_settings(config, tokenizer_dir, &settings, vocab_size)
    }

    /// [`GenerationConfig::from_dir`] with the tokenizer's settings already read.
    ///
    /// transformers falls back to config.json when generation_config.json does not parse, and
    /// never checks the ids: an EOS outside the vocabulary is never generated, so generation
    /// runs to its length limit, and a forced BOS/EOS outside it fails with an IndexError
    /// mid-generation. Both are refused here, up front, with the field named.
    pub fn with_settings(
        config: &Path,
        tokenizer_dir: &Path,
        settings: &TokenizerConfig,
        vocab_size: usize,
    ) -> Result<GenerationConfig, Error> {
        let read = |path: &Path| -> Result<Option<serde_json::Map<String, Value>>, Error> {
            let bad = |problem: ConfigFileProblem| -> Error {
                InputError::ConfigFile {
                    path: path.to_path_buf(),
                    problem,
                }
                .into()
            };
            let text = match crate::small_file::read_text(
                path,
                crate::formats::config::MAX_CONFIG_BYTES,
                "a generation config is a few hundred bytes",
            ) {
                Ok(text) => text,
                Err(crate::small_file::ReadError::NotFound) => return Ok(None),
                Err(e) => return Err(bad(ConfigFileProblem::Unreadable(e))),
            };
            match serde_json::from_str(&text) {
                Ok(Value::Object(map)) => Ok(Some(map)),
                Ok(_) => Err(bad(ConfigFileProblem::NotAnObject)),
                Err(e) => Err(bad(ConfigFileProblem::NotJson(e))),
            }
        };
        let dir = config.parent().unwrap_or(Path::new("."));
        let generation_path = dir.join("generation_config.json");
        let generation_file = read(&generation_path)?;
        let config_file = read(config)?;
        let files = [
            (&generation_path, &generation_file),
            (&config.to_path_buf(), &config_file),
        ];
        // An id field: the file it comes from first (generation_config.json, then config.json),
        // each value a token id of the vocabulary.
        let ids_of = |key: &str, list: bool| -> Result<Option<Vec<u32>>, Error> {
            for (path, map) in files {
                let Some(value) = map.as_ref().and_then(|m| m.get(key)) else {
                    continue;
                };
                let values = match value {
                    Value::Null => continue,
                    Value::Array(ids) if list => ids.iter().collect(),
                    v => vec![v],
                };
                let ids = values
                    .into_iter()
                    .map(|v| match token_id(v) {
                        Some(id) if (id as usize) < vocab_size => Ok::<u32, Error>(id),
                        _ => Err(InputError::ConfigFile {
                            path: path.to_path_buf(),
                            problem: ConfigFileProblem::NotATokenId {
                                key: key.to_string(),
                                value: v.to_string(),
                                vocab: vocab_size,
                            },
                        }
                        .into()),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                return Ok(Some(ids));
            }
            Ok(None)
        };
        let eos_token_ids = ids_of("eos_token_id", true)?.unwrap_or_default();
        let one = |key: &str| -> Result<Option<u32>, Error> {
            Ok(ids_of(key, false)?.and_then(|ids| ids.first().copied()))
        };
        let forced_bos_token_id = one("forced_bos_token_id")?;
        let forced_eos_token_id = one("forced_eos_token_id")?;
        let max_length = files
            .iter()
            .find_map(|(_, m)| {
                m.as_ref()
                    .and_then(|m| m.get("max_length"))
                    .and_then(token_id)
            })
            .map(|n| n as usize);

        let origin = settings.path().map_or_else(
            || tokenizer_dir.join("tokenizer_config.json"),
            Path::to_path_buf,
        );
        let jinja = tokenizer_dir.join("chat_template.jinja");
        let source = match settings.chat_template() {
            Some(s) => Some((origin.display().to_string(), s.to_string())),
            None => match crate::small_file::read_text(
                &jinja,
                crate::formats::config::MAX_CONFIG_BYTES,
                "a chat template is a few kilobytes",
            ) {
                Ok(s) => Some((jinja.display().to_string(), s)),
                Err(crate::small_file::ReadError::NotFound) => None,
                Err(e) => {
                    return Err(InputError::ConfigFile {
                        path: jinja,
                        problem: ConfigFileProblem::Unreadable(e),
                    }
                    .into())
                }
            },
        };
        let chat_template = match source {
            Some((origin, source)) => ChatTemplate::new(
                origin,
                source,
                settings.special("bos_token"),
                settings.special("eos_token"),
            )
            .map_err(ChatUnavailable::Invalid),
            None => Err(no_template(&tokenizer_dir.display().to_string())),
        };
        Ok(GenerationConfig {
            eos_token_ids,
            chat_template,
            max_length,
            forced_bos_token_id,
            forced_eos_token_id,
        })
    }
}

fn token_id(v: &Value) -> Option<u32> {
    v.as_u64().and_then(|id| u32::try_from(id).ok())
}

fn no_template(origin: &str) -> ChatUnavailable {
    ChatUnavailable::Missing {
        origin: origin.to_string(),
        searched: "tokenizer_config.json's chat_template, or chat_template.jinja".to_string(),
    }
}

/// Why a model has no usable chat template.
#[derive(Clone, Debug)]
pub enum ChatUnavailable {
    /// None was found.
    Missing {
        /// The folder or file searched.
        origin: String,
        /// Where in it a template would be.
        searched: String,
    },
    /// One was found but does not compile.
    Invalid(ChatError),
    /// The GGUF metadata that holds it cannot be read.
    Unreadable(std::sync::Arc<crate::formats::gguf::GgufError>),
}

/// A prompt and what greedy decoding added to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generation {
    /// The prompt's ids followed by the generated ones.
    pub ids: Vec<u32>,
    /// How many of `ids` are the prompt.
    pub prompt_len: usize,
    /// Whether it ended on an EOS token (the last id) rather than at the requested count.
    pub stopped_at_eos: bool,
}

impl Generation {
    /// The generated ids.
    pub fn generated(&self) -> &[u32] {
        &self.ids[self.prompt_len..]
    }
}

/// The index of the largest logit (the first of equal ones); NaN logits are an error.
pub fn argmax(logits: &[f32]) -> Result<u32, Error> {
    let mut best = 0;
    for (i, &x) in logits.iter().enumerate() {
        if x.is_nan() {
            return Err(ForwardError::NanLogit { token: i }.into());
        }
        if x > logits[best] {
            best = i;
        }
    }
    Ok(best as u32)
}

/// One decoding step: runs the tokens the model has not seen yet and returns the logits
/// `[vocab]` after the last of them.
pub type Step<'a> = dyn FnMut(&[u32]) -> Result<Vec<f32>, Error> + 'a;

/// Greedy decoding of up to `max_new_tokens` after `prompt`, stopping after any of `eos` (which
/// is kept), for decoders and encoder–decoders alike. `step` runs tokens the model has not seen
/// yet (first the whole prompt, then each token as it is chosen) and returns the logits `[vocab]`
/// after the last of them; it is not called after the last token. `forced` is
/// (`forced_bos_token_id`, `forced_eos_token_id`): the first generated token, and a last one at
/// the length limit, as transformers' logits processors force them (ids outside the vocabulary
/// are not forced; NaN logits are an error even where a token is forced). `progress` is told
/// the number of tokens generated after each one. The caller checks that the prompt and
/// `max_new_tokens` fit the model.
pub fn greedy(
    prompt: &[u32],
    max_new_tokens: usize,
    eos: &[u32],
    forced: (Option<u32>, Option<u32>),
    step: &mut Step<'_>,
    progress: &mut (dyn FnMut(usize) + Send),
) -> Result<Generation, Error> {
    let mut ids = prompt.to_vec();
    let mut stopped_at_eos = false;
    if max_new_tokens > 0 {
        let mut logits = step(prompt)?;
        for n in 1..=max_new_tokens {
            let best = argmax(&logits)?;
            let vocab = logits.len();
            let next = match forced {
                (Some(first), _) if n == 1 && (first as usize) < vocab => first,
                (_, Some(last)) if n == max_new_tokens && (last as usize) < vocab => last,
                _ => best,
            };
            ids.push(next);
            progress(n);
            if eos.contains(&next) {
                stopped_at_eos = true;
                break;
            }
            if n < max_new_tokens {
                logits = step(&[next])?;
            }
        }
    }
    Ok(Generation {
        ids,
        prompt_len: prompt.len(),
        stopped_at_eos,
    })
}

/// [`greedy`] with `rule` applied to each step's logits before the largest is taken: `rule`
/// sees every id so far (the prompt's included) and changes the logits in place, as
/// transformers' logits processors do (Whisper's suppressed tokens and timestamp rules). NaN
/// logits are an error before the rule runs.
pub fn greedy_ruled(
    prompt: &[u32],
    max_new_tokens: usize,
    eos: &[u32],
    rule: &mut (dyn FnMut(&[u32], &mut [f32]) + Send),
    step: &mut Step<'_>,
    progress: &mut (dyn FnMut(usize) + Send),
) -> Result<Generation, Error> {
    let mut ids = prompt.to_vec();
    let mut stopped_at_eos = false;
    if max_new_tokens > 0 {
        let mut logits = step(prompt)?;
        for n in 1..=max_new_tokens {
            argmax(&logits)?;
            rule(&ids, &mut logits);
            let next = argmax(&logits)?;
            ids.push(next);
            progress(n);
            if eos.contains(&next) {
                stopped_at_eos = true;
                break;
            }
            if n < max_new_tokens {
                logits = step(&[next])?;
            }
        }
    }
    Ok(Generation {
        ids,
        prompt_len: prompt.len(),
        stopped_at_eos,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_the_first_of_equal_maxima() {
        assert_eq!(argmax(&[0.1, 3.0, -1.0, 3.0]).unwrap(), 1);
        assert_eq!(argmax(&[f32::NEG_INFINITY, -5.0]).unwrap(), 1);
        assert!(argmax(&[0.0, f32::NAN]).is_err());
    }

    #[test]
    fn a_nan_logit_is_named_by_its_token() {
        let err = argmax(&[0.0, 1.0, f32::NAN]).unwrap_err();
        assert!(
            matches!(&err, Error::Forward(f) if matches!(**f, ForwardError::NanLogit { token: 2 })),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "forward pass failed: the model's logits hold NaN (token 2); the weights overflow on \
             this input"
        );
    }

    #[test]
    fn a_token_id_outside_the_vocabulary_names_its_file_field_and_vocabulary() {
        let dir = std::env::temp_dir().join(format!("attnviz-gen-id-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("config.json");
        std::fs::write(&config, r#"{"eos_token_id": 7}"#).unwrap();
        std::fs::write(
            dir.join("generation_config.json"),
            r#"{"eos_token_id": [2, 100]}"#,
        )
        .unwrap();
        let err = GenerationConfig::from_dir(&config, &dir, 100).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        let Error::Input(input) = &err else {
            panic!("{err:?}");
        };
        let InputError::ConfigFile {
            path,
            problem: ConfigFileProblem::NotATokenId { key, value, vocab },
        } = input.as_ref()
        else {
            panic!("{err:?}");
        };
        assert_eq!(path, &dir.join("generation_config.json"));
        assert_eq!(
            (key.as_str(), value.as_str(), *vocab),
            ("eos_token_id", "100", 100)
        );
        assert!(
            err.to_string().ends_with(
                "generation_config.json: eos_token_id is 100, not a token id of the model's \
                 100-token vocabulary"
            ),
            "{err}"
        );
    }

    #[test]
    fn eos_and_chat_template_come_from_the_model_folder() {
        let dir = std::env::temp_dir().join(format!("attnviz-gen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("config.json");
        std::fs::write(&config, r#"{"eos_token_id": 7}"#).unwrap();
        let g = GenerationConfig::from_dir(&config, &dir, 100).unwrap();
        assert_eq!(g.eos_token_ids, vec![7]);
        let err = g.chat_template.unwrap_err();
        assert!(
            matches!(&err, ChatUnavailable::Missing { searched, .. } if searched.contains("chat_template.jinja")),
            "{err:?}"
        );
        // generation_config.json wins, and may list several.
        std::fs::write(
            dir.join("generation_config.json"),
            r#"{"eos_token_id": [2, 9]}"#,
        )
        .unwrap();
        std::fs::write(
            dir.join("tokenizer_config.json"),
            r#"{"bos_token": {"content": "<s>"}, "chat_template":
                "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"}"#,
        )
        .unwrap();
        let g = GenerationConfig::from_dir(&config, &dir, 100).unwrap();
        assert_eq!(g.eos_token_ids, vec![2, 9]);
        let prompt = g.chat_template.unwrap().render_user_message("hi").unwrap();
        assert_eq!(prompt, "<s>[user] hi[assistant]");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
