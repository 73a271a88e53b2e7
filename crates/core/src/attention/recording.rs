//! What a speech model (Whisper) heard, as the views draw it: the log-mel spectrogram of the
//! window the encoder read, the words the decoder wrote with their decoder rows and their
//! place in time (from the alignment heads), and the samples of the window for a report that
//! plays it. It travels on the run's [`Attention`](super::Attention) values as a picture does
//! ([`super::image`]), so that renderers draw it without the model.
//!
//! Time: the window starts at [`Recording::window_start`] seconds into the recording; encoder
//! frame `f` (a key of the cross-attention) covers `[f, f + 1) × frame_seconds` from there, mel
//! frame `m` `[m, m + 1) × mel_seconds`.

use std::ops::Range;

/// The most samples a [`Recording`] keeps: 30 seconds at 16 kHz (one Whisper window).
pub const MAX_SAMPLES: usize = 30 * 16_000;

/// The most mel bins × frames a [`Recording`] keeps: 128 bins × 3,000 frames (a 30-second
/// window of Whisper large-v3).
pub const MAX_MEL_VALUES: usize = 128 * 3_000;

/// One word the decoder wrote, and where it was said.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedWord {
    /// The word as decoded, with its leading space.
    pub word: String,
    /// Its tokens' rows in the decoder's input (token level, `first..end`): the rows of the
    /// cross-attention that read these tokens. The rows that *predict* them (where the word is
    /// being written, the ones openai-whisper's alignment reads) are one earlier:
    /// [`RecordedWord::predicting_rows`].
    pub rows: Range<usize>,
    /// The encoder frame where it starts (from the window's start).
    pub start_frame: usize,
    /// The encoder frame where it ends (exclusive; equal to the start for a word the alignment
    /// gave no time).
    pub end_frame: usize,
}

impl RecordedWord {
    /// Words found in the captured decoder's `ids`: each word (`word`, its token ids, its start
    /// and end frames), in order, gets the rows where its tokens stand, in order, after the
    /// `prompt_len` tokens of the prompt and the words before it (timestamp tokens may stand
    /// between them). A word whose tokens are not all there (a text cut at the decoder's
    /// positions) is left out, and so are the words after it.
    pub fn place<'a>(
        words: impl IntoIterator<Item = (&'a str, &'a [u32], usize, usize)>,
        ids: &[u32],
        prompt_len: usize,
    ) -> Vec<RecordedWord> {
        let mut at = prompt_len;
        let mut placed = Vec::new();
        for (word, tokens, start_frame, end_frame) in words {
            let mut rows: Option<(usize, usize)> = None;
            for &t in tokens {
                let Some(p) = ids[at.min(ids.len())..].iter().position(|&id| id == t) else {
                    break;
                };
                let p = at + p;
                rows = Some((rows.map_or(p, |r| r.0), p + 1));
                at = p + 1;
            }
            match rows {
                Some((start, end)) if end - start >= tokens.len() => placed.push(RecordedWord {
                    word: word.to_string(),
                    rows: start..end,
                    start_frame,
                    end_frame: end_frame.max(start_frame),
                }),
                _ => break,
            }
        }
        placed
    }

    /// The decoder rows whose next token is one of the word's: `rows` one earlier.
    pub fn predicting_rows(&self) -> Range<usize> {
        self.rows.start.saturating_sub(1)..self.rows.end.saturating_sub(1)
    }
}

/// A speech run's recording, as the views need it (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct Recording {
    /// The recording's file name as the user gave it (escape it where it is shown).
    pub name: String,
    /// Where the window starts in the recording, in seconds.
    pub window_start: f64,
    /// Seconds of audio in the window (the rest of the 30 s the encoder read is padding).
    pub window_seconds: f64,
    /// Seconds per encoder frame (Whisper: 0.02).
    pub frame_seconds: f64,
    /// Seconds per mel frame (Whisper: 0.01, two per encoder frame).
    pub mel_seconds: f64,
    /// Mel bins (rows of [`Recording::mel`]).
    pub mel_bins: usize,
    /// Mel frames kept: the ones the audio covers.
    pub mel_frames: usize,
    /// The log-mel spectrogram as the model read it (Whisper's scaled log10 power),
    /// `mel_bins × mel_frames`, row-major (bin after bin, bin 0 the lowest frequency).
    pub mel: Vec<f32>,
    /// The decoder's words, in order.
    pub words: Vec<RecordedWord>,
    /// The `(layer, head)` pairs of the cross-attention the word times were read from.
    pub alignment_heads: Vec<(usize, usize)>,
    /// The window's samples, mono, in [-1, 1], at `sample_rate` (at most [`MAX_SAMPLES`]);
    /// empty when not kept.
    pub samples: Vec<f32>,
    /// Samples per second of `samples` (16,000).
    pub sample_rate: u32,
}

/// A [`Recording`] whose parts do not fit together.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordingError {
    /// The spectrogram's values are not bins × frames, or too many.
    #[error(
        "the spectrogram holds {len} values for {bins} bins × {frames} frames (at most {MAX_MEL_VALUES})"
    )]
    Mel {
        /// Values held.
        len: usize,
        /// Bins.
        bins: usize,
        /// Frames.
        frames: usize,
    },
    /// More samples than one window.
    #[error("the recording keeps {0} samples, more than one 30-second window at 16 kHz")]
    Samples(usize),
    /// A time step or window that is not a positive number of seconds.
    #[error("the recording's frame durations and window must be positive and finite")]
    Times,
    /// A word ends before it starts, or its rows are empty.
    #[error("word {index} ({word:?}) has rows {rows:?} and frames {start}..{end}")]
    Word {
        /// Its place.
        index: usize,
        /// Its text.
        word: String,
        /// Its rows.
        rows: Range<usize>,
        /// Start frame.
        start: usize,
        /// End frame.
        end: usize,
    },
}

impl Recording {
    /// Check that the parts fit together (sizes, bounds, times); see [`RecordingError`].
    pub fn check(&self) -> Result<(), RecordingError> {
        let (bins, frames) = (self.mel_bins, self.mel_frames);
        if bins.checked_mul(frames) != Some(self.mel.len()) || self.mel.len() > MAX_MEL_VALUES {
            return Err(RecordingError::Mel {
                len: self.mel.len(),
                bins,
                frames,
            });
        }
        if self.samples.len() > MAX_SAMPLES {
            return Err(RecordingError::Samples(self.samples.len()));
        }
        let positive = |x: f64| x.is_finite() && x > 0.0;
        if !positive(self.frame_seconds)
            || !positive(self.mel_seconds)
            || !self.window_seconds.is_finite()
            || self.window_seconds < 0.0
            || !self.window_start.is_finite()
            || (!self.samples.is_empty() && self.sample_rate == 0)
        {
            return Err(RecordingError::Times);
        }
        for (index, w) in self.words.iter().enumerate() {
            if w.rows.is_empty() || w.end_frame < w.start_frame {
                return Err(RecordingError::Word {
                    index,
                    word: w.word.clone(),
                    rows: w.rows.clone(),
                    start: w.start_frame,
                    end: w.end_frame,
                });
            }
        }
        Ok(())
    }

    /// The encoder frames the audio covers (`window_seconds / frame_seconds`, rounded up; at
    /// least 1).
    pub fn frames(&self) -> usize {
        ((self.window_seconds / self.frame_seconds - 1e-9).ceil() as usize).max(1)
    }

    /// The time of encoder frame `f`'s start, in seconds from the recording's start.
    pub fn frame_time(&self, f: usize) -> f64 {
        self.window_start + f as f64 * self.frame_seconds
    }

    /// The spectrogram's value of bin `bin` at mel frame `frame`.
    pub fn mel_at(&self, bin: usize, frame: usize) -> f32 {
        self.mel[bin * self.mel_frames + frame]
    }

    /// The word whose time holds `seconds` (from the recording's start), if any.
    pub fn word_at(&self, seconds: f64) -> Option<usize> {
        let f = ((seconds - self.window_start) / self.frame_seconds).floor();
        if f < 0.0 {
            return None;
        }
        let f = f as usize;
        self.words
            .iter()
            .position(|w| w.start_frame <= f && f < w.end_frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recording() -> Recording {
        Recording {
            name: "a.wav".into(),
            window_start: 0.0,
            window_seconds: 1.0,
            frame_seconds: 0.02,
            mel_seconds: 0.01,
            mel_bins: 2,
            mel_frames: 100,
            mel: vec![0.0; 200],
            words: vec![RecordedWord {
                word: " hi".into(),
                rows: 3..4,
                start_frame: 10,
                end_frame: 20,
            }],
            alignment_heads: vec![(0, 0)],
            samples: vec![0.0; 16_000],
            sample_rate: 16_000,
        }
    }

    #[test]
    fn a_recording_checks_its_parts() {
        let r = recording();
        r.check().unwrap();
        assert_eq!(r.frames(), 50);
        assert_eq!(r.word_at(0.21), Some(0));
        assert_eq!(r.word_at(0.41), None);
        assert_eq!(r.words[0].predicting_rows(), 2..3);
        let bad = Recording {
            mel: vec![0.0; 199],
            ..recording()
        };
        assert!(matches!(bad.check(), Err(RecordingError::Mel { .. })));
        let long = Recording {
            samples: vec![0.0; MAX_SAMPLES + 1],
            ..recording()
        };
        assert!(matches!(long.check(), Err(RecordingError::Samples(_))));
        let mut backwards = recording();
        backwards.words[0].end_frame = 5;
        assert!(matches!(
            backwards.check(),
            Err(RecordingError::Word { .. })
        ));
    }
}
