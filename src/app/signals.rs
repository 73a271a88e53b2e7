//! Signals: Ctrl-C, SIGTERM and SIGHUP remove this run's unfinished files and end the process
//! (the library keeps the registry of those files, `attnviz::cleanup`; handling signals and
//! ending the process are the application's).
//!
//! Design (async-signal safety): the signal handler itself only touches atomics and writes one
//! byte into a pipe (both async-signal-safe). A watcher thread, started by [`install`], waits on
//! that pipe; it takes the registry's lock, removes every registered path, and ends the process
//! with `_exit(128 + signal)`: 130 for SIGINT (Ctrl-C), 143 for SIGTERM, 129 for SIGHUP, the
//! shell's convention for "killed by that signal". It never releases the lock, so no thread can
//! create or rename a temporary file after the cleanup started. A run that asked for a graceful
//! stop (`attnviz::cleanup::set_graceful`: corpus mode, the server) gets its first SIGINT or
//! SIGTERM as a flag it polls instead.

#[cfg(unix)]
mod unix {
    use std::io::Write;
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::sync::Once;

    use attnviz::cleanup::{on_signal as graceful_stop, remove_all_and_hold};

    static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);
    static INSTALL: Once = Once::new();

    pub(super) const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

    extern "C" fn on_signal(sig: libc::c_int) {
        if graceful_stop(sig) {
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
