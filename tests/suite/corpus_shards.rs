//! Corpus mode beyond one process, through the release binary: `--shard K/N` and `attnviz
//! merge` (byte-identical to one run, for N = 1, 3 and 7; refusals), `--resume` after SIGKILL
//! and SIGTERM, JSON Lines with ids, gzip and zstd input told from the content, a decompression
//! bomb in bounded memory, and the scheduler recipes of docs/corpus.md run as written (GNU
//! parallel with several processes; the Slurm and Kubernetes scripts with their variables set).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::support::cli::{attnviz, minilm, stderr, temp_files, tiny, tree, wait_for};

const LIMIT: Duration = Duration::from_secs(120);

use crate::support::cli::{corpus_command, run_corpus as run};

fn ok(out: &Output) {
    assert!(out.status.success(), "{}", stderr(out));
}

fn merge(files: &[PathBuf], out: &Path) -> Output {
    attnviz()
        .arg("merge")
        .args(files)
        .arg("--out")
        .arg(out)
        .arg("-q")
        .output()
        .unwrap()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .unwrap()
}

/// A corpus with every kind of line the summary records: sentences, pairs, bad lines of several
/// kinds, and lines too long for the model (truncated with `--truncate`).
fn mixed_corpus(lines: usize, long: usize) -> String {
    let words = [
        "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "cat", "sat", "on", "mat",
        "where", "did", "it", "run", ",", ".", "!", "?",
    ];
    let mut seed = 7u64;
    let mut next = |n: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize % n
    };
    let mut out = String::new();
    for i in 1..=lines {
        let len = 3 + next(18);
        let sentence: Vec<&str> = (0..len).map(|_| words[next(words.len())]).collect();
        let line = match i % 17 {
            5 => String::new(),
            9 => "a\tb\tc".to_string(),
            13 => vec!["fox jumps over the dog ."; long].join(" "),
            3 | 11 => format!(
                "{}\t{}",
                sentence.join(" "),
                sentence[..len / 2 + 1].join(" ")
            ),
            _ => sentence.join(" "),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Run `input` as shards 1..=n of n into `dir/shard-K`, each with `flags`.
fn run_shards(model: &Path, input: &Path, dir: &Path, n: usize, flags: &[&str]) -> Vec<PathBuf> {
    (1..=n)
        .map(|k| {
            let out = dir.join(format!("shard-{k}"));
            let shard = format!("{k}/{n}");
            let mut all = vec!["--shard", shard.as_str()];
            all.extend_from_slice(flags);
            ok(&run(model, input, &out, &all));
            out.join("corpus_partial.json")
        })
        .collect()
}

#[test]
fn merged_shards_are_byte_identical_to_one_run_for_1_3_and_7_shards() {
    let model = minilm();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("corpus.txt");
    // 100 lines: 76 sentences and pairs, 6 empty, 6 with two tabs, 6 over 512 tokens (cut).
    fs::write(&input, mixed_corpus(100, 120)).unwrap();
    let flags = [
        "--threads",
        "2",
        "--per-sentence",
        "none",
        "--truncate",
        "-q",
    ];
    let single = dir.path().join("single");
    ok(&run(&model, &input, &single, &flags));
    let want = fs::read(single.join("corpus_stats.json")).unwrap();
    let summary = json(&single.join("corpus_stats.json"));
    assert_eq!(summary["lines_read"], 100);
    assert_eq!(summary["bad_lines"]["count"], 12);
    assert!(summary["truncated"].as_u64().unwrap() > 0);
    assert!(summary["pairs"].as_u64().unwrap() > 0);
    assert_eq!(summary["shard"], serde_json::Value::Null);
    for n in [1, 3, 7] {
        let shards = dir.path().join(format!("n{n}"));
        let partials = run_shards(&model, &input, &shards, n, &flags);
        // Each shard saw every line and analysed its own.
        let mut sentences = 0;
        for (k, p) in partials.iter().enumerate() {
            let part = json(p);
            assert_eq!(part["end"], "complete");
            assert_eq!(part["lines"], 100);
            assert_eq!(part["shard"]["index"], k + 1);
            sentences += part["sentences"].as_u64().unwrap();
            let own = json(&p.with_file_name("corpus_stats.json"));
            if n > 1 {
                assert_eq!(own["shard"], format!("{}/{n}", k + 1));
            }
        }
        assert_eq!(sentences, summary["sentences"].as_u64().unwrap());
        let merged = shards.join("merged.json");
        ok(&merge(&partials, &merged));
        assert!(
            fs::read(&merged).unwrap() == want,
            "{n} shards merged differ from one run:\n{}",
            first_difference(&merged, &single.join("corpus_stats.json"))
        );
        // The order the files are given in does not matter.
        let mut reversed = partials.clone();
        reversed.reverse();
        ok(&merge(&reversed, &shards.join("reversed.json")));
        assert!(fs::read(shards.join("reversed.json")).unwrap() == want);
    }
}

/// A mixture-of-experts model's expert load over a corpus (tiny random Qwen3-MoE, routed
/// layers 0 and 2): the sum of the sentences' own `router` loads (their per-sentence JSON), and
/// two shards merged give one run's file byte for byte, expert load included.
#[test]
fn expert_load_over_a_corpus_is_the_sentences_sum_and_merges_exactly() {
    let model = crate::support::cli::repo().join("tests/fixtures/tiny-qwen3_moe");
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("corpus.txt");
    fs::write(&input, mixed_corpus(14, 3)).unwrap();
    let single = dir.path().join("single");
    ok(&run(
        &model,
        &input,
        &single,
        &[
            "--threads",
            "2",
            "--per-sentence",
            "json",
            "--truncate",
            "-q",
        ],
    ));
    let summary = json(&single.join("corpus_stats.json"));
    let load = &summary["expert_load"];
    assert_eq!(load["experts"], 8);
    assert_eq!(load["layers"], serde_json::json!([0, 2]));
    // The sentences' own loads, summed here.
    let mut want = vec![vec![0u64; 8]; 2];
    let mut tokens = 0;
    for e in fs::read_dir(single.join("sentences")).unwrap() {
        let doc = json(&e.unwrap().path());
        let router = &doc["router"];
        tokens += router["tokens"].as_array().unwrap().len() as u64;
        for (i, l) in router["layers"].as_array().unwrap().iter().enumerate() {
            for (x, c) in l["load"].as_array().unwrap().iter().enumerate() {
                want[i][x] += c.as_u64().unwrap();
            }
        }
    }
    assert!(tokens > 0);
    assert_eq!(load["tokens"], tokens);
    assert_eq!(load["load"], serde_json::json!(want));
    let flags = [
        "--threads",
        "1",
        "--per-sentence",
        "none",
        "--truncate",
        "-q",
    ];
    let none = dir.path().join("none");
    ok(&run(&model, &input, &none, &flags));
    let partials = run_shards(&model, &input, dir.path(), 2, &flags);
    assert!(json(&partials[0])["sums"]["expert_load"]["load"] != serde_json::json!(want));
    let merged = dir.path().join("merged.json");
    ok(&merge(&partials, &merged));
    assert!(
        fs::read(&merged).unwrap() == fs::read(none.join("corpus_stats.json")).unwrap(),
        "{}",
        first_difference(&merged, &none.join("corpus_stats.json"))
    );
    assert_eq!(json(&merged)["expert_load"], *load);
}

fn first_difference(a: &Path, b: &Path) -> String {
    let (a, b) = (
        fs::read_to_string(a).unwrap(),
        fs::read_to_string(b).unwrap(),
    );
    a.lines()
        .zip(b.lines())
        .find(|(x, y)| x != y)
        .map(|(x, y)| format!("{x}\n{y}"))
        .unwrap_or_else(|| "lengths differ".into())
}

#[test]
fn shards_write_the_per_sentence_files_one_run_writes() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("corpus.txt");
    fs::write(&input, mixed_corpus(40, 30)).unwrap();
    let flags = ["--threads", "1", "-q", "--truncate"];
    let single = dir.path().join("single");
    ok(&run(&tiny(), &input, &single, &flags));
    let partials = run_shards(&tiny(), &input, dir.path(), 3, &flags);
    let mut from_shards: Vec<(String, Vec<u8>)> = Vec::new();
    for p in &partials {
        let sentences = p.with_file_name("sentences");
        for e in fs::read_dir(&sentences).unwrap() {
            let e = e.unwrap();
            from_shards.push((
                e.file_name().to_string_lossy().into_owned(),
                fs::read(e.path()).unwrap(),
            ));
        }
    }
    from_shards.sort();
    let mut from_single: Vec<(String, Vec<u8>)> = fs::read_dir(single.join("sentences"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    from_single.sort();
    assert_eq!(from_shards.len(), from_single.len());
    assert!(from_shards == from_single, "per-sentence files differ");
    let merged = dir.path().join("merged.json");
    ok(&merge(&partials, &merged));
    assert!(fs::read(merged).unwrap() == fs::read(single.join("corpus_stats.json")).unwrap());
}

/// A failed merge: one line naming `mentions`, status 1, and no output written.
fn refused(out: &Output, mentions: &[&str], merged: &Path) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    for m in mentions {
        assert!(err.contains(m), "expected `{m}` in: {err}");
    }
    assert!(!merged.exists(), "{err}");
}

#[test]
fn merge_refuses_shards_that_do_not_add_up_and_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("corpus.txt");
    fs::write(&input, mixed_corpus(30, 30)).unwrap();
    let flags = ["--threads", "1", "-q", "--per-sentence", "none"];
    let p = run_shards(&tiny(), &input, &d.join("ok"), 3, &flags);
    let merged = d.join("merged.json");

    let out = merge(&[p[0].clone(), p[2].clone()], &merged);
    refused(&out, &["1 of the 3 shards is missing: 2/3"], &merged);
    let out = merge(
        &[p[0].clone(), p[1].clone(), p[1].clone(), p[2].clone()],
        &merged,
    );
    refused(&out, &["shard 2/3 is given twice"], &merged);

    // Other options: shard 2 with --words.
    let words = d.join("words");
    let out_w = run(
        &tiny(),
        &input,
        &words,
        &[&flags[..], &["--shard", "2/3", "--words"]].concat(),
    );
    ok(&out_w);
    let wp = words.join("corpus_partial.json");
    let out = merge(&[p[0].clone(), wp.clone(), p[2].clone()], &merged);
    refused(
        &out,
        &[&wp.display().to_string(), "words = true", "words = false"],
        &merged,
    );

    // Another model: the same weights with another config.json.
    let other_model = d.join("model");
    crate::support::cli::copy_model(&tiny(), &other_model);
    let mut cfg = fs::OpenOptions::new()
        .append(true)
        .open(other_model.join("config.json"))
        .unwrap();
    cfg.write_all(b"\n").unwrap();
    let om = d.join("other-model");
    ok(&run(
        &other_model,
        &input,
        &om,
        &[&flags[..], &["--shard", "2/3"]].concat(),
    ));
    let out = merge(
        &[p[0].clone(), om.join("corpus_partial.json"), p[2].clone()],
        &merged,
    );
    refused(
        &out,
        &["other-model", "model config", "config.json sha256"],
        &merged,
    );

    // Another input with as many lines.
    let other_input = d.join("other.txt");
    fs::write(&other_input, mixed_corpus(30, 30).replace("fox", "cat")).unwrap();
    let oi = d.join("other-input");
    ok(&run(
        &tiny(),
        &other_input,
        &oi,
        &[&flags[..], &["--shard", "2/3"]].concat(),
    ));
    let out = merge(
        &[p[0].clone(), oi.join("corpus_partial.json"), p[2].clone()],
        &merged,
    );
    refused(&out, &["other-input", "read another input"], &merged);

    // Another split.
    let four = d.join("four");
    ok(&run(
        &tiny(),
        &input,
        &four,
        &[&flags[..], &["--shard", "2/4"]].concat(),
    ));
    let out = merge(&[p[0].clone(), four.join("corpus_partial.json")], &merged);
    refused(&out, &["shard 2/4", "one split"], &merged);

    // A shard that has not finished.
    let running = d.join("running.json");
    let text = fs::read_to_string(&p[1]).unwrap();
    fs::write(
        &running,
        text.replace("\"end\": \"complete\"", "\"end\": \"running\""),
    )
    .unwrap();
    let out = merge(&[p[0].clone(), running, p[2].clone()], &merged);
    refused(
        &out,
        &["running.json", "still running", "--resume"],
        &merged,
    );

    // Not a partial file; a partial file as the output.
    let summary = p[1].with_file_name("corpus_stats.json");
    let out = merge(&[p[0].clone(), summary, p[2].clone()], &merged);
    refused(&out, &["corpus_partial.json"], &merged);
    let out = merge(&p, &p[0]);
    refused(&out, &["one of the partial files"], &merged);
    let out = merge(&[d.join("nope.json")], &merged);
    refused(&out, &["does not exist"], &merged);

    // The folders stand for their partial files; the summary can go to stdout.
    let out = attnviz()
        .arg("merge")
        .args(p.iter().map(|f| f.parent().unwrap()))
        .args(["--out", "-"])
        .output()
        .unwrap();
    ok(&out);
    let stdout: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stdout["lines_read"], 30);
}

/// Start a corpus run in the background.
fn spawn(model: &Path, input: &Path, out: &Path, flags: &[&str]) -> Child {
    corpus_command(model, input, out, flags)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn files_in(dir: &Path) -> usize {
    fs::read_dir(dir).map_or(0, |rd| {
        rd.filter(|e| {
            e.as_ref()
                .is_ok_and(|e| !e.file_name().to_string_lossy().starts_with('.'))
        })
        .count()
    })
}

/// Every file under `dir/sentences` with its bytes.
fn sentence_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = fs::read_dir(dir.join("sentences"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[cfg(unix)]
#[test]
fn a_killed_run_resumes_to_the_same_result() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("corpus.txt");
    let lines = 4000;
    fs::write(&input, mixed_corpus(lines, 30)).unwrap();
    let flags = ["--threads", "2", "-q", "--truncate"];
    let full = d.join("full");
    ok(&run(&tiny(), &input, &full, &flags));
    let want_summary = fs::read(full.join("corpus_stats.json")).unwrap();
    let want_files = sentence_files(&full);

    for (sig, code) in [(libc::SIGKILL, None), (libc::SIGTERM, Some(143))] {
        let out = d.join(format!("killed-{sig}"));
        let child = spawn(&tiny(), &input, &out, &flags);
        let sentences = out.join("sentences");
        wait_for("200 sentences", LIMIT, || files_in(&sentences) >= 200);
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as libc::pid_t, sig) };
        let end = child.wait_with_output().unwrap();
        assert_eq!(end.status.code(), code, "{}", stderr(&end));
        let done = files_in(&sentences);
        assert!(
            done < want_files.len(),
            "the run finished before the signal ({done} files)"
        );
        let partial = json(&out.join("corpus_partial.json"));
        if code.is_some() {
            // SIGTERM (what schedulers send first): the sentences in flight finish, the partial
            // file records where the run stopped, and the message says how to go on.
            assert_eq!(partial["end"], "interrupted");
            assert!(partial["lines"].as_u64().unwrap() > 0);
            let err = stderr(&end);
            assert!(
                err.contains("terminated (SIGTERM)") && err.contains("--resume"),
                "{err}"
            );
            assert!(temp_files(&out).is_empty(), "{:?}", tree(&out));
        } else {
            assert_eq!(partial["end"], "running");
        }
        // Resume: the sentences done are skipped, the others computed; same result.
        let res = run(&tiny(), &input, &out, &[&flags[..], &["--resume"]].concat());
        ok(&res);
        assert!(
            fs::read(out.join("corpus_stats.json")).unwrap() == want_summary,
            "resumed after signal {sig}:\n{}",
            first_difference(
                &out.join("corpus_stats.json"),
                &full.join("corpus_stats.json")
            )
        );
        assert!(
            sentence_files(&out) == want_files,
            "per-sentence files differ"
        );
        assert_eq!(json(&out.join("corpus_partial.json"))["end"], "complete");
        // Nothing of the run's bookkeeping is left: no journal, no temporary file.
        let left: Vec<String> = tree(&out)
            .into_iter()
            .filter(|p| {
                Path::new(p)
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with('.')
            })
            .collect();
        assert!(left.is_empty(), "{left:?}");
        // Resuming a finished run changes nothing.
        let again = attnviz()
            .arg("-m")
            .arg(tiny())
            .arg("--input")
            .arg(&input)
            .arg("--out-dir")
            .arg(&out)
            .args(["--threads", "2", "--truncate", "--resume"])
            .output()
            .unwrap();
        ok(&again);
        assert!(fs::read(out.join("corpus_stats.json")).unwrap() == want_summary);
        assert!(
            stderr(&again).contains("done by the earlier run (--resume)"),
            "{}",
            stderr(&again)
        );
    }
}

#[test]
fn resume_refuses_another_run_and_starts_when_there_is_nothing_to_resume() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("corpus.txt");
    fs::write(&input, mixed_corpus(30, 30)).unwrap();
    let out = d.join("out");
    // Nothing to resume: a plain run.
    ok(&run(&tiny(), &input, &out, &["-q", "--resume"]));
    let first = fs::read(out.join("corpus_stats.json")).unwrap();
    let check = |o: &Output, words: &[&str]| {
        let err = stderr(o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        for w in words {
            assert!(err.contains(w), "expected `{w}` in: {err}");
        }
        assert!(fs::read(out.join("corpus_stats.json")).unwrap() == first);
    };
    check(
        &run(&tiny(), &input, &out, &["-q", "--resume", "--words"]),
        &["cannot resume", "words = false", "words = true", "--force"],
    );
    check(
        &run(&tiny(), &input, &out, &["-q", "--resume", "--shard", "1/2"]),
        &[
            "holds the results of shard 1/1",
            "this run is shard 1/2",
            "its own --out-dir, or add --force",
        ],
    );
    let changed = d.join("changed.txt");
    fs::write(&changed, mixed_corpus(30, 30).replacen("the", "a", 1)).unwrap();
    check(
        &run(&tiny(), &changed, &out, &["-q", "--resume"]),
        &[
            "are not the ones the earlier run read",
            "same input, or use --force to start over",
        ],
    );
    let short = d.join("short.txt");
    fs::write(&short, "the cat .\n").unwrap();
    check(
        &run(&tiny(), &short, &out, &["-q", "--resume"]),
        &["has 1 lines", "same input"],
    );
    // Per-sentence files without a partial file cannot be resumed.
    fs::remove_file(out.join("corpus_partial.json")).unwrap();
    check(
        &run(&tiny(), &input, &out, &["-q", "--resume"]),
        &["no corpus_partial.json", "--force"],
    );
    // --force starts over.
    ok(&run(&tiny(), &input, &out, &["-q", "--force"]));
    assert!(fs::read(out.join("corpus_stats.json")).unwrap() == first);
    // Another shard's folder is not overwritten.
    let other = run(&tiny(), &input, &out, &["-q", "--shard", "2/2", "--resume"]);
    check(
        &other,
        &["holds the results of shard 1/1", "this run is shard 2/2"],
    );
}

#[cfg(unix)]
#[test]
fn two_runs_cannot_write_into_one_folder_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("corpus.txt");
    fs::write(&input, mixed_corpus(30, 30)).unwrap();
    let out = d.join("out");
    let flags = ["-q", "--per-sentence", "none", "--threads", "1"];
    // Shards 1 and 2 given one --out-dir by mistake: the second is refused while the first runs
    // (reading its standard input, which stays open until the test closes it).
    let mut first = attnviz()
        .arg("-m")
        .arg(tiny())
        .args(["--input", "-", "--shard", "1/2", "--out-dir"])
        .arg(&out)
        .args(flags)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = first.stdin.take().unwrap();
    stdin.write_all(b"the cat sat .\nthe dog .\n").unwrap();
    wait_for("the first run's lock", LIMIT, || {
        out.join(".corpus.lock").exists()
    });
    let second = run(
        &tiny(),
        &input,
        &out,
        &[&flags[..], &["--shard", "2/2"]].concat(),
    );
    let err = stderr(&second);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "another attnviz run is writing into it; give each run (each shard) its own --out-dir"
        ),
        "{err}"
    );
    drop(stdin);
    let end = first.wait_with_output().unwrap();
    assert!(end.status.success(), "{}", stderr(&end));
    assert!(!out.join(".corpus.lock").exists());
    assert_eq!(json(&out.join("corpus_partial.json"))["shard"]["index"], 1);
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

#[test]
fn json_lines_gzip_and_zstd_are_told_from_the_content() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let records = [
        r#"{"text": "the cat sat on the mat .", "id": "cats-1"}"#,
        r#"{"text": "where did the dog sit ?", "pair": "the dog sat .", "id": 7, "source": "x"}"#,
        r#"{"text": "the lazy dog"}"#,
        r#"{"text": "the fox", "id": "CATS-1"}"#,
        r#"{"text": "un run", "id": "../../etc/passwd"}"#,
        r#"{"text": "", "id": "empty-one"}"#,
        r#"{"text": "the dog !", "id": "empty-one"}"#,
        r#"["not", "an", "object"]"#,
        r#"{"text": "the cat", "id": "000003"}"#,
        r#"{"text": "the dog", "id": "dot."}"#,
        r#"{"txt": "the cat"}"#,
        r#"{"text": "kept , the dog"}"#,
    ];
    let jsonl = records.join("\n") + "\n";
    // The same sentences as plain text (bad records as blank lines), for the statistics.
    let text = "the cat sat on the mat .\nwhere did the dog sit ?\tthe dog sat .\nthe lazy dog\n\n\n\n\n\n\n\n\nkept , the dog\n";
    let text_in = d.join("plain.txt");
    fs::write(&text_in, text).unwrap();
    ok(&run(
        &tiny(),
        &text_in,
        &d.join("text"),
        &["-q", "--threads", "1"],
    ));
    let from_text = json(&d.join("text/corpus_stats.json"));

    // Names that say nothing about the content: detection is by content only.
    let inputs = [
        ("plain.data", jsonl.as_bytes().to_vec(), "none"),
        ("gz.txt", gzip(jsonl.as_bytes()), "gzip"),
        (
            "zst.json",
            zstd::stream::encode_all(jsonl.as_bytes(), 3).unwrap(),
            "zstd",
        ),
    ];
    for (name, bytes, compression) in inputs {
        let input = d.join(name);
        fs::write(&input, bytes).unwrap();
        let out = d.join(format!("out-{name}"));
        let res = run(&tiny(), &input, &out, &["-q", "--threads", "1"]);
        ok(&res);
        let err = stderr(&res);
        for (line, says) in [
            (4, "id \"CATS-1\" is already used by line 1"),
            (5, "id \"../../etc/passwd\" holds '/'"),
            (6, "empty \"text\""),
            (7, "id \"empty-one\" is already used by line 6"),
            (8, "not a JSON object"),
            (9, "id \"000003\" is the output name of line 3"),
            (10, "cannot name a file"),
            (11, "no \"text\" field"),
        ] {
            let msg = err
                .lines()
                .find(|l| l.starts_with(&format!("warning: line {line}:")))
                .unwrap_or_else(|| panic!("line {line} not reported:\n{err}"));
            assert!(msg.contains(says), "{msg}");
        }
        let files: Vec<String> = sentence_files(&out).into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            files,
            ["000003.json", "000012.json", "7.json", "cats-1.json"],
            "{name}"
        );
        let pair = json(&out.join("sentences/7.json"));
        assert_eq!(pair["pair"], "the dog sat .");
        let summary = json(&out.join("corpus_stats.json"));
        assert_eq!(summary["input_format"], "jsonl");
        assert_eq!(summary["compression"], compression);
        assert_eq!(summary["bad_lines"]["by_kind"]["duplicate-id"], 3);
        assert_eq!(summary["bad_lines"]["by_kind"]["bad-id"], 2);
        assert_eq!(summary["bad_lines"]["by_kind"]["bad-json"], 2);
        assert_eq!(summary["stats"], from_text["stats"], "{name}");
        assert_eq!(summary["stats_per_row"], from_text["stats_per_row"]);
        assert_eq!(summary["tokens"], from_text["tokens"]);
    }
    // Text that merely starts with a brace is text; --input-format says what to use.
    let brace = d.join("brace.txt");
    fs::write(&brace, "{the cat} sat .\nthe dog .\n").unwrap();
    ok(&run(&tiny(), &brace, &d.join("brace"), &["-q"]));
    assert_eq!(
        json(&d.join("brace/corpus_stats.json"))["input_format"],
        "text"
    );
    let res = run(
        &tiny(),
        &brace,
        &d.join("forced"),
        &["-q", "--input-format", "jsonl"],
    );
    assert!(!res.status.success());
    assert!(
        stderr(&res).contains("none of the 2 lines"),
        "{}",
        stderr(&res)
    );
}

#[test]
fn json_lines_ids_are_unique_across_shards_as_in_one_run() {
    // Line 2 (shard 2 of 3) takes the id "a"; line 4 (shard 1) repeats it: shard 1 must see that
    // line 2 took it, though line 2 is not its own.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("c.jsonl");
    let mut jsonl = String::new();
    for i in 1..=20 {
        let id = match i {
            2 | 4 => "\"a\"".to_string(),
            // Line 10 has no id, so its name is its number, taken by line 8 (shard 2).
            8 => "\"000010\"".to_string(),
            _ if i % 2 == 0 && i != 10 => format!("\"doc{i}\""),
            _ => "null".into(),
        };
        jsonl.push_str(&format!(
            "{{\"text\": \"the cat sat on the mat {i} .\", \"id\": {id}}}\n"
        ));
    }
    fs::write(&input, &jsonl).unwrap();
    let flags = ["--threads", "1", "-q"];
    let single = d.join("single");
    ok(&run(&tiny(), &input, &single, &flags));
    let s = json(&single.join("corpus_stats.json"));
    assert_eq!(
        s["bad_lines"]["by_kind"]["duplicate-id"], 2,
        "{}",
        s["bad_lines"]
    );
    let partials = run_shards(&tiny(), &input, d, 3, &flags);
    let merged = d.join("merged.json");
    ok(&merge(&partials, &merged));
    assert!(fs::read(&merged).unwrap() == fs::read(single.join("corpus_stats.json")).unwrap());
}

#[cfg(unix)]
#[test]
fn a_decompression_bomb_is_read_in_bounded_memory() {
    // 256 MiB of one byte and no newline, then a good line: about 250 KB of gzip. The first
    // line is measured and dropped as it streams past (tiny-bert takes 16 KiB per line).
    let dir = tempfile::tempdir().unwrap();
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let block = vec![b'a'; 1 << 20];
    for _ in 0..256 {
        e.write_all(&block).unwrap();
    }
    e.write_all(b"\nthe cat sat .\n").unwrap();
    let input = dir.path().join("bomb.gz");
    fs::write(&input, e.finish().unwrap()).unwrap();
    assert!(fs::metadata(&input).unwrap().len() < 2 << 20);
    let mut cmd = attnviz();
    cmd.arg("-m")
        .arg(tiny())
        .arg("--input")
        .arg(&input)
        .arg("--out-dir")
        .arg(dir.path().join("out"))
        .args(["-q", "--threads", "1"]);
    let r = crate::input_bounds::measured(cmd, Vec::new());
    eprintln!(
        "a 256 MiB gzip-compressed line: {:.2?}, max RSS {:.0} MB",
        r.elapsed, r.max_rss_mb
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let summary = json(&dir.path().join("out/corpus_stats.json"));
    assert_eq!(summary["sentences"], 1);
    assert_eq!(summary["bad_lines"]["by_kind"]["too-long"], 1);
    assert_eq!(summary["compression"], "gzip");
    assert!(
        r.max_rss_mb < 128.0,
        "peak RSS {:.0} MiB for a 256 MiB line",
        r.max_rss_mb
    );
}

/// The shell code of the recipe marked `<!-- recipe: NAME -->` in docs/corpus.md: the fenced
/// block that follows the marker.
fn recipe(name: &str) -> String {
    let doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/corpus.md")).unwrap();
    let marker = format!("<!-- recipe: {name} -->");
    let after = &doc[doc.find(&marker).unwrap_or_else(|| panic!("no {marker}")) + marker.len()..];
    let start = after.find("```").unwrap();
    let body = &after[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    body[..body.find("```").unwrap()].to_string()
}

/// A shell with the attnviz under test first on PATH and the recipe's variables set.
fn shell(program: &str, script: &str, vars: &[(&str, &str)]) -> Output {
    let bin = Path::new(env!("CARGO_BIN_EXE_attnviz")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new(program);
    cmd.arg("-c")
        .arg(script)
        .env("PATH", path)
        .env_remove("ATTNVIZ_MODEL")
        .env_remove("RAYON_NUM_THREADS")
        .env("HF_HUB_OFFLINE", "1")
        .env("NO_COLOR", "1")
        // Only the variables a test sets (a test run inside a Slurm job or a pod has its own).
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("SLURM_ARRAY_TASK_MIN")
        .env_remove("SLURM_ARRAY_TASK_STEP")
        .env_remove("SLURM_ARRAY_TASK_COUNT")
        .env_remove("JOB_COMPLETION_INDEX")
        // GNU parallel's citation notice.
        .env("PARALLEL", "--will-cite");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// The single run every recipe's merged result must equal.
fn reference(dir: &Path, input: &Path) -> Vec<u8> {
    let single = dir.join("single");
    ok(&run(
        &tiny(),
        input,
        &single,
        &["--threads", "1", "--per-sentence", "none", "-q"],
    ));
    fs::read(single.join("corpus_stats.json")).unwrap()
}

#[test]
fn the_gnu_parallel_recipe_runs_as_written() {
    if Command::new("parallel").arg("--version").output().is_err() {
        // scripts/test.sh installs GNU parallel; a bare `cargo test` may not have it.
        eprintln!(
            "\n##### SKIPPED: GNU parallel is not installed, so the GNU parallel recipe of \
             docs/corpus.md was NOT run (scripts/test.sh installs it: apt-get install parallel)\n"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("corpus.txt");
    fs::write(&input, mixed_corpus(120, 30)).unwrap();
    let want = reference(d, &input);
    let out = d.join("out");
    let vars = [
        ("MODEL", tiny().to_str().unwrap().to_string()),
        ("INPUT", input.to_str().unwrap().to_string()),
        ("OUT", out.to_str().unwrap().to_string()),
        ("N", "5".to_string()),
        ("JOBS", "3".to_string()),
        ("THREADS", "1".to_string()),
    ];
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let res = shell("bash", &recipe("gnu-parallel"), &vars);
    assert!(res.status.success(), "{}", stderr(&res));
    for k in 1..=5 {
        assert!(out.join(format!("shard-{k}/corpus_partial.json")).is_file());
    }
    assert!(fs::read(out.join("corpus_stats.json")).unwrap() == want);
}

#[test]
fn the_slurm_and_kubernetes_recipes_run_with_their_variables_set() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("corpus.txt");
    fs::write(&input, mixed_corpus(60, 30)).unwrap();
    let want = reference(d, &input);

    // Slurm: each array task runs the batch script with its task id; then the merge job.
    let out = d.join("slurm");
    let (model, input_s, out_s) = (
        tiny().to_str().unwrap().to_string(),
        input.to_str().unwrap().to_string(),
        out.to_str().unwrap().to_string(),
    );
    for task in 1..=3 {
        let id = task.to_string();
        let res = shell(
            "bash",
            &recipe("slurm-array"),
            &[
                ("MODEL", &model),
                ("INPUT", &input_s),
                ("OUT", &out_s),
                // What Slurm sets for task `task` of `--array=1-3`.
                ("SLURM_ARRAY_TASK_ID", &id),
                ("SLURM_ARRAY_TASK_MIN", "1"),
                ("SLURM_ARRAY_TASK_MAX", "3"),
                ("SLURM_ARRAY_TASK_STEP", "1"),
                ("SLURM_ARRAY_TASK_COUNT", "3"),
                ("SLURM_CPUS_PER_TASK", "1"),
            ],
        );
        assert!(res.status.success(), "task {task}: {}", stderr(&res));
    }
    let res = shell("bash", &recipe("slurm-merge"), &[("OUT", &out_s)]);
    assert!(res.status.success(), "{}", stderr(&res));
    assert!(fs::read(out.join("corpus_stats.json")).unwrap() == want);

    // Kubernetes: the container's command for each completion index (from 0), then the merge.
    let yaml = recipe("kubernetes-job");
    let args = yaml_block(&yaml, "args:");
    let merge_args = yaml_block(&recipe("kubernetes-merge"), "args:");
    let out = d.join("k8s");
    let out_k = out.to_str().unwrap().to_string();
    for index in 0..3 {
        let i = index.to_string();
        let res = shell(
            "sh",
            &args,
            &[
                ("MODEL", &model),
                ("INPUT", &input_s),
                ("OUT", &out_k),
                ("N", "3"),
                ("THREADS", "1"),
                ("JOB_COMPLETION_INDEX", &i),
            ],
        );
        assert!(res.status.success(), "index {index}: {}", stderr(&res));
    }
    let res = shell("sh", &merge_args, &[("OUT", &out_k)]);
    assert!(res.status.success(), "{}", stderr(&res));
    assert!(fs::read(out.join("corpus_stats.json")).unwrap() == want);
    // The manifest's N and completions agree.
    let completions = yaml
        .lines()
        .find_map(|l| l.trim().strip_prefix("completions:"))
        .unwrap()
        .split('#')
        .next()
        .unwrap()
        .trim()
        .to_string();
    assert!(
        yaml.contains(&format!("value: \"{completions}\"")),
        "N must equal completions ({completions})"
    );
}

/// The literal block scalar (`- |`) under `key` in a YAML manifest, unindented.
fn yaml_block(yaml: &str, key: &str) -> String {
    let mut lines = yaml.lines().skip_while(|l| l.trim() != key).skip(1);
    let first = lines.next().expect("a `- |` line");
    assert_eq!(first.trim(), "- |", "{key} holds a literal block");
    let body: Vec<&str> = lines
        .take_while(|l| {
            l.trim().is_empty() || l.starts_with(&" ".repeat(first.find('-').unwrap() + 2))
        })
        .collect();
    let indent = body
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    body.iter()
        .map(|l| l.get(indent..).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `--shard auto` with the variables each scheduler sets, given to the process (never set in
/// this one): the shard it takes is the one its partial file records, and each way it can fail
/// is one line.
#[test]
fn shard_auto_takes_the_shard_from_the_scheduler_or_says_in_one_line_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("corpus.txt");
    fs::write(&input, mixed_corpus(12, 10)).unwrap();
    const VARS: [&str; 5] = [
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_MIN",
        "SLURM_ARRAY_TASK_STEP",
        "SLURM_ARRAY_TASK_COUNT",
        "JOB_COMPLETION_INDEX",
    ];
    let with = |shard: &str, vars: &[(&str, &str)], out: &str| {
        let mut cmd = corpus_command(
            &tiny(),
            &input,
            &dir.path().join(out),
            &[
                "--shard",
                shard,
                "--threads",
                "1",
                "--per-sentence",
                "none",
                "-q",
            ],
        );
        for v in VARS {
            cmd.env_remove(v);
        }
        for (k, v) in vars {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    let recorded = |out: &str| {
        let p: serde_json::Value = serde_json::from_str(
            &fs::read_to_string(dir.path().join(out).join("corpus_partial.json")).unwrap(),
        )
        .unwrap();
        format!("{}/{}", p["shard"]["index"], p["shard"]["count"])
    };
    // `--array=10-14:2`: task 12 is the second of three.
    let slurm = [
        ("SLURM_ARRAY_TASK_ID", "12"),
        ("SLURM_ARRAY_TASK_MIN", "10"),
        ("SLURM_ARRAY_TASK_STEP", "2"),
        ("SLURM_ARRAY_TASK_COUNT", "3"),
    ];
    let r = with("auto", &slurm, "slurm");
    assert!(r.status.success(), "{}", stderr(&r));
    assert_eq!(recorded("slurm"), "2/3");
    let r = with("auto/5", &[("JOB_COMPLETION_INDEX", "4")], "k8s");
    assert!(r.status.success(), "{}", stderr(&r));
    assert_eq!(recorded("k8s"), "5/5");
    for (shard, vars, says) in [
        ("auto", &[][..], "--shard auto found no scheduler"),
        (
            "auto",
            &[("JOB_COMPLETION_INDEX", "2")][..],
            "write --shard auto/N",
        ),
        (
            "auto/4",
            &[("JOB_COMPLETION_INDEX", "two")][..],
            "JOB_COMPLETION_INDEX is 'two', not a whole number",
        ),
        (
            "auto/4",
            &[("JOB_COMPLETION_INDEX", "4")][..],
            "makes shard 5 of 4, which does not exist",
        ),
        ("auto/8", &slurm[..], "the Slurm array has 3 tasks"),
        (
            "auto",
            &[("SLURM_ARRAY_TASK_ID", "3"), ("JOB_COMPLETION_INDEX", "1")][..],
            "both SLURM_ARRAY_TASK_ID",
        ),
    ] {
        let r = with(shard, vars, "bad");
        crate::support::cli::assert_clean_failure(&r, says);
        assert!(
            !dir.path().join("bad").exists(),
            "{shard} {vars:?}: nothing written"
        );
    }
}
