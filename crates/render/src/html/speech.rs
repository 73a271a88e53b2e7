//! What the report's Speech tab (`assets/report/speech_view.js`) reads of a speech run: the
//! recording's words and times and the player's audio in the metadata (`meta.speech`,
//! documented in `docs/html.md`), and three payload sections: the log-mel spectrogram
//! (`speech:mel`), the cross-attention as words × time (`speech:words`: the alignment heads'
//! mean, then each layer's head mean, then each head where they fit) and the encoder's
//! self-attention pooled into blocks of 200 ms (`speech:encoder`: each layer's head mean, then
//! each head). The numbers are [`crate::speech`]'s, as the figures draw them.

use base64::Engine;
use serde::Serialize;

use super::payload::{Dtype, Section};
use crate::attention::{Attention, AttentionKind, HeadSel, Recording};
use crate::speech::{pooled_encoder, speech_of, word_matrix, SpeechHeads};

/// Most values of `speech:words` that hold every head (words × frames × layers × heads);
/// beyond, the section holds the alignment mean and the layer means only.
const MOST_WORD_VALUES: usize = 8_000_000;
/// Most values of `speech:encoder` that hold every head; beyond, the layer means only.
const MOST_ENCODER_VALUES: usize = 4_000_000;

/// One word as the tab shows it.
#[derive(Serialize)]
struct WordMeta {
    word: String,
    start_frame: usize,
    end_frame: usize,
    /// Seconds from the recording's start.
    start: f64,
    end: f64,
}

/// The encoder's pooled matrices.
#[derive(Serialize)]
struct EncoderMeta {
    /// Blocks per side.
    side: usize,
    /// Frames per block.
    block: usize,
    /// The encoder's layers.
    layers: usize,
    /// Its heads per layer.
    heads: usize,
    /// Whether each head follows the layer means.
    heads_kept: bool,
}

/// `meta.speech`: the recording, its words, the player's audio and the sections' layout.
#[derive(Serialize)]
pub(super) struct SpeechMeta {
    name: String,
    window_start: f64,
    window_seconds: f64,
    frame_seconds: f64,
    mel_seconds: f64,
    mel_bins: usize,
    mel_frames: usize,
    /// Encoder frames the audio covers (the columns of `speech:words`).
    frames: usize,
    words: Vec<WordMeta>,
    alignment_heads: Vec<[usize; 2]>,
    /// What the first block of `speech:words` is (`mean of the 6 alignment heads`).
    alignment_what: String,
    layers: usize,
    heads: usize,
    layer_numbers: Vec<usize>,
    /// Whether `speech:words` holds each head after the layer means.
    word_heads: bool,
    /// Whether `speech:words` is there (the report holds the cross-attention).
    has_words: bool,
    encoder: Option<EncoderMeta>,
    /// `data:audio/wav;base64,…`: the window as 16-bit PCM; null without samples.
    audio: Option<String>,
}

/// The Speech tab's data, owned until the report is written.
pub(super) struct SpeechData {
    pub(super) meta: SpeechMeta,
    mel: Vec<f32>,
    mel_range: (f32, f32),
    words: Vec<f32>,
    encoder: Vec<f32>,
}

impl SpeechData {
    /// The tab's data for a report of `kinds`, when one of them carries a recording.
    pub(super) fn of(kinds: &[&Attention]) -> Option<SpeechData> {
        let rec: &Recording = kinds.iter().find_map(|a| a.recording.as_deref())?;
        let cross = kinds.iter().copied().find(|a| speech_of(a).is_some());
        let encoder = kinds.iter().copied().find(|a| {
            a.kind == AttentionKind::Encoder && a.level == crate::attention::Level::Token
        });
        let frames = rec.frames();
        let (mut words, mut alignment_what, mut word_heads) = (Vec::new(), String::new(), false);
        let (mut layers, mut heads, mut layer_numbers) = (0, 0, Vec::new());
        if let Some(att) = cross {
            let block = |which| word_matrix(att, which).ok();
            if let Some(m) = block(SpeechHeads::Alignment) {
                alignment_what = m.what;
                words.extend(m.values);
            }
            (layers, heads) = (att.layers(), att.heads());
            layer_numbers = att.layer_numbers().to_vec();
            for l in 0..layers {
                if let Some(m) = block(SpeechHeads::Head {
                    layer: l,
                    head: HeadSel::Mean,
                }) {
                    words.extend(m.values);
                }
            }
            word_heads =
                rec.words.len() * frames.min(att.n_keys()) * layers * heads <= MOST_WORD_VALUES;
            if word_heads {
                for l in 0..layers {
                    for h in 0..heads {
                        if let Some(m) = block(SpeechHeads::Head {
                            layer: l,
                            head: HeadSel::Index(h),
                        }) {
                            words.extend(m.values);
                        }
                    }
                }
            }
        }
        let mut pooled = Vec::new();
        let encoder_meta = encoder.map(|att| {
            let (l_n, h_n) = (att.layers(), att.heads());
            let mut side = 0;
            let mut block = 1;
            for l in 0..l_n {
                let (values, m, b) = pooled_encoder(att, l, HeadSel::Mean);
                (side, block) = (m, b);
                pooled.extend(values);
            }
            let with_heads = side * side * l_n * h_n <= MOST_ENCODER_VALUES;
            if with_heads {
                for l in 0..l_n {
                    for h in 0..h_n {
                        pooled.extend(pooled_encoder(att, l, HeadSel::Index(h)).0);
                    }
                }
            }
            EncoderMeta {
                side,
                block,
                layers: l_n,
                heads: h_n,
                heads_kept: with_heads,
            }
        });
        let mel_range = rec
            .mel
            .iter()
            .filter(|v| v.is_finite())
            .fold((f32::MAX, f32::MIN), |(a, b), &v| (a.min(v), b.max(v)));
        let mel_range = if mel_range.0 < mel_range.1 {
            mel_range
        } else {
            (mel_range.0.min(0.0), mel_range.0.min(0.0) + 1.0)
        };
        let audio = (!rec.samples.is_empty()).then(|| {
            format!(
                "data:audio/wav;base64,{}",
                base64::engine::general_purpose::STANDARD
                    .encode(wav(&rec.samples, rec.sample_rate))
            )
        });
        let meta = SpeechMeta {
            name: rec.name.clone(),
            window_start: rec.window_start,
            window_seconds: rec.window_seconds,
            frame_seconds: rec.frame_seconds,
            mel_seconds: rec.mel_seconds,
            mel_bins: rec.mel_bins,
            mel_frames: rec.mel_frames,
            frames,
            words: rec
                .words
                .iter()
                .map(|w| WordMeta {
                    word: w.word.clone(),
                    start_frame: w.start_frame,
                    end_frame: w.end_frame,
                    start: rec.frame_time(w.start_frame),
                    end: rec.frame_time(w.end_frame),
                })
                .collect(),
            alignment_heads: rec.alignment_heads.iter().map(|&(l, h)| [l, h]).collect(),
            alignment_what,
            layers,
            heads,
            layer_numbers,
            word_heads,
            has_words: !words.is_empty(),
            encoder: encoder_meta,
            audio,
        };
        Some(SpeechData {
            meta,
            mel: rec.mel.clone(),
            mel_range,
            words,
            encoder: pooled,
        })
    }

    /// Whether the report embeds audio (its policy then lets `data:` media play).
    pub(super) fn has_audio(&self) -> bool {
        self.meta.audio.is_some()
    }

    /// The payload sections.
    pub(super) fn sections(&self) -> Vec<Section<'_>> {
        let top = |v: &[f32]| {
            v.iter()
                .copied()
                .filter(|x| x.is_finite())
                .fold(0f32, f32::max)
        };
        let mut out = vec![Section {
            name: "speech:mel".into(),
            dtype: Dtype::U8,
            lo: self.mel_range.0,
            hi: self.mel_range.1,
            parts: vec![self.mel.as_slice()],
        }];
        if !self.words.is_empty() {
            out.push(Section {
                name: "speech:words".into(),
                dtype: Dtype::U16,
                lo: 0.0,
                hi: top(&self.words).max(1e-6),
                parts: vec![self.words.as_slice()],
            });
        }
        if !self.encoder.is_empty() {
            out.push(Section {
                name: "speech:encoder".into(),
                dtype: Dtype::U16,
                lo: 0.0,
                hi: top(&self.encoder).max(1e-6),
                parts: vec![self.encoder.as_slice()],
            });
        }
        out
    }
}

/// `samples` (mono, [-1, 1]) as a WAV file of 16-bit PCM at `rate`.
pub(crate) fn wav(samples: &[f32], rate: u32) -> Vec<u8> {
    let data = (samples.len() * 2) as u32;
    let mut out = Vec::with_capacity(44 + data as usize);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * 2).to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data.to_le_bytes());
    for &s in samples {
        let v = if s.is_finite() {
            s.clamp(-1.0, 1.0)
        } else {
            0.0
        };
        out.extend_from_slice(&((v * 32767.0).round() as i16).to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wav_holds_the_samples_as_16_bit_pcm() {
        let w = wav(&[0.0, 1.0, -1.0, 0.5, 2.0], 16_000);
        assert_eq!(&w[..4], b"RIFF");
        assert_eq!(u32::from_le_bytes(w[4..8].try_into().unwrap()), 36 + 10);
        assert_eq!(u32::from_le_bytes(w[24..28].try_into().unwrap()), 16_000);
        assert_eq!(u32::from_le_bytes(w[40..44].try_into().unwrap()), 10);
        let pcm: Vec<i16> = w[44..]
            .chunks(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(pcm, vec![0, 32767, -32767, 16384, 32767]);
    }
}
