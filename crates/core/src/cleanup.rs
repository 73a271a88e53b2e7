//! Nothing half-built survives Ctrl-C: a registry of the temporary files and folders this
//! process is building, and the stop request a graceful run polls. The library only keeps the
//! registry and the flags; an application that handles signals (the `attnviz` binary) removes
//! the registered paths from its handler's watcher ([`remove_all_and_hold`]) and ends the
//! process, or, when a run asked for a graceful stop, only raises [`stop_requested`]
//! ([`on_signal`]). Without such an application (library use), signals keep their default
//! behaviour; the outputs are still atomic, but temporary files could be left behind.
//!
//! Writers create and commit temporary paths *under the registry's lock* ([`create_tracked`],
//! [`Tracked::commit`]), so a path is never on disk without being registered, and a committed
//! file is never removed.
//!
//! Corpus mode asks for a graceful first Ctrl-C or SIGTERM ([`set_graceful`]): the first SIGINT
//! or SIGTERM only sets a flag ([`stop_requested`]) that the run polls (schedulers send SIGTERM
//! before they kill a job, and the run can then write its partial file for `--resume`); a second
//! signal cleans up and exits as above.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard};

/// What a registered path is, so the cleanup removes it the right way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    File,
    Folder,
}

struct Registry {
    next_id: u64,
    entries: Vec<(u64, Kind, PathBuf)>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    next_id: 0,
    entries: Vec::new(),
});

static GRACEFUL: AtomicBool = AtomicBool::new(false);
static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

fn registry() -> MutexGuard<'static, Registry> {
    // A panic while the lock was held leaves consistent data (pushes and removals are single
    // operations), so a poisoned lock is still usable.
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// A registered temporary path. Dropping it unregisters the path (after the owner removed it:
/// declare this field *after* the value that deletes the file on drop).
#[derive(Debug)]
pub struct Tracked {
    id: u64,
}

impl Tracked {
    /// Run `finish` (typically the rename that turns the temporary path into the output) under
    /// the registry's lock, then unregister the path: a signal either removes the temporary path
    /// before the rename, or leaves the finished output alone.
    pub fn commit<T>(self, finish: impl FnOnce() -> T) -> T {
        let mut reg = registry();
        let out = finish();
        reg.entries.retain(|(id, _, _)| *id != self.id);
        drop(reg);
        std::mem::forget(self);
        out
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        registry().entries.retain(|(id, _, _)| *id != self.id);
    }
}

fn track<T>(
    kind: Kind,
    create: impl FnOnce() -> io::Result<T>,
    path_of: impl FnOnce(&T) -> &Path,
) -> io::Result<(T, Tracked)> {
    let mut reg = registry();
    let value = create()?;
    let id = reg.next_id;
    reg.next_id += 1;
    reg.entries.push((id, kind, path_of(&value).to_path_buf()));
    Ok((value, Tracked { id }))
}

/// Create a temporary file with `create` and register the path `path_of` gives, atomically
/// with respect to the signal cleanup.
pub fn create_tracked<T>(
    create: impl FnOnce() -> io::Result<T>,
    path_of: impl FnOnce(&T) -> &Path,
) -> io::Result<(T, Tracked)> {
    track(Kind::File, create, path_of)
}

/// [`create_tracked`] for a temporary folder (removed with everything in it).
pub fn create_tracked_folder<T>(
    create: impl FnOnce() -> io::Result<T>,
    path_of: impl FnOnce(&T) -> &Path,
) -> io::Result<(T, Tracked)> {
    track(Kind::Folder, create, path_of)
}

/// The temporary paths registered now (for tests and diagnostics).
pub fn tracked_paths() -> Vec<PathBuf> {
    registry()
        .entries
        .iter()
        .map(|(_, _, p)| p.clone())
        .collect()
}

/// Remove every registered path and keep the registry locked for good (the process is about to
/// exit: a signal handler's watcher calls this, then ends the process, so no thread can create
/// or rename a temporary file after the cleanup started). Returns how many paths existed and
/// were removed.
pub fn remove_all_and_hold() -> usize {
    let reg = registry();
    let mut removed = 0;
    // Files first: some live inside registered folders.
    for kind in [Kind::File, Kind::Folder] {
        for (_, k, path) in reg.entries.iter().filter(|(_, k, _)| *k == kind) {
            let res = match k {
                Kind::File => std::fs::remove_file(path),
                Kind::Folder => std::fs::remove_dir_all(path),
            };
            removed += usize::from(res.is_ok());
        }
    }
    std::mem::forget(reg);
    removed
}

/// Corpus mode: make the first SIGINT or SIGTERM a request to stop ([`stop_requested`])
/// instead of an immediate exit (as the application's handler reads [`on_signal`]) (SIGTERM is what Slurm and Kubernetes send to a job they are
/// about to kill, 30 s ahead by default); a second signal still cleans up and exits. `false`
/// restores the immediate exit.
pub fn set_graceful(on: bool) {
    STOP_REQUESTED.store(false, Ordering::SeqCst);
    STOP_SIGNAL.store(0, Ordering::SeqCst);
    GRACEFUL.store(on, Ordering::SeqCst);
}

/// Whether a graceful stop was requested (a first Ctrl-C or SIGTERM after
/// [`set_graceful`]`(true)`).
pub fn stop_requested() -> bool {
    STOP_REQUESTED.load(Ordering::Relaxed)
}

/// The signal that requested the graceful stop (2 for SIGINT, 15 for SIGTERM; 0 if none).
pub fn stop_signal() -> i32 {
    STOP_SIGNAL.load(Ordering::SeqCst)
}

/// What a signal handler does first with `signal` (async-signal-safe: atomics only). Returns
/// `true` when the signal was taken as a graceful stop request (a first SIGINT or SIGTERM after
/// [`set_graceful`]`(true)`; the run polls [`stop_requested`]); `false` when the handler should
/// clean up ([`remove_all_and_hold`]) and end the process.
pub fn on_signal(signal: i32) -> bool {
    const SIGINT: i32 = 2;
    const SIGTERM: i32 = 15;
    if (signal == SIGINT || signal == SIGTERM)
        && GRACEFUL.load(Ordering::SeqCst)
        && !STOP_REQUESTED.swap(true, Ordering::SeqCst)
    {
        STOP_SIGNAL.store(signal, Ordering::SeqCst);
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracked_paths_are_registered_until_committed_or_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.tmp");
        let (path, token) = create_tracked(
            || std::fs::write(&a, "x").map(|_| a.clone()),
            |p: &PathBuf| p.as_path(),
        )
        .unwrap();
        assert!(tracked_paths().contains(&path));
        let b = dir.path().join("b");
        token.commit(|| std::fs::rename(&path, &b)).unwrap();
        assert!(!tracked_paths().contains(&path));
        assert!(b.exists());

        let c = dir.path().join("c.tmp");
        let (_, token) = create_tracked_folder(
            || std::fs::create_dir(&c).map(|_| c.clone()),
            |p: &PathBuf| p.as_path(),
        )
        .unwrap();
        assert!(tracked_paths().contains(&c));
        drop(token);
        assert!(!tracked_paths().contains(&c));
    }
}
