//! GGUF models at their real sizes (issue 22, requirements 4 and 7): peak resident memory and
//! speed of prompt processing with every layer's attention captured, and of greedy
//! generation, on the synthetic 1B/4B/8B-shaped files (`scripts/make-synthetic-gguf.py`) and
//! real SmolLM2-135M Q4_1, beside llama.cpp on the same file and threads. Prints figures;
//! asserts nothing.
//!
//! Run: `cargo bench --bench gguf_sizes`. Each measurement is a fresh child process, so that
//! its peak RSS (`VmHWM`) is its own. Settings (environment):
//! - `BENCH_FILES`: GGUF paths, comma-separated (default: every `.gguf` under
//!   `.cache/synthetic-gguf/`, then SmolLM2);
//! - the rest as `benches/support/gguf_rounds.rs` says (`BENCH_TOKENS`, `BENCH_GENERATE`,
//!   `BENCH_ROUNDS`, `BENCH_THREADS`, `LLAMA_PYTHON`).
//!
//! The bound of requirement 4 is printed beside each peak: file size + KV cache and
//! activations + captured attention + 300 MB (activations: the largest per-layer buffers at
//! this length, counted in `gguf_rounds.rs`).

use std::path::{Path, PathBuf};

#[path = "support/gguf_rounds.rs"]
mod gguf_rounds;
#[path = "support/measure.rs"]
mod measure;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files: Vec<PathBuf> = match std::env::var("BENCH_FILES") {
        Ok(list) => list.split(',').map(PathBuf::from).collect(),
        Err(_) => {
            let mut v: Vec<PathBuf> = std::fs::read_dir(root.join(".cache/synthetic-gguf"))
                .map(|d| d.filter_map(|e| Some(e.ok()?.path())).collect())
                .unwrap_or_default();
            v.retain(|p| p.extension().is_some_and(|e| e == "gguf"));
            v.sort();
            v.push(root.join(".cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"));
            v
        }
    };
    gguf_rounds::bench_main("attnviz GGUF sizes benchmark", files, None);
}
