//! Fidelity of Whisper against Hugging Face transformers, on the tiny random checkpoint
//! `tests/reference/make_whisper.py` made (eager attention, float32) and the log-mel features it
//! recorded: every layer and head of the encoder self-attention, the decoder self-attention and
//! the cross-attention (≤ 1e-5), both stacks' outputs (≤ 1e-4) and the logits (≤ 1e-4), for a
//! teacher-forced input and for the re-run of each of transformers' generations.
//!
//! `cargo test --release --test suite fidelity::whisper -- --nocapture` prints max |Δ| per case.

use std::collections::HashMap;

use attnviz::model::audio::LogMel;
use attnviz::model::encdec::Seq2SeqForward;
use attnviz::model::speech::{timing, SpeechOptions, Task, WordTiming};
use attnviz::model::{family, EncodeOptions, Model};
use candle_core::Device;
use serde::Deserialize;

use super::reference::{fixture, ok, repo, weights_file, MaxDiff, TensorRef, HIDDEN_TOL};
use super::seq2seq::compare_rows;

const LOGITS_TOL: f32 = 1e-4;

#[derive(Debug, Deserialize)]
pub(super) struct Case {
    pub name: String,
    #[serde(default)]
    pub decoder_input_ids: Option<Vec<u32>>,
    #[serde(default)]
    pub generated_ids: Option<Vec<u32>>,
    #[serde(default)]
    pub prompt_len: Option<usize>,
    #[serde(default)]
    pub timestamps: Option<bool>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub stopped_at_eos: Option<bool>,
    pub tensors: HashMap<String, TensorRef>,
}

impl Case {
    pub fn ids(&self) -> &[u32] {
        self.decoder_input_ids
            .as_deref()
            .or(self.generated_ids.as_deref())
            .expect("decoder ids")
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct Word {
    pub word: String,
    pub tokens: Vec<u32>,
    pub start_frame: usize,
    pub end_frame: usize,
}

#[derive(Debug, Deserialize)]
pub(super) struct Timing {
    pub name: String,
    pub heads: Vec<[usize; 2]>,
    pub frames: usize,
    pub words: Vec<Word>,
}

#[derive(Debug, Deserialize)]
pub(super) struct WordTimings {
    pub decoder_input_ids: Vec<u32>,
    pub text_ids: Vec<u32>,
    pub cases: Vec<Timing>,
    pub merge_cases: Vec<MergeCase>,
}

/// A made-up word list before and after make_whisper.py's copy of openai-whisper's
/// `merge_punctuations`.
#[derive(Debug, Deserialize)]
pub(super) struct MergeCase {
    pub before: Vec<MergeWord>,
    pub after: Vec<MergeWord>,
}

#[derive(Debug, Deserialize, PartialEq)]
pub(super) struct MergeWord {
    pub word: String,
    pub tokens: Vec<u32>,
    pub rows: [usize; 2],
    pub start_frame: usize,
    pub end_frame: usize,
}

#[derive(Debug, Deserialize)]
pub(super) struct Manifest {
    tensors: String,
    pub prompt: Vec<u32>,
    pub eot: u32,
    pub cases: Vec<Case>,
    pub generations: Vec<Case>,
    pub word_timings: WordTimings,
}

pub(super) struct Reference {
    pub manifest: Manifest,
    tensors: HashMap<String, candle_core::Tensor>,
}

impl Reference {
    pub fn load() -> Reference {
        let dir = repo().join("tests/reference");
        let path = dir.join("tiny-whisper.json");
        let text = ok(std::fs::read_to_string(&path), path.display());
        let manifest: Manifest = ok(serde_json::from_str(&text), path.display());
        let tensors = ok(
            candle_core::safetensors::load(dir.join(&manifest.tensors), &Device::Cpu),
            &manifest.tensors,
        );
        Reference { manifest, tensors }
    }

    pub fn tensor(&self, name: &str) -> Vec<f32> {
        ok(
            self.tensors[name]
                .flatten_all()
                .and_then(|t| t.to_vec1::<f32>()),
            name,
        )
    }

    pub fn features(&self) -> Vec<f32> {
        self.tensor("features")
    }
}

/// Every kind the case recorded (the generations leave the encoder's out: it is the
/// teacher-forced case's), the hidden states and the logits.
fn compare(reference: &Reference, case: &Case, out: &Seq2SeqForward, problems: &mut Vec<String>) {
    let mut line = format!("[tiny-whisper] {:<10} m={:<3}", case.name, case.ids().len());
    for (kind, forward) in [
        ("encoder", &out.encoder),
        ("decoder", &out.decoder),
        ("cross", &out.cross),
    ] {
        let key = format!("{kind}.attentions");
        let Some(r) = case.tensors.get(&key) else {
            continue;
        };
        let want = reference.tensor(&r.tensor);
        let (d, lines) = compare_rows(&forward.weights, &want, &r.shape, kind);
        line += &format!(" {kind} {:.1e}", d.value);
        problems.extend(
            lines
                .into_iter()
                .take(3)
                .map(|l| format!("{} {l}", case.name)),
        );
    }
    for (kind, ours, tol) in [
        ("encoder.hidden", &out.encoder.hidden, HIDDEN_TOL),
        ("decoder.hidden", &out.decoder.hidden, HIDDEN_TOL),
        ("logits", &out.logits, LOGITS_TOL),
    ] {
        let Some(r) = case.tensors.get(kind).filter(|_| !ours.is_empty()) else {
            continue;
        };
        let d = MaxDiff::of(ours, &reference.tensor(&r.tensor));
        line += &format!(" {kind} {:.1e}", d.value);
        if d.exceeds(tol) {
            problems.push(format!(
                "{} {kind}: max |Δ| {:.3e} > {tol:e}",
                case.name, d.value
            ));
        }
    }
    eprintln!("{line}");
}

#[test]
fn tiny_whisper_network_matches_transformers() {
    let dir = fixture("tiny-whisper");
    let net = ok(
        family::load(&dir.join("config.json"), &[weights_file(&dir)]),
        "tiny-whisper",
    );
    let speech = net.speech().expect("Whisper reads speech");
    assert_eq!((speech.mel_bins(), speech.window_frames()), (80, 300));
    let reference = Reference::load();
    let features = reference.features();
    let m = &reference.manifest;
    assert_eq!(m.generations.len(), 2);
    let mut problems = Vec::new();
    for case in m.cases.iter().chain(&m.generations) {
        let out = ok(
            speech.forward_features(&features, case.ids(), false),
            &case.name,
        );
        compare(&reference, case, &out, &mut problems);
    }
    assert!(
        problems.is_empty(),
        "{} problem(s) against transformers:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

fn window(reference: &Reference) -> LogMel {
    LogMel {
        n_mels: 80,
        frames: 300,
        data: reference.features(),
        start_seconds: 0.0,
    }
}

/// Greedy generation through `Model` (the prompt from the generation config, language `en`,
/// task transcribe, suppress_tokens and begin_suppress_tokens, and with timestamps
/// `WhisperTimeStampLogitsProcessor`'s rules) picks transformers' tokens, and the capture of
/// the whole sequence is transformers' teacher-forced pass over it.
#[test]
fn tiny_whisper_generation_matches_transformers() {
    let model = ok(Model::from_dir(&fixture("tiny-whisper")), "tiny-whisper");
    assert!(model.is_speech() && model.is_seq2seq());
    let reference = Reference::load();
    let window = window(&reference);
    let mut problems = Vec::new();
    for g in &reference.manifest.generations {
        let want = g.ids();
        let options = SpeechOptions {
            language: Some("en".to_string()),
            task: Task::Transcribe,
            timestamps: g.timestamps.expect("timestamps"),
            max_new_tokens: want.len() - g.prompt_len.expect("prompt_len"),
        };
        let enc = ok(
            model.encode_speech(
                &window,
                3.0,
                None,
                &options,
                &EncodeOptions::default(),
                &mut |_| {},
            ),
            &g.name,
        );
        let generation = enc.seq2seq.generation.as_ref().expect("a generation");
        eprintln!(
            "[tiny-whisper] {:<10} generated {:?}",
            g.name, generation.ids
        );
        assert_eq!(
            generation.ids, want,
            "{}: transformers generated otherwise",
            g.name
        );
        assert_eq!(
            Some(generation.stopped_at_eos),
            g.stopped_at_eos,
            "{}",
            g.name
        );
        assert_eq!(
            &enc.prompt[..],
            &want[..g.prompt_len.unwrap()],
            "{}",
            g.name
        );
        assert_eq!(
            Some(&enc.transcript),
            g.text.as_ref().map(|t| t.trim().to_string()).as_ref(),
            "{}",
            g.name
        );
        let [encoder, decoder, cross] = &enc.seq2seq.attentions[..] else {
            panic!("three attentions")
        };
        assert_eq!(encoder.keys().labels[..3], ["0.00s", "0.02s", "0.04s"]);
        assert_eq!(cross.keys().len(), 150);
        assert_eq!(decoder.queries().ids, want);
        let out = Seq2SeqForward {
            encoder: attnviz::model::Forward {
                weights: encoder.weights().to_vec(),
                hidden: enc.seq2seq.encoder_hidden.clone(),
                query_key: None,
                routing: Vec::new(),
            },
            decoder: attnviz::model::Forward {
                weights: decoder.weights().to_vec(),
                hidden: enc.seq2seq.decoder_hidden.clone(),
                query_key: None,
                routing: Vec::new(),
            },
            cross: attnviz::model::Forward {
                weights: cross.weights().to_vec(),
                hidden: Vec::new(),
                query_key: None,
                routing: Vec::new(),
            },
            // The capture keeps no logits: compared by the network test.
            logits: Vec::new(),
        };
        compare(&reference, g, &out, &mut problems);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// openai-whisper's `find_alignment` (make_whisper.py's numpy copy) on transformers'
/// cross-attention: our alignment of the same attention gives the same frames, word for word;
/// and `Model::encode_speech`'s own timings (on our attention) give them too.
#[test]
fn tiny_whisper_word_timings_match_openai_whisper() {
    let reference = Reference::load();
    let t = &reference.manifest.word_timings;
    let cross = reference.tensor("alignment.cross.attentions");
    let m = t.decoder_input_ids.len();
    let decode_model = ok(Model::from_dir(&fixture("tiny-whisper")), "tiny-whisper");
    let decode = |ids: &[u32]| decode_model.tokenizer().decode(ids).unwrap();
    let eot = reference.manifest.eot;
    let frames = |words: &[WordTiming]| -> Vec<(String, usize, usize)> {
        words
            .iter()
            .map(|w| (w.word.clone(), w.start_frame, w.end_frame))
            .collect()
    };
    let want_of = |case: &Timing| -> Vec<(String, usize, usize)> {
        case.words
            .iter()
            .map(|w| (w.word.clone(), w.start_frame, w.end_frame))
            .collect()
    };
    assert_eq!(t.cases.len(), 3);
    for case in &t.cases {
        let heads: Vec<(usize, usize)> = case.heads.iter().map(|&[l, h]| (l, h)).collect();
        let words = timing::find_alignment(
            &timing::AlignmentInput {
                cross: &cross,
                shape: [2, 4, m, 150],
                heads: &heads,
                sot_len: 3,
                text: &t.text_ids,
                eot,
                frames: case.frames,
            },
            &decode,
        );
        eprintln!("[tiny-whisper] {:<16} {:?}", case.name, frames(&words));
        assert!(words.len() >= 3, "{}: words to time", case.name);
        assert_eq!(
            frames(&words),
            want_of(case),
            "{} on transformers' attention",
            case.name
        );
        for (w, r) in words.iter().zip(&case.words) {
            assert_eq!(w.tokens, r.tokens, "{}", case.name);
        }
    }
    assert_eq!(
        timing::default_heads(2, 4),
        t.cases[1]
            .heads
            .iter()
            .map(|&[l, h]| (l, h))
            .collect::<Vec<_>>(),
        "openai's default: every head of the second half"
    );
    // Through the model: the plain generation's text, the config's alignment heads, the 2.2 s
    // the signal covers (110 frames) and the whole window.
    let plain = &reference.manifest.generations[0];
    let window = window(&reference);
    for (seconds, case) in [(3.0, &t.cases[0]), (2.2, &t.cases[2])] {
        let options = SpeechOptions {
            language: Some("en".to_string()),
            task: Task::Transcribe,
            timestamps: false,
            max_new_tokens: plain.ids().len() - 4,
        };
        let enc = ok(
            decode_model.encode_speech(
                &window,
                seconds,
                None,
                &options,
                &EncodeOptions::default(),
                &mut |_| {},
            ),
            "encode_speech",
        );
        assert!(enc.alignment_heads_given);
        assert_eq!(enc.prompt, reference.manifest.prompt);
        assert_eq!(enc.language.as_deref(), Some("<|en|>"));
        assert_eq!(
            frames(&enc.words),
            want_of(case),
            "{} through the model",
            case.name
        );
    }
}

/// openai-whisper's `merge_punctuations` (make_whisper.py's copy, with its default marks) on
/// made-up word lists: the same words, tokens, rows and frames after the merge.
#[test]
fn tiny_whisper_punctuation_merges_as_openai_whisper() {
    let reference = Reference::load();
    let cases = &reference.manifest.word_timings.merge_cases;
    assert!(cases.len() >= 5);
    for case in cases {
        let before = case
            .before
            .iter()
            .map(|w| WordTiming {
                word: w.word.clone(),
                tokens: w.tokens.clone(),
                rows: w.rows,
                start_frame: w.start_frame,
                end_frame: w.end_frame,
                start: w.start_frame as f64 * 0.02,
                end: w.end_frame as f64 * 0.02,
            })
            .collect();
        let after: Vec<MergeWord> =
            timing::merge_punctuations(before, timing::PREPENDED, timing::APPENDED)
                .into_iter()
                .map(|w| MergeWord {
                    word: w.word,
                    tokens: w.tokens,
                    rows: w.rows,
                    start_frame: w.start_frame,
                    end_frame: w.end_frame,
                })
                .collect();
        assert_eq!(after, case.after, "{:?}", case.before);
    }
}

#[derive(Debug, Deserialize)]
struct RealReference {
    tensors: String,
    encoder_rows: Vec<usize>,
    alignment_heads: Vec<[usize; 2]>,
    sequence: Vec<u32>,
    generated_ids: Vec<u32>,
    transcript: String,
    word_timings: RealTimings,
}

#[derive(Debug, Deserialize)]
struct RealTimings {
    words: Vec<Word>,
}

/// A real Whisper (the CTranslate2 files of the issue converted to transformers' layout by
/// tests/reference/ct2_to_transformers.py into .cache/models/<name>-hf) on the real recording
/// (.cache/audio/beckett.wav, scripts/fetch-beckett.sh), through `Model` from the file: the
/// transcript transformers' generate writes, token for token, and openai-whisper's word timings
/// on transformers' cross-attention (`make_whisper.py --real`), frame for frame.
fn check_real(name: &str) {
    let cache = repo().join(".cache");
    let dir = cache.join("models").join(format!("{name}-hf"));
    let wav = cache.join("audio/beckett.wav");
    assert!(
        dir.join("model.safetensors").is_file() && wav.is_file(),
        "{} or {} is missing: run scripts/fetch-whisper-tiny.sh, scripts/fetch-whisper-base.sh \
         and scripts/fetch-beckett.sh, then tests/reference/ct2_to_transformers.py",
        dir.display(),
        wav.display()
    );
    let path = repo().join(format!("tests/reference/{name}-hf-beckett.json"));
    let text = ok(std::fs::read_to_string(&path), path.display());
    let want: RealReference = ok(serde_json::from_str(&text), path.display());
    let model = ok(Model::from_dir(&dir), name);
    let sound = ok(
        attnviz::model::audio::load(&wav, &attnviz::model::audio::AudioLimits::default()),
        "beckett.wav",
    );
    let windows = attnviz::model::audio::log_mel(&sound.samples, model.feature_config().unwrap());
    let options = SpeechOptions {
        max_new_tokens: 100,
        ..SpeechOptions::default()
    };
    let enc = ok(
        model.encode_speech(
            &windows[0],
            sound.duration,
            None,
            &options,
            &EncodeOptions::default(),
            &mut |_| {},
        ),
        name,
    );
    let generation = enc.seq2seq.generation.as_ref().unwrap();
    let eot = *model.generation_config().eos_token_ids.first().unwrap();
    let text: Vec<u32> = generation
        .generated()
        .iter()
        .copied()
        .filter(|&t| t < eot)
        .collect();
    eprintln!("[{name}] {:?}", enc.transcript);
    assert_eq!(
        text, want.generated_ids,
        "{name}: transformers generated otherwise"
    );
    assert_eq!(enc.transcript, want.transcript);
    let ours: Vec<(String, usize, usize)> = enc
        .words
        .iter()
        .map(|w| (w.word.clone(), w.start_frame, w.end_frame))
        .collect();
    let theirs: Vec<(String, usize, usize)> = want
        .word_timings
        .words
        .iter()
        .map(|w| (w.word.clone(), w.start_frame, w.end_frame))
        .collect();
    eprintln!("[{name}] {ours:?}");
    assert_eq!(ours, theirs, "{name}: word timings");

    // The attention of that run against the sample transformers' kept (≤ 1e-4).
    let [encoder, decoder, cross] = &enc.seq2seq.attentions[..] else {
        panic!("three attentions")
    };
    assert_eq!(
        decoder.queries().ids,
        want.sequence,
        "{name}: the run's sequence"
    );
    let tensors = ok(
        candle_core::safetensors::load(
            repo().join("tests/reference").join(&want.tensors),
            &Device::Cpu,
        ),
        &want.tensors,
    );
    let values = |key: &str| -> Vec<f32> {
        ok(
            tensors[key].flatten_all().and_then(|t| t.to_vec1::<f32>()),
            key,
        )
    };
    let (m, n) = (want.sequence.len(), 1500);
    let (enc_arch, dec_arch) = (&encoder.model, &decoder.model);
    let mut ours_cross = Vec::new();
    for &[l, h] in &want.alignment_heads {
        let at = (l * dec_arch.heads + h) * m * n;
        ours_cross.extend_from_slice(&cross.weights()[at..at + m * n]);
    }
    let last = enc_arch.layers - 1;
    let mut ours_enc = Vec::new();
    for layer in [0, last] {
        for h in 0..enc_arch.heads {
            for &r in &want.encoder_rows {
                let at = ((layer * enc_arch.heads + h) * n + r) * n;
                ours_enc.extend_from_slice(&encoder.weights()[at..at + n]);
            }
        }
    }
    for (what, ours, theirs) in [
        (
            "decoder",
            decoder.weights().to_vec(),
            values("decoder.attentions"),
        ),
        (
            "cross (alignment heads)",
            ours_cross,
            values("cross.alignment_heads"),
        ),
        (
            "encoder (rows of the first and last layers)",
            ours_enc,
            values("encoder.first_last_rows"),
        ),
    ] {
        let d = MaxDiff::of(&ours, &theirs);
        eprintln!("[{name}] {what}: max |Δ| {:.1e}", d.value);
        assert!(
            !d.exceeds(1e-4),
            "[{name}] {what}: max |Δ| {:.3e} > 1e-4",
            d.value
        );
    }
}

#[test]
fn real_whisper_tiny_en_transcribes_and_times_beckett_as_transformers() {
    check_real("whisper-tiny.en");
}

#[test]
fn real_whisper_base_transcribes_and_times_beckett_as_transformers() {
    check_real("whisper-base");
}

/// The real tiny.en or base loaded straight from its CTranslate2 folder (model.bin, config.json,
/// tokenizer.json: no conversion) and from the transformers folder
/// tests/reference/ct2_to_transformers.py converts it into (held to transformers by
/// `check_real`): the same sizes, speech settings and features; on beckett.wav, with and
/// without timestamps, the same generated ids, transcript and word timings, and every captured
/// attention (encoder, decoder, cross; every layer and head) within 1e-6, with the same labels.
fn check_ct2_as_converted(name: &str) {
    let cache = repo().join(".cache");
    let ct2_dir = cache.join("models").join(name);
    let hf_dir = cache.join("models").join(format!("{name}-hf"));
    let wav = cache.join("audio/beckett.wav");
    assert!(
        ct2_dir.join("model.bin").is_file()
            && hf_dir.join("model.safetensors").is_file()
            && wav.is_file(),
        "{}, {} or {} is missing: run scripts/fetch-whisper-tiny.sh, scripts/fetch-whisper-base.sh \
         and scripts/fetch-beckett.sh, then tests/reference/ct2_to_transformers.py",
        ct2_dir.join("model.bin").display(),
        hf_dir.display(),
        wav.display()
    );
    let ct2 = ok(Model::from_dir(&ct2_dir), format!("{name} (CTranslate2)"));
    let hf = ok(Model::from_dir(&hf_dir), format!("{name}-hf"));
    assert_eq!(ct2.info().family, "Whisper");
    assert_eq!(
        format!("{:?}", ct2.architecture()),
        format!("{:?}", hf.architecture()),
        "{name}: the encoder's shape"
    );
    assert_eq!(
        ct2.decoder_shape(),
        hf.decoder_shape(),
        "{name}: the decoder's"
    );
    assert_eq!(ct2.max_target_positions(), hf.max_target_positions());
    assert_eq!(ct2.speech_settings(), hf.speech_settings(), "{name}");
    assert_eq!(ct2.feature_config(), hf.feature_config(), "{name}");
    assert_eq!(
        ct2.generation_config().eos_token_ids,
        hf.generation_config().eos_token_ids
    );
    let sound = ok(
        attnviz::model::audio::load(&wav, &attnviz::model::audio::AudioLimits::default()),
        "beckett.wav",
    );
    let windows = attnviz::model::audio::log_mel(&sound.samples, hf.feature_config().unwrap());
    for timestamps in [false, true] {
        let options = SpeechOptions {
            max_new_tokens: 100,
            timestamps,
            ..SpeechOptions::default()
        };
        let run = |model: &Model| {
            ok(
                model.encode_speech(
                    &windows[0],
                    sound.duration,
                    None,
                    &options,
                    &EncodeOptions::default(),
                    &mut |_| {},
                ),
                name,
            )
        };
        let (ours, theirs) = (run(&ct2), run(&hf));
        eprintln!(
            "[{name} from model.bin, timestamps {timestamps}] {:?}",
            ours.transcript
        );
        assert_eq!(
            ours.seq2seq.generation.as_ref().map(|g| &g.ids),
            theirs.seq2seq.generation.as_ref().map(|g| &g.ids),
            "{name}: generated ids"
        );
        assert!(!ours.transcript.is_empty());
        assert_eq!(ours.transcript, theirs.transcript, "{name}");
        assert_eq!(ours.prompt, theirs.prompt, "{name}");
        let timings = |e: &attnviz::model::speech::SpeechEncoding| -> Vec<(String, usize, usize)> {
            e.words
                .iter()
                .map(|w| (w.word.clone(), w.start_frame, w.end_frame))
                .collect()
        };
        assert!(!ours.words.is_empty(), "{name}: word timings");
        assert_eq!(timings(&ours), timings(&theirs), "{name}: word timings");
        assert_eq!(ours.alignment_heads, theirs.alignment_heads);
        for (a, b) in ours
            .seq2seq
            .attentions
            .iter()
            .zip(&theirs.seq2seq.attentions)
        {
            assert_eq!(a.kind, b.kind);
            assert_eq!(
                a.queries().labels,
                b.queries().labels,
                "{name} {:?}",
                a.kind
            );
            assert_eq!(a.keys().labels, b.keys().labels, "{name} {:?}", a.kind);
            assert_eq!(a.weights().len(), b.weights().len());
            let d = MaxDiff::of(a.weights(), b.weights());
            eprintln!(
                "[{name} from model.bin] {:?}: max |Δ| {:.1e}",
                a.kind, d.value
            );
            assert!(
                !d.exceeds(1e-6),
                "[{name}] {:?}: max |Δ| {:.3e} > 1e-6",
                a.kind,
                d.value
            );
        }
    }
}

#[test]
fn real_whisper_tiny_en_from_its_ctranslate2_folder_runs_as_its_conversion() {
    check_ct2_as_converted("whisper-tiny.en");
}

#[test]
fn real_whisper_base_from_its_ctranslate2_folder_runs_as_its_conversion() {
    check_ct2_as_converted("whisper-base");
}

/// A recording longer than 30 s (beckett.wav four times, a second of silence after each: 43.8
/// s) read by the real tiny.en in consecutive windows: without timestamps the windows are
/// [0, 30 s) and [30 s, 43.8 s), each window's transcript, words and (captured) attention are
/// what a single-window run over that window's audio alone gives, the words moved by the
/// window's start, and each transcript is transformers' for that window alone; with timestamps
/// the second window starts where the first's last complete segment ended (openai-whisper's
/// seek), again equals the single-window run there, and the recording's transcript is
/// transformers' sequential long form (tests/reference/make_whisper_long.py).
#[test]
fn real_whisper_tiny_en_reads_a_long_recording_window_after_window() {
    use attnviz::model::audio::{self, AudioLimits};
    use attnviz::model::speech::long::next_window;
    let cache = repo().join(".cache");
    let (dir, wav) = (
        cache.join("models/whisper-tiny.en"),
        cache.join("audio/beckett.wav"),
    );
    assert!(
        dir.join("model.bin").is_file() && wav.is_file(),
        "run scripts/fetch-whisper-tiny.sh and scripts/fetch-beckett.sh"
    );
    let model = ok(Model::from_dir(&dir), "whisper-tiny.en");
    let features = model.feature_config().unwrap().clone();
    let sound = ok(audio::load(&wav, &AudioLimits::default()), "beckett.wav");
    let mut samples = Vec::new();
    for _ in 0..4 {
        samples.extend_from_slice(&sound.samples);
        samples.extend(std::iter::repeat_n(0.0f32, 16000));
    }
    let rate = 16000.0;
    let path = repo().join("tests/reference/whisper-tiny.en-long.json");
    let reference: serde_json::Value = ok(
        serde_json::from_str(&ok(std::fs::read_to_string(&path), path.display())),
        "json",
    );
    assert_eq!(
        reference["seconds"].as_f64(),
        Some(samples.len() as f64 / rate)
    );
    // One window's run on `samples[from..]`'s first 30 s alone.
    let single = |from: usize, options: &SpeechOptions| {
        let end = (from + 480_000).min(samples.len());
        let mut window = audio::log_mel(&samples[from..end], &features).remove(0);
        window.start_seconds = from as f64 / rate;
        ok(
            model.encode_speech(
                &window,
                (end - from) as f64 / rate,
                None,
                options,
                &EncodeOptions::default(),
                &mut |_| {},
            ),
            "one window",
        )
    };
    for timestamps in [false, true] {
        let options = SpeechOptions {
            max_new_tokens: 120,
            timestamps,
            ..SpeechOptions::default()
        };
        let long = ok(
            model.encode_speech_windows(
                &samples,
                &features,
                1,
                &options,
                &EncodeOptions::default(),
                &mut |_, _| {},
            ),
            "long",
        );
        assert!(long.windows.len() >= 2, "timestamps {timestamps}");
        assert_eq!(long.captured, 1);
        let begin = model.speech_settings().unwrap().timestamp_begin();
        for pair in long.windows.windows(2) {
            let moved = next_window(
                &pair[0].generated,
                timestamps.then_some(begin).flatten(),
                pair[0].seconds,
            );
            eprintln!("[tiny.en long, timestamps {timestamps}] the next window {moved:.2} s on");
            if !timestamps {
                assert_eq!(moved, 30.0);
            }
            let start = pair[0].start_seconds + moved;
            assert!(
                (pair[1].start_seconds - start).abs() <= 1.0 / rate,
                "{start}"
            );
        }
        if !timestamps {
            assert_eq!(long.windows.len(), 2);
        }
        for (i, w) in long.windows.iter().enumerate() {
            let alone = single((w.start_seconds * rate).round() as usize, &options);
            eprintln!(
                "[tiny.en long, timestamps {timestamps}] window {i} at {:.2} s: {:?}",
                w.start_seconds, w.transcript
            );
            assert!(!w.transcript.is_empty());
            assert_eq!(w.transcript, alone.transcript, "window {i}");
            let moved: Vec<(String, f64, f64)> = alone
                .words
                .iter()
                .map(|x| {
                    (
                        x.word.clone(),
                        x.start + w.start_seconds,
                        x.end + w.start_seconds,
                    )
                })
                .collect();
            let ours: Vec<(String, f64, f64)> = w
                .words
                .iter()
                .map(|x| (x.word.clone(), x.start, x.end))
                .collect();
            assert_eq!(ours, moved, "window {i}: word timings");
            if i == 1 {
                for (a, b) in long
                    .encoding
                    .seq2seq
                    .attentions
                    .iter()
                    .zip(&alone.seq2seq.attentions)
                {
                    assert_eq!(a.keys().labels, b.keys().labels);
                    assert_eq!(
                        a.weights(),
                        b.weights(),
                        "the captured window's {:?}",
                        a.kind
                    );
                }
            }
        }
        let each: Vec<&str> = long.windows.iter().map(|w| w.transcript.as_str()).collect();
        assert_eq!(long.transcript(), each.join(" "));
        // transformers on the converted folder (make_whisper_long.py): each fixed window alone,
        // and its own sequential long form with timestamps.
        if timestamps {
            assert_eq!(long.transcript(), reference["long_form"].as_str().unwrap());
        } else {
            let theirs: Vec<&str> = reference["windows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w["transcript"].as_str().unwrap())
                .collect();
            assert_eq!(
                each, theirs,
                "each window, as transformers transcribes it alone"
            );
        }
    }
}
