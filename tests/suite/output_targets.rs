//! Outputs that are not regular files: device nodes, FIFOs, symbolic links and standard output
//! under its other names are written in place and never replaced by a regular file; and two
//! outputs never share one file (however the path is spelled).
//!
//! The device nodes are our own, made with mknod in a temporary folder, and so is the link
//! standing for `/dev/stdout`: the real /dev is never used, so a regression cannot damage it.

use std::fs;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::cli::{assert_clean_failure, attnviz, run, stderr, temp_files, tiny, tree};

#[cfg(unix)]
fn c_path(p: &Path) -> std::ffi::CString {
    std::ffi::CString::new(p.to_str().unwrap()).unwrap()
}

/// A character device with /dev/null's numbers (1, 3), made in `dir`. Needs root (CI runs as
/// root): without the permission the test fails, loudly, instead of skipping.
#[cfg(unix)]
fn null_device(dir: &Path) -> std::path::PathBuf {
    let node = dir.join("null");
    let c = c_path(&node);
    // SAFETY: mknod with a NUL-terminated path in our own temporary folder.
    let rc = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    assert_eq!(
        rc,
        0,
        "mknod of a test device in {} failed ({}): this test needs root (as CI runs it)",
        dir.display(),
        std::io::Error::last_os_error()
    );
    node
}

#[cfg(unix)]
fn assert_null_device(node: &Path) {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = fs::symlink_metadata(node).unwrap();
    assert!(
        meta.file_type().is_char_device(),
        "{} is no longer a character device",
        node.display()
    );
    assert_eq!(
        meta.rdev(),
        libc::makedev(1, 3) as u64,
        "same device numbers"
    );
}

#[cfg(unix)]
#[test]
fn a_device_node_is_written_in_place_and_stays_a_device() {
    let dir = tempfile::tempdir().unwrap();
    let node = null_device(dir.path());
    let n = node.to_str().unwrap();
    let m = tiny();
    // Every kind of output into the device, several at once (a device can take any number).
    let out = run(&[
        "-m",
        m.to_str().unwrap(),
        "the quick brown fox .",
        "--json",
        n,
        "--png",
        n,
        "--svg",
        n,
        "--html",
        n,
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_null_device(&node);
    assert_eq!(tree(dir.path()), ["null"], "no temporary file beside it");
}

#[cfg(unix)]
#[test]
fn a_fifo_is_written_in_place_for_its_reader() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    // SAFETY: mkfifo with a NUL-terminated path in our own temporary folder.
    assert_eq!(unsafe { libc::mkfifo(c_path(&fifo).as_ptr(), 0o600) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::read(fifo).unwrap())
    };
    let m = tiny();
    let out = run(&[
        "-m",
        m.to_str().unwrap(),
        "the quick brown fox .",
        "--json",
        fifo.to_str().unwrap(),
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&reader.join().unwrap()).expect("the reader got JSON");
    assert_eq!(json["tokens"][1], "the");
    use std::os::unix::fs::FileTypeExt;
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert_eq!(tree(dir.path()), ["pipe"]);
}

#[cfg(unix)]
#[test]
fn a_fifo_nobody_reads_is_a_clear_error_in_bounded_time() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    // SAFETY: mkfifo with a NUL-terminated path in our own temporary folder.
    assert_eq!(unsafe { libc::mkfifo(c_path(&fifo).as_ptr(), 0o600) }, 0);
    let m = tiny();
    let start = Instant::now();
    let out = run(&[
        "-m",
        m.to_str().unwrap(),
        "the fox .",
        "--json",
        fifo.to_str().unwrap(),
        "-q",
    ]);
    let took = start.elapsed();
    eprintln!("FIFO without reader: failed after {took:.1?}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // The wait is announced, then one error line.
    let last = err.trim_end().lines().last().unwrap();
    assert!(
        last.starts_with("error: ") && last.contains("no process opened it for reading"),
        "{err}"
    );
    assert!(last.contains("start the reader first"), "{err}");
    assert_eq!(tree(dir.path()), ["pipe"]);
}

#[cfg(unix)]
#[test]
fn a_symlink_chain_is_followed_and_the_links_survive() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("real")).unwrap();
    fs::write(dir.path().join("real/attention.json"), "old").unwrap();
    // out.json -> hop (relative) -> real/attention.json (relative to the link's folder)
    symlink("real/attention.json", dir.path().join("hop")).unwrap();
    symlink("hop", dir.path().join("out.json")).unwrap();
    let m = tiny();
    let link = dir.path().join("out.json");
    let out = run(&[
        "-m",
        m.to_str().unwrap(),
        "the lazy dog .",
        "--json",
        link.to_str().unwrap(),
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    for l in ["out.json", "hop"] {
        assert!(
            fs::symlink_metadata(dir.path().join(l))
                .unwrap()
                .file_type()
                .is_symlink(),
            "{l} is still a link"
        );
    }
    let json: Value =
        serde_json::from_slice(&fs::read(dir.path().join("real/attention.json")).unwrap()).unwrap();
    assert_eq!(json["tokens"][2], "lazy");
    assert!(temp_files(dir.path()).is_empty(), "{:?}", tree(dir.path()));
    assert_eq!(
        tree(dir.path()),
        ["hop", "out.json", "real", "real/attention.json"]
    );
}

/// A `/dev/stdout` of our own: a link to `/proc/self/fd/1` in `dir`. (The real one is never
/// used: a regression would replace it with a regular file.)
#[cfg(unix)]
fn own_dev_stdout(dir: &Path) -> String {
    let link = dir.join("stdout");
    std::os::unix::fs::symlink("/proc/self/fd/1", &link).unwrap();
    link.to_str().unwrap().to_string()
}

#[cfg(unix)]
#[test]
fn standard_output_under_other_names_is_standard_output() {
    let m = tiny();
    let links = tempfile::tempdir().unwrap();
    let dev_stdout = own_dev_stdout(links.path());
    for name in [dev_stdout.as_str(), "/proc/self/fd/1"] {
        // Piped: the JSON is all of standard output, as with `-` (no terminal view mixed in).
        let out = run(&["-m", m.to_str().unwrap(), "the fox .", "--json", name]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let json: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{name}: stdout is not pure JSON: {e}"));
        assert_eq!(json["tokens"][2], "fox");
    }
    // Redirected to a file: that very file gets the JSON; it is not replaced by another file.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("redirected.json");
    let handle = fs::File::create(&file).unwrap();
    use std::os::unix::fs::MetadataExt;
    let inode = fs::metadata(&file).unwrap().ino();
    let out = attnviz()
        .args([
            "-m",
            m.to_str().unwrap(),
            "the dog .",
            "--json",
            &dev_stdout,
        ])
        .stdout(Stdio::from(handle))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(fs::metadata(&file).unwrap().ino(), inode, "same file");
    let json: Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
    assert_eq!(json["tokens"][2], "dog");
    assert_eq!(tree(dir.path()), ["redirected.json"]);

    // Two outputs on standard output, however named, are refused.
    let out = run(&[
        "-m",
        m.to_str().unwrap(),
        "x",
        "--json",
        &dev_stdout,
        "--svg",
        "-",
    ]);
    assert_clean_failure(&out, "standard output");
    assert!(fs::symlink_metadata(&dev_stdout)
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn two_outputs_on_one_file_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let m = tiny();
    let m = m.to_str().unwrap();
    let d = dir.path();
    let p = |s: &str| d.join(s).to_str().unwrap().to_string();
    fs::create_dir(d.join("sub")).unwrap();
    let same = p("same");
    let dotted = format!("{}/./sub/../same", d.display());
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--json".into(), same.clone(), "--html".into(), same.clone()],
            "--json and --html",
        ),
        (
            vec!["--png".into(), same.clone(), "--svg".into(), dotted.clone()],
            "--png and --svg",
        ),
        (
            vec![
                "--report".into(),
                p("rep"),
                "--json".into(),
                p("rep/attention.json"),
            ],
            "--json and --report",
        ),
    ];
    for (flags, mentions) in cases {
        let mut args = vec!["-m", m, "the fox ."];
        args.extend(flags.iter().map(String::as_str));
        let out = run(&args);
        assert_clean_failure(&out, mentions);
        assert!(stderr(&out).contains("give each output its own file"));
    }
    // A relative spelling against the working folder.
    let out = attnviz()
        .current_dir(d)
        .args([
            "-m",
            m,
            "the fox .",
            "--json",
            "x.json",
            "--html",
            "./x.json",
        ])
        .output()
        .unwrap();
    assert_clean_failure(&out, "x.json");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("same", d.join("link")).unwrap();
        let out = run(&["-m", m, "the fox .", "--json", &same, "--svg", &p("link")]);
        assert_clean_failure(&out, "--json and --svg");
        fs::remove_file(d.join("link")).unwrap();
    }
    assert_eq!(tree(d), ["sub"], "nothing written");
}
