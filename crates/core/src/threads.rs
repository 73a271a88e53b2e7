//! How many worker threads the forward pass uses.
//!
//! candle's CPU matrix products and our kernels run on rayon's global pool, which reads
//! `RAYON_NUM_THREADS` when it starts. candle also reads that variable on every matrix product
//! to pick its parallelism; when it is unset, candle works the count out again each time from
//! the CPU affinity mask and `/proc` (20–33 µs per product, measured). Setting the variable once,
//! before any tensor work, fixes both.

/// Threads per available CPU beyond which a request is capped ([`max_threads`]).
pub const MAX_THREADS_PER_CPU: usize = 4;

/// Settle the thread count and publish it in `RAYON_NUM_THREADS`; returns the count.
///
/// The count is `requested` (`--threads`) when given and non-zero, else a positive
/// `RAYON_NUM_THREADS` already in the environment, else the number of physical cores (hyper-
/// threads share a core's vector units, so more threads than cores only adds contention),
/// capped by the CPUs this process may run on. A request or variable above [`max_threads`] is
/// capped there: more threads than that only add contention (10,000 threads once took 40
/// minutes for what one does in a second).
///
/// Call it before any thread that reads the environment exists: it writes the process
/// environment, and rayon's pool reads it once, when first used.
pub fn configure(requested: Option<usize>) -> usize {
    let threads = requested
        .filter(|&n| n > 0)
        .or(from_env())
        .unwrap_or_else(default_threads)
        .min(max_threads());
    std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    threads
}

/// A positive `RAYON_NUM_THREADS`, as set in the environment.
pub fn from_env() -> Option<usize> {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
}

/// The most threads [`configure`] grants: [`MAX_THREADS_PER_CPU`] × the CPUs available.
pub fn max_threads() -> usize {
    let available = std::thread::available_parallelism().map_or(1, |n| n.get());
    available.saturating_mul(MAX_THREADS_PER_CPU)
}

/// Physical cores, capped by the CPUs available to this process (affinity mask, cgroup quota).
pub fn default_threads() -> usize {
    let available = std::thread::available_parallelism().map_or(1, |n| n.get());
    num_cpus::get_physical().clamp(1, available.max(1))
}

/// Run `work` on one of the pool's worker threads, and wait for it here.
///
/// A parallel step started from a thread outside the pool hands its work to the pool and
/// sleeps until it is done, then the pool's threads go back to sleep: a wake-up and a sleep on
/// both sides, per step. A forward pass makes hundreds of such steps per token (every matrix
/// product), each of them short when one token is generated, so that price is paid per step.
/// Started from a worker, a step splits its work with the other workers while the caller does
/// its own share, and nobody sleeps in between. Measured on a 2-core machine: a one-row Q4_K
/// product 2048→1024 0.105 → 0.079 ms. Called from a worker already, `work` just runs.
pub fn on_pool<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    if rayon::current_thread_index().is_some() {
        work()
    } else {
        rayon::scope(|_| work())
    }
}
