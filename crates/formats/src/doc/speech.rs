//! The `speech` section of a speech model's run (Whisper, `docs/json.md`, "Speech models"):
//! what the recording was, what the model wrote, and when each word was said.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A speech run: the window read, the transcript and the words' timings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SpeechSection {
    /// The recording's file name.
    pub audio: String,
    /// The recording's length in seconds.
    pub duration: f64,
    /// Where the window read starts, in seconds.
    pub window_start: f64,
    /// Seconds of audio in the window (the frames the word timings cover).
    pub window_seconds: f64,
    /// Windows the recording spans (`chunk_length` seconds each); the attention is the first's.
    pub windows: usize,
    /// Seconds per encoder frame (0.02).
    pub frame_seconds: f64,
    /// The language token the decoder was given (`<|en|>`); null for English-only models.
    pub language: Option<String>,
    /// Whether the model detected the language (none was given).
    pub language_detected: bool,
    /// `transcribe` or `translate`.
    pub task: String,
    /// Whether timestamp tokens were generated.
    pub timestamps: bool,
    /// The decoder's prompt (`<|startoftranscript|>`, language, task, `<|notimestamps|>`), ids.
    pub prompt: Vec<u32>,
    /// The transcript (the text tokens decoded).
    pub transcript: String,
    /// The `[layer, head]` pairs of the decoder's cross-attention the timings read.
    pub alignment_heads: Vec<[usize; 2]>,
    /// Whether those are the model's own (`alignment_heads` of its generation config), rather
    /// than openai-whisper's default (every head of the decoder's second half).
    pub alignment_heads_given: bool,
    /// Each word, in order.
    pub words: Vec<WordDoc>,
}

/// One word's timing, found as openai-whisper's `word_timestamps=True` finds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WordDoc {
    /// The word as decoded, with its leading space.
    pub word: String,
    /// Its tokens' ids.
    pub tokens: Vec<u32>,
    /// Its tokens' rows `[first, end)` in the decoder's units.
    pub rows: [usize; 2],
    /// The encoder frame where it starts.
    pub start_frame: usize,
    /// The encoder frame where it ends.
    pub end_frame: usize,
    /// Start, in seconds from the recording's start.
    pub start: f64,
    /// End, in seconds from the recording's start.
    pub end: f64,
}
