//! Mixture-of-experts models at their real sizes beside llama.cpp (issue 43, requirement 6):
//! a gpt-oss-20b-shaped GGUF file (its experts in MXFP4, the rest as the released file) and an
//! OLMoE-1B-7B-shaped one (Q4_K_M), both of random blocks (`scripts/make-synthetic-gguf.py`).
//! For each: attnviz with every layer captured (attention, gpt-oss's sink shares, the routers'
//! decisions) against llama.cpp without capture (`benches/llama_cpp_anchor.py`), the same file,
//! the same threads, alternating fresh processes: prompt wall and CPU time, greedy generation
//! tokens/s, and peak RSS beside the bound file + KV cache and activations + capture + 300 MB.
//! Prints the figures and whether each goal (prompt ≤ 1.5× llama.cpp's time, generation ≥ 0.7×
//! its tokens/s, peak within the bound) was met; asserts nothing. Not for CI (12 GB and 4 GB
//! files).
//!
//! Make the files, then run:
//!     .cache/venv-ref/bin/python scripts/make-synthetic-gguf.py --out .cache/synthetic \
//!         --only gpt-oss-20b-mxfp4 olmoe-1b-7b-q4km
//!     cargo bench --bench moe_sizes
//!
//! Settings (environment): `BENCH_FILES` (GGUF paths, comma-separated; default
//! `.cache/synthetic/gpt-oss-20b-mxfp4.gguf` and `.cache/synthetic/olmoe-1b-7b-q4km.gguf`), and
//! those of `benches/support/gguf_rounds.rs` (`BENCH_TOKENS` 512, `BENCH_GENERATE` 16,
//! `BENCH_ROUNDS` 3, `BENCH_THREADS` 2, `LLAMA_PYTHON`).

use std::path::{Path, PathBuf};

#[path = "support/gguf_rounds.rs"]
mod gguf_rounds;
#[path = "support/measure.rs"]
mod measure;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files: Vec<PathBuf> = match std::env::var("BENCH_FILES") {
        Ok(list) => list.split(',').map(PathBuf::from).collect(),
        Err(_) => ["gpt-oss-20b-mxfp4.gguf", "olmoe-1b-7b-q4km.gguf"]
            .iter()
            .map(|f| root.join(".cache/synthetic").join(f))
            .collect(),
    };
    let goals = gguf_rounds::Goals {
        prompt_ratio: 1.5,
        generation_ratio: 0.7,
    };
    gguf_rounds::bench_main(
        "attnviz mixture-of-experts sizes benchmark",
        files,
        Some(goals),
    );
}
