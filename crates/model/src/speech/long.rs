//! Recordings longer than one window, read as openai-whisper's `transcribe` reads them: windows
//! one after the other, each decoded on its own ([`Model::encode_speech`] on the log-mel
//! spectrogram of its 30 seconds, computed for that stretch alone), the next starting
//!
//! - with timestamps, where the last complete segment ended: after the last pair of timestamp
//!   tokens (`<|a|><|b|>`), at `b`, unless the window's text ends with a single timestamp (then,
//!   as when it holds no pair, at the window's end), as openai-whisper moves its `seek`;
//! - without timestamps, at the window's end (the next 30-second boundary): the model marks no
//!   place where a sentence ends, so the windows are the fixed ones.
//!
//! Each window's transcript and word timings (moved by the window's start) are kept; the
//! attention of one window (the one asked for) is kept, the others' dropped as they are made.

use crate::audio::{self, FeatureConfig};
use crate::error::Error;
use crate::{EncodeOptions, Model};

use super::{SpeechEncoding, SpeechOptions, WordTiming, FRAME_SECONDS};

/// The most windows read from one recording (an hour of audio, the longest read, needs 120 of
/// 30 s; windows that move on by little are bounded by this).
pub const MAX_WINDOWS: usize = 1000;

/// What one window gave.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowTranscript {
    /// Where it starts in the recording, in seconds.
    pub start_seconds: f64,
    /// The seconds of audio it holds (30, less at the end of the recording).
    pub seconds: f64,
    /// Its transcript.
    pub transcript: String,
    /// Its generated ids (the prompt left out).
    pub generated: Vec<u32>,
    /// Its words, their `start` and `end` in seconds of the recording (their frames the
    /// window's own).
    pub words: Vec<WordTiming>,
}

/// The result of [`Model::encode_speech_windows`].
#[derive(Clone, Debug)]
pub struct LongSpeech {
    /// Every window, in order.
    pub windows: Vec<WindowTranscript>,
    /// Which of them was captured.
    pub captured: usize,
    /// Its whole run: the three attentions, the prompt, its own transcript and words (their
    /// times within the window).
    pub encoding: SpeechEncoding,
}

impl LongSpeech {
    /// The recording's transcript: the windows' transcripts joined by a space.
    pub fn transcript(&self) -> String {
        let parts: Vec<&str> = self
            .windows
            .iter()
            .map(|w| w.transcript.as_str())
            .filter(|t| !t.is_empty())
            .collect();
        parts.join(" ")
    }

    /// Every window's words, with the window they came from.
    pub fn words(&self) -> impl Iterator<Item = (usize, &WordTiming)> {
        self.windows
            .iter()
            .enumerate()
            .flat_map(|(i, w)| w.words.iter().map(move |word| (i, word)))
    }
}

/// The seconds after its start where the window after one that generated `generated` (text
/// and timestamp tokens, no prompt, `<|endoftext|>` and what follows left out) begins, as
/// openai-whisper's `transcribe` moves its seek; `window` is the seconds it held.
/// `timestamp_begin` is `<|0.00|>` when timestamps were generated, `None` otherwise.
pub fn next_window(generated: &[u32], timestamp_begin: Option<u32>, window: f64) -> f64 {
    let Some(begin) = timestamp_begin else {
        return window;
    };
    let is_ts: Vec<bool> = generated.iter().map(|&t| t >= begin).collect();
    let single_ending = is_ts.len() >= 2 && !is_ts[is_ts.len() - 2] && is_ts[is_ts.len() - 1];
    // Positions just after each pair of consecutive timestamps.
    let last_pair = (1..is_ts.len()).rev().find(|&i| is_ts[i - 1] && is_ts[i]);
    match last_pair {
        Some(after) if !single_ending => {
            let seconds = f64::from(generated[after - 1] - begin) * FRAME_SECONDS;
            // A segment that ends where it starts would read the same window again.
            if seconds > 0.0 {
                seconds.min(window)
            } else {
                window
            }
        }
        _ => window,
    }
}

impl Model {
    /// Read a recording of any length (mono `samples` at the feature extractor's rate) in
    /// consecutive windows, as the module documentation says, keeping the attention of window
    /// `capture` (0: the first). `progress` is told, for each window, its number and then how
    /// many tokens it has generated after each. A `capture` beyond the windows read is refused
    /// by the caller, which knows their count from the result only when timestamps move the
    /// windows: here it leaves [`LongSpeech::captured`] at the last window.
    pub fn encode_speech_windows(
        &self,
        samples: &[f32],
        features: &FeatureConfig,
        capture: usize,
        options: &SpeechOptions,
        opts: &EncodeOptions,
        progress: &mut (dyn FnMut(usize, usize) + Send),
    ) -> Result<LongSpeech, Error> {
        let rate = f64::from(features.sampling_rate);
        let n = features.n_samples.max(1);
        let timestamp_begin = options
            .timestamps
            .then(|| self.speech_settings().and_then(|s| s.timestamp_begin()))
            .flatten();
        let eot = self
            .generation
            .eos_token_ids
            .first()
            .copied()
            .unwrap_or(u32::MAX);
        let mut windows = Vec::new();
        let mut kept: Option<(usize, SpeechEncoding)> = None;
        let mut seek = 0usize;
        loop {
            let index = windows.len();
            let end = (seek + n).min(samples.len());
            let mut window = audio::log_mel(&samples[seek.min(end)..end], features)
                .into_iter()
                .next()
                .expect("log_mel gives at least one window");
            window.start_seconds = seek as f64 / rate;
            let seconds = (end - seek.min(end)) as f64 / rate;
            let enc = self.encode_speech(&window, seconds, None, options, opts, &mut |d| {
                progress(index, d)
            })?;
            let generated: Vec<u32> = enc
                .seq2seq
                .generation
                .as_ref()
                .map(|g| {
                    g.generated()
                        .iter()
                        .copied()
                        .take_while(|&t| t != eot)
                        .collect()
                })
                .unwrap_or_default();
            let words = enc
                .words
                .iter()
                .map(|w| WordTiming {
                    start: w.start + window.start_seconds,
                    end: w.end + window.start_seconds,
                    ..w.clone()
                })
                .collect();
            windows.push(WindowTranscript {
                start_seconds: window.start_seconds,
                seconds,
                transcript: enc.transcript.clone(),
                generated: generated.clone(),
                words,
            });
            // Window `capture`, or the last read when there are fewer.
            if index <= capture {
                kept = Some((index, enc));
            }
            let advance = next_window(&generated, timestamp_begin, seconds);
            let step = ((advance * rate).round() as usize).clamp(1, n);
            seek += step;
            if seek >= samples.len() || windows.len() >= MAX_WINDOWS {
                break;
            }
        }
        let (captured, encoding) = kept.expect("one window at least");
        Ok(LongSpeech {
            windows,
            captured,
            encoding,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_window_starts_as_openai_whispers_seek_moves() {
        let b = 1000; // <|0.00|>
        let ts = |s: f64| b + (s / FRAME_SECONDS).round() as u32;
        // No timestamps: the next 30-second boundary.
        assert_eq!(next_window(&[5, 6, 7], None, 30.0), 30.0);
        // Segments closed by a pair: after the last pair's first timestamp.
        let tokens = [
            ts(0.0),
            5,
            6,
            ts(4.0),
            ts(4.0),
            7,
            8,
            ts(9.5),
            ts(9.5),
            9,
            10,
        ];
        assert!((next_window(&tokens, Some(b), 30.0) - 9.5).abs() < 1e-9);
        // Ending on a single timestamp: the whole window was read.
        let tokens = [ts(0.0), 5, ts(4.0), ts(4.0), 7, ts(9.5)];
        assert_eq!(next_window(&tokens, Some(b), 30.0), 30.0);
        // No pair at all: the whole window.
        assert_eq!(next_window(&[ts(0.0), 5, 6], Some(b), 30.0), 30.0);
        // A pair at 0.00 would read the window again: the whole window instead.
        assert_eq!(next_window(&[ts(0.0), ts(0.0), 5], Some(b), 30.0), 30.0);
    }
}
