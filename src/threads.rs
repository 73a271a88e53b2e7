//! How many worker threads the forward pass uses.
//!
//! candle's CPU matrix products and our kernels run on rayon's global pool, which reads
//! `RAYON_NUM_THREADS` when it starts. candle also reads that variable on every matrix product
//! to pick its parallelism; when it is unset, candle works the count out again each time from
//! the CPU affinity mask and `/proc` (20–33 µs per product, measured). Setting the variable once,
//! before any tensor work, fixes both.

/// Settle the thread count and publish it in `RAYON_NUM_THREADS`; returns the count.
///
/// The count is `requested` (`--threads`) when given and non-zero, else a positive
/// `RAYON_NUM_THREADS` already in the environment, else the number of physical cores (hyper-
/// threads share a core's vector units, so more threads than cores only adds contention),
/// capped by the CPUs this process may run on.
///
/// Call it first thing in `main`, before any other thread exists: it writes the process
/// environment, and rayon's pool reads it once, when first used.
pub fn configure(requested: Option<usize>) -> usize {
    let from_env = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok());
    let threads = requested
        .filter(|&n| n > 0)
        .or(from_env.filter(|&n| n > 0))
        .unwrap_or_else(default_threads);
    std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    threads
}

/// Physical cores, capped by the CPUs available to this process (affinity mask, cgroup quota).
pub fn default_threads() -> usize {
    let available = std::thread::available_parallelism().map_or(1, |n| n.get());
    num_cpus::get_physical().clamp(1, available.max(1))
}
