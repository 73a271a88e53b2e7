//! Sampling-rate conversion with rubato's synchronous FFT resampler, in f64.

use rubato::{FftFixedIn, Resampler};

/// Input frames per FFT chunk.
const CHUNK: usize = 1024;

/// Resamples mono `samples` from `from` Hz to `to` Hz (band-limited, as soxr and
/// `scipy.signal.resample_poly` do), returning `ceil(len × to / from)` samples aligned with the
/// input (the resampler's delay is removed). Equal rates return the samples unchanged.
pub fn resample(samples: &[f32], from: u32, to: u32) -> Vec<f32> {
    if from == to || samples.is_empty() {
        return samples.to_vec();
    }
    let want = (samples.len() as u128 * u128::from(to)).div_ceil(u128::from(from)) as usize;
    let Ok(mut rs) = FftFixedIn::<f64>::new(from as usize, to as usize, CHUNK, 2, 1) else {
        // Only zero rates are refused, which `load` has already ruled out.
        return Vec::new();
    };
    let delay = rs.output_delay();
    let mut out: Vec<f64> = Vec::with_capacity(want + delay + 2 * rs.output_frames_max());
    let mut input = vec![0f64; rs.input_frames_max()];
    let mut pos = 0;
    // Full chunks, then zeros (the tail) until the delayed output is complete.
    while out.len() < want + delay {
        let n = rs.input_frames_next();
        input.resize(n, 0.0);
        let take = n.min(samples.len().saturating_sub(pos));
        for (d, s) in input.iter_mut().zip(&samples[pos..pos + take]) {
            *d = f64::from(*s);
        }
        input[take..].fill(0.0);
        pos += take;
        match rs.process(&[&input[..]], None) {
            Ok(chunk) => out.extend_from_slice(&chunk[0]),
            Err(_) => break,
        }
    }
    out.iter()
        .skip(delay)
        .take(want)
        .map(|&v| v as f32)
        .collect()
}
