//! What the benchmarks share: the machine's description, medians, a child command's wall time and
//! peak memory, and a Python anchor that runs as a child answering one JSON line per command (so
//! its timings alternate with ours in the same run). Included with `#[path]`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// CPU model, physical and logical cores.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, m)| m.trim().to_string())
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let avx512 = cpuinfo.contains(" avx512f");
    format!(
        "{model}, {} physical cores, {} logical CPUs{}; kernels: {}",
        num_cpus::get_physical(),
        num_cpus::get(),
        if avx512 { ", AVX-512" } else { "" },
        attnviz::model::kernels::instruction_set()
    )
}

/// The environment that puts PyTorch on the instruction set ours runs on when `ATTNVIZ_ISA`
/// lowers it: ATen's own kernels (`ATEN_CPU_CAPABILITY`), MKL's products
/// (`MKL_ENABLE_INSTRUCTIONS`) and oneDNN's (`ONEDNN_MAX_CPU_ISA`).
pub fn matching_isa() -> Vec<(&'static str, &'static str)> {
    let isa = std::env::var("ATTNVIZ_ISA")
        .unwrap_or_default()
        .to_ascii_lowercase();
    match isa.as_str() {
        "avx2" => vec![
            ("ATEN_CPU_CAPABILITY", "avx2"),
            ("MKL_ENABLE_INSTRUCTIONS", "AVX2"),
            ("ONEDNN_MAX_CPU_ISA", "AVX2"),
        ],
        "baseline" | "sse2" | "none" => vec![
            ("ATEN_CPU_CAPABILITY", "default"),
            ("MKL_ENABLE_INSTRUCTIONS", "SSE4_2"),
            ("ONEDNN_MAX_CPU_ISA", "SSE41"),
        ],
        _ => vec![],
    }
}

/// User + system CPU time of this process (all its threads) so far, in seconds: on a shared
/// machine the work done, where wall time also counts waiting for a core.
#[allow(dead_code)] // not every bench that includes this file uses it
pub fn cpu_seconds() -> f64 {
    // SAFETY: rusage is plain old data; all-zero is a valid value for getrusage to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid, writable rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    assert_eq!(rc, 0, "getrusage");
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(usage.ru_utime) + s(usage.ru_stime)
}

/// The 1-, 5- and 15-minute load averages.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "n/a".into())
}

/// A whole-number setting from the environment.
pub fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// The median; NaN for no values.
pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

pub fn minimum(xs: &[f64]) -> f64 {
    xs.iter().copied().fold(f64::INFINITY, f64::min)
}

/// `median unit (min) ×count`, values multiplied by `scale`.
pub fn fmt_stats(xs: &[f64], scale: f64, unit: &str) -> String {
    if xs.is_empty() {
        return "n/a".into();
    }
    let digits = |x: f64| if x * scale < 10.0 { 2 } else { 1 };
    let (m, lo) = (median(xs), minimum(xs));
    format!(
        "{:.*} {unit} ({:.*}) ×{}",
        digits(m),
        m * scale,
        digits(lo),
        lo * scale,
        xs.len()
    )
}

/// Wall times, CPU times and peak resident sets of several runs of one command.
pub struct Runs {
    pub walls: Vec<f64>,
    /// User + system seconds of each child, every thread.
    pub cpus: Vec<f64>,
    pub peaks_kib: Vec<f64>,
    pub status: Option<i32>,
}

impl Runs {
    pub fn wall(&self) -> String {
        fmt_stats(&self.walls, 1.0, "s")
    }

    pub fn cpu(&self) -> String {
        fmt_stats(&self.cpus, 1.0, "s")
    }

    pub fn rss(&self) -> String {
        if self.peaks_kib.is_empty() {
            return "n/a".into();
        }
        format!("{:.0} MiB", median(&self.peaks_kib) / 1024.0)
    }
}

/// Run `cmd` once to warm the page cache, then `runs` times `pause` apart, reading each child's
/// wall time and peak RSS (`wait4`'s rusage, so only that child counts). Exit status 3 counts
/// as a run too: the Python jobs use it for "ran, without an optional part" (bertviz missing).
pub fn measure_runs(cmd: &mut Command, runs: usize, pause: Duration) -> Runs {
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let mut out = Runs {
        walls: vec![],
        cpus: vec![],
        peaks_kib: vec![],
        status: None,
    };
    for i in 0..=runs {
        if i > 0 {
            std::thread::sleep(pause);
        }
        let start = Instant::now();
        let Ok(mut child) = cmd.spawn() else {
            return out;
        };
        let stderr = child.stderr.take();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut s) = stderr {
                let _ = std::io::Read::read_to_string(&mut s, &mut text);
            }
            text
        });
        let mut status = 0;
        // SAFETY: rusage is plain data; wait4 fills it for the child we just spawned.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: waits for our own child; `status` and `usage` are valid for writing.
        let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
        let wall = start.elapsed().as_secs_f64();
        let text = reader.join().unwrap_or_default();
        if pid < 0 {
            return out;
        }
        let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
        out.status = code;
        if !matches!(code, Some(0) | Some(3)) {
            eprintln!(
                "{:?} failed ({code:?}): {}",
                cmd.get_program(),
                text.lines().last().unwrap_or_default()
            );
            return out;
        }
        if i > 0 {
            out.walls.push(wall);
            let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
            out.cpus.push(secs(usage.ru_utime) + secs(usage.ru_stime));
            out.peaks_kib.push(usage.ru_maxrss as f64);
        }
    }
    out
}

/// A Python anchor: a child process that prints a hello line (`{"torch": …, "transformers": …,
/// "threads": …}` or `{"error": …}`), then answers each command line with one JSON line.
pub struct Anchor {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// What it runs, from its hello line.
    pub version: String,
}

impl Anchor {
    /// Start `script` with `--threads threads`.
    pub fn spawn(python: &str, script: &Path, threads: usize) -> Result<Anchor, String> {
        let mut child = Command::new(python)
            .arg(script)
            .arg("--threads")
            .arg(threads.to_string())
            .env("OMP_NUM_THREADS", threads.to_string())
            .envs(matching_isa())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {python}: {e}"))?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut anchor = Anchor {
            child,
            stdin,
            stdout,
            version: String::new(),
        };
        let hello = match anchor.read() {
            Ok(hello) => hello,
            Err(e) => {
                anchor.quit();
                return Err(
                    if e.contains("ImportError") || e.contains("ModuleNotFoundError") {
                        "torch or transformers not installed".into()
                    } else {
                        e
                    },
                );
            }
        };
        anchor.version = format!(
            "torch {} / transformers {}, {} threads{}",
            hello["torch"].as_str().unwrap_or("?"),
            hello["transformers"].as_str().unwrap_or("?"),
            hello["threads"],
            hello["isa"]
                .as_str()
                .map_or(String::new(), |isa| format!(", {isa}"))
        );
        if let Some(policy) = hello["omp_wait_policy"].as_str() {
            anchor.version += &format!(", OMP_WAIT_POLICY={policy}");
        }
        Ok(anchor)
    }

    fn read(&mut self) -> Result<serde_json::Value, String> {
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .map_err(|e| format!("anchor: {e}"))?;
        if line.is_empty() {
            return Err("anchor exited".into());
        }
        let v: serde_json::Value =
            serde_json::from_str(&line).map_err(|e| format!("anchor: {e}: {line}"))?;
        match v.get("error") {
            Some(e) if v.get("torch").is_none() => Err(format!("anchor: {e}")),
            _ => Ok(v),
        }
    }

    /// Send one command and read its answer.
    pub fn call(&mut self, command: &str) -> Result<serde_json::Value, String> {
        writeln!(self.stdin, "{command}").map_err(|e| format!("anchor: {e}"))?;
        self.stdin.flush().map_err(|e| format!("anchor: {e}"))?;
        self.read()
    }

    /// The `times` list of an answer.
    pub fn times(v: &serde_json::Value) -> Result<Vec<f64>, String> {
        v["times"]
            .as_array()
            .map(|a| a.iter().filter_map(|t| t.as_f64()).collect())
            .ok_or_else(|| format!("anchor: {v}"))
    }

    /// The `cpu` list of an answer (empty when it has none).
    pub fn cpu(v: &serde_json::Value) -> Vec<f64> {
        v["cpu"]
            .as_array()
            .map(|a| a.iter().filter_map(|t| t.as_f64()).collect())
            .unwrap_or_default()
    }

    /// Ask it to end, and wait.
    pub fn quit(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let _ = self.child.wait();
    }
}

/// `ours / theirs` as "median / minimum" ratios (`-` when either is empty).
pub fn ratio(ours: &[f64], theirs: &[f64]) -> String {
    if ours.is_empty() || theirs.is_empty() {
        return "-".into();
    }
    format!(
        "{:.2} / {:.2}",
        median(ours) / median(theirs),
        minimum(ours) / minimum(theirs)
    )
}

/// One row of a four-column table: a label, two timings in ms, and a last column.
pub fn table_row(label: &str, ours: &[f64], theirs: &[f64], last: &str) {
    println!(
        "{:>6} {:>24} {:>24} {:>13}",
        label,
        fmt_stats(ours, 1e3, "ms"),
        fmt_stats(theirs, 1e3, "ms"),
        last
    );
}
