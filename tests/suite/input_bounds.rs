//! Bounded work for hostile flags and inputs: a huge `--threads` is capped with a note; a huge
//! standard input, TEXT argument or corpus line is refused (or, with `--truncate`, cut) after
//! reading only as much as the model could ever use, in bounded time and memory.
//!
//! Peak memory is the child's VmHWM, sampled while it runs.

#![cfg(unix)]

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::cli::{assert_clean_failure, attnviz, minilm, run, stderr, tiny, tree};

/// What a measured run gives back.
pub(crate) struct Measured {
    pub(crate) code: Option<i32>,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: String,
    pub(crate) max_rss_mb: f64,
    pub(crate) elapsed: Duration,
}

/// The peak resident memory (VmHWM) of process `pid` so far, in MiB.
fn peak_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Run `cmd` feeding `input` on stdin (from a thread; the child may stop reading early),
/// sampling its peak memory every 2 ms until it exits. (The child's own VmHWM: getrusage's
/// maxrss would also count the test process's memory, which a spawned child inherits until
/// exec.)
pub(crate) fn measured(mut cmd: Command, input: Vec<u8>) -> Measured {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        // The child stops reading at its limit: a broken pipe here is expected.
        let _ = stdin.write_all(&input);
    });
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        out.read_to_end(&mut v).unwrap();
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).unwrap();
        s
    });
    let mut peak = 0f64;
    let status = loop {
        if let Some(mb) = peak_mb(child.id()) {
            peak = peak.max(mb);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "hangs");
        std::thread::sleep(Duration::from_millis(2));
    };
    let elapsed = start.elapsed();
    feeder.join().unwrap();
    Measured {
        code: status.code(),
        stdout: reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
        max_rss_mb: peak,
        elapsed,
    }
}

#[test]
fn huge_thread_counts_are_capped_with_a_note() {
    let cpus = std::thread::available_parallelism().unwrap().get();
    let m = tiny();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "the quick brown fox .\nthe lazy dog .\n").unwrap();
    for corpus in [false, true] {
        let start = Instant::now();
        let mut args = vec!["-m", m.to_str().unwrap(), "--threads", "10000", "-q"];
        let out_dir = dir.path().join("out");
        if corpus {
            args.extend(["--input", input.to_str().unwrap()]);
            args.extend(["--out-dir", out_dir.to_str().unwrap()]);
        } else {
            args.push("the quick brown fox .");
        }
        let out = run(&args);
        let took = start.elapsed();
        eprintln!("--threads 10000 (corpus mode: {corpus}) took {took:.2?}");
        assert!(out.status.success(), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("--threads 10000 is more than 4 × the {cpus} CPUs")),
            "{err}"
        );
        assert!(err.contains(&format!("using {}", 4 * cpus)), "{err}");
        assert!(took < Duration::from_secs(60), "{took:?}");
    }
    // Not a number: clap's error, status 2, no panic.
    let out = run(&["-m", m.to_str().unwrap(), "x", "--threads", "1e12"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("invalid value '1e12'"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("panicked"));
    let out = run(&["-m", m.to_str().unwrap(), "x", "--threads", "0"]);
    assert_clean_failure(&out, "--threads must be at least 1");
}

#[test]
fn ten_megabytes_on_stdin_are_refused_or_cut_after_reading_the_limit() {
    let m = minilm();
    // 10 MB of ordinary text; all-MiniLM-L6-v2 takes 512 positions = 128 KiB at most.
    let sentence = "The quick brown fox jumps over the lazy dog. ";
    let big: Vec<u8> = sentence
        .as_bytes()
        .iter()
        .copied()
        .cycle()
        .take(10_000_000)
        .collect();
    let mut cmd = attnviz();
    cmd.args(["-m", m.to_str().unwrap(), "-", "-q"]);
    let r = measured(cmd, big.clone());
    eprintln!(
        "10 MB on stdin, refused: {:.2?}, max RSS {:.0} MB",
        r.elapsed, r.max_rss_mb
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert_eq!(r.stderr.trim_end().lines().count(), 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("more than 131072 bytes") && r.stderr.contains("--truncate"),
        "{}",
        r.stderr
    );
    assert!(r.elapsed < Duration::from_secs(10), "{:?}", r.elapsed);
    assert!(r.max_rss_mb < 400.0, "{} MB", r.max_rss_mb);

    let mut cmd = attnviz();
    cmd.args(["-m", m.to_str().unwrap(), "-", "--truncate", "--json", "-"]);
    let r = measured(cmd, big);
    eprintln!(
        "10 MB on stdin, --truncate: {:.2?}, max RSS {:.0} MB",
        r.elapsed, r.max_rss_mb
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("only its first 131072 bytes were read (--truncate)"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("tokens; truncated to the model's maximum of 512"),
        "{}",
        r.stderr
    );
    let json: Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(json["tokens"].as_array().unwrap().len(), 512);
    assert!(json["text"].as_str().unwrap().len() <= 131072);
    assert!(r.elapsed < Duration::from_secs(20), "{:?}", r.elapsed);
    assert!(r.max_rss_mb < 1500.0, "{} MB", r.max_rss_mb);
}

#[test]
fn a_cut_on_stdin_never_splits_a_character() {
    // tiny-bert: 64 positions, so 16 KiB. "é" is two bytes and the limit falls inside one.
    let m = tiny();
    let text = format!("a{}", "é".repeat(20_000));
    let mut cmd = attnviz();
    cmd.args(["-m", m.to_str().unwrap(), "-", "--truncate", "--json", "-"]);
    let r = measured(cmd, text.into_bytes());
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let json: Value = serde_json::from_slice(&r.stdout).unwrap();
    let kept = json["text"].as_str().unwrap();
    assert_eq!(kept.len(), 16383, "cut before the split character");
    assert!(kept.ends_with('é'));
}

#[test]
fn a_huge_text_or_pair_argument_is_refused_or_cut_before_tokenizing() {
    let m = tiny();
    let m = m.to_str().unwrap();
    let big = "the quick brown fox . ".repeat(4000); // 88 KB; tiny-bert takes 16 KiB
    let start = Instant::now();
    let out = run(&["-m", m, &big]);
    assert_clean_failure(&out, "the text is 88000 bytes long");
    assert!(stderr(&out).contains("at most 16384 bytes"));
    let out = run(&["-m", m, "the fox .", "--pair", &big]);
    assert_clean_failure(&out, "the pair sentence is 88000 bytes long");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("a.json");
    let out = run(&[
        "-m",
        m,
        &big,
        "--truncate",
        "--json",
        json.to_str().unwrap(),
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("only its first 16384 bytes were read"));
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["tokens"].as_array().unwrap().len(), 64);
    assert!(
        v["text"].as_str().unwrap().len() <= 16384,
        "the text as analysed"
    );
    assert!(start.elapsed() < Duration::from_secs(20));
}

#[test]
fn a_corpus_line_over_the_limit_is_a_bad_line_read_in_bounded_memory() {
    let m = tiny();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    // Line 2 is 50 MB without a newline until its end; tiny-bert's limit is 16 KiB per line.
    let mut bytes = b"the quick brown fox .\n".to_vec();
    bytes.extend(std::iter::repeat_n(b'a', 50_000_000));
    bytes.extend_from_slice(b"\nthe lazy dog .\n");
    std::fs::write(&input, &bytes).unwrap();
    drop(bytes);
    let mut cmd = attnviz();
    cmd.args(["-m", m.to_str().unwrap(), "--input"])
        .arg(&input)
        .arg("--out-dir")
        .arg(dir.path().join("out"))
        .arg("-q");
    let r = measured(cmd, Vec::new());
    eprintln!(
        "corpus with a 50 MB line: {:.2?}, max RSS {:.0} MB",
        r.elapsed, r.max_rss_mb
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "line 2: 50000000 bytes long, over the limit of 16384 bytes per line for this model"
        ),
        "{}",
        r.stderr
    );
    assert!(r.max_rss_mb < 200.0, "{} MB", r.max_rss_mb);
    let files = tree(&dir.path().join("out/sentences"));
    assert_eq!(files, ["000001.json", "000003.json"]);
}

#[test]
fn the_logit_lens_keeps_at_most_a_hundred_tokens_a_cell_and_counts_its_memory() {
    // --lens-top at the vocabulary's size cost 3.6 GiB per input token (10¹⁸ aborted).
    let llama = crate::support::cli::fixture("tiny-llama");
    let m = llama.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("a.json");
    let j = json.to_str().unwrap();
    for k in ["101", "49152", "1000000000000000000"] {
        let out = run(&[
            "-m",
            m,
            "the cat sat",
            "--lens",
            "--lens-top",
            k,
            "--json",
            j,
        ]);
        assert_clean_failure(
            &out,
            &format!(
                "--lens-top {k} keeps more tokens per cell than the logit lens writes (at most 100"
            ),
        );
        assert!(!json.exists());
    }
    let out = run(&[
        "-m",
        m,
        "the cat sat",
        "--lens",
        "--lens-top",
        "100",
        "--json",
        j,
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(doc["logit_lens"]["k"], 100);
    assert_eq!(
        doc["logit_lens"]["top"][0][0].as_array().unwrap().len(),
        100
    );
    std::fs::remove_file(&json).unwrap();
    // Its memory counts against --max-memory: 100 KB holds this capture (2 layers × 4 heads
    // over a few tokens), not 3 stages × the positions × 100 tokens of 2.5 KB.
    let out = run(&[
        "-m",
        m,
        "the cat sat",
        "--lens",
        "--lens-top",
        "100",
        "--max-memory",
        "100k",
        "--json",
        j,
    ]);
    assert_clean_failure(&out, "the logit lens of 100 tokens per cell at 3 stages ×");
    assert!(stderr(&out).contains("--lens-top"), "{}", stderr(&out));
    assert!(!json.exists());
}

#[test]
fn analyses_that_re_run_the_model_are_estimated_against_a_time_limit() {
    // Value zeroing and ablation ran for minutes with no word: the estimate (one pass's time ×
    // the passes to come) is checked before the re-runs. A limit of 0 s refuses any.
    let llama = crate::support::cli::fixture("tiny-llama");
    let m = llama.to_str().unwrap();
    for (flag, name, passes) in [
        (
            "--value-zeroing",
            "value zeroing",
            "re-runs the model about",
        ),
        (
            "--ablate",
            "head ablation",
            "re-runs the model about 6 times",
        ),
    ] {
        let out = run(&[
            "-m",
            m,
            "the cat sat",
            flag,
            "--max-analysis-time",
            "0",
            "--json",
            "-",
        ]);
        assert_clean_failure(&out, &format!("{name} of "));
        let err = stderr(&out);
        assert!(err.contains(passes), "{err}");
        assert!(
            err.contains("more than the given time limit of 0.00 s"),
            "{err}"
        );
        assert!(
            err.contains("or allow it with --max-analysis-time 1s"),
            "{err}"
        );
        // Within the default limit the tiny model runs, without a notice.
        // (`--json -`: with -q alone the analysis would reach no output, which is refused.)
        let out = run(&["-m", m, "the cat sat", flag, "--json", "-"]);
        assert!(out.status.success(), "{}", stderr(&out));
        // (The analysis's table goes to stderr when stdout holds the JSON.)
        let err = stderr(&out);
        assert!(!err.contains("re-runs the model"), "{err}");
        assert!(!err.contains("--max-analysis-time"), "{err}");
    }
    let out = run(&["-m", m, "x", "--max-analysis-time", "5m"]);
    assert_clean_failure(
        &out,
        "--max-analysis-time limits the analyses that re-run the model",
    );
    let out = run(&[
        "-m",
        m,
        "x",
        "--value-zeroing",
        "--max-analysis-time",
        "soon",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`soon` is not a time"),
        "{}",
        stderr(&out)
    );
}
