//! Corpus mode's own documents (`docs/corpus.md`): `corpus_stats.json`, the summary and averaged
//! statistics, and `corpus_partial.json`, the exact sums `attnviz merge` and `--resume` read.
//! Each sentence's file is an attention document (`attention-v2`/`-v3`).

use schemars::JsonSchema;
use serde_json::{Map, Value};

/// Statistics `[layer][head]` by name, or null for a corpus with no sentence.
type Grids = Option<Map<String, Value>>;

/// `corpus_stats.json`.
#[derive(JsonSchema)]
#[schemars(title = "attnviz corpus summary (corpus_stats.json), format version 1")]
#[allow(dead_code)]
pub struct CorpusStats {
    /// Always `"attnviz-corpus-stats"`.
    #[schemars(extend("const" = "attnviz-corpus-stats"))]
    format: String,
    /// The format's version.
    format_version: u32,
    /// Always `"0-based"`.
    numbering: super::Numbering,
    /// The model (`id`, `revision`, `family`, shape).
    model: Map<String, Value>,
    /// The input file (standard input: `-`).
    input: String,
    /// `text`, `jsonl` or `images`.
    input_format: String,
    /// `gzip`, `zstd` or null.
    compression: Option<String>,
    /// `K/N` for a shard, else null.
    shard: Option<String>,
    /// The options that shape the figures.
    options: Map<String, Value>,
    /// How the run ended.
    #[schemars(extend("enum" = ["complete", "stopped", "interrupted", "failed"]))]
    end: String,
    /// The line it stopped at or after, else null.
    end_line: Option<u64>,
    /// Why it stopped or failed, else null.
    end_reason: Option<String>,
    /// Lines read.
    lines_read: u64,
    /// Sentences measured.
    sentences: u64,
    /// Of them, pairs.
    pairs: u64,
    /// Sentences cut at the model's length.
    truncated: u64,
    /// The lines of the truncated sentences (the first ones).
    truncated_lines: Value,
    /// Tokens measured.
    tokens: u64,
    /// Units measured (tokens or words).
    units: u64,
    /// Bad lines: count, by kind, the first listed.
    bad_lines: BadLines,
    /// How the sentences' files are named, null with `--per-sentence none`.
    sentence_files: Option<String>,
    /// What each averaged section weighs.
    weighting: Map<String, Value>,
    /// The model's induction scores, or null.
    induction: Option<Map<String, Value>>,
    /// Mean over sentences.
    stats: Grids,
    /// Standard deviation over sentences.
    stats_sd: Grids,
    /// Mean over every query row.
    stats_per_row: Grids,
}

/// `bad_lines`.
#[derive(JsonSchema)]
#[allow(dead_code)]
pub struct BadLines {
    /// Bad lines in all.
    count: u64,
    /// Bad lines by kind (`docs/corpus.md`).
    by_kind: Map<String, Value>,
    /// The first bad lines: `{line, kind, reason}`.
    listed: Vec<Map<String, Value>>,
}

/// `corpus_partial.json`.
#[derive(JsonSchema)]
#[schemars(title = "attnviz corpus partial sums (corpus_partial.json)")]
#[allow(dead_code)]
pub struct CorpusPartial {
    /// Always `"attnviz-corpus-partial"`.
    #[schemars(extend("const" = "attnviz-corpus-partial"))]
    format: String,
    /// The format's version.
    format_version: u32,
    /// The attnviz version that wrote it.
    attnviz: String,
    /// `{index, count}`.
    shard: Map<String, Value>,
    /// The model.
    model: Map<String, Value>,
    /// The model's files and their digests.
    model_files: Value,
    /// `{start, end}`: the start and end tokens' names.
    token_names: Map<String, Value>,
    /// The input file.
    input: String,
    /// `text`, `jsonl` or `images`.
    input_format: String,
    /// `gzip`, `zstd` or null.
    compression: Option<String>,
    /// The options that shape the figures.
    options: Map<String, Value>,
    /// Threads.
    threads: u64,
    /// Induction scores, or null.
    induction: Option<Map<String, Value>>,
    /// How the run ended.
    end: String,
    /// Why, or null.
    end_reason: Option<String>,
    /// Lines read.
    lines: u64,
    /// Bytes of input read.
    input_bytes: u64,
    /// SHA-256 of the input read.
    input_sha256: String,
    /// Lines of this shard.
    lines_in_shard: u64,
    /// Sentences measured.
    sentences: u64,
    /// Lines skipped.
    skipped: u64,
    /// Pairs.
    pairs: u64,
    /// Truncated sentences.
    truncated: u64,
    /// Tokens.
    tokens: u64,
    /// Units.
    units: u64,
    /// Truncated lines.
    truncated_lines: Value,
    /// Bad lines.
    bad_lines: BadLines,
    /// The exact sums.
    sums: Value,
}
