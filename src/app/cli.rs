//! Command-line arguments (clap): the flags as typed. [`super::plan`] turns them into a checked
//! plan; nothing else reads them.
//!
//! Option values are the library's own types (colour maps, figures, …), parsed by name through
//! [`attnviz::choice::Choice`] with [`choice`], so each type and its names are defined once, in
//! the library, and the help text lists them. Flags whose effect depends on another flag
//! (`--colormap` on an image output, `--top` on the terminal view) are `Option`s without a clap
//! default, so the plan can tell a flag the user typed from a default and refuse one that would
//! do nothing; their defaults are the plan's and are named in the help text.

use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand};

use attnviz::analysis::{Stat, Weighting};
use attnviz::attention::{AttentionKind, HeadSel};
use attnviz::choice::Choice;
use attnviz::corpus::{InputFormat, OnBadLine, PerSentence, ShardSpec};
use attnviz::render::html::PrecisionChoice;
use attnviz::render::image::{ColorScale, Colormap, Figure, Theme};
use attnviz::render::json::JsonSection;
use attnviz::render::ColorChoice;

/// The `--help` headings of the analysing command, one per task, in the order `--help` shows
/// them (`ORDER`). clap orders headings by their first flag, so [`Args`]'s fields come in
/// this order too (a test checks the printed help).
pub mod heading {
    /// TEXT, --pair, --truncate.
    pub const INPUT: &str = "Input";
    /// Which model, and what of it is captured.
    pub const MODEL: &str = "Model";
    /// What the views show, and the files written (JSON, HTML, a saved capture).
    pub const OUTPUTS: &str = "Outputs";
    /// PNG and SVG figures.
    pub const FIGURES: &str = "Figures (PNG, SVG)";
    /// A vision model's picture.
    pub const PICTURES: &str = "Pictures (vision models)";
    /// A speech model's recording.
    pub const AUDIO: &str = "Audio (speech models)";
    /// Statistics and the analyses beyond raw attention.
    pub const ANALYSES: &str = "Analyses";
    /// Decoders and encoder–decoders: generating, teacher forcing, chat templates.
    pub const GENERATION: &str = "Generation";
    /// `--input FILE`: many sentences.
    pub const CORPUS: &str = "Corpus mode";
    /// Every heading, in order (what the tests check `--help` against).
    #[cfg(test)]
    pub const ORDER: [&str; 9] = [
        INPUT, MODEL, OUTPUTS, FIGURES, PICTURES, AUDIO, ANALYSES, GENERATION, CORPUS,
    ];
}

/// See what a Transformer's attention heads look at.
///
/// Runs TEXT through the model (our own multi-head attention, agreeing with Hugging Face
/// transformers) and shows the attention of every layer and head: in the terminal, as JSON, as
/// PNG/SVG heatmaps and as a self-contained HTML report. Layers and heads are numbered from 0.
#[derive(Debug, Parser)]
#[command(name = "attnviz", version, about, long_about = None, max_term_width = 100)]
#[command(args_conflicts_with_subcommands = true, next_display_order = 1)]
#[command(after_help = "Examples:\n  \
    attnviz \"The quick brown fox jumps over the lazy dog.\"\n  \
    attnviz -m ./all-MiniLM-L6-v2 \"The cat sat.\" --pair \"It was tired.\" --layer 2 --head 5\n  \
    attnviz \"The cat sat on the mat.\" --json attention.json --html report.html --png head.png\n  \
    echo \"Text from a pipe\" | attnviz - --json -\n  \
    attnviz -m gpt2 \"The capital of France is\" --generate 16\n  \
    attnviz -m ollama:qwen2.5:0.5b \"What is attention?\" --chat --generate 32 --html chat.html\n  \
    attnviz -m SmolLM2-135M-Instruct.Q4_1.gguf \"The capital of France is\" --generate 16\n  \
    attnviz --input sentences.txt --out-dir corpus --words\n  \
    attnviz --input corpus.jsonl.gz --out-dir shard-3 --shard 3/8 --resume\n  \
    attnviz models\n  \
    attnviz merge shard-*/corpus_partial.json --out corpus_stats.json\n  \
    attnviz render outputs.npz --html report.html")]
pub struct Args {
    /// A subcommand (`render`, `merge`, `diff`, `serve`, `models`) instead of analysing TEXT. To analyse a
    /// text that is a subcommand's name, write it after `--`: `attnviz -- merge`.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// The sentence to analyse; `-` reads it from standard input. Not with --input. A one-word
    /// text that is a subcommand's name, or one letter from one (`serv`), goes after `--`:
    /// `attnviz -- serv`.
    #[arg(help_heading = heading::INPUT, value_name = "TEXT", display_order = 0)]
    pub text: Option<String>,

    /// A second sentence: encode TEXT and PAIR as a pair (segments A and B).
    #[arg(help_heading = heading::INPUT, short, long, value_name = "PAIR")]
    pub pair: Option<String>,

    /// Cut input longer than the model's maximum positions instead of failing.
    #[arg(help_heading = heading::INPUT, long)]
    pub truncate: bool,

    /// Hugging Face repo id, a local folder with config.json, weights and tokenizer files, a
    /// GGUF file, or a model in another program's store by name: ollama:NAME[:TAG],
    /// lmstudio:PUBLISHER/MODEL[/FILE], llamacpp:NAME (`attnviz models` lists them).
    #[arg(
        help_heading = heading::MODEL,
        short,
        long,
        value_name = "MODEL",
        env = "ATTNVIZ_MODEL",
        default_value = "bert-base-uncased"
    )]
    pub model: String,

    /// Hub revision (branch, tag or commit) of --model.
    #[arg(
        help_heading = heading::MODEL,
        long,
        value_name = "REV",
        default_value = "main"
    )]
    pub revision: String,

    /// Worker threads for the forward pass [default: physical cores; at most 4 × the CPUs
    /// available].
    #[arg(help_heading = heading::MODEL, long, value_name = "N")]
    pub threads: Option<usize>,

    /// Capture only these layers (numbered from 0), e.g. `0,5,10-12`: a long input on a deep
    /// model needs layers × heads × tokens² × 4 bytes for its attention. Every output shows
    /// the captured layers under their own numbers.
    #[arg(help_heading = heading::MODEL, long, value_name = "LIST", value_parser = parse_layers)]
    pub layers: Option<LayerList>,

    /// The most memory the captured attention may take, e.g. `2G`, `512M` (bytes, or with k,
    /// M, G, T; powers of 1024). A larger capture is refused before the model runs
    /// [default: half of this machine's memory].
    #[arg(help_heading = heading::MODEL, long, value_name = "SIZE", value_parser = parse_size)]
    pub max_memory: Option<u64>,

    /// Keep each layer's summary instead of its attention, computed block by block so that no
    /// layer's tokens × tokens matrix is ever held: for long inputs (thousands of tokens).
    /// Per head: each token's top keys (--top-keys), its weight on the first token (the sink)
    /// and its entropy, the attention by distance, a map pooled to at most 256 × 256, and the
    /// full rows of the tokens --query names. Written to the terminal, --json and --html (pooled
    /// maps that zoom to the tokens kept, top-key links, statistics).
    #[arg(help_heading = heading::MODEL, long)]
    pub summarise: bool,

    /// With --summarise: the keys kept per token, largest weight first [default: 16].
    #[arg(help_heading = heading::MODEL, long, value_name = "K", requires = "summarise")]
    pub top_keys: Option<usize>,

    /// What to show and where: the output flags, shared with `attnviz render`.
    #[command(flatten)]
    pub out: Outputs,

    /// Include each head's query and key vectors in the HTML report for its neuron view.
    #[arg(help_heading = heading::OUTPUTS, long)]
    pub neuron: bool,

    /// Save every captured layer's attention to FILE.safetensors, each layer written as the
    /// model computes it, so the capture need not fit in memory (--max-memory then bounds one
    /// layer). Draw it later, reading only the layers needed, with `attnviz render
    /// FILE.safetensors` (docs/save.md).
    #[arg(help_heading = heading::OUTPUTS, long, value_name = "FILE")]
    pub save_attention: Option<PathBuf>,

    /// The number type --save-attention writes: f32 (exact), or f16 (half the size, within
    /// 5e-4 relative) [default: f32].
    #[arg(help_heading = heading::OUTPUTS, long, value_name = "TYPE", value_parser = ["f32", "f16"], requires = "save_attention")]
    pub save_dtype: Option<String>,

    // A picture for a vision model, or pictures for a vision-language model; the help names
    // every vision family ([`image_help`]).
    #[arg(help_heading = heading::PICTURES, long, value_name = "FILE", action = clap::ArgAction::Append, help = image_help())]
    pub image: Vec<PathBuf>,

    /// The vision tower and projector of a GGUF text model (-m model.gguf), from llama.cpp's
    /// projector file (mmproj-*.gguf), as llama.cpp's multimodal CLI takes it: the pair reads
    /// pictures (--image) with the prompt. A model of Ollama's or LM Studio's store uses the
    /// projector the store keeps beside it without this.
    #[arg(help_heading = heading::PICTURES, long, value_name = "FILE")]
    pub mmproj: Option<PathBuf>,

    /// A vision-language model's vision tower alone: its self-attention over the picture,
    /// drawn and written as a vision model's (every view of --image), instead of the language
    /// model's.
    #[arg(help_heading = heading::PICTURES, long)]
    pub tower: bool,

    /// Gemma 3: cut a long picture into pan-and-scan crops (2 to 4 along its longer side, as
    /// transformers' processor does with do_pan_and_scan=True), each read after the whole
    /// picture as a run of its own.
    #[arg(help_heading = heading::PICTURES, long)]
    pub pan_and_scan: bool,

    /// Which attention the picture views draw (with --image).
    #[command(flatten)]
    pub picture: PictureArgs,

    /// A recording (WAV, FLAC, MP3 or OGG/Vorbis) for a speech model (Whisper): decoded, mixed
    /// to mono, resampled to 16 kHz and turned into the model's log-mel spectrogram; it is
    /// transcribed greedily in consecutive windows of 30 s, and the views show one window's
    /// (--window) encoder attention over the audio frames (labelled by time), the decoder's,
    /// and the cross-attention of the words over the frames, with each word's start and end.
    /// No TEXT with it.
    #[arg(help_heading = heading::AUDIO, long, value_name = "FILE")]
    pub audio: Option<PathBuf>,

    /// With --audio: the spoken language (en, de, english, …) [default: detected by
    /// multilingual models].
    #[arg(help_heading = heading::AUDIO, long, value_name = "CODE", requires = "audio")]
    pub language: Option<String>,

    /// With --audio: transcribe in the spoken language, or translate into English [default:
    /// transcribe].
    #[arg(help_heading = heading::AUDIO, long, value_name = "TASK", value_parser = ["transcribe", "translate"], requires = "audio")]
    pub task: Option<String>,

    /// With --audio: generate Whisper's timestamp tokens (<|0.00|> …) between the segments.
    #[arg(help_heading = heading::AUDIO, long, requires = "audio")]
    pub timestamps: bool,

    /// With --audio: the window of a recording longer than 30 s whose attention the views
    /// show, from 0 (the transcript and word timings cover every window) [default: 0].
    #[arg(help_heading = heading::AUDIO, long, value_name = "N", requires = "audio")]
    pub window: Option<usize>,

    /// Per-head statistics (`--stats`, `--stat`).
    #[command(flatten)]
    pub stats: StatsArgs,

    /// What every view draws: the attention probabilities, or the attention weighted by what
    /// it moves, as shares of each row (docs/analyses.md) [default: raw].
    #[arg(help_heading = heading::ANALYSES, long, value_name = "WEIGHTS", value_parser = choice::<Weighting>())]
    pub weighting: Option<Weighting>,

    /// ALTI (Ferrando et al. 2022; docs/analyses.md): how much each input token contributes to
    /// each token's representation after every layer, through the values, the residual and
    /// the norms; `--json` gets `alti` and `alti_per_layer` sections, `--figure alti` draws it
    /// up to --layer, `--html` offers it in the matrix view (self-attention of encoders and
    /// decoders; every layer captured). Costs several forward passes.
    #[arg(help_heading = heading::ANALYSES, long)]
    pub alti: bool,

    /// Value zeroing (Mohebbi et al. 2023; docs/analyses.md): how far each token's output of a
    /// layer moves when a context token's value vector is zeroed, rolled out through the
    /// layers; `--json` gets `value_zeroing` and `value_zeroing_per_layer` sections, `--figure
    /// value-zeroing` draws it up to --layer, `--html` offers it in the matrix view
    /// (self-attention of encoders and decoders; every layer). Costs about one forward pass per
    /// token.
    #[arg(help_heading = heading::ANALYSES, long)]
    pub value_zeroing: bool,

    /// The logit lens (docs/analyses.md): at every layer and position, the token the residual
    /// stream predicts through the model's own head (a decoder's final norm and unembedding, an
    /// encoder's masked-LM head), with its probability, as a table; `--json` gets a
    /// `logit_lens` section, `--html` a lens view (the report opens on it), `--figure lens`
    /// draws it (decoders with a language-model head, encoders with a masked-LM head).
    #[arg(help_heading = heading::ANALYSES, long)]
    pub lens: bool,

    /// Tokens kept per logit-lens cell in the JSON export, at most 100 [default: 5].
    #[arg(help_heading = heading::ANALYSES, long, value_name = "K")]
    pub lens_top: Option<usize>,

    /// Per-head direct logit attribution at the last position (docs/analyses.md): each head's
    /// share of the target token's logit, ranked, and a layers × heads table; `--json` gets a
    /// `head_attribution` section (decoders with a language-model head).
    #[arg(help_heading = heading::ANALYSES, long)]
    pub attribution: bool,

    /// The token the attribution and ablation follow, typed as one token of the vocabulary
    /// (a word after a space usually starts with one: " Paris") [default: the model's own
    /// prediction of the next token]. Implies --attribution.
    #[arg(help_heading = heading::ANALYSES, long, value_name = "TOKEN")]
    pub target_token: Option<String>,

    /// The logit difference A − B of two tokens, per head (implies --attribution, with A as
    /// the target).
    #[arg(help_heading = heading::ANALYSES, long, value_name = "A,B")]
    pub contrast: Option<String>,

    /// Head ablation: remove each head in turn (zeroed, or replaced by its mean over the
    /// input) and report the change in the target's log-probability [default: zero].
    #[arg(help_heading = heading::ANALYSES, long, value_name = "MODE", num_args = 0..=1, default_missing_value = "zero", value_parser = ["zero", "mean"])]
    pub ablate: Option<String>,

    /// Decoder models: generate up to N tokens greedily after TEXT (with a KV cache, stopping
    /// at the model's end-of-sequence token), then show the attention over the prompt and the
    /// generated tokens, which every view marks. Encoder–decoder models (BART, T5, Marian):
    /// TEXT is the source, and the decoder generates up to N tokens [default: 19, or the
    /// checkpoint's max_length less one when smaller].
    #[arg(help_heading = heading::GENERATION, long, value_name = "N")]
    pub generate: Option<usize>,

    /// Encoder–decoder models (BART, T5, Marian): the output to teacher-force. TEXT is the
    /// source; the decoder reads this target shifted right behind its start token, as
    /// transformers does in training.
    #[arg(
        help_heading = heading::GENERATION,
        long,
        value_name = "TEXT",
        conflicts_with = "generate"
    )]
    pub target: Option<String>,

    /// Wrap TEXT in the model's chat template (one user message, the assistant's turn opened),
    /// as chat models expect their input; with --generate, the model answers.
    #[arg(help_heading = heading::GENERATION, long)]
    pub chat: bool,

    /// How long value zeroing and head ablation may each take, e.g. `90s`, `20m`, `2h` (a
    /// number alone is seconds). Both re-run the model many times (value zeroing once per
    /// token); the time is estimated from one pass before the re-runs start, and a longer
    /// analysis is refused [default: 10m].
    #[arg(help_heading = heading::ANALYSES, long, value_name = "TIME", value_parser = parse_duration)]
    pub max_analysis_time: Option<std::time::Duration>,

    /// Corpus mode: one sentence, or a tab-separated pair, per line of FILE (`-` for stdin), or
    /// JSON Lines ({"text": …, "pair": …, "id": …}); gzip or zstd compressed or not. Writes
    /// DIR/sentences/NNNNNN.json (NNNNNN = line number, or the id), DIR/corpus_stats.json (the
    /// per-head statistics averaged over the sentences) and DIR/corpus_partial.json (exact sums,
    /// for `attnviz merge` and --resume), and prints the averaged --stats table.
    #[arg(help_heading = heading::CORPUS, long, value_name = "FILE", conflicts_with_all = ["text", "pair"])]
    pub input: Option<PathBuf>,

    /// Corpus mode: folder for the per-sentence outputs and the corpus statistics.
    #[arg(help_heading = heading::CORPUS, long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,

    /// Corpus mode: what to do with a bad line (empty, too long, more than one tab, not UTF-8;
    /// in JSON Lines also no "text", an id that cannot name a file, or an id used before)
    /// [default: skip].
    #[arg(help_heading = heading::CORPUS, long, value_name = "WHAT", value_parser = choice::<OnBadLine>())]
    pub on_bad_line: Option<OnBadLine>,

    /// Corpus mode: what to write for each sentence into DIR/sentences/, named by line number
    /// (000042.json); comma-separated. `none` writes only DIR/corpus_stats.json [default: json].
    #[arg(
        help_heading = heading::CORPUS,
        long,
        value_name = "LIST",
        value_parser = choice::<PerSentence>(),
        value_delimiter = ','
    )]
    pub per_sentence: Option<Vec<PerSentence>>,

    /// Corpus mode: replace an earlier run's results in --out-dir (its sentences/ files) instead
    /// of refusing to mix two runs.
    #[arg(help_heading = heading::CORPUS, long)]
    pub force: bool,

    /// Corpus mode: process only shard K of N: lines K, K+N, K+2N, … (numbered from 1). Each
    /// shard writes DIR/corpus_partial.json; `attnviz merge` combines them exactly. `auto` takes
    /// K and N from a Slurm array task (SLURM_ARRAY_TASK_ID, _MIN, _STEP, _COUNT); `auto/N`
    /// takes K from a Kubernetes Indexed Job's JOB_COMPLETION_INDEX (from 0) with N its
    /// completions, or checks N against the Slurm array (docs/corpus.md).
    #[arg(help_heading = heading::CORPUS, long, value_name = "K/N|auto[/N]", value_parser = parse_shard)]
    pub shard: Option<ShardSpec>,

    /// Corpus mode: continue the run in --out-dir where it stopped (killed, pre-empted, Ctrl-C),
    /// skipping the sentences already done; with nothing to continue, start.
    #[arg(help_heading = heading::CORPUS, long, conflicts_with = "force")]
    pub resume: bool,

    /// Corpus mode: what each line of --input holds. gzip and zstd compression are recognised
    /// by their content either way [default: auto].
    #[arg(help_heading = heading::CORPUS, long, value_name = "FORMAT", value_parser = choice::<InputFormat>())]
    pub input_format: Option<InputFormat>,
}

/// The output flags: what to show (layer, head, words), the files to write and the terminal
/// view. TEXT and `attnviz render FILE` take them alike; a subcommand's flags come after its
/// name (`attnviz render a.npz --html r.html`), and `attnviz merge` has its own.
#[derive(Debug, clap::Args)]
pub struct Outputs {
    /// Layer to show in the terminal and single-head images (0-based) [default: last layer].
    #[arg(help_heading = heading::OUTPUTS, short, long, value_name = "N")]
    pub layer: Option<usize>,

    /// Head to show (0-based), or `mean` for the mean over the layer's heads [default: mean].
    #[arg(help_heading = heading::OUTPUTS, long, value_name = "N|mean", value_parser = parse_head)]
    pub head: Option<HeadSel>,

    /// Which attention of an encoder–decoder model (BART, T5, Marian) or file the terminal
    /// view, the statistics table and PNG/SVG show, and the kind the HTML report opens on
    /// [default: cross, or the only kind a file holds]; the report and JSON hold all three.
    /// Other models have one, `self`.
    #[arg(help_heading = heading::OUTPUTS, long, value_name = "KIND", value_parser = choice::<AttentionKind>())]
    pub kind: Option<AttentionKind>,

    /// Merge word pieces into words (attention to a word sums its pieces; from a word, averages them).
    #[arg(help_heading = heading::OUTPUTS, long)]
    pub words: bool,

    /// Label tokens as the tokenizer's vocabulary spells them (`Ġquick`, `▁fox`, `Ċ`, `Ã©`)
    /// instead of as a reader reads them (`quick`, `fox`, `↵`, `é`), in the terminal view, the
    /// images and the HTML report (whose page can switch back). JSON holds both.
    #[arg(help_heading = heading::OUTPUTS, long)]
    pub raw_tokens: bool,

    /// Drop the special tokens the tokenizer adds ([CLS]/[SEP], <s>/</s>, BOS/EOS…) and
    /// renormalise each row over the remaining tokens.
    #[arg(help_heading = heading::OUTPUTS, long)]
    pub no_special: bool,

    /// How many most-attended tokens the terminal lists for each token [default: 3].
    #[arg(help_heading = heading::OUTPUTS, long, value_name = "K")]
    pub top: Option<usize>,

    /// Colour in the terminal view and the statistics table [default: auto].
    #[arg(help_heading = heading::OUTPUTS, long, value_name = "WHEN", value_parser = choice::<ColorChoice>())]
    pub color: Option<ColorChoice>,

    /// Don't print the terminal view (outputs requested with --json/--png/… are still written;
    /// an analysis whose result would then reach no output is refused).
    #[arg(help_heading = heading::OUTPUTS, short, long)]
    pub quiet: bool,

    /// Write the attention (and statistics) as JSON to FILE; `-` writes to standard output.
    #[arg(help_heading = heading::OUTPUTS, long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Add sections to every JSON export (--json, --report, corpus mode), comma-separated; the
    /// sections are listed below (docs/json.md describes each).
    #[arg(
        help_heading = heading::OUTPUTS,
        long,
        value_name = "LIST",
        value_parser = choice::<JsonSection>(),
        value_delimiter = ',',
    )]
    pub json_include: Vec<JsonSection>,

    /// Write JSON numbers at full f32 precision instead of 6 significant digits.
    #[arg(help_heading = heading::OUTPUTS, long)]
    pub full_precision: bool,

    /// Write a self-contained interactive HTML report (head, model, matrix and neuron views).
    #[arg(help_heading = heading::OUTPUTS, long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// How the HTML report stores attention weights: 16 bits (within 7.6e-6), 8 bits (within
    /// 2e-3, several times smaller), or auto: 16 bits up to 25 million weights, else 8 (so a
    /// 512-token bert-base report stays under 30 MB). The page states the precision
    /// [default: auto].
    #[arg(help_heading = heading::OUTPUTS, long, value_name = "BITS", value_parser = choice::<PrecisionChoice>())]
    pub html_precision: Option<PrecisionChoice>,

    /// Write everything (JSON, HTML report and every kind of image) into folder DIR.
    #[arg(help_heading = heading::OUTPUTS, long, value_name = "DIR")]
    pub report: Option<PathBuf>,

    /// Write a local model's folder (or GGUF file) and the input files by their full paths in
    /// the JSON, the HTML report, saved captures and corpus summaries [default: by their names,
    /// so that a file shared says nothing of this machine's folders].
    #[arg(help_heading = heading::OUTPUTS, long)]
    pub full_paths: bool,

    /// Write a PNG heatmap (see --figure).
    #[arg(help_heading = heading::FIGURES, long, value_name = "FILE")]
    pub png: Option<PathBuf>,

    /// Write an SVG heatmap (see --figure).
    #[arg(help_heading = heading::FIGURES, long, value_name = "FILE")]
    pub svg: Option<PathBuf>,

    /// What the PNG/SVG shows [default: head].
    #[arg(help_heading = heading::FIGURES, long, value_name = "FIGURE", value_parser = figure_choice())]
    pub figure: Option<Figure>,

    /// Colour map of heatmaps [default: viridis].
    #[arg(help_heading = heading::FIGURES, long, value_name = "MAP", value_parser = choice::<Colormap>())]
    pub colormap: Option<Colormap>,

    /// Light or dark images [default: light].
    #[arg(help_heading = heading::FIGURES, long, value_name = "THEME", value_parser = choice::<Theme>())]
    pub theme: Option<Theme>,

    /// How attention maps to colour in images: auto (square root for inputs over 64 tokens or
    /// when the first token holds most of the attention, else linear; the figure says which and
    /// why); linear; sqrt (weak links show, zero stays zero); log (three decades below the
    /// largest weight). The colour bar's ticks sit at their real values on every scale
    /// [default: auto].
    #[arg(help_heading = heading::FIGURES, long, value_name = "SCALE", value_parser = choice::<ColorScale>())]
    pub scale: Option<ColorScale>,

    /// PNG pixels per layout pixel, for print: 2 doubles the pixels with the same layout
    /// (0.5 to 4). The PNG states 96 × F pixels per inch, so it prints at the same size
    /// [default: 1].
    #[arg(help_heading = heading::FIGURES, long, value_name = "F", value_parser = parse_scale_factor)]
    pub scale_factor: Option<f32>,

    /// PNG pixel density for print, e.g. 300: the same as --scale-factor DPI/96 (48 to 384).
    #[arg(help_heading = heading::FIGURES, long, value_name = "DPI", conflicts_with = "scale_factor", value_parser = parse_dpi)]
    pub dpi: Option<f32>,
}

/// The per-head statistics table: TEXT and `attnviz render FILE` take it alike.
#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    /// Print per-head statistics (entropy, distance, shares to the sequence start/end tokens,
    /// punctuation, self, previous and next, to the first token in causal models, and a label
    /// per head) as a layers × heads overview.
    #[arg(help_heading = heading::ANALYSES, long)]
    pub stats: bool,

    /// Print one statistic as a layers × heads heatmap instead of the overview (implies --stats).
    #[arg(help_heading = heading::ANALYSES, long, value_name = "NAME", value_parser = stat_choice(), ignore_case = true)]
    pub stat: Option<Stat>,
}

/// The most layers a `--layers` list may name (far more than any model has).
const MAX_LAYER_NUMBER: usize = 100_000;

/// The layers `--layers` names, ascending, each once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerList(pub Vec<usize>);

/// `0,5,10-12` → `[0, 5, 10, 11, 12]`: numbers and inclusive ranges, sorted, each once.
pub fn parse_layers(s: &str) -> Result<LayerList, String> {
    let number = |t: &str| -> Result<usize, String> {
        match t.trim().parse::<usize>() {
            Ok(n) if n <= MAX_LAYER_NUMBER => Ok(n),
            Ok(n) => Err(format!("layer {n} is more than any model has")),
            Err(_) => Err(format!(
                "`{}` is not a layer number; give numbers and ranges from 0, e.g. 0,5,10-12",
                t.trim()
            )),
        }
    };
    let mut layers = Vec::new();
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(format!("the range {a}-{b} runs backwards; write {b}-{a}"));
                }
                layers.extend(a..=b);
            }
            None => layers.push(number(part)?),
        }
    }
    layers.sort_unstable();
    layers.dedup();
    Ok(LayerList(layers))
}

/// `2G`, `512M`, `1.5GiB`, `800mb`, `4096` (bytes) → bytes; k/M/G/T are powers of 1024.
/// A time: seconds, or a number with `s`, `m` or `h` (`90`, `90s`, `2.5m`, `1h`).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let (number, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => t.split_at(i),
        _ => (t, "s"),
    };
    let scale = match unit {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(format!(
                "`{s}` is not a time: give seconds, or a number with s, m or h"
            ))
        }
    };
    match number.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 && x * scale <= 1e9 => {
            Ok(std::time::Duration::from_secs_f64(x * scale))
        }
        _ => Err(format!(
            "`{s}` is not a time: give seconds, or a number with s, m or h (at most 10⁹ seconds)"
        )),
    }
}

pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let bad = || format!("`{s}` is not a memory size; write e.g. 2G, 512M or a number of bytes");
    let value: f64 = number.parse().map_err(|_| bad())?;
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit.trim_end_matches("ib").trim_end_matches('b');
    let scale: f64 = match unit {
        "" => 1.0,
        "k" => 1024.0,
        "m" => 1024f64.powi(2),
        "g" => 1024f64.powi(3),
        "t" => 1024f64.powi(4),
        _ => return Err(bad()),
    };
    let bytes = value * scale;
    if !(bytes.is_finite() && bytes >= 1.0 && bytes < 2f64.powi(63)) {
        return Err(format!("`{s}` is not a memory size from 1 byte to 8 EiB"));
    }
    Ok(bytes as u64)
}

/// Subcommands. Without one, attnviz runs a model on TEXT (a text that is a subcommand's name
/// is given after `--`: `attnviz -- render`).
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Draw attention from a file: an attnviz JSON export (any format version), or an .npz /
    /// .safetensors file with an `attention` array [layers, heads, queries, keys] and its
    /// `tokens` (see docs/render.md). Every output flag works as for TEXT.
    #[command(after_help = "Examples:\n  \
        attnviz render attention.json --html report.html\n  \
        attnviz render outputs.npz --png head.png --layer 3 --head 7\n  \
        attnviz render weights.safetensors --tokens tokens.txt --stats")]
    Render(Box<RenderArgs>),
    /// Combine the partial files of corpus shards (`--shard K/N`) into one corpus_stats.json,
    /// exactly as one run over the whole corpus would write it.
    #[command(after_help = "Example:\n  \
        attnviz merge out/shard-*/corpus_partial.json --out corpus_stats.json")]
    Merge(MergeArgs),
    /// Compare two captures (any files `render` reads: attnviz JSON, saved .safetensors
    /// captures, .npz): A − B per head, and each head's Jensen–Shannon distance as a layers ×
    /// heads heatmap, ranked (docs/compare.md).
    #[command(after_help = "Examples:\n  \
        attnviz diff cat.json dog.json\n  \
        attnviz diff cat.json dog.json --png distance.png --html compare.html\n  \
        attnviz diff bert.json roberta.json --words --figure head --layer 1 --head 2 --png head.png\n  \
        attnviz diff base.json tuned.json --json comparison.json -q")]
    Diff(Box<DiffArgs>),
    /// Serve a live local web app: type a text and watch every view of the HTML report follow,
    /// with the models loaded once. Binds 127.0.0.1 only unless --host says otherwise (then a
    /// token in the URL is required).
    #[command(after_help = "Examples:\n  \
        attnviz serve -m ./all-MiniLM-L6-v2\n  \
        attnviz serve -m ./all-MiniLM-L6-v2 -m SmolLM2-135M-Instruct.Q4_1.gguf --port 8750\n  \
        ssh -L 8750:127.0.0.1:8750 remote-host   # then open http://127.0.0.1:8750/ here")]
    Serve(ServeArgs),
    /// List the models on this machine: Ollama's, LM Studio's and llama.cpp's stores and the
    /// Hugging Face cache (their environment variables, else their default folders), each with
    /// its family, size, quantization and whether attnviz can run it (docs/models.md).
    #[command(after_help = "Examples:\n  \
        attnviz models\n  \
        attnviz models --json | jq -r '.models[] | select(.runnable) | .name'\n  \
        attnviz models --verify")]
    Models(ModelsArgs),
}

/// `attnviz models`.
#[derive(Debug, clap::Args)]
pub struct ModelsArgs {
    /// Write the listing as JSON to standard output (schema/models.schema.json) instead of a
    /// table.
    #[arg(long)]
    pub json: bool,

    /// Also check the SHA-256 of every Ollama blob against its manifest's digest (reads every
    /// byte of each). A run checks sizes and headers only.
    #[arg(long)]
    pub verify: bool,
}

/// What `attnviz diff --png/--svg` draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiffFigure {
    /// The layers × heads heatmap of Jensen–Shannon distances, with the farthest heads listed.
    Distance,
    /// One head's A, B and A − B side by side.
    Head,
    /// Every head of one layer's A − B in a grid.
    Layer,
}

/// `attnviz diff A B`.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The first capture (A).
    #[arg(value_name = "A")]
    pub a: PathBuf,

    /// The second capture (B).
    #[arg(value_name = "B")]
    pub b: PathBuf,

    /// Compare at word level even when A and B come from one tokenizer (two tokenizers are
    /// always compared by words).
    #[arg(help_heading = "What to compare", long)]
    pub words: bool,

    /// When A and B have different numbers of layers or heads (two models), compare the layers
    /// and heads they share, by index.
    #[arg(help_heading = "What to compare", long)]
    pub shared: bool,

    /// Of a file with an encoder–decoder's attention, the kind to compare [default: cross];
    /// other files hold one, `self`.
    #[arg(help_heading = "What to compare", long, value_name = "KIND", value_parser = choice::<AttentionKind>())]
    pub kind: Option<AttentionKind>,

    /// The most memory reading each file may take, e.g. `2G` [default: half of this machine's
    /// memory].
    #[arg(help_heading = "What to compare", long, value_name = "SIZE", value_parser = parse_size)]
    pub max_memory: Option<u64>,

    /// Layer of the head figure, the layer figure and the terminal's head table (0-based)
    /// [default: the farthest head's].
    #[arg(help_heading = "What to show", short, long, value_name = "N")]
    pub layer: Option<usize>,

    /// Head of the head figure and the terminal's head table (0-based) [default: the farthest
    /// head (of --layer)].
    #[arg(help_heading = "What to show", long, value_name = "N")]
    pub head: Option<usize>,

    /// Label tokens as the tokenizer's vocabulary spells them (`Ġquick`).
    #[arg(help_heading = "What to show", long)]
    pub raw_tokens: bool,

    /// Write the comparison's numbers as JSON to FILE (docs/json.md, "Comparison"); `-` writes
    /// to standard output.
    #[arg(help_heading = "Outputs", long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write JSON numbers at full precision instead of 6 significant digits.
    #[arg(help_heading = "Outputs", long)]
    pub full_precision: bool,

    /// Name A and B by their full paths in the JSON and the HTML page [default: by their file
    /// names].
    #[arg(help_heading = "Outputs", long)]
    pub full_paths: bool,

    /// Write a PNG (see --figure).
    #[arg(help_heading = "Outputs", long, value_name = "FILE")]
    pub png: Option<PathBuf>,

    /// Write an SVG (see --figure).
    #[arg(help_heading = "Outputs", long, value_name = "FILE")]
    pub svg: Option<PathBuf>,

    /// What the PNG/SVG shows [default: distance].
    #[arg(help_heading = "Outputs", long, value_name = "FIGURE", value_parser = diff_figure())]
    pub figure: Option<DiffFigure>,

    /// Colour map of A, B and the distances (A − B is always blue–white–red) [default: viridis].
    #[arg(help_heading = "Outputs", long, value_name = "MAP", value_parser = choice::<Colormap>())]
    pub colormap: Option<Colormap>,

    /// Light or dark images [default: light].
    #[arg(help_heading = "Outputs", long, value_name = "THEME", value_parser = choice::<Theme>())]
    pub theme: Option<Theme>,

    /// PNG pixels per layout pixel, for print (0.5 to 4) [default: 1].
    #[arg(help_heading = "Outputs", long, value_name = "F", value_parser = parse_scale_factor)]
    pub scale_factor: Option<f32>,

    /// Write a self-contained HTML page: A and B side by side, A − B, and the ranked distance
    /// heatmap (click a head to show it).
    #[arg(help_heading = "Outputs", long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// How many heads the terminal ranks, and how many cells its head table lists [default: 10].
    #[arg(help_heading = "Terminal view", long, value_name = "K")]
    pub top: Option<usize>,

    /// Colour in the terminal view [default: auto].
    #[arg(help_heading = "Terminal view", long, value_name = "WHEN", value_parser = choice::<ColorChoice>())]
    pub color: Option<ColorChoice>,

    /// Don't print the terminal view.
    #[arg(help_heading = "Outputs", short, long)]
    pub quiet: bool,
}

/// The `--figure` names of `attnviz diff`.
fn diff_figure() -> impl TypedValueParser<Value = DiffFigure> {
    PossibleValuesParser::new([
        PossibleValue::new("distance")
            .help("The layers × heads heatmap of Jensen–Shannon distances, ranked"),
        PossibleValue::new("head").help("One head's A, B and A − B (--layer, --head)"),
        PossibleValue::new("layer").help("Every head of --layer's A − B in a grid"),
    ])
    .map(|name| match name.as_str() {
        "head" => DiffFigure::Head,
        "layer" => DiffFigure::Layer,
        _ => DiffFigure::Distance,
    })
}

/// `attnviz serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// A model to serve (hub id, local folder, GGUF file, or ollama:NAME[:TAG],
    /// lmstudio:PUBLISHER/MODEL[/FILE], llamacpp:NAME); repeat for several. The first is
    /// the one the page opens on.
    #[arg(short, long = "model", value_name = "ID|DIR", required = true)]
    pub models: Vec<String>,

    /// Hub revision of every --model.
    #[arg(long, value_name = "REV", default_value = "main")]
    pub revision: String,

    /// The port to listen on; 0 picks a free one (the address is printed).
    #[arg(long, value_name = "N", default_value_t = 8750)]
    pub port: u16,

    /// The address to listen on. Anything but a loopback address requires the token printed
    /// at start in every URL, and is warned about: anyone who can reach the port and has the
    /// token can run the models.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub host: std::net::IpAddr,

    /// Require the token printed at start in every URL on a loopback address too: there, any
    /// user of this machine can reach the server without it.
    #[arg(long)]
    pub token: bool,

    /// Name a local model by its folder's (or GGUF file's) full path in the reports and the
    /// answers [default: by the folder's or file's name].
    #[arg(long)]
    pub full_paths: bool,

    /// The most tokens one request's input may have (text and pair, with special tokens).
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_tokens: usize,

    /// The most tokens one request may generate (decoders).
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_generate: usize,

    /// Requests that may wait for a model while it runs another (and reports that may wait
    /// while one is written); more get 503.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub queue: usize,

    /// Connections open at once; one more is answered 503 and closed.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_connections: usize,

    /// The most memory the runs kept for the page (its frame's first load, Save report) may
    /// take, e.g. `256M`, `1G` (powers of 1024); the oldest are dropped first, the newest kept
    /// whatever its size. At most 16 are kept.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "256M")]
    pub keep_memory: u64,

    /// Seconds one request may take, waiting and running; longer ones get 503.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub timeout: u64,

    /// Worker threads of each forward pass [default: the physical cores].
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,

    /// For tests: every run, once it has its model's turn, waits for one line on stdin before
    /// its forward pass (and every report, once it has the writer's turn, before it is
    /// written), so a test holds a model or the writer busy for exactly as long as it wants.
    #[arg(long, hide = true)]
    pub test_hold: bool,
}

/// `attnviz render FILE`.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// An attnviz JSON export, or an .npz / .safetensors file with `attention` and `tokens`.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// The tokens of FILE's attention, one per line (or a JSON array of strings), when FILE has
    /// none or others should label it.
    #[arg(help_heading = heading::INPUT, long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,

    /// The most memory reading and drawing FILE may take, e.g. `2G`, `512M` (bytes, or with k,
    /// M, G, T; powers of 1024). Checked from the file's headers before anything is read
    /// [default: half of this machine's memory, or of the address-space limit].
    #[arg(help_heading = heading::INPUT, long, value_name = "SIZE", value_parser = parse_size)]
    pub max_memory: Option<u64>,

    /// Of a capture saved with --save-attention, read only these layers (numbered as in the
    /// model), e.g. `3` or `0,5,10-12`; the others are not read at all.
    #[arg(help_heading = heading::INPUT, long, value_name = "LIST", value_parser = parse_layers)]
    pub layers: Option<LayerList>,

    /// What to show and where, as for TEXT.
    #[command(flatten)]
    pub out: Outputs,

    /// Which attention the picture views draw, when FILE is an image run's JSON export.
    #[command(flatten)]
    pub picture: PictureArgs,

    /// Per-head statistics, as for TEXT.
    #[command(flatten)]
    pub stats: StatsArgs,
}

/// What the views of a picture draw: the query, and how rollout fuses heads.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PictureArgs {
    /// With --image (or a file of an image run): the query whose attention the terminal view and figures draw, as the
    /// patch's ROW,COL on the grid (from 0), or `pool`: the attention-pooling head's probe
    /// (SigLIP); default: the class token, or the pooling head on a model without one. For a
    /// vision-language model (LLaVA): a token's number N, whose attention to the picture's
    /// image tokens the figures draw over the picture, or `generated`: each generated token's.
    /// With --summarise: the tokens (numbers from 0, e.g. `0,511`) whose full rows are kept.
    #[arg(help_heading = heading::PICTURES, long, value_name = "ROW,COL|pool|N|generated")]
    pub query: Option<String>,

    /// With an image and `--figure rollout`: how each layer's heads are fused before rolling
    /// out (vit-explain's head_fusion): mean (default), max or min.
    #[arg(help_heading = heading::PICTURES, long, value_name = "FUSION", value_parser = choice::<attnviz::analysis::HeadFusion>())]
    pub head_fusion: Option<attnviz::analysis::HeadFusion>,

    /// With an image and `--figure rollout`: the share of each layer's smallest fused weights
    /// set to 0 before rolling out (vit-explain's discard_ratio), from 0 (default) to below 1.
    #[arg(help_heading = heading::PICTURES, long, value_name = "RATIO")]
    pub discard_ratio: Option<f32>,

    /// With a vision-language model: draw each picture's image tokens one by one (`<img1 r,c>`)
    /// in the terminal view and the figures' matrices, instead of one band per picture
    /// (`picture 1 · 24×24`: its column the sum of a row's attention to the picture, its row the
    /// mean of the picture's rows).
    #[arg(help_heading = heading::PICTURES, long)]
    pub expand_pictures: bool,
}

/// `attnviz merge`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The partial files (DIR/corpus_partial.json of each shard), or the shards' output folders.
    #[arg(value_name = "PARTIAL", required = true)]
    pub partials: Vec<PathBuf>,

    /// Where to write the merged summary; `-` writes it to standard output.
    #[arg(long, value_name = "FILE", required = true)]
    pub out: PathBuf,

    /// Print neither the averaged statistics table nor the closing line.
    #[arg(short, long)]
    pub quiet: bool,

    /// Show one statistic of the table as a layers × heads heatmap.
    #[arg(long, value_name = "NAME", value_parser = stat_choice(), ignore_case = true)]
    pub stat: Option<Stat>,

    /// Colour in the statistics table [default: auto].
    #[arg(long, value_name = "WHEN", value_parser = choice::<ColorChoice>())]
    pub color: Option<ColorChoice>,
}

fn parse_shard(s: &str) -> Result<ShardSpec, attnviz::corpus::shard::ShardError> {
    s.parse()
}

/// A value parser for a library option type: its names (with their descriptions for `--help`),
/// case-insensitive, mapped to the value.
pub fn choice<T: Choice + Send + Sync>() -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(
        T::ALL
            .iter()
            .map(|v| PossibleValue::new(v.name()).help(v.describe())),
    )
    .map(|name| T::from_name(&name).expect("clap accepted only the listed names"))
}

/// `--image`'s help, naming every family that reads images, as the registry lists them.
fn image_help() -> String {
    let families: Vec<&str> = attnviz::model::families::registry::vision_families()
        .map(|f| f.name)
        .collect();
    format!(
        "An image (PNG, JPEG or WebP) for a vision model ({}): its attention over the patches, \
         drawn on the picture, and TEXT is not needed. For a vision-language model (LLaVA): a \
         picture read with the prompt TEXT; repeat --image for several, in the order of the \
         prompt's <image> marks",
        families.join(", ")
    )
}

/// The `--stat` names (the JSON field names, with their titles for `--help`), and the
/// spellings [`Stat`]'s `FromStr` also takes as hidden aliases: without `to_`, with `-` for `_`,
/// and format version 1's `to_cls`/`cls` and `to_sep`/`sep`.
fn stat_choice() -> impl TypedValueParser<Value = Stat> {
    PossibleValuesParser::new(Stat::ALL.iter().map(|&st| {
        let aliases: &[&'static str] = match st {
            Stat::Entropy | Stat::Distance => &[],
            Stat::EntropyNorm => &["entropy-norm"],
            Stat::ToStart => &["to-start", "start", "to_cls", "cls"],
            Stat::ToEnd => &["to-end", "end", "to_sep", "sep"],
            Stat::ToFirst => &["to-first", "first"],
            Stat::ToPunct => &["to-punct", "punct"],
            Stat::ToSelf => &["to-self", "self"],
            Stat::ToPrev => &["to-prev", "prev"],
            Stat::ToNext => &["to-next", "next"],
            Stat::PrevTokenScore => &["prev-token-score"],
            Stat::DuplicateTokenScore => &["duplicate-token-score"],
        };
        PossibleValue::new(st.name())
            .help(st.title())
            .aliases(aliases.iter().copied())
    }))
    .map(|name| {
        name.parse::<Stat>()
            .expect("clap accepted only Stat's names")
    })
}

/// The `--figure` names, with help that names the flags each figure reads (the library's
/// descriptions name none).
fn figure_choice() -> impl TypedValueParser<Value = Figure> {
    PossibleValuesParser::new(Figure::ALL.iter().map(|&f| {
        let help = match f {
            Figure::Head => {
                "One head's query × key heatmap (--layer, --head; `--head mean` for the mean)"
            }
            Figure::Layer => "All heads of --layer in a grid with a shared colour scale",
            Figure::Mean => "The mean over the heads of --layer",
            Figure::Model => f.describe(),
            Figure::Rollout => "Attention rollout (Abnar & Zuidema 2020) up to --layer",
            Figure::Alti => "ALTI (Ferrando et al. 2022), contributions up to --layer (--alti)",
            Figure::ValueZeroing => {
                "Value zeroing (Mohebbi et al. 2023), rolled out up to --layer (--value-zeroing)"
            }
            Figure::Lens => "The logit lens: layers × positions, each cell its most probable token",
            Figure::Attribution => {
                "Each head's direct logit attribution, layers × heads (--target-token, --contrast)"
            }
            Figure::Ablation => {
                "The change in the target's log-probability when each head is removed (--ablate)"
            }
            Figure::Router => {
                "A mixture-of-experts model's router at --layer: tokens × experts, the chosen \
                 experts outlined, and the expert load per layer"
            }
            Figure::Mixing => {
                "A hybrid model's token mixing (Qwen3-Next): the gated delta layers feeding \
                 --layer, each layer's exact mixing matrix at --head on a signed scale (not \
                 attention probabilities)"
            }
        };
        PossibleValue::new(f.name()).help(help)
    }))
    .map(|name| Figure::from_name(&name).expect("clap accepted only the listed names"))
}

fn parse_scale_factor(s: &str) -> Result<f32, String> {
    use attnviz::render::image::{MAX_SCALE_FACTOR, MIN_SCALE_FACTOR};
    match s.parse::<f32>() {
        Ok(f) if (MIN_SCALE_FACTOR..=MAX_SCALE_FACTOR).contains(&f) => Ok(f),
        _ => Err(format!(
            "`{s}` is not a scale factor from {MIN_SCALE_FACTOR} to {MAX_SCALE_FACTOR}"
        )),
    }
}

fn parse_dpi(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(d) if (48.0..=384.0).contains(&d) => Ok(d),
        _ => Err(format!("`{s}` is not a pixel density from 48 to 384 dpi")),
    }
}

fn parse_head(s: &str) -> Result<HeadSel, String> {
    if s.eq_ignore_ascii_case("mean") {
        return Ok(HeadSel::Mean);
    }
    s.parse::<usize>()
        .map(HeadSel::Index)
        .map_err(|_| format!("`{s}` is not a head number (0-based) or `mean`"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Args::command().debug_assert();
    }

    #[test]
    fn help_has_one_heading_per_task_in_order() {
        for long in [false, true] {
            let mut cmd = Args::command();
            let help = if long {
                cmd.render_long_help()
            } else {
                cmd.render_help()
            }
            .to_string();
            let headings: Vec<&str> = help
                .lines()
                .filter(|l| !l.starts_with(' ') && l.ends_with(':'))
                .map(|l| l.trim_end_matches(':'))
                .collect();
            let mut expected = vec!["Commands", "Options"];
            expected.extend(heading::ORDER);
            expected.push("Examples");
            assert_eq!(headings, expected, "long help: {long}");
            // The input group opens with TEXT.
            let input = help
                .split(&format!("\n{}:\n", heading::INPUT))
                .nth(1)
                .unwrap();
            assert!(input.trim_start().starts_with("[TEXT]"), "{input}");
        }
        let mut cmd = Args::command();
        cmd.build();
        for arg in cmd.get_arguments() {
            if matches!(arg.get_id().as_str(), "help" | "version") {
                continue;
            }
            let h = arg.get_help_heading();
            assert!(
                h.is_some_and(|h| heading::ORDER.contains(&h)),
                "{}: heading {h:?}",
                arg.get_id()
            );
        }
    }

    /// Whether `word` occurs in `text` as a word of its own.
    fn names(text: &str, word: &str) -> bool {
        let is_word = |c: char| c.is_alphanumeric() || c == '_';
        text.match_indices(word).any(|(i, _)| {
            let before = text[..i].chars().next_back();
            let after = text[i + word.len()..].chars().next();
            !before.is_some_and(is_word) && !after.is_some_and(is_word)
        })
    }

    #[test]
    fn help_that_names_values_names_them_all() {
        fn check(cmd: &clap::Command) {
            for arg in cmd.get_arguments() {
                let values: Vec<String> = arg
                    .get_possible_values()
                    .iter()
                    .filter(|v| !v.is_hide_set())
                    .map(|v| v.get_name().to_string())
                    .collect();
                let help = arg
                    .get_long_help()
                    .or(arg.get_help())
                    .map(ToString::to_string)
                    .unwrap_or_default();
                let named: Vec<&String> = values.iter().filter(|v| names(&help, v)).collect();
                assert!(
                    named.len() < 2 || named.len() == values.len(),
                    "{} {}: its help names {named:?} of {values:?}; name them all, or none and \
                     let clap list them",
                    cmd.get_name(),
                    arg.get_id()
                );
            }
            for sub in cmd.get_subcommands() {
                check(sub);
            }
        }
        let mut cmd = Args::command();
        cmd.build();
        check(&cmd);
        // --stat lists every statistic, and takes the other spellings its parser knows.
        let stat = cmd.get_arguments().find(|a| a.get_id() == "stat").unwrap();
        let listed: Vec<String> = stat
            .get_possible_values()
            .iter()
            .map(|v| v.get_name().to_string())
            .collect();
        let all: Vec<&str> = Stat::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(listed, all);
        for st in Stat::ALL {
            let name = st.name();
            let short = name.strip_prefix("to_").unwrap_or(name);
            for spelling in [name.to_string(), name.replace('_', "-"), short.to_string()] {
                let args = Args::try_parse_from(["attnviz", "t", "--stat", &spelling]);
                assert_eq!(args.unwrap().stats.stat, Some(st), "--stat {spelling}");
            }
        }
        for v in stat.get_possible_values() {
            for spelling in v.get_name_and_aliases() {
                assert_eq!(
                    spelling.parse::<Stat>().ok().map(Stat::name),
                    Some(v.get_name())
                );
                let args = Args::try_parse_from(["attnviz", "t", "--stat", spelling]).unwrap();
                assert_eq!(args.stats.stat.map(Stat::name), Some(v.get_name()));
            }
        }
    }

    #[test]
    fn image_help_names_every_vision_family() {
        let mut cmd = Args::command();
        cmd.build();
        let image = cmd.get_arguments().find(|a| a.get_id() == "image").unwrap();
        let help = image.get_help().unwrap().to_string();
        let families: Vec<&str> = attnviz::model::families::registry::vision_families()
            .map(|f| f.name)
            .collect();
        assert!(
            families.contains(&"ViT") && families.len() >= 4,
            "{families:?}"
        );
        for f in families {
            assert!(help.contains(f), "--image's help names {f}: {help}");
        }
    }

    #[test]
    fn every_flag_has_a_python_name_or_a_reason() {
        let doc = include_str!("../../docs/python-flags.md");
        let mut rows: Vec<(&str, &str)> = Vec::new();
        for line in doc.lines() {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let Some(cli) = cells
                .get(1)
                .and_then(|c| c.strip_prefix('`'))
                .and_then(|c| c.strip_suffix('`'))
            else {
                continue;
            };
            let python = cells.get(2).copied().unwrap_or("");
            assert!(
                !rows.iter().any(|(c, _)| *c == cli),
                "{cli} has two rows in docs/python-flags.md"
            );
            rows.push((cli, python));
        }
        let mut cmd = Args::command();
        cmd.build();
        let mut cli: Vec<String> = cmd
            .get_arguments()
            .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
            .map(|a| match a.get_long() {
                Some(long) => format!("--{long}"),
                None => a.get_value_names().unwrap()[0].to_string(),
            })
            .collect();
        cli.extend(
            cmd.get_subcommands()
                .filter(|s| s.get_name() != "help")
                .map(|s| format!("attnviz {}", s.get_name())),
        );
        for flag in &cli {
            assert!(
                rows.iter().any(|(c, _)| c == flag),
                "{flag} has no row in docs/python-flags.md: give its Python name, or \"CLI only: \
                 why\""
            );
        }
        for (flag, python) in &rows {
            assert!(
                cli.contains(&flag.to_string()),
                "docs/python-flags.md lists {flag}, which `attnviz --help` does not have"
            );
            match python.strip_prefix("CLI only") {
                Some(reason) => assert!(
                    reason.starts_with(": ") && reason.len() > 10,
                    "{flag}: say why it is CLI only"
                ),
                None => assert!(
                    ["`run(", "`report.", "`attnviz."]
                        .iter()
                        .any(|p| python.starts_with(p)),
                    "{flag}: its Python name, as `run(name=)` or `report.method(name=)`: {python}"
                ),
            }
        }
    }

    #[test]
    fn scale_factor_and_dpi_are_bounded() {
        assert_eq!(parse_scale_factor("2"), Ok(2.0));
        assert!(parse_scale_factor("0.1").is_err() && parse_scale_factor("5").is_err());
        assert!(parse_scale_factor("NaN").is_err() && parse_scale_factor("x").is_err());
        assert_eq!(parse_dpi("300"), Ok(300.0));
        assert!(parse_dpi("1000").is_err() && parse_dpi("inf").is_err());
    }

    #[test]
    fn merge_is_a_subcommand_and_text_still_works() {
        let args = Args::try_parse_from(["attnviz", "The cat sat."]).unwrap();
        assert_eq!(args.text.as_deref(), Some("The cat sat."));
        assert!(args.command.is_none());
        let args =
            Args::try_parse_from(["attnviz", "merge", "a.json", "b", "--out", "x.json"]).unwrap();
        let Some(Command::Merge(m)) = args.command else {
            panic!("merge")
        };
        assert_eq!(m.partials, [PathBuf::from("a.json"), PathBuf::from("b")]);
        assert_eq!(m.out, PathBuf::from("x.json"));
        // The word itself, after `--`.
        let args = Args::try_parse_from(["attnviz", "--", "merge"]).unwrap();
        assert_eq!(args.text.as_deref(), Some("merge"));
        // Text flags do not mix with the subcommand.
        assert!(Args::try_parse_from(["attnviz", "--words", "merge", "a", "--out", "x"]).is_err());
        assert!(Args::try_parse_from(["attnviz", "merge", "--out", "x"]).is_err());
        let args = Args::try_parse_from(["attnviz", "--input", "f", "--shard", "2/5"]).unwrap();
        assert_eq!(
            args.shard,
            Some(ShardSpec::Fixed(attnviz::corpus::Shard::new(2, 5).unwrap()))
        );
        let e = Args::try_parse_from(["attnviz", "--input", "f", "--shard", "0/5"]).unwrap_err();
        assert!(e.to_string().contains("JOB_COMPLETION_INDEX"), "{e}");
        assert!(Args::try_parse_from(["attnviz", "--input", "f", "--resume", "--force"]).is_err());
    }

    #[test]
    fn each_subcommand_takes_only_its_own_flags() {
        // render: the output flags, after its name; no model flags.
        let args = Args::try_parse_from([
            "attnviz", "render", "a.npz", "--html", "r.html", "--stats", "-q", "--tokens", "t",
        ])
        .unwrap();
        let Some(Command::Render(r)) = args.command else {
            panic!("render")
        };
        assert_eq!(r.out.html, Some(PathBuf::from("r.html")));
        assert!(r.stats.stats && r.out.quiet);
        assert_eq!(r.tokens, Some(PathBuf::from("t")));
        assert!(args.out.html.is_none());
        for model_flag in [
            &["-m", "x"][..],
            &["--pair", "x"],
            &["--neuron"],
            &["--input", "f"],
        ] {
            let argv = ["attnviz", "render", "a.npz"].iter().chain(model_flag);
            assert!(Args::try_parse_from(argv).is_err(), "{model_flag:?}");
        }
        // merge: its own --quiet/--stat/--color, and none of the output flags.
        let args = Args::try_parse_from([
            "attnviz", "merge", "a", "--out", "x", "-q", "--stat", "entropy", "--color", "never",
        ])
        .unwrap();
        let Some(Command::Merge(m)) = args.command else {
            panic!("merge")
        };
        assert!(m.quiet && m.stat == Some(Stat::Entropy));
        assert_eq!(m.color, Some(ColorChoice::Never));
        for output_flag in [
            &["--html", "r.html"][..],
            &["--layer", "1"],
            &["--words"],
            &["--top", "2"],
        ] {
            let argv = ["attnviz", "merge", "a", "--out", "x"]
                .iter()
                .chain(output_flag);
            assert!(Args::try_parse_from(argv).is_err(), "{output_flag:?}");
        }
        let args = Args::try_parse_from(["attnviz", "--", "render"]).unwrap();
        assert_eq!(args.text.as_deref(), Some("render"));
        assert!(args.command.is_none());
    }

    #[test]
    fn head_parses_number_or_mean() {
        assert_eq!(parse_head("3"), Ok(HeadSel::Index(3)));
        assert_eq!(parse_head("MEAN"), Ok(HeadSel::Mean));
        assert!(parse_head("-1").is_err());
    }

    #[test]
    fn library_option_types_parse_by_their_names() {
        let args = Args::try_parse_from([
            "attnviz",
            "t",
            "--colormap",
            "magma",
            "--theme",
            "dark",
            "--scale",
            "log",
            "--figure",
            "model",
            "--html-precision",
            "8",
            "--json-include",
            "means,rollout",
            "--color",
            "never",
        ])
        .unwrap();
        assert_eq!(args.out.colormap, Some(Colormap::Magma));
        assert_eq!(args.out.theme, Some(Theme::Dark));
        assert_eq!(args.out.scale, Some(ColorScale::Log));
        assert_eq!(args.out.figure, Some(Figure::Model));
        assert_eq!(args.out.html_precision, Some(PrecisionChoice::Bits8));
        assert_eq!(
            args.out.json_include,
            [JsonSection::Means, JsonSection::Rollout]
        );
        assert_eq!(args.out.color, Some(ColorChoice::Never));
        let e = Args::try_parse_from(["attnviz", "t", "--colormap", "jet"]).unwrap_err();
        assert!(e.to_string().contains("viridis"), "{e}");
    }
}
