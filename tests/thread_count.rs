//! `attnviz::threads::configure`: `--threads`, then `RAYON_NUM_THREADS`, then the physical cores,
//! capped at four threads per CPU.
//! A test binary of its own, because it writes the process environment.

use attnviz::threads::{configure, default_threads};

#[test]
fn request_then_environment_then_cores() {
    assert!(default_threads() >= 1);
    assert!(default_threads() <= std::thread::available_parallelism().unwrap().get());
    // A request wins, and is published for rayon and candle.
    assert_eq!(configure(Some(3)), 3);
    assert_eq!(std::env::var("RAYON_NUM_THREADS").unwrap(), "3");
    // No request: the variable already set wins.
    assert_eq!(configure(None), 3);
    // Zero means "not given", in the request and in the variable alike.
    std::env::set_var("RAYON_NUM_THREADS", "0");
    assert_eq!(configure(Some(0)), default_threads());
    assert_eq!(
        std::env::var("RAYON_NUM_THREADS").unwrap(),
        default_threads().to_string()
    );
    std::env::set_var("RAYON_NUM_THREADS", "not a number");
    assert_eq!(configure(None), default_threads());

    // Huge requests (and variables) are capped at four threads per available CPU.
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert_eq!(attnviz::threads::max_threads(), 4 * cpus);
    assert_eq!(configure(Some(10_000)), 4 * cpus);
    assert_eq!(configure(Some(usize::MAX)), 4 * cpus);
    std::env::set_var("RAYON_NUM_THREADS", "1000000");
    assert_eq!(configure(None), 4 * cpus);
}
