//! Nothing half-built survives Ctrl-C: a registry of the temporary files and folders this
//! process is building, and a SIGINT/SIGTERM/SIGHUP handler that removes them and exits.
//!
//! Design (async-signal safety): the signal handler itself only touches atomics and writes one
//! byte into a pipe (both async-signal-safe). A watcher thread, started by [`install`], waits on
//! that pipe; it takes the registry's lock, removes every registered path, and ends the process
//! with `_exit(128 + signal)`: 130 for SIGINT (Ctrl-C), 143 for SIGTERM, 129 for SIGHUP, the
//! shell's convention for "killed by that signal". It never releases the lock, so no thread can
//! create or rename a temporary file after the cleanup started.
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
/// exit). Returns how many paths existed and were removed.
fn remove_all_and_hold() -> usize {
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
/// instead of an immediate exit (SIGTERM is what Slurm and Kubernetes send to a job they are
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

#[cfg(unix)]
mod unix {
    use std::io::Write;
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::sync::Once;

    use super::{remove_all_and_hold, GRACEFUL, STOP_REQUESTED, STOP_SIGNAL};

    static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);
    static INSTALL: Once = Once::new();

    pub(super) const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

    extern "C" fn on_signal(sig: libc::c_int) {
        if (sig == libc::SIGINT || sig == libc::SIGTERM)
            && GRACEFUL.load(Ordering::SeqCst)
            && !STOP_REQUESTED.swap(true, Ordering::SeqCst)
        {
            STOP_SIGNAL.store(sig, Ordering::SeqCst);
            return;
        }
        let fd = PIPE_WRITE.load(Ordering::SeqCst);
        if fd >= 0 {
            let byte = sig as u8;
            // SAFETY: write(2) is async-signal-safe; `byte` outlives the call. errno is saved
            // and restored so the interrupted code sees its own.
            unsafe {
                let errno = errno_location();
                let saved = errno.map(|e| *e);
                libc::write(fd, (&byte as *const u8).cast(), 1);
                if let (Some(e), Some(v)) = (errno, saved) {
                    *e = v;
                }
            }
        }
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    unsafe fn errno_location() -> Option<*mut libc::c_int> {
        // SAFETY: returns the calling thread's errno slot.
        Some(unsafe { libc::__errno_location() })
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    unsafe fn errno_location() -> Option<*mut libc::c_int> {
        None
    }

    fn watch(read_fd: libc::c_int) {
        let mut byte = 0u8;
        loop {
            // SAFETY: reading one byte into a live local from a pipe we own.
            let n = unsafe { libc::read(read_fd, (&mut byte as *mut u8).cast(), 1) };
            if n == 1 {
                break;
            }
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return; // the pipe is gone: nothing to watch
        }
        let sig = libc::c_int::from(byte);
        let removed = remove_all_and_hold();
        let what = match sig {
            libc::SIGINT => "interrupted (Ctrl-C)",
            libc::SIGTERM => "terminated (SIGTERM)",
            _ => "hung up (SIGHUP)",
        };
        let cleaned = match removed {
            0 => String::new(),
            1 => "; removed 1 unfinished output".to_string(),
            n => format!("; removed {n} unfinished outputs"),
        };
        let _ = writeln!(std::io::stderr(), "error: {what}{cleaned}");
        // SAFETY: ends the process at once, without running other threads' code or destructors
        // (which could recreate files); the registry lock stays held until then.
        unsafe { libc::_exit(128 + sig) }
    }

    pub(super) fn install() {
        INSTALL.call_once(|| {
            let mut fds = [0 as libc::c_int; 2];
            // SAFETY: pipe(2) fills the two-element array.
            if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
                return; // no handler: Ctrl-C keeps its default (atomic outputs stay whole)
            }
            for fd in fds {
                // SAFETY: setting close-on-exec on descriptors we own.
                unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
            }
            let read_fd = fds[0];
            let spawned = std::thread::Builder::new()
                .name("attnviz-signals".into())
                .stack_size(256 * 1024)
                .spawn(move || watch(read_fd));
            if spawned.is_err() {
                return;
            }
            PIPE_WRITE.store(fds[1], Ordering::SeqCst);
            for sig in SIGNALS {
                // SAFETY: a zeroed sigaction is valid; the handler only uses atomics and write(2).
                // No SA_RESTART, so a read blocked on a terminal returns when corpus mode's
                // graceful Ctrl-C arrives and the run can stop.
                unsafe {
                    let mut action: libc::sigaction = std::mem::zeroed();
                    action.sa_sigaction =
                        on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                    libc::sigemptyset(&mut action.sa_mask);
                    action.sa_flags = 0;
                    libc::sigaction(sig, &action, std::ptr::null_mut());
                }
            }
        });
    }
}

/// Install the SIGINT/SIGTERM/SIGHUP handler and its watcher thread (once; later calls do
/// nothing). Without it (library use), signals keep their default behaviour; the outputs are
/// still atomic, but temporary files could be left behind.
pub fn install() {
    #[cfg(unix)]
    unix::install();
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
