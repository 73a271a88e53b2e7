//! Whisper through the `attnviz` binary, on the tiny random checkpoint and a synthetic
//! recording: `--audio` writes the three attentions (frames labelled by time), the transcript
//! and the word timings (terminal, JSON's `speech` section, PNG); what cannot run gets one line
//! and writes nothing (text to Whisper, text beside the recording, a recording to a text model,
//! an unknown language, a file that is no recording, speech settings without a recording).

use std::fs;
use std::path::Path;

use crate::fidelity::reference::{fixture, repo};
use crate::support::cli::{assert_clean_failure, run, stderr, tree};

fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// A 16-bit mono WAV at 16 kHz: `seconds` of a 440 Hz tone, then as much silence.
fn write_wav(to: &Path, seconds: f64) {
    let n = (seconds * 16000.0) as usize;
    let samples: Vec<i16> = (0..2 * n)
        .map(|i| {
            let t = i as f64 / 16000.0;
            let x = if i < n {
                0.4 * (2.0 * std::f64::consts::PI * 440.0 * t).sin()
            } else {
                0.0
            };
            (x * 32767.0) as i16
        })
        .collect();
    write_samples(to, &samples);
}

/// 16-bit mono `samples` at 16 kHz as a WAV file.
fn write_samples(to: &Path, samples: &[i16]) {
    let data = samples.len() * 2;
    let mut bytes = Vec::new();
    bytes.extend(b"RIFF");
    bytes.extend(&((36 + data) as u32).to_le_bytes());
    bytes.extend(b"WAVEfmt ");
    bytes.extend(&16u32.to_le_bytes());
    bytes.extend(&1u16.to_le_bytes()); // PCM
    bytes.extend(&1u16.to_le_bytes()); // mono
    bytes.extend(&16000u32.to_le_bytes());
    bytes.extend(&32000u32.to_le_bytes());
    bytes.extend(&2u16.to_le_bytes());
    bytes.extend(&16u16.to_le_bytes());
    bytes.extend(b"data");
    bytes.extend(&(data as u32).to_le_bytes());
    for s in samples {
        bytes.extend(&s.to_le_bytes());
    }
    fs::write(to, bytes).unwrap();
}

#[test]
fn whisper_inputs_that_cannot_run_get_one_line_and_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("out");
    fs::create_dir(&out_dir).unwrap();
    let wav = tmp.path().join("tone.wav");
    write_wav(&wav, 1.0);
    let not_audio = tmp.path().join("notes.wav");
    fs::write(&not_audio, "not a recording").unwrap();
    let (png, json) = (out_dir.join("a.png"), out_dir.join("a.json"));
    let outputs = ["--png", path(&png), "--json", path(&json)];
    let (whisper, bart) = (fixture("tiny-whisper"), fixture("tiny-bart"));
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![path(&whisper), "Hello there"],
            "give it with --audio FILE",
        ),
        (
            vec![path(&whisper), "Hello", "--audio", path(&wav)],
            "drop TEXT",
        ),
        (vec![path(&bart), "--audio", path(&wav)], "drop --audio"),
        (
            vec![path(&whisper), "--audio", path(&wav), "--language", "xx"],
            "its languages are de, en, fr",
        ),
        (
            vec![path(&whisper), "--audio", path(&not_audio)],
            "not a recording attnviz can decode",
        ),
        (
            vec![path(&whisper), "--audio", path(&wav), "--generate", "0"],
            "generates nothing",
        ),
        (
            vec![path(&whisper), "--audio", path(&wav), "--generate", "1000"],
            "generate at most 60",
        ),
    ];
    for (args, needle) in cases {
        let mut all = vec!["-m"];
        all.extend(&args);
        all.extend(outputs);
        let out = run(&all);
        assert_clean_failure(&out, needle);
        assert!(
            tree(&out_dir).is_empty(),
            "{args:?} left {:?}",
            tree(&out_dir)
        );
    }
}

#[test]
fn audio_gives_the_three_attentions_the_transcript_and_word_timings() {
    let tmp = tempfile::tempdir().unwrap();
    let wav = tmp.path().join("tone.wav");
    write_wav(&wav, 1.0);
    let (png, json) = (tmp.path().join("cross.png"), tmp.path().join("a.json"));
    let whisper = fixture("tiny-whisper");
    let out = run(&[
        "-m",
        path(&whisper),
        "--audio",
        path(&wav),
        "--language",
        "en",
        "--generate",
        "8",
        "--kind",
        "cross",
        "--png",
        path(&png),
        "--json",
        path(&json),
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("tone.wav: 2.00 s of audio, language <|en|>"),
        "{err}"
    );
    assert!(err.contains("transcript (8 tokens"), "{err}");
    assert!(
        err.contains("word timings (the model's alignment heads)"),
        "{err}"
    );
    assert!(fs::metadata(&png).unwrap().len() > 1000);
    let doc: serde_json::Value = serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        doc["kinds"],
        serde_json::json!(["encoder", "decoder", "cross"])
    );
    let encoder = &doc["encoder"];
    assert_eq!(encoder["tokens"][0], "0.00s");
    assert_eq!(encoder["tokens"][149], "2.98s");
    let cross = &doc["cross"];
    assert_eq!(cross["key_tokens"].as_array().unwrap().len(), 150);
    let speech = &cross["speech"];
    assert_eq!(speech["audio"], "tone.wav");
    assert_eq!(speech["window_seconds"], 2.0);
    assert_eq!(speech["prompt"], serde_json::json!([301, 302, 306, 310]));
    assert_eq!(
        speech["alignment_heads"],
        serde_json::json!([[1, 0], [1, 2]])
    );
    let words = speech["words"].as_array().unwrap();
    assert!(!words.is_empty(), "{speech}");
    // Words follow each other within the 2 s the recording covers (100 frames).
    let mut last = 0.0;
    for w in words {
        let (start, end) = (w["start"].as_f64().unwrap(), w["end"].as_f64().unwrap());
        assert!(last <= start && start <= end && end <= 2.0, "{w}");
        last = end;
    }
    assert!(
        doc["decoder"]["speech"].is_null(),
        "one speech section, with the cross kind"
    );
}

/// A CTranslate2 folder (model.bin, config.json, tokenizer.json, as
/// scripts/fetch-whisper-tiny.sh ships Whisper tiny.en) runs as `-m` with `--audio`, no
/// conversion: the transcript of beckett.wav is the one transformers writes from the converted
/// folder (tests/reference/whisper-tiny.en-hf-beckett.json), with word timings.
#[test]
fn a_ctranslate2_folder_transcribes_a_recording_as_it_is() {
    let cache = repo().join(".cache");
    let (dir, wav) = (
        cache.join("models/whisper-tiny.en"),
        cache.join("audio/beckett.wav"),
    );
    assert!(
        dir.join("model.bin").is_file() && wav.is_file(),
        "{} or {} is missing: run scripts/fetch-whisper-tiny.sh and scripts/fetch-beckett.sh",
        dir.display(),
        wav.display()
    );
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("a.json");
    let out = run(&[
        "-m",
        path(&dir),
        "--audio",
        path(&wav),
        "--json",
        path(&json),
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let reference: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(repo().join("tests/reference/whisper-tiny.en-hf-beckett.json"))
            .unwrap(),
    )
    .unwrap();
    let doc: serde_json::Value = serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    let speech = &doc["cross"]["speech"];
    assert_eq!(speech["transcript"], reference["transcript"], "{err}");
    assert_eq!(
        doc["model"]["family"].as_str().unwrap_or("Whisper"),
        "Whisper"
    );
    assert_eq!(
        speech["words"].as_array().unwrap().len(),
        reference["word_timings"]["words"].as_array().unwrap().len()
    );
}

/// A recording longer than a window (the tiny checkpoint's are 3 s): read in consecutive
/// windows, the transcript and the words covering them all, the attention the one window
/// `--window` picks, which the JSON names; a window it does not have is refused in one line.
#[test]
fn a_long_recording_is_read_window_after_window_and_window_picks_the_attention() {
    let tmp = tempfile::tempdir().unwrap();
    let wav = tmp.path().join("long.wav");
    // 7 s: a tone, silence, a tone of another pitch: three windows of 3 s.
    let samples: Vec<i16> = (0..7 * 16000)
        .map(|i| {
            let t = f64::from(i) / 16000.0;
            let f = if t < 3.5 { 440.0 } else { 660.0 };
            let x = if (2.0..4.0).contains(&t) {
                0.0
            } else {
                0.4 * (2.0 * std::f64::consts::PI * f * t).sin()
            };
            (x * 32767.0) as i16
        })
        .collect();
    write_samples(&wav, &samples);
    let whisper = fixture("tiny-whisper");
    let json_of = |window: &str, file: &str| -> serde_json::Value {
        let json = tmp.path().join(file);
        let mut args = vec![
            "-m",
            path(&whisper),
            "--audio",
            path(&wav),
            "--language",
            "en",
            "--generate",
            "6",
            "--json",
            path(&json),
        ];
        if !window.is_empty() {
            args.extend(["--window", window]);
        }
        let out = run(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap()
    };
    let first = json_of("", "first.json");
    let last = json_of("2", "last.json");
    for (doc, window) in [(&first, 0), (&last, 2)] {
        let speech = &doc["cross"]["speech"];
        assert_eq!(speech["windows"], 3, "{speech}");
        assert_eq!(speech["window"], window);
        assert_eq!(speech["window_start"], 3.0 * f64::from(window));
        assert_eq!(
            speech["window_seconds"],
            if window == 2 { 1.0 } else { 3.0 }
        );
        assert_eq!(
            doc["encoder"]["tokens"][0],
            format!("{:.2}s", 3.0 * f64::from(window))
        );
        let words = speech["words"].as_array().unwrap();
        let windows: Vec<u64> = words
            .iter()
            .map(|w| w["window"].as_u64().unwrap())
            .collect();
        assert!(windows.windows(2).all(|p| p[0] <= p[1]), "{windows:?}");
        for w in words {
            let k = w["window"].as_f64().unwrap();
            let (start, end) = (w["start"].as_f64().unwrap(), w["end"].as_f64().unwrap());
            assert!(
                3.0 * k <= start && start <= end && end <= (3.0 * k + 3.0).min(7.0),
                "{w}"
            );
        }
    }
    // The same transcript and words whichever window is captured; the captured window's own
    // transcript is in the recording's.
    assert_eq!(
        first["cross"]["speech"]["transcript"],
        last["cross"]["speech"]["transcript"]
    );
    assert_eq!(
        first["cross"]["speech"]["words"],
        last["cross"]["speech"]["words"]
    );
    for doc in [&first, &last] {
        let speech = &doc["cross"]["speech"];
        assert!(speech["transcript"]
            .as_str()
            .unwrap()
            .contains(speech["window_transcript"].as_str().unwrap()));
    }
    let out = run(&[
        "-m",
        path(&whisper),
        "--audio",
        path(&wav),
        "--language",
        "en",
        "--generate",
        "4",
        "--window",
        "3",
    ]);
    assert_clean_failure(
        &out,
        "read in 3 windows of up to 3 s, numbered from 0; window 3 is not one of them",
    );
}
