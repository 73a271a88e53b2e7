//! Corpus mode (`--input FILE --out-dir DIR`), driving the release binary: per-sentence files
//! against the single-sentence CLI, corpus averages against the per-sentence files, bad lines,
//! stop mode, pairs, stdin, Ctrl-C.
//!
//! The real all-MiniLM-L6-v2 (`$ATTNVIZ_MINILM_DIR` or `.cache/models/all-MiniLM-L6-v2`) is used
//! where the numbers matter; the tiny fixture model where only the mechanics do.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::cli::{attnviz, run, run_corpus, stderr, tiny};
use crate::support::data::read_json;

use crate::support::models::minilm::minilm_dir as minilm;

/// Run corpus mode on `input` (bytes) with `model` and extra flags; the output folder is
/// `dir/out`.
fn corpus(model: &Path, dir: &Path, input: &[u8], flags: &[&str]) -> Output {
    let file = dir.join("input.txt");
    fs::write(&file, input).unwrap();
    run_corpus(model, &file, &dir.join("out"), flags)
}

/// File names in `out/sentences`, sorted.
fn sentence_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir.join("out/sentences"))
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

const LINES: &[&str] = &[
    "The quick brown fox jumps over the lazy dog.",
    "Where did the cat sit?\tIt sat on the mat, unbelievably!",
    "Attention heads in BERT often look at [SEP] when nothing else applies.",
    "Short one.",
    "A sentence with punctuation: commas, semicolons; and \"quotes\".",
];

#[test]
fn per_sentence_json_equals_the_single_sentence_cli() {
    let model = minilm();
    for flags in [
        &[][..],
        &["--words", "--no-special", "--full-precision"][..],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = corpus(&model, dir.path(), LINES.join("\n").as_bytes(), flags);
        assert!(out.status.success(), "{}", stderr(&out));
        let names = sentence_files(dir.path());
        assert_eq!(
            names,
            [
                "000001.json",
                "000002.json",
                "000003.json",
                "000004.json",
                "000005.json"
            ]
        );
        for (i, line) in LINES.iter().enumerate() {
            let single = dir.path().join(format!("single{i}.json"));
            let mut cmd = attnviz();
            cmd.arg("-m").arg(&model).args(flags).arg("-q");
            match line.split_once('\t') {
                Some((a, b)) => cmd.arg(a).arg("--pair").arg(b),
                None => cmd.arg(line),
            };
            let res = cmd.arg("--json").arg(&single).output().unwrap();
            assert!(res.status.success(), "{}", stderr(&res));
            let from_corpus = fs::read(dir.path().join("out/sentences").join(&names[i])).unwrap();
            assert!(
                fs::read(&single).unwrap() == from_corpus,
                "line {} ({flags:?}) differs from `attnviz TEXT --json`",
                i + 1
            );
        }
        // The pair really is a pair.
        let pair = read_json(&dir.path().join("out/sentences/000002.json"));
        assert_eq!(pair["pair"], "It sat on the mat, unbelievably!");
        assert!(pair["sentence_b_start"].as_u64().is_some());
    }
}

/// The statistics the test reads back from a `stats` section: `[stat][layer][head]`.
const STATS: [&str; 9] = [
    "entropy",
    "entropy_norm",
    "distance",
    "to_start",
    "to_end",
    "to_punct",
    "to_self",
    "to_prev",
    "to_next",
];

fn grid(section: &Value, name: &str) -> Vec<Vec<f64>> {
    section[name]
        .as_array()
        .unwrap_or_else(|| panic!("no {name}"))
        .iter()
        .map(|l| {
            l.as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect()
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs().max(1e-3)
}

/// Clark et al.'s labels, from the thresholds written in the JSON (the rule order of docs/stats.md).
fn label(section: &Value, l: usize, h: usize) -> &'static str {
    let t = &section["thresholds"];
    let v = |name: &str| grid(section, name)[l][h];
    let (pos, broad, sink) = (
        t["positional"].as_f64().unwrap(),
        t["broad"].as_f64().unwrap(),
        t["sink"].as_f64().unwrap(),
    );
    if v("to_prev") > pos {
        "positional-previous"
    } else if v("to_next") > pos {
        "positional-next"
    } else if v("entropy_norm") >= broad {
        "broad"
    } else if v("to_start") + v("to_end") > sink {
        "special-sink"
    } else {
        "none"
    }
}

#[test]
fn corpus_averages_equal_the_mean_of_the_per_sentence_statistics() {
    let model = minilm();
    let dir = tempfile::tempdir().unwrap();
    let mut input = LINES.join("\n");
    input.push_str("\n\nThe committee questioned the engineer about the bridge.\n");
    let out = corpus(&model, dir.path(), input.as_bytes(), &["--threads", "2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = read_json(&dir.path().join("out/corpus_stats.json"));
    let files = sentence_files(dir.path());
    assert_eq!(files.len(), 6);
    assert_eq!(summary["sentences"], 6);
    assert_eq!(summary["pairs"], 1);
    assert_eq!(summary["lines_read"], 7);
    assert_eq!(summary["bad_lines"]["count"], 1);

    let docs: Vec<Value> = files
        .iter()
        .map(|f| read_json(&dir.path().join("out/sentences").join(f)))
        .collect();
    let tokens: u64 = docs
        .iter()
        .map(|d| d["tokens"].as_array().unwrap().len() as u64)
        .sum();
    assert_eq!(summary["tokens"], tokens);
    let (layers, heads) = (6, 12);
    let stats = &summary["stats"];
    let per_row = &summary["stats_per_row"];
    let sd = &summary["stats_sd"];
    for name in STATS {
        let corpus_mean = grid(stats, name);
        let corpus_row = grid(per_row, name);
        let corpus_sd = grid(sd, name);
        for l in 0..layers {
            for h in 0..heads {
                let values: Vec<(f64, f64)> = docs
                    .iter()
                    .map(|d| {
                        let s = &d["stats"];
                        (grid(s, name)[l][h], s["rows"][l][h].as_f64().unwrap())
                    })
                    .collect();
                let n = values.len() as f64;
                let mean = values.iter().map(|v| v.0).sum::<f64>() / n;
                let var = values.iter().map(|v| (v.0 - mean).powi(2)).sum::<f64>() / n;
                let rows: f64 = values.iter().map(|v| v.1).sum();
                let weighted = values.iter().map(|v| v.0 * v.1).sum::<f64>() / rows;
                assert!(
                    close(corpus_mean[l][h], mean),
                    "{name}[{l}][{h}]: {} vs {mean}",
                    corpus_mean[l][h]
                );
                assert!(
                    close(corpus_row[l][h], weighted),
                    "per-row {name}[{l}][{h}]"
                );
                assert!(
                    (corpus_sd[l][h] - var.sqrt()).abs() < 1e-9,
                    "sd {name}[{l}][{h}]"
                );
                assert_eq!(stats["rows"][l][h].as_f64().unwrap(), rows);
            }
        }
    }
    for l in 0..layers {
        for h in 0..heads {
            assert_eq!(stats["label"][l][h], label(stats, l, h), "label [{l}][{h}]");
            assert_eq!(stats["sentences"][l][h], 6);
        }
    }
}

#[test]
fn corpus_statistics_are_reproducible_and_agree_across_thread_counts() {
    let model = tiny();
    let input: String = (0..60)
        .map(|i| match i % 3 {
            0 => "the quick brown fox jump over the lazy dog .\n".to_string(),
            1 => format!(
                "where did the cat sit ?\t{}\n",
                "the cat sat on the mat . ".repeat(1 + i % 5)
            ),
            _ => "un run play kept , the dog !\n".to_string(),
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("input.txt");
    fs::write(&file, input).unwrap();
    let mut summaries = Vec::new();
    for threads in ["1", "2", "5"] {
        let out_dir = dir.path().join(format!("out{threads}"));
        let out = run_corpus(&model, &file, &out_dir, &["--threads", threads, "-q"]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(fs::read_dir(out_dir.join("sentences")).unwrap().count(), 60);
        summaries.push(fs::read(out_dir.join("corpus_stats.json")).unwrap());
    }
    // The corpus sums are exact, so for a given thread count the summary is the same bit for bit
    // however the sentences were scheduled (run 2 threads twice). Across thread counts the
    // engine's matrix products may block differently (gemm splits its work by thread count),
    // moving weights by about 1e-6, so the statistics agree to that, not bit for bit.
    let again = dir.path().join("out2-again");
    let out = run_corpus(&model, &file, &again, &["--threads", "2", "-q"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(summaries[1] == fs::read(again.join("corpus_stats.json")).unwrap());
    let parsed: Vec<serde_json::Value> = summaries
        .iter()
        .map(|s| serde_json::from_slice(s).unwrap())
        .collect();
    for other in &parsed[1..] {
        let worst = max_numeric_diff(&parsed[0], other);
        assert!(
            worst <= 1e-5,
            "statistics differ by {worst:e} across thread counts"
        );
    }
}

/// Largest absolute difference between the numbers at the same places of two JSON values with
/// the same shape (other values must be equal).
fn max_numeric_diff(a: &serde_json::Value, b: &serde_json::Value) -> f64 {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => (x.as_f64().unwrap() - y.as_f64().unwrap()).abs(),
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len());
            x.iter()
                .zip(y)
                .map(|(x, y)| max_numeric_diff(x, y))
                .fold(0.0, f64::max)
        }
        (Value::Object(x), Value::Object(y)) => {
            assert_eq!(x.keys().collect::<Vec<_>>(), y.keys().collect::<Vec<_>>());
            x.iter()
                .map(|(k, v)| max_numeric_diff(v, &y[k]))
                .fold(0.0, f64::max)
        }
        _ => {
            assert_eq!(a, b);
            0.0
        }
    }
}

#[test]
fn bad_lines_are_reported_with_their_numbers_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let long = "the cat sat on the mat . ".repeat(20); // over tiny-bert's 64 positions
    let mut input: Vec<u8> = Vec::new();
    input.extend_from_slice(b"the cat sat on the mat .\n"); // 1 good
    input.extend_from_slice(b"\n"); // 2 empty
    input.extend_from_slice(b"  \t  \r\n"); // 3 whitespace only
    input.extend_from_slice(b"the dog\tthe cat\tthe fox\n"); // 4 two tabs
    input.extend_from_slice(b"the \xff\xfe dog\n"); // 5 invalid UTF-8
    input.extend_from_slice(format!("{long}\n").as_bytes()); // 6 too long
    input.extend_from_slice(b"the fox .\t\n"); // 7 empty second sentence
    input.extend_from_slice(b"where did the dog sit ?\tthe dog sat .\r\n"); // 8 good pair (CRLF)
    input.extend_from_slice(b"the lazy dog"); // 9 good, no final newline
    let out = corpus(&tiny(), dir.path(), &input, &["-q"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    for (line, words) in [
        (2, "empty line"),
        (3, "empty line"),
        (4, "tabs"),
        (5, "UTF-8"),
        (6, "--truncate"),
        (7, "second sentence"),
    ] {
        let msg = err
            .lines()
            .find(|l| l.contains(&format!("line {line}:")))
            .unwrap_or_else(|| panic!("line {line} not reported:\n{err}"));
        assert!(msg.contains(words) && msg.contains("skipped"), "{msg}");
    }
    assert_eq!(
        sentence_files(dir.path()),
        ["000001.json", "000008.json", "000009.json"]
    );
    let summary = read_json(&dir.path().join("out/corpus_stats.json"));
    assert_eq!(summary["end"], "complete");
    assert_eq!(summary["sentences"], 3);
    assert_eq!(summary["lines_read"], 9);
    let listed: Vec<u64> = summary["bad_lines"]["listed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["line"].as_u64().unwrap())
        .collect();
    assert_eq!(listed, [2, 3, 4, 5, 6, 7]);
    assert_eq!(summary["bad_lines"]["by_kind"]["empty"], 3);
    assert_eq!(summary["bad_lines"]["by_kind"]["too-long"], 1);
    let pair = read_json(&dir.path().join("out/sentences/000008.json"));
    assert_eq!(pair["pair"], "the dog sat .");

    // With --truncate the long line is used, cut to the model's 64 positions.
    let dir = tempfile::tempdir().unwrap();
    let out = corpus(&tiny(), dir.path(), &input, &["-q", "--truncate"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("line 6:") && stderr(&out).contains("truncated to 64"));
    let cut = read_json(&dir.path().join("out/sentences/000006.json"));
    assert_eq!(cut["tokens"].as_array().unwrap().len(), 64);
    let summary = read_json(&dir.path().join("out/corpus_stats.json"));
    assert_eq!(summary["truncated"], 1);
    assert_eq!(summary["truncated_lines"], serde_json::json!([6]));
}

#[test]
fn stop_mode_exits_non_zero_and_keeps_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut input = String::new();
    for i in 1..=40 {
        input.push_str(if i == 25 {
            "a\tb\tc\n"
        } else {
            "the cat sat on the mat .\n"
        });
    }
    let out = corpus(
        &tiny(),
        dir.path(),
        input.as_bytes(),
        &["--on-bad-line", "stop", "--threads", "3", "-q"],
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("line 25:") && err.contains("stopped"), "{err}");
    let want: Vec<String> = (1..25).map(|i| format!("{i:06}.json")).collect();
    assert_eq!(
        sentence_files(dir.path()),
        want,
        "exactly the lines before the bad one"
    );
    let summary = read_json(&dir.path().join("out/corpus_stats.json"));
    assert_eq!(summary["end"], "stopped");
    assert_eq!(summary["end_line"], 25);
    assert_eq!(summary["sentences"], 24);
    assert!(summary["stats"]["entropy"].is_array());
    // No temporary files left behind.
    assert!(fs::read_dir(dir.path().join("out/sentences"))
        .unwrap()
        .all(|e| !e.unwrap().file_name().to_string_lossy().ends_with(".tmp")));
}

#[test]
fn stdin_input_and_no_per_sentence_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = attnviz()
        .arg("-m")
        .arg(tiny())
        .args(["--input", "-", "--per-sentence", "none", "--out-dir"])
        .arg(dir.path().join("out"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"the cat sat .\nthe dog !\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!dir.path().join("out/sentences").exists());
    let summary = read_json(&dir.path().join("out/corpus_stats.json"));
    assert_eq!(summary["sentences"], 2);
    assert_eq!(summary["input"], "-");
    // The averaged table goes to stdout.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("averaged over 2 sentences"), "{stdout}");
    assert!(stdout.contains("layer 2"), "{stdout}");
}

#[test]
fn unusable_input_and_single_input_flags_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = corpus(&tiny(), dir.path(), b"", &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("has no lines"), "{}", stderr(&out));
    let out = corpus(&tiny(), dir.path(), b"\n \n", &[]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("none of the 2 lines"),
        "{}",
        stderr(&out)
    );
    let out = corpus(&tiny(), dir.path(), b"the cat .\n", &["--json", "x.json"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--json is for a single input"),
        "{}",
        stderr(&out)
    );
    let out = attnviz()
        .arg("-m")
        .arg(tiny())
        .args(["--input", "/nonexistent/corpus.txt", "--out-dir"])
        .arg(dir.path().join("o2"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot read /nonexistent/corpus.txt"),
        "{}",
        stderr(&out)
    );
}

#[cfg(unix)]
#[test]
fn ctrl_c_finishes_the_sentences_in_flight_and_writes_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let mut child = attnviz()
        .arg("-m")
        .arg(tiny())
        .args(["--input", "-", "-q", "--out-dir"])
        .arg(&out_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for _ in 0..5 {
        stdin.write_all(b"the cat sat on the mat .\n").unwrap();
    }
    stdin.flush().unwrap();
    // Wait until the five lines are written, with the input still open.
    let start = Instant::now();
    while sentence_files(dir.path()).len() < 5 {
        assert!(start.elapsed() < Duration::from_secs(60), "no output");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    std::thread::sleep(Duration::from_millis(100));
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    let summary = read_json(&out_dir.join("corpus_stats.json"));
    assert_eq!(summary["end"], "interrupted");
    assert_eq!(summary["sentences"], 5);
    assert_eq!(sentence_files(dir.path()).len(), 5);
}

#[test]
fn a_failed_write_ends_the_run_and_the_summary_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // A folder where line 2's file should go makes its write fail (even for root).
    fs::create_dir_all(dir.path().join("out/sentences/000002.json")).unwrap();
    let out = corpus(
        &tiny(),
        dir.path(),
        b"the cat sat .\nthe dog sat .\n",
        // --force: the folder in the way looks like an earlier run's file.
        &["--threads", "1", "-q", "--force"],
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("000002.json") && err.contains("folder"),
        "{err}"
    );
    let summary = read_json(&dir.path().join("out/corpus_stats.json"));
    assert_eq!(summary["end"], "failed");
    assert!(summary["end_reason"]
        .as_str()
        .unwrap()
        .contains("000002.json"));
    assert_eq!(summary["sentences"], 1);
    assert!(dir.path().join("out/sentences/000001.json").is_file());
}

/// A vision model's corpus: a folder of images (in name order) or a file of image paths, each
/// image's JSON the same as `attnviz -m MODEL --image PATH --json`, an unreadable picture a bad
/// line (`bad-image`) that is skipped.
#[test]
fn a_vision_models_corpus_is_a_folder_or_a_list_of_images() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = crate::support::cli::repo().join("tests/fixtures");
    let deit = fixtures.join("tiny-deit");
    let images = dir.path().join("images");
    fs::create_dir(&images).unwrap();
    for name in ["own32.png", "wide45x37.jpg"] {
        fs::copy(fixtures.join("images").join(name), images.join(name)).unwrap();
    }
    fs::write(images.join("broken.png"), b"not a picture").unwrap();
    fs::write(images.join("notes.txt"), b"not listed").unwrap();
    let corpus = |input: &Path, out: &Path| {
        run(&[
            "-m",
            deit.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
            "--out-dir",
            out.to_str().unwrap(),
            "--per-sentence",
            "json",
            "-q",
        ])
    };
    let single = |image: &Path| {
        let json = dir.path().join("single.json");
        let out = run(&[
            "-m",
            deit.to_str().unwrap(),
            "--image",
            image.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
            "-q",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        fs::read(json).unwrap()
    };
    // The folder: broken.png (line 1), own32.png (2), wide45x37.jpg (3); notes.txt is no image.
    let out_dir = dir.path().join("out");
    let out = corpus(&images, &out_dir);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("line 1:") && err.contains("broken.png is not a readable image"),
        "{err}"
    );
    let stats: serde_json::Value =
        serde_json::from_slice(&fs::read(out_dir.join("corpus_stats.json")).unwrap()).unwrap();
    assert_eq!(stats["sentences"], 2, "{stats}");
    assert_eq!(stats["bad_lines"]["by_kind"]["bad-image"], 1, "{stats}");
    assert_eq!(
        fs::read(out_dir.join("sentences/000002.json")).unwrap(),
        single(&images.join("own32.png"))
    );
    assert_eq!(
        fs::read(out_dir.join("sentences/000003.json")).unwrap(),
        single(&images.join("wide45x37.jpg"))
    );
    // A list of paths, relative to the list's folder.
    let list = dir.path().join("list.txt");
    fs::write(&list, "images/wide45x37.jpg\nimages/missing.png\n").unwrap();
    let out_dir = dir.path().join("out-list");
    let out = corpus(&list, &out_dir);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("line 2: cannot read image"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        fs::read(out_dir.join("sentences/000001.json")).unwrap(),
        single(&images.join("wide45x37.jpg"))
    );
}
