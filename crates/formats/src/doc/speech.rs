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
    /// Windows the recording was read in, one after the other (`chunk_length` seconds each at
    /// most; `docs/audio-input.md`, "Longer recordings").
    pub windows: usize,
    /// The window whose attention was captured (from 0): the attentions, `window_start`,
    /// `window_seconds`, `prompt` and `window_transcript` are its; `transcript` and `words`
    /// cover every window.
    #[serde(default)]
    pub window: usize,
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
    /// The recording's transcript: each window's text tokens decoded, joined by a space.
    pub transcript: String,
    /// The captured window's transcript (its decoder's text tokens decoded).
    #[serde(default)]
    pub window_transcript: String,
    /// The `[layer, head]` pairs of the decoder's cross-attention the timings read.
    pub alignment_heads: Vec<[usize; 2]>,
    /// Whether those are the model's own (`alignment_heads` of its generation config), rather
    /// than openai-whisper's default (every head of the decoder's second half).
    pub alignment_heads_given: bool,
    /// Each word of every window, in order.
    pub words: Vec<WordDoc>,
}

/// One word's timing, found as openai-whisper's `word_timestamps=True` finds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WordDoc {
    /// The word as decoded, with its leading space.
    pub word: String,
    /// Its tokens' ids.
    pub tokens: Vec<u32>,
    /// The window it was read in (from 0; [`SpeechSection::window`] is the captured one).
    #[serde(default)]
    pub window: usize,
    /// Its tokens' rows `[first, end)` in its window's decoder units (the captured window's
    /// are the decoder attention's rows).
    pub rows: [usize; 2],
    /// The encoder frame of its window where it starts.
    pub start_frame: usize,
    /// The encoder frame of its window where it ends.
    pub end_frame: usize,
    /// Start, in seconds from the recording's start.
    pub start: f64,
    /// End, in seconds from the recording's start.
    pub end: f64,
}
