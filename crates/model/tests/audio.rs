//! The audio front-end against transformers' `WhisperFeatureExtractor` and soundfile/soxr, from
//! `tests/reference/make_audio.py` (`audio-features.{json,safetensors}`, inputs in
//! `tests/reference/audio-inputs/`), and on damaged and hostile files.
//!
//! The real recording (beckett.wav) needs `scripts/fetch-beckett.sh` (or `ATTNVIZ_AUDIO_DIR`);
//! its test fails, never skips, without it. `-- --nocapture` prints every case's max |Δ|.

use std::path::{Path, PathBuf};
use std::time::Duration;

use attnviz_model::audio::{self, AudioError, AudioLimits, FeatureConfig, LogMel};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// 16 kHz input, no resampling: every value within this of transformers'.
const TOL: f32 = 1e-5;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn reference() -> PathBuf {
    repo().join("tests/reference")
}

struct Refs {
    manifest: Value,
    bytes: Vec<u8>,
}

impl Refs {
    fn load() -> Refs {
        let dir = reference();
        let manifest =
            serde_json::from_slice(&std::fs::read(dir.join("audio-features.json")).unwrap())
                .unwrap();
        let bytes = std::fs::read(dir.join("audio-features.safetensors")).unwrap();
        Refs { manifest, bytes }
    }

    fn case(&self, name: &str) -> &Value {
        self.manifest["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no case {name} in audio-features.json"))
    }

    fn tensor(&self, name: &str) -> (Vec<usize>, Vec<f32>) {
        let st = safetensors::SafeTensors::deserialize(&self.bytes).unwrap();
        let t = st
            .tensor(name)
            .unwrap_or_else(|_| panic!("no tensor {name}"));
        assert_eq!(t.dtype(), safetensors::Dtype::F32, "{name}");
        let v = t
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        (t.shape().to_vec(), v)
    }
}

fn sha256_f32(v: &[f32]) -> String {
    let mut h = Sha256::new();
    for x in v {
        h.update(x.to_le_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The largest |ours − reference| over a case's stored frames, and over the other frames the
/// distance outside each bin's stored [min, max].
fn window_diff(refs: &Refs, key: &str, ours: &LogMel, frames: (usize, usize)) -> (f32, f32) {
    let (shape, stored) = refs.tensor(&format!("{key}.frames"));
    let (a, b) = frames;
    assert_eq!(shape, vec![ours.n_mels, b - a], "{key}");
    let (_, lo) = refs.tensor(&format!("{key}.rest_min"));
    let (_, hi) = refs.tensor(&format!("{key}.rest_max"));
    let mut inside = 0f32;
    let mut outside = 0f32;
    for m in 0..ours.n_mels {
        for t in 0..ours.frames {
            let v = ours.at(m, t);
            if (a..b).contains(&t) {
                let r = stored[m * (b - a) + t - a];
                if (v - r).abs() > inside && std::env::var_os("AUDIO_WHERE").is_some() {
                    eprintln!("  {key} mel {m} frame {t}: ours {v} reference {r}");
                }
                inside = inside.max((v - r).abs());
            } else {
                outside = outside.max(lo[m] - v).max(v - hi[m]);
            }
        }
    }
    (inside, outside)
}

fn config_for(case: &Value) -> FeatureConfig {
    match case["feature_size"].as_u64().unwrap() {
        80 => FeatureConfig::default(),
        128 => FeatureConfig::from_file(
            &reference().join("audio-inputs/large-v3/preprocessor_config.json"),
        )
        .unwrap(),
        n => panic!("feature_size {n}"),
    }
}

/// Decodes the case's file and checks samples (bit for bit) and features (≤ `TOL`).
fn check_exact(refs: &Refs, name: &str, path: &Path) {
    let case = refs.case(name);
    let sound = audio::load(path, &AudioLimits::default()).unwrap();
    assert_eq!(sound.sample_rate, 16_000);
    assert_eq!(
        sound.source_rate as u64,
        case["source_rate"].as_u64().unwrap(),
        "{name}"
    );
    assert_eq!(
        sound.channels as u64,
        case["channels"].as_u64().unwrap(),
        "{name}"
    );
    assert_eq!(
        sound.samples.len() as u64,
        case["n_samples"].as_u64().unwrap(),
        "{name}"
    );
    assert_eq!(
        sha256_f32(&sound.samples),
        case["samples_sha256"].as_str().unwrap(),
        "{name}: samples differ from soundfile's"
    );
    let cfg = config_for(case);
    let windows = audio::log_mel(&sound.samples, &cfg);
    let expected = case["windows"].as_array().unwrap();
    assert_eq!(windows.len(), expected.len(), "{name}: windows");
    for (w, (ours, exp)) in windows.iter().zip(expected).enumerate() {
        assert_eq!(ours.start_seconds, exp["start_seconds"].as_f64().unwrap());
        assert_eq!((ours.n_mels, ours.frames), (cfg.feature_size, 3000));
        let fr = exp["frames"].as_array().unwrap();
        let frames = (
            fr[0].as_u64().unwrap() as usize,
            fr[1].as_u64().unwrap() as usize,
        );
        let (inside, outside) = window_diff(refs, &format!("{name}.w{w}"), ours, frames);
        eprintln!("{name} window {w}: max |Δ| {inside:.2e} over frames {frames:?}, {outside:.2e} outside the others' range");
        assert!(inside <= TOL, "{name} window {w}: max |Δ| {inside} > {TOL}");
        assert!(
            outside <= TOL,
            "{name} window {w}: {outside} outside the reference's range"
        );
    }
}

#[test]
fn mel_filters_match_transformers() {
    let refs = Refs::load();
    for n_mels in [80usize, 128] {
        let cfg = FeatureConfig {
            feature_size: n_mels,
            ..FeatureConfig::default()
        };
        let ours = audio::mel_filters(&cfg);
        let (shape, theirs) = refs.tensor(&format!("mel_filters.{n_mels}"));
        assert_eq!(shape, vec![n_mels, 201]);
        // The reference is stored as f32: the only difference allowed is its rounding.
        let worst = ours
            .iter()
            .zip(&theirs)
            .map(|(&a, &b)| ((a as f32) - b).abs())
            .fold(0f32, f32::max);
        eprintln!("mel filters {n_mels}: max |Δ| {worst:.2e}");
        assert_eq!(worst, 0.0, "{n_mels} bins");
    }
}

#[test]
fn sixteen_khz_wav_matches_transformers() {
    let refs = Refs::load();
    let inputs = reference().join("audio-inputs");
    check_exact(&refs, "chirp16k", &inputs.join("chirp16k.wav"));
    check_exact(&refs, "stereo16k", &inputs.join("stereo16k.wav"));
}

/// 24-bit and 8-bit PCM and 32-bit float WAV: the samples as soundfile scales them.
#[test]
fn other_sample_formats_match_soundfile() {
    let refs = Refs::load();
    let inputs = reference().join("audio-inputs");
    check_exact(&refs, "chirp16k_24bit", &inputs.join("chirp16k-24bit.wav"));
    check_exact(&refs, "chirp16k_8bit", &inputs.join("chirp16k-8bit.wav"));
    check_exact(&refs, "chirp16k_float", &inputs.join("chirp16k-float.wav"));
}

#[test]
fn large_v3_128_bins_match_transformers() {
    let refs = Refs::load();
    check_exact(
        &refs,
        "chirp16k_128",
        &reference().join("audio-inputs/chirp16k.wav"),
    );
}

#[test]
fn long_flac_gives_consecutive_windows() {
    let refs = Refs::load();
    check_exact(
        &refs,
        "long16k",
        &reference().join("audio-inputs/long16k.flac"),
    );
}

#[test]
fn real_recording_matches_transformers() {
    let dir = match std::env::var_os("ATTNVIZ_AUDIO_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => repo().join(".cache/audio"),
    };
    let path = dir.join("beckett.wav");
    assert!(
        path.is_file(),
        "beckett.wav not found: {} is missing. Run scripts/fetch-beckett.sh (or set ATTNVIZ_AUDIO_DIR to a folder holding beckett.wav).",
        path.display()
    );
    check_exact(&Refs::load(), "beckett", &path);
}

/// Resampled (44.1 kHz stereo FLAC, 48 kHz mono WAV): against soxr's HQ resampling (librosa's
/// default), samples and features; the manifest records how far scipy's resample_poly is from
/// soxr, for scale.
#[test]
fn resampled_files_are_close_to_soxr() {
    let refs = Refs::load();
    for (name, file, rate, channels) in [
        ("stereo44k", "stereo44k.flac", 44_100, 2),
        ("mono48k", "mono48k.wav", 48_000, 1),
    ] {
        let case = refs.case(name);
        let sound = audio::load(
            &reference().join("audio-inputs").join(file),
            &AudioLimits::default(),
        )
        .unwrap();
        assert_eq!((sound.source_rate, sound.channels), (rate, channels));
        assert_eq!(
            sound.samples.len() as u64,
            case["n_samples"].as_u64().unwrap()
        );
        let (_, soxr) = refs.tensor(&format!("{name}.soxr_samples"));
        let sample_diff = sound
            .samples
            .iter()
            .zip(&soxr)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        let windows = audio::log_mel(&sound.samples, &FeatureConfig::default());
        let fr = case["windows"][0]["frames"].as_array().unwrap();
        let frames = (
            fr[0].as_u64().unwrap() as usize,
            fr[1].as_u64().unwrap() as usize,
        );
        let (inside, outside) = window_diff(&refs, &format!("{name}.w0"), &windows[0], frames);
        eprintln!(
            "{name}: samples max |Δ| {sample_diff:.2e} from soxr; features max |Δ| {inside:.2e} (soxr vs resample_poly: samples {}, features {})",
            case["soxr_vs_poly_samples_max_abs"], case["windows"][0]["soxr_vs_poly_features_max_abs"]
        );
        // Measured: samples 1.0e-2 and features 2.5e-2 at 44.1 kHz, 5.6e-3 and 4.8e-2 at
        // 48 kHz, all at 7.5–8 kHz (mel bins 77–79, the resamplers' transition band), where
        // soxr and resample_poly differ by 0.10 and 1.55 (0.058 and 1.30) themselves.
        assert!(sample_diff <= 1.5e-2, "{name}: samples {sample_diff}");
        assert!(inside <= 0.05, "{name}: features {inside}");
        assert!(outside <= 0.05, "{name}: features outside {outside}");
    }
}

/// MP3 and OGG/Vorbis: symphonia's decoders against libsndfile's (mpg123, libvorbis).
#[test]
fn lossy_files_are_close_to_libsndfile() {
    let refs = Refs::load();
    for (name, file) in [
        ("tones16k_mp3", "tones16k.mp3"),
        ("tones16k_ogg", "tones16k.ogg"),
    ] {
        let case = refs.case(name);
        let sound = audio::load(
            &reference().join("audio-inputs").join(file),
            &AudioLimits::default(),
        )
        .unwrap();
        assert_eq!(sound.source_rate, 16_000, "{name}");
        assert_eq!(
            sound.samples.len() as u64,
            case["n_samples"].as_u64().unwrap(),
            "{name}: length"
        );
        let windows = audio::log_mel(&sound.samples, &FeatureConfig::default());
        let (inside, outside) = window_diff(&refs, &format!("{name}.w0"), &windows[0], (0, 202));
        eprintln!("{name}: features max |Δ| {inside:.2e}, outside {outside:.2e}");
        assert!(inside <= 1e-3, "{name}: {inside}");
        assert!(outside <= 1e-3, "{name}: {outside}");
    }
}

// ---- limits and hostile files ------------------------------------------------------------

fn chirp_bytes() -> Vec<u8> {
    std::fs::read(reference().join("audio-inputs/chirp16k.wav")).unwrap()
}

fn write_tmp(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A 44-byte canonical WAV header: PCM, the given channels, rate and data length.
fn wav_header(channels: u16, rate: u32, data_len: u32) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(b"RIFF");
    h.extend_from_slice(&(36u32.wrapping_add(data_len)).to_le_bytes());
    h.extend_from_slice(b"WAVEfmt ");
    h.extend_from_slice(&16u32.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&channels.to_le_bytes());
    h.extend_from_slice(&rate.to_le_bytes());
    let block = channels.max(1) as u32 * 2;
    h.extend_from_slice(&(rate * block).to_le_bytes());
    h.extend_from_slice(&(block as u16).to_le_bytes());
    h.extend_from_slice(&16u16.to_le_bytes());
    h.extend_from_slice(b"data");
    h.extend_from_slice(&data_len.to_le_bytes());
    h
}

/// Loads in a thread and insists on an answer within a generous bound (a hang fails the test
/// instead of stalling the suite; it is not a timing assertion on a correct run).
fn load_err(path: &Path, limits: AudioLimits) -> AudioError {
    let path = path.to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(audio::load(&path, &limits));
    });
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(Ok(a)) => panic!("decoded {} samples from a bad file", a.samples.len()),
        Ok(Err(e)) => {
            let msg = e.to_string();
            assert!(!msg.contains('\n'), "one line: {msg}");
            eprintln!("{msg}");
            e
        }
        Err(_) => panic!("no answer in 120 s"),
    }
}

#[test]
fn truncated_wav_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = chirp_bytes();
    // Cut inside the data: the header's length is exact for PCM.
    let p = write_tmp(&dir, "cut.wav", &bytes[..bytes.len() / 2]);
    assert!(matches!(
        load_err(&p, AudioLimits::default()),
        AudioError::Truncated {
            claimed: 48_000,
            ..
        }
    ));
    // Cut inside the header.
    let p = write_tmp(&dir, "head.wav", &bytes[..30]);
    assert!(matches!(
        load_err(&p, AudioLimits::default()),
        AudioError::Malformed { .. } | AudioError::Unsupported { .. }
    ));
}

#[test]
fn wav_claiming_a_huge_length_is_refused_before_decoding() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = wav_header(1, 16_000, 0x7FFF_FFF0);
    // The RIFF length too, as a streaming writer that never came back to fill it in leaves it.
    bytes[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    bytes.extend_from_slice(&[0u8; 3200]);
    let p = write_tmp(&dir, "huge.wav", &bytes);
    match load_err(&p, AudioLimits::default()) {
        AudioError::TooLong {
            claimed: true,
            seconds,
            ..
        } => assert!(seconds > 3600.0),
        e => panic!("{e:?}"),
    }
}

#[test]
fn zero_channels_and_absurd_rates_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (name, header) in [
        ("zero-ch.wav", wav_header(0, 16_000, 3200)),
        ("zero-rate.wav", wav_header(1, 0, 3200)),
        ("fast.wav", wav_header(1, 4_000_000, 3200)),
    ] {
        let mut bytes = header;
        bytes.extend_from_slice(&[0u8; 3200]);
        let p = write_tmp(&dir, name, &bytes);
        let e = load_err(&p, AudioLimits::default());
        assert!(
            matches!(
                e,
                AudioError::BadHeader { .. }
                    | AudioError::Unsupported { .. }
                    | AudioError::Malformed { .. }
            ),
            "{name}: {e:?}"
        );
    }
}

/// Every field of the `fmt ` chunk set to 0 and to its maximum: an error or a decoding, never a
/// panic (symphonia panics on some of these; they are checked before it reads them).
#[test]
fn wav_header_fields_at_their_extremes() {
    let dir = tempfile::tempdir().unwrap();
    for offset in (20..36).step_by(2) {
        for value in [0u16, u16::MAX] {
            let mut bytes = wav_header(1, 16_000, 3200);
            bytes[offset..offset + 2].copy_from_slice(&value.to_le_bytes());
            bytes.extend_from_slice(&[1u8; 3200]);
            let p = write_tmp(&dir, &format!("f{offset}-{value}.wav"), &bytes);
            let got = std::panic::catch_unwind(|| audio::load(&p, &AudioLimits::default()));
            let got = got.unwrap_or_else(|_| panic!("panic at offset {offset} = {value}"));
            if let Err(e) = got {
                assert!(
                    !matches!(e, AudioError::Malformed { ref problem, .. } if problem.contains("decoder failed")),
                    "offset {offset} = {value}: {e}"
                );
            }
        }
    }
}

#[test]
fn random_bytes_and_empty_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_tmp(&dir, "empty.wav", b"");
    assert!(matches!(
        load_err(&p, AudioLimits::default()),
        AudioError::Empty { .. }
    ));
    // A fixed xorshift stream: reproducible "random" bytes.
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let noise: Vec<u8> = (0..200_000)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect();
    for name in [
        "noise.wav",
        "noise.mp3",
        "noise.flac",
        "noise.ogg",
        "noise.bin",
    ] {
        let p = write_tmp(&dir, name, &noise);
        load_err(&p, AudioLimits::default());
    }
    // Valid magic numbers followed by noise.
    for (name, magic) in [
        ("magic.flac", &b"fLaC"[..]),
        ("magic.ogg", b"OggS"),
        ("magic.mp3", b"ID3\x04\0\0\0\0\0\0"),
    ] {
        let mut bytes = magic.to_vec();
        bytes.extend_from_slice(&noise);
        let p = write_tmp(&dir, name, &bytes);
        load_err(&p, AudioLimits::default());
    }
}

#[test]
fn limits_are_said_and_enforced() {
    let chirp = reference().join("audio-inputs/chirp16k.wav");
    let e = load_err(
        &chirp,
        AudioLimits {
            max_bytes: 1000,
            max_seconds: 3600.0,
        },
    );
    assert!(matches!(e, AudioError::TooBig { limit: 1000, .. }));
    assert!(e.to_string().contains("1000 bytes"), "{e}");
    let e = load_err(
        &chirp,
        AudioLimits {
            max_bytes: 1 << 30,
            max_seconds: 2.0,
        },
    );
    assert!(
        matches!(e, AudioError::TooLong { claimed: true, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("limit of 2 s"), "{e}");
    // Compressed formats too, whether or not their header states a length (MP3's does not
    // always: then decoding stops as soon as the limit is passed).
    for file in ["tones16k.mp3", "tones16k.ogg", "long16k.flac"] {
        let e = load_err(
            &reference().join("audio-inputs").join(file),
            AudioLimits {
                max_bytes: 1 << 30,
                max_seconds: 1.0,
            },
        );
        assert!(matches!(e, AudioError::TooLong { .. }), "{file}: {e:?}");
    }
    // A FLAC whose STREAMINFO says "length unknown" (0 samples, as the format allows): the
    // limit is enforced on what is decoded.
    let mut flac = std::fs::read(reference().join("audio-inputs/long16k.flac")).unwrap();
    flac[21] &= 0xF0;
    flac[22..26].fill(0);
    let dir = tempfile::tempdir().unwrap();
    let p = write_tmp(&dir, "unknown-length.flac", &flac);
    let limits = AudioLimits {
        max_bytes: 1 << 30,
        max_seconds: 20.0,
    };
    let e = load_err(&p, limits);
    assert!(
        matches!(e, AudioError::TooLong { claimed: false, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("at least"), "{e}");
    let whole = audio::load(&p, &AudioLimits::default()).unwrap();
    assert_eq!(whole.samples.len(), 35 * 16_000);
    // A folder is not a recording.
    let e = load_err(&reference().join("audio-inputs"), AudioLimits::default());
    assert!(matches!(e, AudioError::NotAFile { .. }), "{e:?}");
}

/// A recording held in memory (an upload) decodes as the same file does, under the same limits.
#[test]
fn bytes_in_memory_decode_as_the_file_does() {
    let inputs = reference().join("audio-inputs");
    for file in [
        "chirp16k.wav",
        "stereo44k.flac",
        "tones16k.mp3",
        "tones16k.ogg",
    ] {
        let path = inputs.join(file);
        let from_file = audio::load(&path, &AudioLimits::default()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let from_bytes =
            audio::load_bytes(bytes, Path::new(file), &AudioLimits::default()).unwrap();
        assert_eq!(from_bytes.samples, from_file.samples, "{file}");
        assert_eq!(
            (from_bytes.source_rate, from_bytes.channels),
            (from_file.source_rate, from_file.channels)
        );
    }
    let small = AudioLimits {
        max_bytes: 100,
        max_seconds: 3600.0,
    };
    let e = audio::load_bytes(chirp_bytes(), Path::new("upload.wav"), &small).unwrap_err();
    assert!(matches!(e, AudioError::TooBig { .. }), "{e:?}");
    let e = audio::load_bytes(Vec::new(), Path::new("upload.wav"), &AudioLimits::default())
        .unwrap_err();
    assert!(matches!(e, AudioError::Empty { .. }), "{e:?}");
    let mut bytes = chirp_bytes();
    bytes.truncate(bytes.len() / 3);
    let e = audio::load_bytes(bytes, Path::new("upload.wav"), &AudioLimits::default()).unwrap_err();
    assert!(matches!(e, AudioError::Truncated { .. }), "{e:?}");
}

/// Each input with bytes flipped at reproducible places (a fixed xorshift): a recording or a
/// typed error, and no panic reached inside the decoders (which `load` would catch and report
/// as "the decoder failed").
#[test]
fn flipped_bytes_give_a_recording_or_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = reference().join("audio-inputs");
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut caught = Vec::new();
    for file in [
        "chirp16k.wav",
        "long16k.flac",
        "tones16k.mp3",
        "tones16k.ogg",
        "chirp16k-24bit.wav",
    ] {
        let original = std::fs::read(inputs.join(file)).unwrap();
        for round in 0..60 {
            let mut bytes = original.clone();
            // Mostly the headers, where the lengths and counts are.
            for _ in 0..1 + next() % 8 {
                let span = if next() % 2 == 0 {
                    bytes.len().min(256)
                } else {
                    bytes.len()
                };
                let at = (next() as usize) % span;
                bytes[at] ^= 1 << (next() % 8);
            }
            let p = write_tmp(&dir, file, &bytes);
            if let Err(AudioError::Malformed { problem, .. }) =
                audio::load(&p, &AudioLimits::default())
            {
                if problem.contains("decoder failed") {
                    caught.push(format!("{file} round {round}"));
                }
            }
        }
    }
    assert!(caught.is_empty(), "panics inside the decoder: {caught:?}");
}
