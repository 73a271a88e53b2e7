//! The captured attention: the one value that flows from the encoder to every analysis and renderer.
//!
//! Numbering convention (used by the CLI, the JSON export and every view): **layers and heads are
//! numbered from 0**, as in Hugging Face's `outputs.attentions[layer][0, head]` and bertviz.
//! Query index is the row, key index the column: `weight(layer, head, query, key)`.

use std::ops::Range;

/// Which model produced an [`Attention`], and its shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelInfo {
    /// Hub repo id (`bert-base-uncased`) or the local folder the user gave.
    pub id: String,
    /// Hub revision the files came from (a branch, tag or commit), `None` for a local folder.
    pub revision: Option<String>,
    /// Short name for titles, chosen when the model was loaded (see
    /// [`crate::model::source::display_name`]); `None`: derived from `id`.
    pub name: Option<String>,
    /// Number of encoder layers.
    pub layers: usize,
    /// Attention heads per layer.
    pub heads: usize,
    /// Hidden size of the encoder.
    pub hidden_size: usize,
    /// Size of one head's query/key/value vectors (`hidden_size / heads`).
    pub head_dim: usize,
}

impl ModelInfo {
    /// Short name for titles: [`ModelInfo::name`]'s field when set; else a hub repo id as is,
    /// a local folder by its last path component.
    pub fn name(&self) -> &str {
        if let Some(name) = &self.name {
            return name;
        }
        if self.revision.is_some() {
            return &self.id;
        }
        let trimmed = self.id.trim_end_matches(['/', '\\']);
        trimmed
            .rsplit(['/', '\\'])
            .next()
            .filter(|s| !s.is_empty())
            .unwrap_or(&self.id)
    }
}

/// Whether the rows and columns of an [`Attention`] are word pieces or whole words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Level {
    /// One unit per word piece, as the model saw them.
    #[default]
    Token,
    /// Word pieces merged into words: attention *to* a word is the sum over its pieces, attention
    /// *from* a word the mean over its pieces.
    Word,
}

impl Level {
    /// Lower-case name used in JSON and the HTML report.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Token => "token",
            Level::Word => "word",
        }
    }
}

/// Which head (or the mean over heads) a view shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadSel {
    /// One head, 0-based.
    Index(usize),
    /// The mean over all heads of the layer.
    Mean,
}

/// Each head's query and key vectors, as the attention used them (before the 1/√d scaling).
///
/// Both are laid out `[layer][head][token][head_dim]`, row-major, over *tokens* (never words).
#[derive(Clone, Debug, PartialEq)]
pub struct QueryKey {
    /// Query vectors, `[layers, heads, seq, head_dim]`.
    pub queries: Vec<f32>,
    /// Key vectors, `[layers, heads, seq, head_dim]`.
    pub keys: Vec<f32>,
}

/// The attention of every layer and head for one input, with everything a view needs to label it.
///
/// Units are tokens (or words, see [`Level`]); all per-unit vectors have the same length `n`.
#[derive(Clone, Debug, PartialEq)]
pub struct Attention {
    /// The model that produced it.
    pub model: ModelInfo,
    /// The text the user gave (sentence A).
    pub text: String,
    /// The second sentence of a pair, if any.
    pub pair: Option<String>,
    /// Whether units are tokens or words.
    pub level: Level,
    /// Display label of each unit (`[CLS]`, `quick`, `##ly`, or a merged word).
    pub tokens: Vec<String>,
    /// Vocabulary id of each token. Empty at [`Level::Word`].
    pub input_ids: Vec<u32>,
    /// Segment of each unit: 0 for sentence A, 1 for sentence B.
    pub token_type_ids: Vec<u32>,
    /// Whether each unit is a special token (`[CLS]`, `[SEP]`, …).
    pub special: Vec<bool>,
    /// For each unit, the range of word-piece tokens it covers (`i..i+1` at token level).
    pub spans: Vec<Range<usize>>,
    /// For each token, the index of the word it belongs to (`None` for special tokens).
    /// At word level, each word's own index (`None` for special tokens).
    pub word_ids: Vec<Option<usize>>,
    /// Whether [CLS]/[SEP] were removed and the rows renormalised.
    pub special_excluded: bool,
    /// Index of the first unit of sentence B, if the input is a pair.
    pub sentence_b_start: Option<usize>,
    /// Attention probabilities, `[layers, heads, n, n]`, row-major (each row sums to 1).
    weights: Vec<f32>,
    /// Query/key vectors, when the encoder was asked to keep them.
    pub query_key: Option<QueryKey>,
}

/// Error for an [`Attention`] built from inconsistent parts.
#[derive(Debug, thiserror::Error)]
#[error("inconsistent attention: {0}")]
pub struct ShapeError(pub String);

impl Attention {
    /// Build an attention value, checking that every per-unit vector has `n` entries and that
    /// `weights` holds `layers × heads × n × n` values.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        model: ModelInfo,
        text: String,
        pair: Option<String>,
        tokens: Vec<String>,
        input_ids: Vec<u32>,
        token_type_ids: Vec<u32>,
        special: Vec<bool>,
        word_ids: Vec<Option<usize>>,
        weights: Vec<f32>,
        query_key: Option<QueryKey>,
    ) -> Result<Self, ShapeError> {
        let n = tokens.len();
        let sentence_b_start = token_type_ids.iter().position(|&t| t != 0);
        let att = Attention {
            model,
            text,
            pair,
            level: Level::Token,
            spans: (0..n).map(|i| i..i + 1).collect(),
            tokens,
            input_ids,
            token_type_ids,
            special,
            word_ids,
            special_excluded: false,
            sentence_b_start,
            weights,
            query_key,
        };
        att.check()?;
        Ok(att)
    }

    /// Build a derived value (word level, special tokens excluded, …) from `self`'s metadata with
    /// new units and weights. Query/key vectors are dropped: they only make sense per token.
    #[allow(clippy::too_many_arguments)]
    pub fn derive(
        &self,
        level: Level,
        tokens: Vec<String>,
        input_ids: Vec<u32>,
        token_type_ids: Vec<u32>,
        special: Vec<bool>,
        spans: Vec<Range<usize>>,
        word_ids: Vec<Option<usize>>,
        special_excluded: bool,
        weights: Vec<f32>,
    ) -> Result<Self, ShapeError> {
        let sentence_b_start = token_type_ids.iter().position(|&t| t != 0);
        let att = Attention {
            model: self.model.clone(),
            text: self.text.clone(),
            pair: self.pair.clone(),
            level,
            tokens,
            input_ids,
            token_type_ids,
            special,
            spans,
            word_ids,
            special_excluded,
            sentence_b_start,
            weights,
            query_key: None,
        };
        att.check()?;
        Ok(att)
    }

    fn check(&self) -> Result<(), ShapeError> {
        let n = self.tokens.len();
        let m = &self.model;
        let lens = [
            ("token_type_ids", self.token_type_ids.len()),
            ("special", self.special.len()),
            ("spans", self.spans.len()),
            ("word_ids", self.word_ids.len()),
        ];
        for (name, len) in lens {
            if len != n {
                return Err(ShapeError(format!(
                    "{name} has {len} entries for {n} units"
                )));
            }
        }
        if self.level == Level::Token && self.input_ids.len() != n {
            return Err(ShapeError(format!(
                "input_ids has {} entries for {n} tokens",
                self.input_ids.len()
            )));
        }
        let want = m.layers * m.heads * n * n;
        if self.weights.len() != want {
            return Err(ShapeError(format!(
                "weights hold {} values, expected {} layers × {} heads × {n} × {n} = {want}",
                self.weights.len(),
                m.layers,
                m.heads
            )));
        }
        if let Some(qk) = &self.query_key {
            let tokens = self.spans.last().map_or(0, |s| s.end);
            let want = m.layers * m.heads * tokens * m.head_dim;
            if qk.queries.len() != want || qk.keys.len() != want {
                return Err(ShapeError(format!(
                    "query/key vectors hold {}/{} values, expected {want}",
                    qk.queries.len(),
                    qk.keys.len()
                )));
            }
        }
        Ok(())
    }

    /// Number of units (tokens or words): the side of every attention matrix.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether there are no units at all.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Number of layers.
    pub fn layers(&self) -> usize {
        self.model.layers
    }

    /// Number of heads per layer.
    pub fn heads(&self) -> usize {
        self.model.heads
    }

    /// All weights, `[layers, heads, n, n]` row-major.
    pub fn weights(&self) -> &[f32] {
        &self.weights
    }

    /// One layer's weights, `[heads, n, n]` row-major.
    pub fn layer(&self, layer: usize) -> &[f32] {
        let size = self.heads() * self.len() * self.len();
        &self.weights[layer * size..(layer + 1) * size]
    }

    /// One head's `n × n` matrix, row = query, column = key.
    pub fn head(&self, layer: usize, head: usize) -> &[f32] {
        let n2 = self.len() * self.len();
        let start = (layer * self.heads() + head) * n2;
        &self.weights[start..start + n2]
    }

    /// One attention weight: how much `query` attends to `key` in `layer`/`head`.
    pub fn weight(&self, layer: usize, head: usize, query: usize, key: usize) -> f32 {
        self.head(layer, head)[query * self.len() + key]
    }

    /// The mean over the heads of `layer`, `n × n` row-major.
    pub fn head_mean(&self, layer: usize) -> Vec<f32> {
        let n2 = self.len() * self.len();
        let mut mean = vec![0f32; n2];
        for h in 0..self.heads() {
            for (m, w) in mean.iter_mut().zip(self.head(layer, h)) {
                *m += w;
            }
        }
        let scale = 1.0 / self.heads() as f32;
        mean.iter_mut().for_each(|m| *m *= scale);
        mean
    }

    /// The matrix for a head selection: one head's weights, or the mean over the layer's heads.
    pub fn matrix(&self, layer: usize, head: HeadSel) -> Vec<f32> {
        match head {
            HeadSel::Index(h) => self.head(layer, h).to_vec(),
            HeadSel::Mean => self.head_mean(layer),
        }
    }

    /// Query vector of `token` in `layer`/`head`, if vectors were captured.
    pub fn query(&self, layer: usize, head: usize, token: usize) -> Option<&[f32]> {
        let qk = self.query_key.as_ref()?;
        Some(&qk.queries[self.qk_offset(layer, head, token)..][..self.model.head_dim])
    }

    /// Key vector of `token` in `layer`/`head`, if vectors were captured.
    pub fn key(&self, layer: usize, head: usize, token: usize) -> Option<&[f32]> {
        let qk = self.query_key.as_ref()?;
        Some(&qk.keys[self.qk_offset(layer, head, token)..][..self.model.head_dim])
    }

    fn qk_offset(&self, layer: usize, head: usize, token: usize) -> usize {
        let tokens = self.spans.last().map_or(0, |s| s.end);
        ((layer * self.heads() + head) * tokens + token) * self.model.head_dim
    }

    /// Segment label of unit `i`: `"A"` or `"B"`.
    pub fn segment(&self, i: usize) -> &'static str {
        if self.token_type_ids[i] == 0 {
            "A"
        } else {
            "B"
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small, deterministic attention value for unit tests of analyses and renderers:
    /// `layers × heads` heads over `tokens`; head `h` of layer `l` puts most of each row on key
    /// `(q + l + h) % n`, the rest spread evenly.
    pub fn synthetic(tokens: &[&str], layers: usize, heads: usize) -> Attention {
        let n = tokens.len();
        let mut weights = Vec::with_capacity(layers * heads * n * n);
        for l in 0..layers {
            for h in 0..heads {
                for q in 0..n {
                    let peak = (q + l + h) % n;
                    for k in 0..n {
                        let rest = if n > 1 { 0.3 / (n - 1) as f32 } else { 0.0 };
                        weights.push(if k == peak {
                            0.7 + if n == 1 { 0.3 } else { 0.0 }
                        } else {
                            rest
                        });
                    }
                }
            }
        }
        let special: Vec<bool> = tokens
            .iter()
            .map(|t| t.starts_with('[') && t.ends_with(']'))
            .collect();
        let mut word = 0;
        let word_ids = tokens
            .iter()
            .zip(&special)
            .map(|(t, &s)| {
                if s {
                    None
                } else {
                    if !t.starts_with("##") {
                        word += 1;
                    }
                    Some(word - 1)
                }
            })
            .collect();
        Attention::new(
            ModelInfo {
                id: "synthetic".into(),
                revision: None,
                name: None,
                layers,
                heads,
                hidden_size: heads * 4,
                head_dim: 4,
            },
            tokens.join(" "),
            None,
            tokens.iter().map(|t| t.to_string()).collect(),
            (0..n as u32).collect(),
            vec![0; n],
            special,
            word_ids,
            weights,
            None,
        )
        .expect("synthetic attention is consistent")
    }

    #[test]
    fn indexing_follows_layer_head_query_key() {
        let att = synthetic(&["[CLS]", "a", "b", "[SEP]"], 2, 3);
        // layer 1, head 2, query 0 peaks at key (0+1+2)%4 = 3
        assert!((att.weight(1, 2, 0, 3) - 0.7).abs() < 1e-6);
        assert_eq!(att.head(1, 2).len(), 16);
        assert_eq!(att.layer(1).len(), 48);
    }

    #[test]
    fn head_mean_averages_heads() {
        let att = synthetic(&["[CLS]", "a", "b", "[SEP]"], 1, 2);
        let mean = att.head_mean(0);
        for q in 0..4 {
            for k in 0..4 {
                let want = (att.weight(0, 0, q, k) + att.weight(0, 1, q, k)) / 2.0;
                assert!((mean[q * 4 + k] - want).abs() < 1e-7);
            }
        }
    }

    #[test]
    fn model_name_is_short_for_folders() {
        let mut info = synthetic(&["a"], 1, 1).model;
        info.id = "/models/all-MiniLM-L6-v2/".into();
        assert_eq!(info.name(), "all-MiniLM-L6-v2");
        info.id = "sentence-transformers/all-MiniLM-L6-v2".into();
        info.revision = Some("main".into());
        assert_eq!(info.name(), "sentence-transformers/all-MiniLM-L6-v2");
    }

    #[test]
    fn rejects_wrong_weight_count() {
        let att = synthetic(&["a", "b"], 1, 1);
        let err = Attention::new(
            att.model.clone(),
            String::new(),
            None,
            att.tokens.clone(),
            att.input_ids.clone(),
            att.token_type_ids.clone(),
            att.special.clone(),
            att.word_ids.clone(),
            vec![0.0; 3],
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("expected 1 layers"), "{err}");
    }
}
