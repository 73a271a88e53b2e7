//! Hostile inputs of corpus mode (issue 20, requirements 9, 10, 15, 16, 17, 18): links, FIFOs
//! and devices planted in the output folder, a resumed run given another input, a flood of bad
//! lines, damaged partial files and journals, and control characters in what the input quotes.
//!
//! Each case runs the release binary on the tiny fixture model under `ulimit -v` 1 GiB and a
//! 60 s `timeout` (a FIFO opened for a blocking read, or a device read to the end, fails the
//! test instead of hanging it), and checks the exit status, that the message is one line naming
//! what is wrong, and that nothing outside the output folder changed. Time and memory per case
//! are measured by `scripts/measure-hostile.sh` (cases from `scripts/hostile/corpus.py`; figures
//! in docs/hostile.md), not asserted here.

use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::support::cli::{attnviz, mkfifo, stderr, tiny, tree, wait_for};

const LINES: &str = "the cat sat on the mat .\nwhere did the dog go ?\nthe fox jumps .\n";

/// `attnviz ARGS` limited to 1 GiB of address space and 60 s.
fn limited(args: &[OsString]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1048576; exec timeout 60 \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_attnviz"))
        .args(args)
        .env("HF_HUB_OFFLINE", "1")
        .env("NO_COLOR", "1")
        .env_remove("ATTNVIZ_MODEL")
        .env_remove("RAYON_NUM_THREADS")
        .stdin(Stdio::null())
        .output()
        .expect("sh runs")
}

/// Corpus mode on `input` into `out` with `flags`, limited.
fn corpus(input: &Path, out: &Path, flags: &[&str]) -> Output {
    let mut args: Vec<OsString> = vec![
        "-m".into(),
        tiny().into(),
        "--input".into(),
        input.into(),
        "--out-dir".into(),
        out.into(),
        "--threads".into(),
        "1".into(),
    ];
    args.extend(flags.iter().map(OsString::from));
    limited(&args)
}

/// Exit status 1, one line on stderr starting with `error:` that holds every one of
/// `mentions`, no panic.
fn refused(out: &Output, mentions: &[&str]) -> String {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(err.starts_with("error: "), "{err}");
    for m in mentions {
        assert!(err.contains(m), "expected `{m}` in: {err}");
    }
    err
}

fn ok(out: &Output) {
    assert!(out.status.success(), "{}", stderr(out));
}

/// Every file under `dir` with the SHA-256 of its bytes (links as `-> TARGET`, folders as
/// `dir`, FIFOs and devices as `special`), sorted: what a refused run must leave unchanged.
fn snapshot(dir: &Path) -> Vec<String> {
    use sha2::{Digest, Sha256};
    tree(dir)
        .into_iter()
        // A killed run's stale lock file, removed by the next run, is not a change.
        .filter(|p| {
            !(p == ".corpus.lock"
                && fs::symlink_metadata(dir.join(p)).is_ok_and(|m| m.is_file() && m.len() == 0))
        })
        .map(|p| {
            let full = dir.join(&p);
            let meta = fs::symlink_metadata(&full).unwrap();
            let what = if meta.file_type().is_symlink() {
                format!("-> {}", fs::read_link(&full).unwrap().display())
            } else if meta.is_file() {
                let hash = Sha256::digest(fs::read(&full).unwrap());
                hash.iter().take(8).map(|b| format!("{b:02x}")).collect()
            } else if meta.is_dir() {
                "dir".into()
            } else {
                "special".into()
            };
            format!("{p} {what}")
        })
        .collect()
}

/// A character device like `/dev/zero` (1, 5) at `path`; `false` when this process may not make
/// device nodes (not root, or a container without CAP_MKNOD).
#[cfg(target_os = "linux")]
fn mkchar_zero(path: &Path) -> bool {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mknod on a NUL-terminated path in the test's temporary folder.
    unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 5)) == 0 }
}

/// A folder with an input file and the victims a hostile link points at: a file and a folder
/// outside the output folder, which must never change.
struct Scene {
    dir: tempfile::TempDir,
}

impl Scene {
    fn new() -> Scene {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("input.txt"), LINES).unwrap();
        fs::write(dir.path().join("victim.txt"), "keep me").unwrap();
        fs::create_dir(dir.path().join("victim-dir")).unwrap();
        Scene { dir }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn out(&self) -> PathBuf {
        self.path("out")
    }
    fn run(&self, flags: &[&str]) -> Output {
        corpus(&self.path("input.txt"), &self.out(), flags)
    }
    /// Nothing outside the output folder changed.
    fn assert_victims_untouched(&self) {
        assert_eq!(
            fs::read_to_string(self.path("victim.txt")).unwrap(),
            "keep me"
        );
        assert_eq!(fs::read_dir(self.path("victim-dir")).unwrap().count(), 0);
        let mut top: Vec<String> = fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        top.sort();
        assert_eq!(top, ["input.txt", "out", "victim-dir", "victim.txt"]);
    }
}

#[cfg(unix)]
#[test]
fn a_link_planted_in_the_output_folder_never_receives_output() {
    use std::os::unix::fs::symlink;
    // (the name in the folder, what it links to, the flags of the run)
    let cases: &[(&str, &str, &[&str])] = &[
        ("corpus_stats.json", "victim.txt", &[]),
        ("corpus_stats.json", "victim.txt", &["--force"]),
        ("corpus_partial.json", "victim.txt", &[]),
        ("corpus_partial.json", "victim.txt", &["--force"]),
        ("corpus_partial.json", "victim.txt", &["--resume"]),
        (".corpus.lock", "victim.txt", &[]),
        (".corpus_journal.0", "victim.txt", &[]),
        (".corpus_journal.0", "victim.txt", &["--force"]),
        ("sentences", "victim-dir", &[]),
        ("sentences", "victim-dir", &["--force"]),
        ("sentences/000001.json", "victim.txt", &["--force"]),
        ("sentences/000002.json", "victim.txt", &["--resume"]),
        // A dangling link would create its target.
        ("corpus_stats.json", "created-by-attnviz.txt", &["--force"]),
    ];
    for (name, target, flags) in cases {
        let scene = Scene::new();
        let out = scene.out();
        fs::create_dir_all(out.join("sentences")).unwrap();
        if *name == "sentences" {
            fs::remove_dir(out.join("sentences")).unwrap();
        }
        symlink(scene.path(target), out.join(name)).unwrap();
        let before = snapshot(&out);
        let res = scene.run(flags);
        let what = format!(
            "{name} in it is a symbolic link (to {}",
            scene.path(target).display()
        );
        refused(&res, &[&what, "never through a link", "remove the link"]);
        scene.assert_victims_untouched();
        assert_eq!(
            snapshot(&out),
            before,
            "{name} {flags:?}: the folder changed"
        );
    }
}

#[cfg(unix)]
#[test]
fn a_fifo_or_device_in_the_output_folder_is_refused_at_once() {
    let mut cases: Vec<(&str, bool, &[&str])> = vec![
        // (the name, a character device rather than a FIFO, flags)
        (".corpus.lock", false, &[]),
        (".corpus_journal.0", false, &["--resume"]),
        (".corpus_journal.7", false, &[]),
        ("corpus_partial.json", false, &["--resume"]),
        ("corpus_stats.json", false, &["--force"]),
        (
            "sentences/000001.json",
            false,
            &["--force", "--per-sentence", "json"],
        ),
    ];
    #[cfg(target_os = "linux")]
    cases.extend([
        (".corpus.lock", true, &[][..]),
        (".corpus_journal.0", true, &["--resume"][..]),
        ("corpus_partial.json", true, &["--resume"][..]),
    ]);
    let mut devices = 0;
    for (name, device, flags) in cases {
        let scene = Scene::new();
        let out = scene.out();
        // A finished run to resume (without per-sentence files, so that a run without --force
        // or --resume may go into the folder again).
        ok(&scene.run(&["-q", "--per-sentence", "none"]));
        fs::create_dir_all(out.join("sentences")).unwrap();
        let flags = if flags.contains(&"--per-sentence") {
            flags.to_vec()
        } else {
            [&["--per-sentence", "none"][..], flags].concat()
        };
        let node = out.join(name);
        let _ = fs::remove_file(&node);
        if device {
            #[cfg(target_os = "linux")]
            if !mkchar_zero(&node) {
                eprintln!("skipped: cannot make a device node here (not root)");
                continue;
            }
            devices += 1;
        } else {
            mkfifo(&node);
        }
        let before = snapshot(&out);
        let res = scene.run(&flags);
        let kind = if device {
            "a character device"
        } else {
            "a FIFO"
        };
        refused(&res, &[&format!("{name} in it is {kind}"), "remove it"]);
        scene.assert_victims_untouched();
        assert_eq!(snapshot(&out), before, "{name}: the folder changed");
    }
    eprintln!("{devices} device cases run");
}

/// The journal of a killed run: a run reading standard input is killed (SIGKILL) once it has
/// written `n` sentences, before its first checkpoint after the start covers them.
#[cfg(unix)]
fn killed_run(out: &Path, lines: &str, n: usize) {
    let mut child = attnviz()
        .arg("-m")
        .arg(tiny())
        .args(["--input", "-", "--threads", "1", "-q", "--out-dir"])
        .arg(out)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(lines.as_bytes()).unwrap();
    stdin.flush().unwrap();
    let sentences = out.join("sentences");
    wait_for("the sentences", Duration::from_secs(120), || {
        fs::read_dir(&sentences).map_or(0, |rd| {
            rd.filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| !e.file_name().to_string_lossy().starts_with('.'))
            })
            .count()
        }) >= n
    });
    // Give the worker time to journal the last sentence after renaming its file (microseconds).
    std::thread::sleep(Duration::from_millis(200));
    child.kill().unwrap();
    child.wait().unwrap();
    drop(stdin);
}

#[cfg(unix)]
#[test]
fn resume_checks_every_journaled_line_against_the_input() {
    let scene = Scene::new();
    let out = scene.out();
    let lines = "the cat sat .\nthe dog ran .\na fox .\nwhere is it ?\nthe end .\n";
    killed_run(&out, lines, 5);
    let partial: serde_json::Value =
        serde_json::from_slice(&fs::read(out.join("corpus_partial.json")).unwrap()).unwrap();
    let checkpointed = partial["lines"].as_u64().unwrap() as usize;
    let journaled = fs::read_dir(&out)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".corpus_journal.")
        })
        .map(|e| e.metadata().unwrap().len())
        .sum::<u64>();
    // The same lines, but the last changed: it is one the journal holds (or, if a checkpoint
    // happened to cover it, one the partial file holds).
    let changed = scene.path("changed.txt");
    fs::write(&changed, lines.replace("the end .", "the END .")).unwrap();
    let before = snapshot(&out);
    let res = corpus(&changed, &out, &["-q", "--resume"]);
    if checkpointed < 5 {
        assert!(journaled > 0, "no journal after the kill");
        refused(
            &res,
            &[
                "cannot resume",
                "line 5 of",
                "is not the one the earlier run read",
                "same input",
            ],
        );
    } else {
        refused(
            &res,
            &["cannot resume", "are not the ones the earlier run read"],
        );
    }
    assert_eq!(
        snapshot(&out),
        before,
        "a refused resume changed the folder"
    );
    // A shorter input is refused too.
    let short = scene.path("short.txt");
    fs::write(&short, "the cat sat .\nthe dog ran .\n").unwrap();
    refused(
        &corpus(&short, &out, &["-q", "--resume"]),
        &["cannot resume", "same input"],
    );
    assert_eq!(snapshot(&out), before);
    // The same input resumes to the result of one uninterrupted run.
    let same = scene.path("same.txt");
    fs::write(&same, lines).unwrap();
    ok(&corpus(&same, &out, &["-q", "--resume"]));
    let full = scene.path("full");
    ok(&corpus(&same, &full, &["-q"]));
    assert!(
        fs::read(out.join("corpus_stats.json")).unwrap()
            == fs::read(full.join("corpus_stats.json")).unwrap(),
        "the resumed summary differs from one run's"
    );
}

/// The offset of the first statistic (head 0's entropy) in a journal record of a sentence named
/// `name`, from the start of the record (see crates/attnviz/src/corpus/journal.rs).
fn first_value_offset(name: &str) -> usize {
    8 // length, CRC
        + 1 + 8 + 8 + 32 + 1 // version, line, input bytes, input SHA-256, kind
        + 4 + name.len() // name
        + 1 + 8 + 8 + 4 + 4 // flags, tokens, units, layers, heads
        + 8 // head 0's rows
}

#[cfg(unix)]
#[test]
fn a_journal_record_holding_inf_is_refused_naming_the_field() {
    let scene = Scene::new();
    let out = scene.out();
    let lines = "the cat sat .\nthe dog ran .\n";
    killed_run(&out, lines, 2);
    let journal = fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".corpus_journal.")
                && fs::metadata(p).unwrap().len() > 0
        });
    let Some(journal) = journal else {
        // A checkpoint covered both sentences before the kill: nothing journaled to damage.
        eprintln!("skipped: the checkpoint covered every sentence before the kill");
        return;
    };
    let mut bytes = fs::read(&journal).unwrap();
    let len = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
    let name_len = u32::from_le_bytes(bytes[58..62].try_into().unwrap()) as usize;
    let name = String::from_utf8(bytes[62..62 + name_len].to_vec()).unwrap();
    let at = first_value_offset(&name);
    bytes[at..at + 8].copy_from_slice(&f64::INFINITY.to_bits().to_le_bytes());
    let crc = crc32fast::hash(&bytes[8..8 + len]);
    bytes[4..8].copy_from_slice(&crc.to_le_bytes());
    fs::write(&journal, bytes).unwrap();
    let same = scene.path("same.txt");
    fs::write(&same, lines).unwrap();
    let before = snapshot(&out);
    refused(
        &corpus(&same, &out, &["-q", "--resume"]),
        &[
            "cannot resume",
            "entropy is inf",
            "layer 0, head 0",
            "damaged",
        ],
    );
    assert_eq!(snapshot(&out), before);
}

#[test]
fn a_flood_of_bad_lines_is_warned_about_a_few_times_and_counted_once() {
    let scene = Scene::new();
    // One good line, 100,000 empty lines and 25 with two tabs, gzip-compressed.
    let mut text = String::from("the cat sat .\n");
    text.push_str(&"\n".repeat(50_000));
    for _ in 0..25 {
        text.push_str("a\tb\tc\n");
    }
    text.push_str(&"\n".repeat(50_000));
    let gz = scene.path("flood.txt.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(text.as_bytes()).unwrap();
    fs::write(&gz, enc.finish().unwrap()).unwrap();
    let res = corpus(&gz, &scene.out(), &["-q", "--per-sentence", "none"]);
    ok(&res);
    let err = stderr(&res);
    let lines: Vec<&str> = err.lines().collect();
    let empty: Vec<&&str> = lines
        .iter()
        .filter(|l| l.contains(": empty line;"))
        .collect();
    let tabs: Vec<&&str> = lines.iter().filter(|l| l.contains(": 2 tabs;")).collect();
    assert_eq!(empty.len(), 10, "{err}");
    assert_eq!(tabs.len(), 10, "{err}");
    assert!(
        empty[9].contains("further `empty` lines are counted at the end"),
        "{err}"
    );
    assert!(
        lines.contains(&"warning: 99,990 more `empty` lines skipped (100,000 in all; every bad line is counted in corpus_stats.json)"),
        "{err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("warning: 15 more `tabs` lines skipped (25 in all")),
        "{err}"
    );
    assert_eq!(lines.len(), 22, "{err}");
    let summary: serde_json::Value =
        serde_json::from_slice(&fs::read(scene.out().join("corpus_stats.json")).unwrap()).unwrap();
    assert_eq!(summary["bad_lines"]["count"], 100_025);
    assert_eq!(summary["bad_lines"]["by_kind"]["empty"], 100_000);
    assert_eq!(summary["sentences"], 1);
}

/// Two shards' partial files of the input, each in its folder.
fn two_shards(scene: &Scene) -> [PathBuf; 2] {
    let input = scene.path("input.txt");
    let mut out = Vec::new();
    for k in 1..=2 {
        let dir = scene.path(&format!("shard-{k}"));
        ok(&corpus(
            &input,
            &dir,
            &["-q", "--per-sentence", "none", "--shard", &format!("{k}/2")],
        ));
        out.push(dir.join("corpus_partial.json"));
    }
    out.try_into().unwrap()
}

fn merge(files: &[PathBuf], out: &Path) -> Output {
    let mut args: Vec<OsString> = vec!["merge".into()];
    args.extend(files.iter().map(OsString::from));
    args.extend(["--out".into(), out.into(), "-q".into()]);
    limited(&args)
}

/// Replace the text of field `field` (a top-level field, one per line) in the partial file.
fn edit_field(path: &Path, field: &str, value: &str) {
    let text = fs::read_to_string(path).unwrap();
    let key = format!("  \"{field}\": ");
    let edited: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with(&key) {
                let comma = if l.ends_with(',') { "," } else { "" };
                format!("{key}{value}{comma}")
            } else {
                l.to_string()
            }
        })
        .collect();
    assert_ne!(edited.join("\n"), text.trim_end(), "no field {field}");
    fs::write(path, edited.join("\n") + "\n").unwrap();
}

#[test]
fn merge_refuses_numbers_no_run_writes_naming_the_field() {
    // (field, value, words the message holds)
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "lines",
            "1000000000000000000",
            &["\"lines\" is 1,000,000,000,000,000,000", "input_bytes"],
        ),
        ("lines", "1e999", &["not JSON", "in \"lines\""]),
        ("tokens", "NaN", &["not JSON", "in \"tokens\""]),
        ("sentences", "-3", &["integer `-3`", "in \"sentences\""]),
        (
            "sentences",
            "200",
            &["\"sentences\" (200)", "do not add up"],
        ),
        ("pairs", "5", &["pairs is 5, more than the"]),
        ("lines_in_shard", "7", &["\"lines_in_shard\" is 7"]),
    ];
    for (field, value, words) in cases {
        let scene = Scene::new();
        let [a, b] = two_shards(&scene);
        edit_field(&b, field, value);
        let out = scene.path("merged.json");
        let err = refused(&merge(&[a, b.clone()], &out), words);
        assert!(err.contains(&b.display().to_string()), "{err}");
        assert!(!out.exists(), "{field} = {value}: a summary was written");
    }
}

#[test]
fn merge_refuses_negative_sums_and_counts_that_overflow() {
    let scene = Scene::new();
    let [a, b] = two_shards(&scene);
    let out = scene.path("merged.json");
    // A negative fixed-point sum.
    let text = fs::read_to_string(&b).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["sums"]["sum"]["entropy"][0][0] = "-18446744073709551616000".into();
    fs::write(&b, serde_json::to_string(&v).unwrap()).unwrap();
    refused(
        &merge(&[a.clone(), b.clone()], &out),
        &["sums: sum.entropy of layer 0, head 0 is -18446744073709551616000, below 0"],
    );
    // Token counts that each fit in 64 bits but whose sum does not: refused, not wrapped.
    fs::write(&b, &text).unwrap();
    edit_field(&a, "tokens", "18446744073709551000");
    edit_field(&b, "tokens", "18446744073709551000");
    refused(
        &merge(&[a, b], &out),
        &["tokens: the sum of the files' values overflows 64 bits"],
    );
    assert!(!out.exists());
}

#[test]
fn a_shard_count_of_a_billion_billions_is_not_allocated() {
    let scene = Scene::new();
    let [a, _] = two_shards(&scene);
    let text = fs::read_to_string(&a).unwrap();
    let v = text.replace(
        "\"shard\": {\"count\":2,\"index\":1}",
        "\"shard\": {\"count\":1000000000000000000,\"index\":1}",
    );
    assert_ne!(v, text, "no shard field in:\n{text}");
    fs::write(&a, v).unwrap();
    // The lines of shard 1 of 10^18 among 3 lines: only line 1 (2 were counted).
    let res = merge(&[a], &scene.path("merged.json"));
    refused(
        &res,
        &["\"lines_in_shard\" is 2, but shard 1/1000000000000000000 has 1"],
    );
}

#[test]
fn text_quoted_from_the_input_reaches_the_terminal_escaped() {
    let scene = Scene::new();
    let input = scene.path("ids.jsonl");
    fs::write(
        &input,
        concat!(
            "{\"id\": \"ok-1\", \"text\": \"the cat sat .\"}\n",
            "{\"id\": \"\\u001b]52;c;aGk=\\u0007\\u001b[2J\", \"text\": \"the dog .\"}\n",
            "{\"id\": \"a\\u202eb\", \"text\": \"a fox .\"}\n",
            "{\"id\": 1.5e999, \"text\": \"x\"}\n",
        ),
    )
    .unwrap();
    let res = corpus(&input, &scene.out(), &["-q"]);
    ok(&res);
    let err = stderr(&res);
    assert!(
        !err.contains('\u{1b}') && !err.contains('\u{7}'),
        "raw controls: {err:?}"
    );
    assert!(!err.contains('\u{202e}'), "raw bidi control: {err:?}");
    assert!(
        err.contains("<U+001B>]52;c;aGk=<U+0007><U+001B>[2J"),
        "{err}"
    );
    assert!(err.contains("a<U+202E>b"), "{err}");
    // One warning per bad line, each on one line.
    assert_eq!(
        err.lines()
            .filter(|l| l.starts_with("warning: line "))
            .count(),
        3,
        "{err}"
    );
    assert_eq!(err.lines().count(), 3, "{err}");
    // Stop mode: the same id ends the run, in an error line that is escaped too.
    let res = corpus(
        &input,
        &scene.path("stop"),
        &["-q", "--on-bad-line", "stop"],
    );
    let err = refused(&res, &["line 2: id \"<U+001B>]52", "stopped"]);
    assert!(!err.contains('\u{1b}'), "{err:?}");
    // An output folder whose name holds a control character: the closing line shows it.
    let odd = scene.path("out\u{1b}[31mred");
    let res = corpus(&scene.path("input.txt"), &odd, &[]);
    ok(&res);
    let err = stderr(&res);
    assert!(err.contains("out<U+001B>[31mred"), "{err}");
    assert!(!err.contains('\u{1b}'), "{err:?}");
}

#[test]
fn merge_notes_quote_the_files_escaped() {
    let scene = Scene::new();
    let [a, b] = two_shards(&scene);
    // The same input under another name (a shard on another machine): merged, with a note
    // that quotes both names.
    edit_field(&b, "input", "\"in\\u001b[2J\\u202e.txt\"");
    let out = scene.path("merged.json");
    let res = attnviz()
        .arg("merge")
        .arg(&a)
        .arg(&b)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    ok(&res);
    let err = stderr(&res);
    assert!(
        err.contains("note:") && err.contains("in\\u{1b}[2J\\u{202e}.txt"),
        "{err}"
    );
    assert!(
        !err.contains('\u{1b}') && !err.contains('\u{202e}'),
        "{err:?}"
    );
}
