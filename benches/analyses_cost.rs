//! What the analyses beyond raw weights cost (issue 24, requirement 8), on the real
//! SmolLM2-135M-Instruct (Q4_1 GGUF, 30 layers × 9 heads) at 64 tokens:
//!
//! 1. a plain run (forward + capture of every head) against the same run with value-weighted
//!    attention, the logit lens (top 5) and per-head direct logit attribution (goal: at most
//!    50 % more), and each of the three on its own;
//! 2. head ablation of every head (270 of them: zeroed, and mean-ablated), each in turn, the
//!    change in the target's log-probability (goal: at most 10 s on 2 threads).
//!
//! All through the library's run request, as the command line, Python and the server run it.
//! Prints figures; asserts nothing. Run: `cargo bench --bench analyses_cost`. Settings
//! (environment): `BENCH_THREADS=N` (default: `attnviz::threads`' choice), `BENCH_QUICK=1`
//! (fewer repetitions), `ATTNVIZ_SMOLLM2_DIR` (the model; `scripts/fetch-smollm2.sh`).
//!
//! The variants alternate round by round in one process on this shared machine; each figure
//! is the median (minimum) over its repetitions, with CPU time (user + system, every thread)
//! beside the wall time.

use std::time::Instant;

use attnviz::model::Model;
use attnviz::request::{AblationMode, RunRequest};

#[path = "support/measure.rs"]
mod measure;
#[path = "../tests/suite/support/models/smollm2.rs"]
mod smollm2;

use measure::{cpu_seconds, env_usize, fmt_stats, median, minimum};

/// A prompt of about 64 SmolLM2 tokens.
const PROMPT: &str = "The history of the printing press begins in the fifteenth century, when \
    Johannes Gutenberg combined movable metal type, oil-based ink and a wooden press adapted \
    from those used for wine. Within fifty years, presses were running in more than two \
    hundred cities across Europe, and the price of a book had fallen so far that even the";

struct Variant {
    name: &'static str,
    request: RunRequest,
    walls: Vec<f64>,
    cpus: Vec<f64>,
}

impl Variant {
    fn new(name: &'static str, request: RunRequest) -> Variant {
        Variant {
            name,
            request,
            walls: Vec::new(),
            cpus: Vec::new(),
        }
    }

    fn time(&mut self, model: &Model) {
        let (start, start_cpu) = (Instant::now(), cpu_seconds());
        let run = self
            .request
            .run(model, &attnviz::progress::Silent)
            .expect("run");
        std::hint::black_box(&run);
        drop(run);
        self.walls.push(start.elapsed().as_secs_f64());
        self.cpus.push(cpu_seconds() - start_cpu);
    }
}

fn main() {
    let threads = attnviz::threads::configure(env_usize("BENCH_THREADS"));
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let gguf = smollm2::smollm2_gguf();
    let model = Model::from_gguf(&gguf).expect("loading SmolLM2");
    let tokens = model
        .tokenizer()
        .encode(PROMPT, None, model.max_positions(), false)
        .expect("tokenize")
        .ids
        .len();
    println!(
        "attnviz analyses cost: SmolLM2-135M-Instruct Q4_1, 30 layers × 9 heads, {tokens} tokens{}",
        if quick { " (quick)" } else { "" }
    );
    println!("machine: {}", measure::machine());
    println!("threads: {threads}");
    println!("load average before: {}", measure::load_average());
    println!("figures: median (min) ×runs; lower is better\n");

    let plain = RunRequest::new(PROMPT);
    let mut variants = vec![
        Variant::new("plain run (forward + capture)", plain.clone()),
        Variant::new(
            "+ value-weighted",
            RunRequest {
                value_weighted: true,
                ..plain.clone()
            },
        ),
        Variant::new(
            "+ logit lens (top 5)",
            RunRequest {
                lens: Some(5),
                ..plain.clone()
            },
        ),
        Variant::new(
            "+ head attribution",
            RunRequest {
                attribution: true,
                ..plain.clone()
            },
        ),
        Variant::new(
            "+ all three",
            RunRequest {
                value_weighted: true,
                lens: Some(5),
                attribution: true,
                ..plain.clone()
            },
        ),
    ];
    for v in &mut variants {
        v.time(&model);
        v.walls.clear();
        v.cpus.clear();
    }
    let (rounds, reps) = if quick { (2, 2) } else { (5, 3) };
    for _ in 0..rounds {
        for v in &mut variants {
            for _ in 0..reps {
                v.time(&model);
            }
        }
    }
    let base_wall = median(&variants[0].walls);
    let base_cpu = median(&variants[0].cpus);
    println!(
        "{:<32} {:>22} {:>22} {:>14}",
        "", "wall", "CPU", "added wall/CPU"
    );
    for v in &variants {
        println!(
            "{:<32} {:>22} {:>22} {:>6.0} % / {:>3.0} %",
            v.name,
            fmt_stats(&v.walls, 1e3, "ms"),
            fmt_stats(&v.cpus, 1e3, "ms"),
            (median(&v.walls) / base_wall - 1.0) * 100.0,
            (median(&v.cpus) / base_cpu - 1.0) * 100.0,
        );
    }
    println!("goal: + all three adds at most 50 %\n");

    let mut ablations = vec![
        Variant::new(
            "ablate every head (zero)",
            RunRequest {
                ablate: Some(AblationMode::Zero),
                ..plain.clone()
            },
        ),
        Variant::new(
            "ablate every head (mean)",
            RunRequest {
                ablate: Some(AblationMode::Mean),
                ..plain.clone()
            },
        ),
    ];
    let reps = if quick { 1 } else { 3 };
    for _ in 0..reps {
        for v in &mut ablations {
            v.time(&model);
        }
    }
    println!("{:<32} {:>22} {:>22}", "", "wall", "CPU");
    for v in &ablations {
        println!(
            "{:<32} {:>22} {:>22}",
            v.name,
            fmt_stats(&v.walls, 1.0, "s"),
            fmt_stats(&v.cpus, 1.0, "s"),
        );
    }
    println!(
        "goal: every head (270) at most 10 s on 2 threads; best {:.2} s",
        ablations
            .iter()
            .map(|v| minimum(&v.walls))
            .fold(f64::INFINITY, f64::min)
    );
    println!("\nload average after: {}", measure::load_average());
}
