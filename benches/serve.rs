//! `attnviz serve` benchmark (issue 25, req 6): keystroke to drawn view, and the server's own
//! time per request, for all-MiniLM-L6-v2 at 12 tokens (goal ≤ 100 ms) and SmolLM2-135M-Instruct
//! Q4_1 at 32 tokens (goal ≤ 300 ms), the server on 2 threads.
//!
//! Run: `cargo bench --bench serve` (needs the models from `scripts/fetch-minilm.sh` and
//! `scripts/fetch-smollm2.sh`, plus chromium and `npm ci` in tests/browser, like the browser
//! tests). `ATTNVIZ_BENCH_ROUNDS` sets the rounds (default 30).
//!
//! - Keystroke to drawn view is measured in the browser (tests/browser/serve_bench.mjs): the
//!   page's own record from the input event of one typed key to the report frame's next paint
//!   after the view is drawn; split into "to answer" (the request) and "page draw" (the booted
//!   report drawing the run's data in place, `window.attnviz.load`; the rounds drawn so are
//!   counted, and the frame's load parts are printed only for rounds that loaded a document).
//! - The server's overhead is a loopback client's round trip minus the library's share, which
//!   the server reports in `Server-Timing` (`run`: the run request; `report`: building the
//!   report's data, its metadata and payload — the whole HTML is written only for the frame's
//!   first load and for Save): printed as total − run (the goal's "total minus the library run") and as
//!   total − run − report (the HTTP stack alone). The server's CPU time per request is read from
//!   /proc.
//! - Anchor: what a user does without the server, `attnviz -m MODEL TEXT --html FILE --threads 2`
//!   (loads the model every time), alternating with the server's requests.

#[path = "support/measure.rs"]
mod measure;
#[path = "../tests/suite/support/models/minilm.rs"]
mod minilm;
#[path = "../tests/suite/support/models/smollm2.rs"]
mod smollm2;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use measure::{fmt_stats, load_average, machine, median};

const BIN: &str = env!("CARGO_BIN_EXE_attnviz");
const WORDS: &str = "Attention lets every token look at every other token and each head in a \
    layer learns its own way of looking while the quick brown fox jumps over the lazy dog near \
    the old stone bridge across the river where the cat sat on the mat and watched the rain";

struct Server {
    child: Child,
    port: u16,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(models: &[&Path]) -> Server {
    let mut cmd = Command::new(BIN);
    cmd.arg("serve");
    for m in models {
        cmd.arg("-m").arg(m);
    }
    let mut child = cmd
        .args(["--port", "0", "--threads", "2", "--queue", "16"])
        .env("HF_HUB_OFFLINE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("attnviz serve starts");
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("the server prints its address")
            .unwrap();
        if let Some(rest) = line.split("open ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    // The request log goes on; drain it so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    let port = url
        .trim_start_matches("http://")
        .split(['/', ':'])
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap();
    Server { child, port, url }
}

/// One POST /api/run over a fresh loopback connection: the round trip, the answer and the
/// `Server-Timing` entries (ms).
fn post(port: u16, json: &str) -> (Duration, serde_json::Value, Vec<(String, f64)>) {
    let raw = format!(
        "POST /api/run HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{json}",
        json.len()
    );
    let started = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let took = started.elapsed();
    let text = String::from_utf8_lossy(&out);
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
    let timing = head
        .lines()
        .find_map(|l| l.strip_prefix("server-timing: "))
        .unwrap_or("")
        .split(',')
        .filter_map(|p| {
            let (name, dur) = p.trim().split_once(";dur=")?;
            Some((name.to_string(), dur.parse().ok()?))
        })
        .collect();
    (took, serde_json::from_str(body).unwrap(), timing)
}

fn timing(t: &[(String, f64)], name: &str) -> f64 {
    t.iter().find(|(n, _)| n == name).map(|(_, v)| *v).unwrap()
}

/// The first words of [`WORDS`] that make exactly `tokens` input tokens for model `index`.
fn text_of(port: u16, index: usize, tokens: usize) -> String {
    let words: Vec<&str> = WORDS.split_whitespace().collect();
    for k in 1..=words.len() {
        let text = words[..k].join(" ") + ".";
        let json = serde_json::json!({ "model": index, "text": text }).to_string();
        let n = post(port, &json).1["tokens"].as_u64().unwrap() as usize;
        if n == tokens {
            return text;
        }
        assert!(n < tokens, "no prefix of the words makes {tokens} tokens");
    }
    panic!("the words are too few for {tokens} tokens")
}

/// User + system seconds of process `pid` so far (/proc/PID/stat, clock ticks).
fn cpu_of(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    // SAFETY: sysconf has no preconditions.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap()) / tick
}

/// The CLI's run of the same text (wall seconds, CPU seconds of the child).
fn cli_once(model: &Path, text: &str, out: &Path) -> (f64, f64) {
    let before = children_cpu();
    let started = Instant::now();
    let status = Command::new(BIN)
        .arg("-m")
        .arg(model)
        .arg(text)
        .arg("--html")
        .arg(out)
        .args(["--threads", "2"])
        .env("HF_HUB_OFFLINE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    (started.elapsed().as_secs_f64(), children_cpu() - before)
}

fn children_cpu() -> f64 {
    // SAFETY: rusage is plain old data, filled by getrusage.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_CHILDREN with a valid, writable rusage.
    assert_eq!(
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) },
        0
    );
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(usage.ru_utime) + s(usage.ru_stime)
}

fn p90(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * 0.9).round() as usize]
}

fn line(what: &str, xs: &[f64]) -> String {
    format!(
        "{what:<26} {}, p90 {:.1} ms",
        fmt_stats(xs, 1.0, "ms"),
        p90(xs)
    )
}

fn main() {
    let rounds = measure::env_usize("ATTNVIZ_BENCH_ROUNDS").unwrap_or(30);
    let models: [(PathBuf, &str, usize, f64); 2] = [
        (minilm::minilm_dir(), "all-MiniLM-L6-v2", 12, 100.0),
        (
            smollm2::smollm2_gguf(),
            "SmolLM2-135M-Instruct Q4_1",
            32,
            300.0,
        ),
    ];
    println!("attnviz serve benchmark: {}", machine());
    println!(
        "server on 2 threads; {rounds} rounds; load average before: {}",
        load_average()
    );
    let paths: Vec<&Path> = models.iter().map(|m| m.0.as_path()).collect();
    let server = serve(&paths);
    let pid = server.child.id();
    let dir = tempfile::tempdir().unwrap();
    for (index, (path, name, tokens, goal)) in models.iter().enumerate() {
        let text = text_of(server.port, index, *tokens);
        let json = serde_json::json!({ "model": index, "text": text }).to_string();
        for _ in 0..3 {
            post(server.port, &json);
        }
        // The server alone, alternating with the CLI anchor.
        let (mut trips, mut over_run, mut over_http, mut runs) = (vec![], vec![], vec![], vec![]);
        let (mut cli_wall, mut cli_cpu) = (vec![], vec![]);
        let mut server_cpu = 0.0;
        for i in 0..rounds {
            let cpu0 = cpu_of(pid);
            let (took, answer, t) = post(server.port, &json);
            server_cpu += cpu_of(pid) - cpu0;
            assert_eq!(answer["tokens"].as_u64(), Some(*tokens as u64));
            let ms = took.as_secs_f64() * 1e3;
            let (run, report) = (timing(&t, "run"), timing(&t, "report"));
            trips.push(ms);
            runs.push(run);
            over_run.push(ms - run);
            over_http.push(ms - run - report);
            if i % 5 == 0 {
                let (w, c) = cli_once(path, &text, &dir.path().join("r.html"));
                cli_wall.push(w * 1e3);
                cli_cpu.push(c * 1e3);
            }
        }
        // In the browser.
        let job = serde_json::json!({
            "url": server.url, "model": index, "text": text, "rounds": rounds, "warmup": 3,
        });
        let out = Command::new("node")
            .arg("serve_bench.mjs")
            .arg(job.to_string())
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser"))
            .output()
            .expect("node runs (Node ≥ 20, `npm ci` in tests/browser)");
        assert!(
            out.status.success(),
            "serve_bench.mjs failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let page: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let rows = page["rows"].as_array().unwrap();
        let col = |k: &str| -> Vec<f64> { rows.iter().filter_map(|r| r[k].as_f64()).collect() };
        let in_place = rows.iter().filter(|r| r["in_place"] == true).count();
        let drawn = col("keystroke_to_drawn");
        println!("\n{name}, {tokens} tokens: {text:?}");
        println!(
            "{}   goal ≤ {goal:.0} ms: {}",
            line("keystroke → drawn view", &drawn),
            if median(&drawn) <= *goal {
                "met (median)"
            } else {
                "NOT met (median)"
            }
        );
        println!(
            "{}",
            line("  keystroke → answer", &col("keystroke_to_answer"))
        );
        println!("{}", line("  page draw (in place)", &col("page_draw")));
        println!("    rounds drawn in place    {in_place} of {}", rows.len());
        for (label, key) in [
            ("    frame: fetch", "frame_fetch"),
            ("    frame: parse", "frame_parse"),
            ("    frame: to load event", "frame_load"),
            ("    frame: boot + draw", "frame_boot_draw"),
        ] {
            let xs = col(key);
            if !xs.is_empty() {
                println!("{}", line(label, &xs));
            }
        }
        let data = col("data_kib");
        if !data.is_empty() {
            println!("    data per run             {:.0} KiB", median(&data));
        }
        println!("{}", line("  library run (in page)", &col("library_run")));
        println!("{}", line("  server: report data", &col("library_report")));
        println!("{}", line("server round trip", &trips));
        println!("{}", line("  library run", &runs));
        println!(
            "{}   goal ≤ 5 ms",
            line("  overhead: total − run", &over_run)
        );
        println!("{}", line("  of which HTTP (− report)", &over_http));
        println!(
            "  server CPU per request   {:.1} ms",
            server_cpu * 1e3 / rounds as f64
        );
        println!(
            "anchor: attnviz --html (CLI, loads the model each time): wall {}, CPU {}",
            fmt_stats(&cli_wall, 1.0, "ms"),
            fmt_stats(&cli_cpu, 1.0, "ms")
        );
        if !page["errors"].as_array().unwrap().is_empty() {
            println!("page errors: {}", page["errors"]);
        }
    }
    println!("\nload average after: {}", load_average());
}
