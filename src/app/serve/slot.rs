//! One forward pass per model at a time, a bounded number waiting, the rest refused.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A model's admission: `queue` requests may wait while one runs.
pub struct Slot {
    run: Arc<Semaphore>,
    in_flight: Arc<AtomicUsize>,
    queue: usize,
}

/// A request admitted to a slot (running or waiting); dropping it (finished, timed out, or the
/// client gone before it ran) frees its place.
pub struct Admitted {
    in_flight: Arc<AtomicUsize>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Slot {
    /// A slot with room for one running request and `queue` waiting ones.
    pub fn new(queue: usize) -> Slot {
        Slot {
            run: Arc::new(Semaphore::new(1)),
            in_flight: Arc::new(AtomicUsize::new(0)),
            queue,
        }
    }

    /// A place in the queue, or `None` when it is full.
    pub fn admit(&self) -> Option<Admitted> {
        let before = self.in_flight.fetch_add(1, Ordering::SeqCst);
        let admitted = Admitted {
            in_flight: Arc::clone(&self.in_flight),
        };
        (before <= self.queue).then_some(admitted)
    }

    /// Wait for the model (the one forward pass).
    pub async fn turn(&self) -> OwnedSemaphorePermit {
        Arc::clone(&self.run)
            .acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }

    /// Requests running or waiting.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_runs_and_the_queue_is_bounded() {
        let slot = Slot::new(2);
        let a = slot.admit().expect("runs");
        let b = slot.admit().expect("waits");
        let c = slot.admit().expect("waits");
        assert!(slot.admit().is_none(), "the fourth is refused");
        assert_eq!(slot.in_flight(), 3);
        drop(b);
        assert!(
            slot.admit().is_some(),
            "a freed place is taken again (and freed)"
        );
        drop((a, c));
        assert_eq!(slot.in_flight(), 0);
    }
}
