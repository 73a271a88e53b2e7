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
pub(crate) fn write_wav(to: &Path, seconds: f64) {
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

/// The JSON metadata block of an HTML report.
fn html_meta(html: &str) -> serde_json::Value {
    let open = "<script type=\"application/json\" id=\"attnviz-meta\">";
    let start = html.find(open).expect("a metadata block") + open.len();
    let end = start + html[start..].find("</script>").expect("its end");
    serde_json::from_str(&html[start..end]).expect("JSON metadata")
}

#[test]
fn a_speech_run_draws_its_words_over_the_recording_on_every_surface() {
    let tmp = tempfile::tempdir().unwrap();
    // A name a page must escape.
    let wav = tmp.path().join("a<b>&'tone.wav");
    write_wav(&wav, 1.0);
    let out_of = |name: &str| tmp.path().join(name);
    let (png, svg, html, json) = (
        out_of("s.png"),
        out_of("s.svg"),
        out_of("s.html"),
        out_of("s.json"),
    );
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
        "--png",
        path(&png),
        "--svg",
        path(&svg),
        "--html",
        path(&html),
        "--json",
        path(&json),
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    // The terminal: the words with their times, and the strip of where each one's attention
    // peaks, within 80 columns.
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("Words over the recording"), "{text}");
    // The figures: the words × time figure, not the matrix over every frame.
    let svg_text = fs::read_to_string(&svg).unwrap();
    assert!(
        svg_text.contains("cross-attention over the recording"),
        "{}",
        &svg_text[..svg_text.len().min(2000)]
    );
    assert!(fs::metadata(&png).unwrap().len() > 1000);
    // The JSON's words and the report's are the same words at the same times.
    let doc: serde_json::Value = serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    let words = doc["cross"]["speech"]["words"].as_array().unwrap().clone();
    assert!(!words.is_empty());
    let page = fs::read_to_string(&html).unwrap();
    let meta = html_meta(&page);
    let speech = &meta["speech"];
    assert_eq!(speech["name"], "a<b>&'tone.wav");
    assert!(!page.contains("a<b>"), "the file name is escaped");
    let shown = speech["words"].as_array().unwrap();
    assert_eq!(shown.len(), words.len(), "{speech}");
    for (a, b) in shown.iter().zip(&words) {
        assert_eq!(a["word"], b["word"]);
        assert_eq!(a["start_frame"], b["start_frame"]);
        assert_eq!(a["end_frame"], b["end_frame"]);
        let close = |x: &serde_json::Value, y: &serde_json::Value| {
            (x.as_f64().unwrap() - y.as_f64().unwrap()).abs() < 1e-6
        };
        assert!(close(&a["start"], &b["start"]) && close(&a["end"], &b["end"]));
    }
    assert_eq!(
        speech["window_seconds"],
        doc["cross"]["speech"]["window_seconds"]
    );
    // The recording plays from the page itself: a WAV of the window's 2 s at 16 kHz.
    let audio = speech["audio"].as_str().unwrap();
    let b64 = audio
        .strip_prefix("data:audio/wav;base64,")
        .expect("a data: WAV");
    use base64::Engine;
    let wav_bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    assert_eq!(&wav_bytes[..4], b"RIFF");
    assert_eq!(wav_bytes.len(), 44 + 2 * 32_000);
    assert!(page.contains("media-src data:"), "the policy lets it play");
    // The spectrogram and the word matrices travel in the payload.
    let names: Vec<&str> = meta["payload"]["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    for s in ["speech:mel", "speech:words", "speech:encoder"] {
        assert!(names.contains(&s), "{names:?}");
    }

    // The encoder's figure is pooled, its scale said.
    let enc_svg = out_of("e.svg");
    let out = run(&[
        "-m",
        path(&whisper),
        "--audio",
        path(&wav),
        "--generate",
        "4",
        "--kind",
        "encoder",
        "--svg",
        path(&enc_svg),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let enc = fs::read_to_string(&enc_svg).unwrap();
    assert!(
        enc.contains("pooled: 1 cell = 20 ms"),
        "{}",
        &enc[..enc.len().min(2000)]
    );

    // A report folder holds the speech run's own figures beside every other.
    let dir = out_of("rep");
    let out = run(&[
        "-m",
        path(&whisper),
        "--audio",
        path(&wav),
        "--generate",
        "4",
        "--report",
        path(&dir),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    for f in [
        "speech.png",
        "speech.svg",
        "encoder-pooled.png",
        "encoder-pooled.svg",
    ] {
        assert!(dir.join(f).is_file(), "{f} in {:?}", tree(&dir));
    }
    let words = fs::read_to_string(dir.join("speech.svg")).unwrap();
    assert!(words.contains("cross-attention over the recording"));
}

/// `attnviz render` of a speech run's JSON export draws the speech views, not the plain
/// matrices: the words × time figure with each word's box from the JSON's `speech` section
/// (the words the export holds, in its order), without the spectrogram the JSON does not carry
/// (the figure says so), and the terminal's words with their times; the same figure a run of the
/// model draws has the spectrogram.
#[test]
fn render_of_a_speech_json_draws_the_words_over_time() {
    let tmp = tempfile::tempdir().unwrap();
    let wav = tmp.path().join("tone.wav");
    write_wav(&wav, 1.0);
    let (json, live, drawn) = (
        tmp.path().join("a.json"),
        tmp.path().join("live.svg"),
        tmp.path().join("drawn.svg"),
    );
    let out = run(&[
        "-m",
        path(&fixture("tiny-whisper")),
        "--audio",
        path(&wav),
        "--language",
        "en",
        "--generate",
        "8",
        "--json",
        path(&json),
        "--svg",
        path(&live),
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    let words: Vec<String> = doc["cross"]["speech"]["words"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["word"].as_str().unwrap().trim().to_string())
        .collect();
    assert!(!words.is_empty(), "the run found words");
    let out = run(&["render", path(&json), "--svg", path(&drawn)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let terminal = String::from_utf8_lossy(&out.stdout).to_string();
    let svg = fs::read_to_string(&drawn).unwrap();
    let live = fs::read_to_string(&live).unwrap();
    for figure in [&svg, &live] {
        assert!(
            figure.contains("cross-attention over the recording"),
            "the words × time figure"
        );
    }
    assert!(svg.contains("no spectrogram:"), "the figure says why");
    // The strip's label stands on a line of its own (an SVG text's content).
    assert!(!svg.contains("\nlog-mel\n"), "no spectrogram strip");
    assert!(live.contains("\nlog-mel\n") && !live.contains("no spectrogram"));
    // Each word (the plain ones: the tiny model's may be pieces of characters) is a row label,
    // in the JSON's order, and the terminal gives it its time.
    let mut at = 0;
    for w in words
        .iter()
        .filter(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric()))
    {
        let label = format!("\n{w}\n");
        let found = svg[at..].find(&label).map(|p| p + at);
        assert!(found.is_some(), "{w} in order in the figure");
        at = found.unwrap() + 1;
        assert!(
            terminal.contains(&format!("{w} ")),
            "{w} in the terminal:\n{terminal}"
        );
    }
    assert!(terminal.contains("the word's time"), "{terminal}");
}
