//! Whisper's log-mel spectrogram, step for step as transformers' `WhisperFeatureExtractor`
//! computes it on its numpy path (`_np_extract_fbank_features` over `audio_utils.spectrogram`):
//! each 30-second window zero-padded, reflect-padded by `n_fft / 2` at both ends, framed every
//! `hop_length` samples under a periodic Hann window, real FFT (kept in f64, rounded to f32
//! parts as numpy's complex64 buffer does), power spectrum, Slaney mel filters up to 8 kHz,
//! `log10(max(x, 1e-10))`, the last frame dropped, clamped to `max - 8` and mapped by
//! `(x + 4) / 4`.

use std::f64::consts::PI;

use rayon::prelude::*;
use realfft::RealFftPlanner;

use super::FeatureConfig;

/// One window's log-mel spectrogram.
#[derive(Debug, Clone, PartialEq)]
pub struct LogMel {
    /// Mel bins (rows): the config's `feature_size`.
    pub n_mels: usize,
    /// Frames (columns): the config's `nb_max_frames` (3,000, one per 10 ms).
    pub frames: usize,
    /// `n_mels × frames` values, row-major (bin after bin), as transformers'
    /// `input_features[0]`.
    pub data: Vec<f32>,
    /// Where the window starts in the recording, in seconds (a multiple of `chunk_length`).
    pub start_seconds: f64,
}

impl LogMel {
    /// The value of mel bin `mel` at frame `frame`.
    pub fn at(&self, mel: usize, frame: usize) -> f32 {
        self.data[mel * self.frames + frame]
    }
}

/// The log-mel spectrogram of mono `samples` at `cfg.sampling_rate`, one [`LogMel`] per
/// `cfg.n_samples` (30 s): the first covers `[0, 30 s)`, the next `[30 s, 60 s)`, and so on,
/// the last zero-padded to a full window (an empty input gives one window of silence). Each
/// window is what transformers' `WhisperFeatureExtractor` returns for that stretch of audio on
/// its own.
pub fn log_mel(samples: &[f32], cfg: &FeatureConfig) -> Vec<LogMel> {
    let n = cfg.n_samples;
    let windows = samples.len().div_ceil(n).max(1);
    let filters = MelFilters::new(cfg);
    let window = hann_periodic(cfg.n_fft);
    (0..windows)
        .into_par_iter()
        .map(|w| {
            let end = ((w + 1) * n).min(samples.len());
            let chunk = &samples[(w * n).min(end)..end];
            LogMel {
                n_mels: cfg.feature_size,
                frames: cfg.nb_max_frames,
                data: one_window(chunk, cfg, &window, &filters),
                start_seconds: (w * cfg.chunk_length) as f64,
            }
        })
        .collect()
}

/// The Slaney-normalised mel filter bank transformers builds for Whisper
/// (`mel_filter_bank(1 + n_fft // 2, feature_size, 0, 8000, sampling_rate, norm="slaney",
/// mel_scale="slaney")`), as `feature_size` rows of `1 + n_fft / 2` weights (transposed from
/// transformers' `[bins, mels]`).
pub fn mel_filters(cfg: &FeatureConfig) -> Vec<f64> {
    let n_freq = 1 + cfg.n_fft / 2;
    let n_mels = cfg.feature_size;
    let fft_freqs = linspace(0.0, f64::from(cfg.sampling_rate / 2), n_freq);
    let mel_freqs = linspace(hz_to_mel(0.0), hz_to_mel(8000.0), n_mels + 2);
    let filter_freqs: Vec<f64> = mel_freqs.iter().map(|&m| mel_to_hz(m)).collect();
    let diff: Vec<f64> = filter_freqs.windows(2).map(|p| p[1] - p[0]).collect();
    let mut out = vec![0f64; n_mels * n_freq];
    for m in 0..n_mels {
        let enorm = 2.0 / (filter_freqs[m + 2] - filter_freqs[m]);
        for (k, &f) in fft_freqs.iter().enumerate() {
            let down = -(filter_freqs[m] - f) / diff[m];
            let up = (filter_freqs[m + 2] - f) / diff[m + 1];
            out[m * n_freq + k] = 0f64.max(down.min(up)) * enorm;
        }
    }
    out
}

/// numpy's `linspace(start, stop, num)`: `i * step + start`, the last exactly `stop`.
fn linspace(start: f64, stop: f64, num: usize) -> Vec<f64> {
    let step = (stop - start) / (num - 1) as f64;
    let mut v: Vec<f64> = (0..num).map(|i| i as f64 * step + start).collect();
    if let Some(last) = v.last_mut() {
        *last = stop;
    }
    v
}

const MIN_LOG_HZ: f64 = 1000.0;
const MIN_LOG_MEL: f64 = 15.0;

/// The Slaney mel scale (linear below 1 kHz, logarithmic above), as transformers'
/// `hertz_to_mel(..., mel_scale="slaney")`.
fn hz_to_mel(f: f64) -> f64 {
    if f >= MIN_LOG_HZ {
        MIN_LOG_MEL + (f / MIN_LOG_HZ).ln() * (27.0 / 6.4f64.ln())
    } else {
        3.0 * f / 200.0
    }
}

fn mel_to_hz(m: f64) -> f64 {
    if m >= MIN_LOG_MEL {
        MIN_LOG_HZ * ((6.4f64.ln() / 27.0) * (m - MIN_LOG_MEL)).exp()
    } else {
        200.0 * m / 3.0
    }
}

/// numpy's `hanning(n + 1)[:-1]`, computed as numpy does (`0.5 + 0.5 cos(pi k / n)` over
/// `k = -n, -n + 2, …`).
fn hann_periodic(n: usize) -> Vec<f64> {
    let m = (n + 1) as f64;
    (0..n)
        .map(|i| {
            let k = 1.0 - m + 2.0 * i as f64;
            0.5 + 0.5 * (PI * k / (m - 1.0)).cos()
        })
        .collect()
}

/// The filter bank with each row's non-zero span, so the product skips the zeros.
struct MelFilters {
    weights: Vec<f64>,
    n_freq: usize,
    spans: Vec<(usize, usize)>,
}

impl MelFilters {
    fn new(cfg: &FeatureConfig) -> MelFilters {
        let weights = mel_filters(cfg);
        let n_freq = 1 + cfg.n_fft / 2;
        let spans = weights
            .chunks_exact(n_freq)
            .map(|row| {
                let first = row.iter().position(|&w| w != 0.0).unwrap_or(0);
                let last = row.iter().rposition(|&w| w != 0.0).map_or(0, |l| l + 1);
                (first, last.max(first))
            })
            .collect();
        MelFilters {
            weights,
            n_freq,
            spans,
        }
    }
}

fn one_window(
    chunk: &[f32],
    cfg: &FeatureConfig,
    window: &[f64],
    filters: &MelFilters,
) -> Vec<f32> {
    let n_fft = cfg.n_fft;
    let pad = n_fft / 2;
    let n = cfg.n_samples;
    // The window zero-padded to n samples, then reflect-padded (numpy's "reflect": the edge
    // sample is not repeated).
    let mut padded = vec![0f64; n + 2 * pad];
    for (d, &s) in padded[pad..].iter_mut().zip(chunk) {
        *d = f64::from(s);
    }
    for i in 0..pad {
        padded[pad - 1 - i] = padded[pad + 1 + i];
        padded[pad + n + i] = padded[pad + n - 2 - i];
    }
    let frames = cfg.nb_max_frames;
    let n_freq = filters.n_freq;
    let n_mels = cfg.feature_size;
    let fft = RealFftPlanner::<f64>::new().plan_fft_forward(n_fft);
    let mut buf = fft.make_input_vec();
    let mut spec = fft.make_output_vec();
    let mut scratch = fft.make_scratch_vec();
    let mut power = vec![0f64; n_freq];
    // log10 mel values, frame-major while computing.
    let mut logs = vec![0f32; frames * n_mels];
    for t in 0..frames {
        let start = t * cfg.hop_length;
        for ((b, &x), &w) in buf
            .iter_mut()
            .zip(&padded[start..start + n_fft])
            .zip(window)
        {
            *b = x * w;
        }
        // The input length is the planned one, so the transform cannot fail.
        let _ = fft.process_with_scratch(&mut buf, &mut spec, &mut scratch);
        for (p, c) in power.iter_mut().zip(&spec) {
            let (re, im) = (f64::from(c.re as f32), f64::from(c.im as f32));
            // |c|² without the square root and square that `hypot` would round twice (and a
            // slow libm call per bin).
            *p = re * re + im * im;
        }
        for m in 0..n_mels {
            let (lo, hi) = filters.spans[m];
            let row = &filters.weights[m * n_freq..(m + 1) * n_freq];
            let v: f64 = row[lo..hi]
                .iter()
                .zip(&power[lo..hi])
                .map(|(w, p)| w * p)
                .sum();
            logs[t * n_mels + m] = v.max(1e-10).log10() as f32;
        }
    }
    let max = logs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let floor = max - 8.0;
    let mut data = vec![0f32; n_mels * frames];
    for t in 0..frames {
        for m in 0..n_mels {
            data[m * frames + t] = (logs[t * n_mels + m].max(floor) + 4.0) / 4.0;
        }
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hann_is_periodic_and_symmetric() {
        let w = hann_periodic(400);
        assert_eq!(w[0], 0.0);
        assert!((w[200] - 1.0).abs() < 1e-15);
        for k in 1..200 {
            assert!((w[k] - w[400 - k]).abs() < 1e-15, "{k}");
        }
    }

    #[test]
    fn silence_is_one_window_at_the_floor() {
        // All-zero input: every mel value is log10(1e-10) = -10, so (x + 4) / 4 = -1.5.
        let cfg = FeatureConfig::default();
        let out = log_mel(&[], &cfg);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].data.len(), 80 * 3000);
        assert!(out[0].data.iter().all(|&v| v == -1.5));
    }

    #[test]
    fn windows_follow_the_length() {
        let cfg = FeatureConfig::default();
        assert_eq!(log_mel(&vec![0.1; 480_000], &cfg).len(), 1);
        let two = log_mel(&vec![0.1; 480_001], &cfg);
        assert_eq!(two.len(), 2);
        assert_eq!(two[1].start_seconds, 30.0);
    }
}
