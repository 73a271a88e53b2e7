//! Folders of outputs: corpus mode checks its input and output folder before loading anything
//! and never mixes two runs (unless `--force`); a report folder (`--report DIR`) appears whole
//! or not at all, even when the disk fills up while it is written.
//!
//! The full disk is real where the test may mount a small tmpfs (as root, as CI runs); the
//! same failure is also produced everywhere with a file-size limit (RLIMIT_FSIZE) on the child.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::cli::{assert_clean_failure, attnviz, run, stderr, temp_files, tiny, tree};

#[test]
fn corpus_input_that_is_a_folder_needs_a_vision_model_and_leaves_no_folder() {
    let dir = tempfile::tempdir().unwrap();
    let images = dir.path().join("images");
    std::fs::create_dir(&images).unwrap();
    let out_dir = dir.path().join("out");
    let corpus = |model: &str, input: &Path| {
        run(&[
            "-m",
            model,
            "--input",
            input.to_str().unwrap(),
            "--out-dir",
            out_dir.to_str().unwrap(),
            "--per-sentence",
            "json",
        ])
    };
    // A folder without images: said first, before the model loads.
    assert_clean_failure(
        &corpus("/no/such/model", &images),
        "the folder holds no image",
    );
    assert!(!out_dir.exists(), "no output folder, no summary");
    // A folder of images for a text model.
    std::fs::copy(
        crate::support::cli::repo().join("tests/fixtures/images/own32.png"),
        images.join("a.png"),
    )
    .unwrap();
    assert_clean_failure(
        &corpus(tiny().to_str().unwrap(), &images),
        "is read as a corpus of images, and tiny-bert is no vision model",
    );
    assert!(!out_dir.exists(), "no output folder left behind");
    // A model that does not load: nothing left behind either.
    let text = dir.path().join("in.txt");
    std::fs::write(&text, "hello\n").unwrap();
    assert!(!corpus("/no/such/model", &text).status.success());
    assert!(!out_dir.exists(), "no output folder left behind");
}

#[test]
fn a_rerun_into_an_earlier_runs_folder_is_refused_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let out_dir = dir.path().join("out");
    let m = tiny();
    let corpus = |text: &str, extra: &[&str]| {
        fs::write(&input, text).unwrap();
        attnviz()
            .arg("-m")
            .arg(&m)
            .arg("--input")
            .arg(&input)
            .arg("--out-dir")
            .arg(&out_dir)
            .arg("-q")
            .args(extra)
            .output()
            .unwrap()
    };
    let out = corpus("the fox .\nthe dog .\nthe cat .\n", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let first = tree(&out_dir);
    assert_eq!(
        first,
        [
            "corpus_partial.json",
            "corpus_stats.json",
            "sentences",
            "sentences/000001.json",
            "sentences/000002.json",
            "sentences/000003.json"
        ]
    );
    let before = fs::read(out_dir.join("corpus_stats.json")).unwrap();

    // The same folder again: refused before the model is loaded, nothing touched.
    for extra in [&[][..], &["--per-sentence", "none"]] {
        let out = corpus("the lazy dog .\n", extra);
        assert_clean_failure(&out, "already holds 3 files from an earlier run");
        assert!(stderr(&out).contains("--force"));
        assert_eq!(tree(&out_dir), first);
        assert_eq!(fs::read(out_dir.join("corpus_stats.json")).unwrap(), before);
    }

    // --force: the earlier run's files are replaced; a file of the user's stays.
    fs::write(out_dir.join("sentences/notes.txt"), "mine").unwrap();
    let out = corpus("the lazy dog .\n", &["--force"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        tree(&out_dir),
        [
            "corpus_partial.json",
            "corpus_stats.json",
            "sentences",
            "sentences/000001.json",
            "sentences/notes.txt"
        ]
    );
    let one: serde_json::Value =
        serde_json::from_slice(&fs::read(out_dir.join("sentences/000001.json")).unwrap()).unwrap();
    assert_eq!(one["text"], "the lazy dog .");
}

/// Build a tiny-bert report into `dir`, with `limit` (bytes) on the size of any file the
/// child writes when given. Returns the run's output.
fn report(dir: &Path, file_size_limit: Option<u64>) -> std::process::Output {
    let m = tiny();
    let mut cmd = attnviz();
    cmd.arg("-m")
        .arg(&m)
        .args(["the quick brown fox jumps over the lazy dog .", "-q"])
        .arg("--report")
        .arg(dir);
    #[cfg(unix)]
    if let Some(limit) = file_size_limit {
        use std::os::unix::process::CommandExt;
        // SAFETY: between fork and exec only async-signal-safe calls: signal and setrlimit.
        unsafe {
            cmd.pre_exec(move || {
                // A write past the limit then fails with EFBIG instead of killing the process.
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                let rl = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &rl) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    #[cfg(not(unix))]
    let _ = file_size_limit;
    cmd.output().unwrap()
}

/// The sizes of a complete report's files, largest first.
fn report_sizes() -> Vec<(String, u64)> {
    let dir = tempfile::tempdir().unwrap();
    let out = report(&dir.path().join("r"), None);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut sizes: Vec<(String, u64)> = fs::read_dir(dir.path().join("r"))
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    sizes.sort_by_key(|(_, s)| std::cmp::Reverse(*s));
    sizes
}

#[cfg(unix)]
#[test]
fn a_report_whose_last_write_fails_leaves_no_partial_folder() {
    let sizes = report_sizes();
    assert_eq!(sizes.len(), 12, "{sizes:?}");
    // Every file but the largest fits: the run writes most of the report, then one write fails.
    let limit = sizes[0].1 - 1;
    assert!(sizes[1].1 <= limit, "{sizes:?}");
    eprintln!("report files {sizes:?}; file size limit {limit} bytes");
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("rep");
    let out = report(&target, Some(limit));
    assert_clean_failure(&out, "File too large");
    assert!(tree(dir.path()).is_empty(), "{:?}", tree(dir.path()));

    // Into an existing folder holding an earlier report and a file of the user's: a failure
    // changes nothing; a success replaces the report's files and keeps the user's.
    fs::create_dir(&target).unwrap();
    fs::write(target.join("report.html"), "earlier").unwrap();
    fs::write(target.join("notes.txt"), "mine").unwrap();
    let out = report(&target, Some(limit));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        tree(dir.path()),
        ["rep", "rep/notes.txt", "rep/report.html"]
    );
    assert_eq!(
        fs::read_to_string(target.join("report.html")).unwrap(),
        "earlier"
    );
    let out = report(&target, None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(tree(&target).len(), 13);
    assert_eq!(
        fs::read_to_string(target.join("notes.txt")).unwrap(),
        "mine"
    );
    assert!(temp_files(dir.path()).is_empty());
}

/// A tmpfs of `kib` KiB mounted on a new folder in `parent`, unmounted on drop; `None` when
/// mounting is not permitted here.
#[cfg(target_os = "linux")]
struct SmallDisk(PathBuf);

#[cfg(target_os = "linux")]
impl SmallDisk {
    fn mount(parent: &Path, kib: u64) -> Option<SmallDisk> {
        let at = parent.join("disk");
        fs::create_dir(&at).unwrap();
        let c = |s: &str| std::ffi::CString::new(s).unwrap();
        let (src, target, fstype, opts) = (
            c("tmpfs"),
            c(at.to_str().unwrap()),
            c("tmpfs"),
            c(&format!("size={kib}k")),
        );
        // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
        let rc = unsafe {
            libc::mount(
                src.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                0,
                opts.as_ptr().cast(),
            )
        };
        (rc == 0).then_some(SmallDisk(at))
    }
}

#[cfg(target_os = "linux")]
impl Drop for SmallDisk {
    fn drop(&mut self) {
        let c = std::ffi::CString::new(self.0.to_str().unwrap()).unwrap();
        // SAFETY: unmounting the tmpfs this test mounted.
        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_report_on_a_full_disk_leaves_no_partial_folder() {
    let sizes = report_sizes();
    let total: u64 = sizes.iter().map(|(_, s)| s).sum();
    let dir = tempfile::tempdir().unwrap();
    // Room for about half the report.
    let kib = (total / 2 / 1024).max(8);
    let Some(disk) = SmallDisk::mount(dir.path(), kib) else {
        // Not root, or no CAP_SYS_ADMIN: the file-size-limit test above covers the failure.
        eprintln!(
            "NOTE: mounting a {kib} KiB tmpfs is not permitted here; the full-disk case is \
             covered by a_report_whose_last_write_fails_leaves_no_partial_folder only"
        );
        return;
    };
    eprintln!("report of {total} bytes onto a {kib} KiB tmpfs");
    let out = report(&disk.0.join("rep"), None);
    assert_clean_failure(&out, "No space left on device");
    assert!(tree(&disk.0).is_empty(), "{:?}", tree(&disk.0));
}
