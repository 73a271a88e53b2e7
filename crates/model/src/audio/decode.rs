//! Decoding a file into mono samples with symphonia, within [`AudioLimits`].

use std::fs::File;
use std::io::ErrorKind;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use symphonia::core::audio::{SampleBuffer, SignalSpec};
use symphonia::core::codecs::{
    DecoderOptions, CODEC_TYPE_FLAC, CODEC_TYPE_NULL, CODEC_TYPE_PCM_ALAW, CODEC_TYPE_PCM_F32BE,
    CODEC_TYPE_PCM_F32LE, CODEC_TYPE_PCM_F64BE, CODEC_TYPE_PCM_F64LE, CODEC_TYPE_PCM_MULAW,
    CODEC_TYPE_PCM_S16BE, CODEC_TYPE_PCM_S16LE, CODEC_TYPE_PCM_S24BE, CODEC_TYPE_PCM_S24LE,
    CODEC_TYPE_PCM_S32BE, CODEC_TYPE_PCM_S32LE, CODEC_TYPE_PCM_S8, CODEC_TYPE_PCM_U8,
};
use symphonia::core::errors::Error as SymError;
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::{MediaSourceStream, MediaSourceStreamOptions};
use symphonia::core::meta::{Limit, MetadataOptions};
use symphonia::core::probe::Hint;

use crate::small_file::{open_regular, ReadError};

use super::{resample, Audio, AudioError, AudioLimits, MAX_CHANNELS, MAX_SOURCE_RATE, TARGET_RATE};

/// Packets that fail to decode are skipped (as players do: one damaged MP3 frame is not the
/// whole file), up to this many; more means the stream is not what its header says.
const MAX_BAD_PACKETS: usize = 64;

/// Reads a WAV, FLAC, MP3 or OGG/Vorbis file, mixes its channels to mono (their mean) and
/// resamples it to [`TARGET_RATE`] (a 16 kHz file's samples are returned exactly as stored).
///
/// The file is refused before decoding when it is larger than `limits.max_bytes` or its header
/// says it is longer than `limits.max_seconds`, and as soon as the decoded part passes
/// `limits.max_seconds` otherwise; a damaged or hostile file gives an [`AudioError`], never a
/// panic. Memory is the mono samples at the file's rate plus, when resampling, the result.
pub fn load(path: &Path, limits: &AudioLimits) -> Result<Audio, AudioError> {
    let read_err = |source| AudioError::Read {
        path: path.to_path_buf(),
        source,
    };
    // A FIFO or a device is refused without blocking on it.
    let file = open_regular(path).map_err(|e| match e {
        ReadError::NotFound => read_err(std::io::Error::from(ErrorKind::NotFound)),
        ReadError::Io(e) => read_err(e),
        _ => AudioError::NotAFile {
            path: path.to_path_buf(),
        },
    })?;
    let meta = file.metadata().map_err(read_err)?;
    if meta.len() == 0 {
        return Err(AudioError::Empty {
            path: path.to_path_buf(),
        });
    }
    if meta.len() > limits.max_bytes {
        return Err(AudioError::TooBig {
            path: path.to_path_buf(),
            bytes: meta.len(),
            limit: limits.max_bytes,
        });
    }
    // symphonia's demuxers and decoders are not all proven against hostile input: a panic in
    // one is this file's error, not the program's end.
    let decoded = catch_unwind(AssertUnwindSafe(|| decode_mono(path, file, limits)))
        .unwrap_or_else(|_| {
            Err(AudioError::Malformed {
                path: path.to_path_buf(),
                problem: "the decoder failed on its contents".into(),
            })
        })?;
    let Mono {
        samples,
        rate,
        channels,
    } = decoded;
    let samples = if rate == TARGET_RATE {
        samples
    } else {
        resample(&samples, rate, TARGET_RATE)
    };
    Ok(Audio {
        duration: samples.len() as f64 / f64::from(TARGET_RATE),
        samples,
        sample_rate: TARGET_RATE,
        source_rate: rate,
        channels,
    })
}

struct Mono {
    samples: Vec<f32>,
    rate: u32,
    channels: u16,
}

fn decode_mono(path: &Path, file: File, limits: &AudioLimits) -> Result<Mono, AudioError> {
    let malformed = |problem: String| AudioError::Malformed {
        path: path.to_path_buf(),
        problem,
    };
    let mss = MediaSourceStream::new(Box::new(file), MediaSourceStreamOptions::default());
    let mut hint = Hint::new();
    if let Some(ext) = path.extension().and_then(|e| e.to_str()) {
        hint.with_extension(ext);
    }
    let format_opts = FormatOptions {
        // Drop an MP3's encoder delay and padding as mpg123 (soundfile's MP3 decoder) does.
        enable_gapless: true,
        ..FormatOptions::default()
    };
    // Tags and cover pictures are not needed: a hostile one cannot claim memory.
    let meta_opts = MetadataOptions {
        limit_metadata_bytes: Limit::Maximum(1 << 20),
        limit_visual_bytes: Limit::Maximum(0),
    };
    let probed = symphonia::default::get_probe()
        .format(&hint, mss, &format_opts, &meta_opts)
        .map_err(|e| match e {
            SymError::IoError(e) if e.kind() == ErrorKind::UnexpectedEof => {
                malformed("it ends inside its header".into())
            }
            SymError::IoError(e) => AudioError::Read {
                path: path.to_path_buf(),
                source: e,
            },
            other => AudioError::Unsupported {
                path: path.to_path_buf(),
                problem: other.to_string(),
            },
        })?;
    let mut format = probed.format;
    let track = format
        .tracks()
        .iter()
        .find(|t| t.codec_params.codec != CODEC_TYPE_NULL)
        .ok_or_else(|| AudioError::Unsupported {
            path: path.to_path_buf(),
            problem: "no audio track".into(),
        })?;
    let track_id = track.id;
    let params = track.codec_params.clone();
    let bad_header = |what: String| AudioError::BadHeader {
        path: path.to_path_buf(),
        what,
    };
    let rate = params
        .sample_rate
        .ok_or_else(|| malformed("no sampling rate".into()))?;
    if rate == 0 || rate > MAX_SOURCE_RATE {
        return Err(bad_header(format!("a sampling rate of {rate} Hz")));
    }
    if let Some(ch) = params.channels {
        if ch.count() == 0 || ch.count() > MAX_CHANNELS {
            return Err(bad_header(format!("{} channels", ch.count())));
        }
    }
    let max_frames = (limits.max_seconds * f64::from(rate)).floor() as u64;
    if let Some(n) = params.n_frames {
        if n > max_frames {
            return Err(AudioError::TooLong {
                path: path.to_path_buf(),
                seconds: n as f64 / f64::from(rate),
                claimed: true,
                limit: limits.max_seconds,
            });
        }
    }
    let lossless = is_lossless(params.codec);
    let mut decoder = symphonia::default::get_codecs()
        .make(&params, &DecoderOptions::default())
        .map_err(|e| AudioError::Unsupported {
            path: path.to_path_buf(),
            problem: e.to_string(),
        })?;

    // The header's length is only a reservation hint when it is within the limit; the vector
    // grows with what is actually decoded.
    let mut samples: Vec<f32> =
        Vec::with_capacity(params.n_frames.unwrap_or(0).min(max_frames).min(1 << 24) as usize);
    let mut buf: Option<(SampleBuffer<f32>, SignalSpec)> = None;
    let mut channels: u16 = 0;
    let mut bad_packets = 0usize;
    loop {
        let packet = match format.next_packet() {
            Ok(p) => p,
            Err(SymError::IoError(e)) if e.kind() == ErrorKind::UnexpectedEof => break,
            Err(SymError::ResetRequired) => break,
            Err(SymError::IoError(e)) => {
                return Err(AudioError::Read {
                    path: path.to_path_buf(),
                    source: e,
                })
            }
            Err(e) => return Err(malformed(e.to_string())),
        };
        if packet.track_id() != track_id {
            continue;
        }
        let decoded = match decoder.decode(&packet) {
            Ok(d) => d,
            Err(SymError::DecodeError(e)) => {
                bad_packets += 1;
                if bad_packets > MAX_BAD_PACKETS {
                    return Err(malformed(format!(
                        "more than {MAX_BAD_PACKETS} packets fail to decode, the last: {e}"
                    )));
                }
                continue;
            }
            Err(SymError::IoError(e)) if e.kind() == ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(malformed(e.to_string())),
        };
        let spec = *decoded.spec();
        let n_ch = spec.channels.count();
        if n_ch == 0 || n_ch > MAX_CHANNELS {
            return Err(bad_header(format!("{n_ch} channels")));
        }
        if spec.rate != rate {
            return Err(malformed(format!(
                "its sampling rate changes from {rate} Hz to {} Hz",
                spec.rate
            )));
        }
        channels = n_ch as u16;
        let frames = decoded.frames();
        if frames == 0 {
            continue;
        }
        if (samples.len() + frames) as u64 > max_frames {
            return Err(AudioError::TooLong {
                path: path.to_path_buf(),
                seconds: (samples.len() + frames) as f64 / f64::from(rate),
                claimed: false,
                limit: limits.max_seconds,
            });
        }
        let need = decoded.capacity() as u64;
        let b = match &mut buf {
            Some((b, s)) if *s == spec && b.capacity() >= need as usize * n_ch => b,
            _ => &mut buf.insert((SampleBuffer::new(need, spec), spec)).0,
        };
        b.copy_interleaved_ref(decoded);
        let inter = b.samples();
        if n_ch == 1 {
            samples.extend_from_slice(&inter[..frames]);
        } else {
            // The mean of the channels, summed in f64 and rounded once.
            samples.extend(
                inter
                    .chunks_exact(n_ch)
                    .take(frames)
                    .map(|f| (f.iter().map(|&s| f64::from(s)).sum::<f64>() / n_ch as f64) as f32),
            );
        }
    }
    if lossless {
        if let Some(claimed) = params.n_frames {
            if (samples.len() as u64) < claimed {
                return Err(AudioError::Truncated {
                    path: path.to_path_buf(),
                    claimed,
                    found: samples.len() as u64,
                });
            }
        }
    }
    if samples.is_empty() {
        return Err(AudioError::NoSamples {
            path: path.to_path_buf(),
        });
    }
    Ok(Mono {
        samples,
        rate,
        channels,
    })
}

/// Codecs whose header length is exact, so a shorter stream is a truncated file.
fn is_lossless(codec: symphonia::core::codecs::CodecType) -> bool {
    [
        CODEC_TYPE_FLAC,
        CODEC_TYPE_PCM_S8,
        CODEC_TYPE_PCM_U8,
        CODEC_TYPE_PCM_S16LE,
        CODEC_TYPE_PCM_S16BE,
        CODEC_TYPE_PCM_S24LE,
        CODEC_TYPE_PCM_S24BE,
        CODEC_TYPE_PCM_S32LE,
        CODEC_TYPE_PCM_S32BE,
        CODEC_TYPE_PCM_F32LE,
        CODEC_TYPE_PCM_F32BE,
        CODEC_TYPE_PCM_F64LE,
        CODEC_TYPE_PCM_F64BE,
        CODEC_TYPE_PCM_ALAW,
        CODEC_TYPE_PCM_MULAW,
    ]
    .contains(&codec)
}
