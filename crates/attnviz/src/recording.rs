//! The [`Recording`] a speech run's views draw, from what the run read and found: the window's
//! spectrogram and samples, and the words' timings with their rows in the captured decoder.

use crate::attention::{RecordedWord, Recording};
use crate::model::audio::LogMel;
use crate::model::speech::{WordTiming, FRAME_SECONDS};

/// The recording of one window: `name` (the file's), the mono `samples` of the whole recording
/// at `sample_rate`, the `window` the encoder read (`mel_seconds` per mel frame: the feature
/// extractor's hop over its rate) with its `window_seconds` of audio, and the
/// `words` found over the decoder `ids` the run captured (`prompt_len` of them the prompt).
///
/// A word's rows in the timings are those of openai-whisper's alignment sequence (the prompt
/// with `<|notimestamps|>`, the text tokens, `<|endoftext|>`); the captured decoder may hold
/// timestamp tokens between the text tokens, so each word's rows are found again in `ids`: its
/// tokens, in order, after the prompt.
pub(crate) fn recording(
    name: String,
    (samples, sample_rate): (&[f32], u32),
    (window, mel_seconds, window_seconds): (&LogMel, f64, f64),
    words: &[WordTiming],
    (ids, prompt_len): (&[u32], usize),
    alignment_heads: &[(usize, usize)],
) -> Recording {
    let mel_frames = ((window_seconds / mel_seconds).ceil() as usize).clamp(1, window.frames);
    let mel: Vec<f32> = (0..window.n_mels)
        .flat_map(|b| {
            window.data[b * window.frames..][..mel_frames]
                .iter()
                .copied()
        })
        .collect();
    let rate = sample_rate as f64;
    let first = ((window.start_seconds * rate) as usize).min(samples.len());
    let kept = ((window_seconds * rate).round() as usize)
        .min(crate::attention::recording::MAX_SAMPLES)
        .min(samples.len() - first);
    let recorded = RecordedWord::place(
        words.iter().map(|w| {
            (
                w.word.as_str(),
                w.tokens.as_slice(),
                w.start_frame,
                w.end_frame,
            )
        }),
        ids,
        prompt_len,
    );
    Recording {
        name,
        window_start: window.start_seconds,
        window_seconds,
        frame_seconds: FRAME_SECONDS,
        mel_seconds,
        mel_bins: window.n_mels,
        mel_frames,
        mel,
        words: recorded,
        alignment_heads: alignment_heads.to_vec(),
        samples: samples[first..first + kept].to_vec(),
        sample_rate,
    }
}
