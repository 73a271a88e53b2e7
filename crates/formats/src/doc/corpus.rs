//! Corpus mode's own documents (`docs/corpus.md`): `corpus_stats.json`, the summary and averaged
//! statistics, and `corpus_partial.json`, the exact sums `attnviz merge` and `--resume` read.
//! Each sentence's file is an attention document (`attention-v2`/`-v3`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::analysis::detectors::Induction;
use crate::analysis::StatsSection;

/// Statistics `[layer][head]` by name, or null for a corpus with no sentence.
type Grids = Option<Map<String, Value>>;

/// `stats` of a corpus summary: the statistics section of an attention document (means over
/// sentences) with the sentences behind each head's figures. The writer serialises a
/// [`StatsSection`] and adds `sentences`; this type is its schema.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct CorpusStatsSection {
    #[serde(flatten)]
    section: StatsSection,
    /// Sentences behind each head's figures, `[layer][head]`.
    sentences: Vec<Vec<u64>>,
}

/// One file of `model_files`: its name (without its folder), size and SHA-256.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FileHashDoc {
    /// Size in bytes.
    pub bytes: u64,
    /// File name.
    pub file: String,
    /// SHA-256, lower-case hex.
    pub sha256: String,
}

/// `model_files`: the SHA-256 of the model's config, weights and tokenizer files (a GGUF file
/// holds all three: its config is null and its one file is the weights).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ModelFilesDoc {
    /// `config.json`, or null (GGUF).
    pub config: Option<FileHashDoc>,
    /// Every tokenizer file present.
    pub tokenizer: Vec<FileHashDoc>,
    /// Every weight file.
    pub weights: Vec<FileHashDoc>,
}

/// `options`: every option that shapes a corpus run's results or files. Runs merged or resumed
/// together must agree on all of them. Fields in name order, as every version wrote them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct CorpusOptionsDoc {
    /// Full-precision numbers in the sentences' files.
    pub full_precision: bool,
    /// `text`, `jsonl` or `images`.
    pub input_format: String,
    /// The optional sections of the sentences' JSON files.
    pub json_include: Vec<String>,
    /// The attention accumulated (encoder–decoders only: `encoder`, `cross`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Special tokens removed and the rows renormalised.
    pub no_special: bool,
    /// What a bad line does: `skip` or `stop`.
    pub on_bad_line: String,
    /// The files written per sentence.
    pub per_sentence: Vec<String>,
    /// Whether each line carries a target (encoder–decoders only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub targets: Option<bool>,
    /// Sentences cut at the model's length instead of refused.
    pub truncate: bool,
    /// Statistics over words.
    pub words: bool,
    /// Options this version does not know (a later attnviz's), kept so that they count when
    /// runs are compared.
    #[serde(flatten)]
    pub later: BTreeMap<String, Value>,
}

/// `corpus_stats.json`: the type the run and `attnviz merge` write.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "attnviz corpus summary (corpus_stats.json), format version 1")]
pub struct CorpusStats {
    /// Always `"attnviz-corpus-stats"`.
    #[schemars(extend("const" = "attnviz-corpus-stats"))]
    pub format: String,
    /// The format's version.
    pub format_version: u32,
    /// Always `"0-based"`.
    pub numbering: super::Numbering,
    /// The model (`id`, `revision`, `family`, shape).
    pub model: super::ModelDoc,
    /// The input file (standard input: `-`).
    pub input: String,
    /// `text`, `jsonl` or `images`.
    pub input_format: String,
    /// `none`, `gzip` or `zstd`.
    pub compression: String,
    /// `K/N` for a shard, else null.
    pub shard: Option<String>,
    /// The options that shape the figures.
    pub options: CorpusOptionsDoc,
    /// How the run ended.
    #[schemars(extend("enum" = ["complete", "stopped", "interrupted", "failed"]))]
    pub end: String,
    /// The line it stopped at or after, else null.
    pub end_line: Option<usize>,
    /// Why it stopped or failed, else null.
    pub end_reason: Option<String>,
    /// Lines read.
    pub lines_read: usize,
    /// Sentences measured.
    pub sentences: u64,
    /// Of them, pairs.
    pub pairs: u64,
    /// Sentences cut at the model's length.
    pub truncated: u64,
    /// The lines of the truncated sentences (the first ones).
    pub truncated_lines: Vec<usize>,
    /// Tokens measured.
    pub tokens: u64,
    /// Units measured (tokens or words).
    pub units: u64,
    /// Bad lines: count, by kind, the first listed.
    pub bad_lines: BadLinesDoc,
    /// How the sentences' files are named, null with `--per-sentence none`.
    pub sentence_files: Option<String>,
    /// What each averaged section weighs.
    pub weighting: WeightingDoc,
    /// The model's induction scores, or null.
    #[schemars(with = "Option<Induction>")]
    pub induction: Value,
    /// Mean over sentences, with `sentences`: the sentences behind each head's figures.
    #[schemars(with = "Option<CorpusStatsSection>")]
    pub stats: Grids,
    /// Standard deviation over sentences, `[layer][head]` by statistic (null where fewer than
    /// two sentences define it).
    #[schemars(with = "Option<BTreeMap<String, Vec<Vec<Option<f64>>>>>")]
    pub stats_sd: Grids,
    /// Mean over every query row.
    #[schemars(with = "Option<StatsSection>")]
    pub stats_per_row: Grids,
    /// A mixture-of-experts model's expert load over the corpus: per routed layer, the tokens
    /// that chose each expert (absent for any other model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_load: Option<super::router::ExpertLoadDoc>,
}

/// `weighting` of a corpus summary: what each averaged section weighs, in words.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct WeightingDoc {
    /// What `rows` counts.
    pub rows: String,
    /// What `sentences` counts.
    pub sentences: String,
    /// How `stats` averages.
    pub stats: String,
    /// How `stats_per_row` averages.
    pub stats_per_row: String,
    /// What `stats_sd` is.
    pub stats_sd: String,
}

// The small objects' fields are in name order: the order every earlier version wrote them in.

/// `bad_lines`: written by the summary and the partial file, read back from the partial file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BadLinesDoc {
    /// Bad lines by kind (`docs/corpus.md`).
    pub by_kind: BTreeMap<String, usize>,
    /// Bad lines in all.
    pub count: usize,
    /// The first bad lines.
    pub listed: Vec<BadLineDoc>,
}

/// One of `bad_lines.listed`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BadLineDoc {
    /// Its kind (`docs/corpus.md`).
    pub kind: String,
    /// Its line number, from 1.
    pub line: usize,
    /// What was wrong with it, in words.
    pub reason: String,
}

/// `shard` of a partial file: shard `index` of `count`, both from 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ShardDoc {
    /// How many shards the corpus was split into.
    pub count: usize,
    /// This shard, 1 to `count`.
    pub index: usize,
}

/// `token_names` of a partial file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TokenNamesDoc {
    /// The end token's name (`none` when the model has none).
    pub end: String,
    /// The start token's name.
    pub start: String,
}

/// `[layer][head]` grids of one kind of number, by statistic name.
pub type GridsByStat<T> = BTreeMap<String, Vec<Vec<T>>>;

/// `sums` of a partial file: the exact fixed-point sums behind every statistic, each
/// `[layer][head]`. The sums are decimal strings (JSON numbers hold 53 bits exactly, these hold
/// 128); the counts are numbers. Fields in name order, as every version wrote them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SumsDoc {
    /// Sentences in which each statistic was defined, by statistic.
    pub defined: GridsByStat<u64>,
    /// Query rows over which each statistic was defined, by statistic.
    pub defined_rows: GridsByStat<u64>,
    /// A mixture-of-experts model's expert load over the lines summed (absent for any other
    /// model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_load: Option<super::router::ExpertLoadDoc>,
    /// The fixed point's fraction bits: a sum is the integer × 2^−fraction_bits.
    pub fraction_bits: i64,
    /// Sentences behind each head's figures.
    pub head_sentences: Vec<Vec<u64>>,
    /// Heads per layer.
    pub heads: usize,
    /// Layers.
    pub layers: usize,
    /// Query rows behind each head's figures.
    pub rows: Vec<Vec<u64>>,
    /// Sum over sentences of each statistic.
    pub sum: GridsByStat<String>,
    /// Sum over every query row of each statistic times the rows.
    pub sum_rows: GridsByStat<String>,
    /// Sum over sentences of each statistic's square.
    pub sum_sq: GridsByStat<String>,
}

/// `corpus_partial.json`: the type the run writes and `attnviz merge` and `--resume` read.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "attnviz corpus partial sums (corpus_partial.json)")]
pub struct CorpusPartial {
    /// Always `"attnviz-corpus-partial"`.
    #[schemars(extend("const" = "attnviz-corpus-partial"))]
    pub format: String,
    /// The format's version.
    pub format_version: u64,
    /// The attnviz version that wrote it.
    pub attnviz: String,
    /// Which shard.
    pub shard: ShardDoc,
    /// The model (`id`, `revision`, `family`, shape).
    pub model: super::ModelDoc,
    /// The model's files and their digests; null when not known (a library caller's run).
    pub model_files: Option<ModelFilesDoc>,
    /// The start and end tokens' names.
    pub token_names: TokenNamesDoc,
    /// The input file.
    pub input: String,
    /// `text`, `jsonl` or `images`.
    pub input_format: String,
    /// `none`, `gzip` or `zstd`.
    pub compression: String,
    /// The options that shape the figures.
    pub options: CorpusOptionsDoc,
    /// Threads.
    pub threads: usize,
    /// Induction scores, or null.
    #[schemars(with = "Option<Induction>")]
    pub induction: Value,
    /// How the run ended: `running` while it runs.
    #[schemars(extend("enum" = ["running", "complete", "stopped", "interrupted", "failed"]))]
    pub end: String,
    /// Why, or null.
    pub end_reason: Option<String>,
    /// Lines read.
    pub lines: usize,
    /// Bytes of input read.
    pub input_bytes: u64,
    /// SHA-256 of the input read.
    pub input_sha256: String,
    /// Lines of this shard among `lines`.
    pub lines_in_shard: usize,
    /// Sentences measured.
    pub sentences: u64,
    /// Lines skipped (bad lines).
    pub skipped: usize,
    /// Pairs.
    pub pairs: u64,
    /// Truncated sentences.
    pub truncated: u64,
    /// Tokens.
    pub tokens: u64,
    /// Units.
    pub units: u64,
    /// The first truncated lines.
    pub truncated_lines: Vec<usize>,
    /// Bad lines.
    pub bad_lines: BadLinesDoc,
    /// The exact sums.
    pub sums: SumsDoc,
}
