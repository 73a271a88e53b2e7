//! Audio input for the speech families: decode a WAV, FLAC, MP3 or OGG/Vorbis file with
//! bounded time and memory ([`load`]), mix it to mono and resample it to 16 kHz ([`Audio`]),
//! then compute Whisper's log-mel spectrogram exactly as transformers'
//! `WhisperFeatureExtractor` does ([`log_mel`], one [`LogMel`] per 30-second window), with the
//! settings read from the checkpoint's `preprocessor_config.json` ([`FeatureConfig`]).
//!
//! ```no_run
//! use std::path::Path;
//! use attnviz_model::audio::{self, AudioLimits, FeatureConfig};
//! let sound = audio::load(Path::new("speech.flac"), &AudioLimits::default())?;
//! let windows = audio::log_mel(&sound.samples, &FeatureConfig::default());
//! println!("{:.2} s in {} window(s) of {}×{}", sound.duration, windows.len(), windows[0].n_mels, windows[0].frames);
//! # Ok::<(), attnviz_model::audio::AudioError>(())
//! ```

mod decode;
mod features;
mod mel;
mod resample;

use std::path::PathBuf;

pub use decode::load;
pub use features::{FeatureConfig, FeatureConfigError};
pub use mel::{log_mel, mel_filters, LogMel};
pub use resample::resample;

/// The sampling rate every [`Audio`] is delivered at (Whisper's).
pub const TARGET_RATE: u32 = 16_000;

/// Decoded sound, mono at [`TARGET_RATE`].
#[derive(Debug, Clone)]
pub struct Audio {
    /// The samples in [-1, 1] as soundfile and librosa give them (16-bit PCM divided by 32768),
    /// the mean of the file's channels, at `sample_rate`.
    pub samples: Vec<f32>,
    /// Always [`TARGET_RATE`].
    pub sample_rate: u32,
    /// The file's own sampling rate (no resampling was done when it is [`TARGET_RATE`]).
    pub source_rate: u32,
    /// How many channels the file had (mixed down to one).
    pub channels: u16,
    /// The length in seconds (`samples.len() / sample_rate`).
    pub duration: f64,
}

/// How much [`load`] accepts: a file over either limit is refused before it is decoded in full
/// (its size before any decoding, its duration from the header when it states one, otherwise as
/// soon as the decoded part passes the limit).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AudioLimits {
    /// The largest file, in bytes.
    pub max_bytes: u64,
    /// The longest recording, in seconds.
    pub max_seconds: f64,
}

impl Default for AudioLimits {
    /// 1 GiB and one hour (an hour at 16 kHz is 230 MB of samples and 120 windows).
    fn default() -> Self {
        AudioLimits {
            max_bytes: 1 << 30,
            max_seconds: 3600.0,
        }
    }
}

/// The highest sampling rate a file may declare (anything above is a damaged or hostile header).
pub const MAX_SOURCE_RATE: u32 = 768_000;
/// The most channels a file may declare.
pub const MAX_CHANNELS: usize = 64;

/// Why an audio file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AudioError {
    /// The file cannot be opened or read.
    #[error("cannot read audio {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// A folder, a FIFO or a device.
    #[error("cannot read audio {}: not a regular file", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// The file holds no bytes.
    #[error("{} is empty; give a WAV, FLAC, MP3 or OGG/Vorbis recording", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// Bigger than [`AudioLimits::max_bytes`].
    #[error("{} is {bytes} bytes, more than the limit of {limit} bytes; cut the recording or raise the limit", path.display())]
    TooBig {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// Longer than [`AudioLimits::max_seconds`] (as its header says, or as decoded so far).
    #[error("{} is {}{seconds:.1} s long, more than the limit of {limit} s; cut the recording or raise the limit", path.display(), if *claimed { "said by its header to be " } else { "at least " })]
    TooLong {
        /// The file.
        path: PathBuf,
        /// Its length, or the part decoded before it passed the limit.
        seconds: f64,
        /// Whether `seconds` is the header's claim.
        claimed: bool,
        /// The limit.
        limit: f64,
    },
    /// Not a format the decoder knows, or not audio at all.
    #[error("{} is not a recording attnviz can decode ({problem}); give a WAV, FLAC, MP3 or OGG/Vorbis file", path.display())]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What the decoder said.
        problem: String,
    },
    /// A known format, but damaged: a bad header, a stream that cannot be decoded.
    #[error("{} is damaged ({problem}); re-export it from an audio editor", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The header promises more audio than the file holds (lossless formats only, whose length
    /// is exact).
    #[error("{} is truncated: its header says {claimed} frames, the file holds {found}; re-export it", path.display())]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Frames the header announces.
        claimed: u64,
        /// Frames decoded.
        found: u64,
    },
    /// The header's sampling rate or channel count is outside what a recording has.
    #[error("{} declares {what}, which no recording has; the header is damaged", path.display())]
    BadHeader {
        /// The file.
        path: PathBuf,
        /// The declared value in words ("0 channels", "a rate of 0 Hz").
        what: String,
    },
    /// Decoded, but no samples at all.
    #[error("{} holds no audio samples; give a recording that is not empty", path.display())]
    NoSamples {
        /// The file.
        path: PathBuf,
    },
}
