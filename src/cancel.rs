//! Asking work under way to stop: a flag shared between whoever wants the result (a server
//! request, which times out or whose client leaves) and the work itself, which checks it where
//! stopping is cheap and safe (a picture's decoder between scans and rows, a vision model
//! between layers) and ends with its own "cancelled" error.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A shared stop flag; clones share it. The default is a fresh flag nobody has set.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A flag nobody has set yet.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Ask the work holding a clone of this flag to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether [`Cancel::cancel`] was called on this flag or a clone.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// A guard that cancels this flag when it is dropped: held by whoever waits for the work,
    /// so that dropping the waiter (a request's future, on timeout or when its client leaves)
    /// stops the work too.
    pub fn on_drop(&self) -> CancelOnDrop {
        CancelOnDrop(self.clone())
    }
}

/// Cancels its flag when dropped ([`Cancel::on_drop`]).
#[derive(Debug)]
pub struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flag_and_a_dropped_guard_sets_it() {
        let flag = Cancel::new();
        let seen_by_the_work = flag.clone();
        assert!(!seen_by_the_work.is_cancelled());
        let guard = flag.on_drop();
        assert!(!seen_by_the_work.is_cancelled());
        drop(guard);
        assert!(seen_by_the_work.is_cancelled());
        assert!(!Cancel::new().is_cancelled(), "a new flag is its own");
    }
}
