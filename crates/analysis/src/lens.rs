//! The logit lens (nostalgebraist 2020, "interpreting GPT: the logit lens"), labelled for
//! people: at every stage of the residual stream (the embeddings, then each layer's output) and
//! every position, the tokens the model's own final norm and head read from it, most probable
//! first. The numbers come from `crate::model::lens` (a pass of the model); this is the value
//! every view and the JSON export show. When to trust it: `docs/analyses.md`.

use serde::Serialize;

use crate::model::LensForward;

/// The most tokens a lens cell keeps: the lens shows what a stage predicts, not the whole
/// distribution, and every token kept costs [`ENTRY_BYTES`] at every stage and position (at
/// the vocabulary's size, 3.6 GiB per input token).
pub const MAX_TOP: usize = 100;

/// What one kept token of the lens costs by the time it is written: its id, probability and
/// text here, and its object in the JSON export. Measured as the peak resident memory over
/// that of the same run with K = 5: 1.8 KB a token at K = 100 (SmolLM2, 31 stages × 66
/// positions), 2.4 KB at K = 49,152; rounded up.
pub const ENTRY_BYTES: u64 = 2560;

/// The bytes the lens of `stages` stages × `tokens` positions × `k` tokens per cell takes
/// ([`ENTRY_BYTES`] each), or `None` when the count overflows.
pub fn lens_bytes(stages: usize, tokens: usize, k: usize) -> Option<u64> {
    (stages as u64)
        .checked_mul(tokens as u64)?
        .checked_mul(k as u64)?
        .checked_mul(ENTRY_BYTES)
}

/// One token of a lens cell.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct LensToken {
    /// Vocabulary id.
    pub id: u32,
    /// The token as text (decoded by the model's tokenizer, spaces kept).
    pub text: String,
    /// Its probability: softmax over the whole vocabulary.
    pub prob: f32,
}

/// The logit lens of one sequence.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct LogitLens {
    /// What each stage is: `embeddings`, then `layer 0`, `layer 1`, … (the residual stream
    /// after that layer; the last is the model's own output).
    pub stages: Vec<String>,
    /// The input token at each position, as the views label it (the lens at position i reads
    /// the prediction for position i + 1 in a decoder, for position i itself in a masked LM).
    pub positions: Vec<String>,
    /// Tokens per cell.
    pub k: usize,
    /// `top[stage][position]`: the `k` most probable tokens, most probable first.
    pub top: Vec<Vec<Vec<LensToken>>>,
}

impl LogitLens {
    /// Label `forward` with the input's `positions` and `decode` (a token id → its text).
    pub fn new(
        forward: &LensForward,
        positions: Vec<String>,
        decode: impl Fn(u32) -> String,
    ) -> LogitLens {
        let (n, k) = (forward.positions, forward.k);
        let stages = (0..forward.stages)
            .map(|s| match s {
                0 => "embeddings".to_string(),
                s => format!("layer {}", s - 1),
            })
            .collect();
        let top = (0..forward.stages)
            .map(|s| {
                (0..n)
                    .map(|p| {
                        let at = (s * n + p) * k;
                        forward.ids[at..at + k]
                            .iter()
                            .zip(&forward.probs[at..at + k])
                            .map(|(&id, &prob)| LensToken {
                                id,
                                text: decode(id),
                                prob,
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect();
        LogitLens {
            stages,
            positions,
            k,
            top,
        }
    }

    /// The most probable token of a cell.
    pub fn top1(&self, stage: usize, position: usize) -> &LensToken {
        &self.top[stage][position][0]
    }
}

/// A token's text as a person reads it in a small cell: a leading space dropped (the JSON keeps
/// it), line breaks and tabs as `↵` and `⇥`, other control characters as `·`, and `␣` for a
/// token of spaces only.
pub fn readable(text: &str) -> String {
    if !text.is_empty() && text.chars().all(|c| c == ' ') {
        return "␣".repeat(text.chars().count().min(3));
    }
    text.strip_prefix(' ')
        .unwrap_or(text)
        .chars()
        .map(|c| match c {
            '\n' => '↵',
            '\t' => '⇥',
            c if c.is_control() => '·',
            c => c,
        })
        .collect()
}

/// One token's text exactly, quoted as JSON writes a string: a leading or trailing space stays
/// inside the quotes (`" Paris"` is not `"Paris"`), and control characters are escaped (`"\n"`).
/// For where a token is named on its own (the target of an attribution) and must not be taken
/// for another that reads the same; the HTML report names them the same way.
pub fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_stages_and_cells_from_the_forward_values() {
        let forward = LensForward {
            stages: 2,
            positions: 2,
            k: 2,
            ids: vec![1, 2, 3, 4, 5, 6, 7, 8],
            probs: vec![0.5, 0.2, 0.6, 0.1, 0.7, 0.3, 0.9, 0.05],
        };
        let lens = LogitLens::new(&forward, vec!["a".into(), "b".into()], |id| {
            format!("t{id}")
        });
        assert_eq!(lens.stages, ["embeddings", "layer 0"]);
        assert_eq!(lens.top1(1, 0).id, 5);
        assert_eq!(lens.top[1][1][1].text, "t8");
        assert_eq!(lens.top[0][1][0].prob, 0.6);
    }

    #[test]
    fn tokens_read_as_text() {
        assert_eq!(readable(" cat"), "cat");
        assert_eq!(readable("\n\n"), "↵↵");
        assert_eq!(readable("  "), "␣␣");
        assert_eq!(readable("a\u{1}"), "a·");
        // Quoted, tokens that read alike stay apart.
        assert_eq!(quoted(" Paris"), "\" Paris\"");
        assert_ne!(quoted(" Paris"), quoted("Paris"));
        assert_eq!(quoted("a\n\"b"), r#""a\n\"b""#);
    }
}
