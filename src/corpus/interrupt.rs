//! Ctrl-C during a corpus run: the first one asks the run to stop after the sentences in
//! flight (their files and the corpus summary are still written); a second one ends the process
//! at once, as usual.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Whether Ctrl-C was pressed since [`install`].
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// Catch the next SIGINT (Unix). Without `SA_RESTART`, so a read blocked on a terminal
/// returns and the run can stop.
#[cfg(unix)]
pub fn install() {
    extern "C" fn on_sigint(_: libc::c_int) {
        REQUESTED.store(true, Ordering::Relaxed);
        // SAFETY: signal() with SIG_DFL is async-signal-safe; the next Ctrl-C kills as usual.
        unsafe {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
        }
    }
    REQUESTED.store(false, Ordering::Relaxed);
    // SAFETY: a zeroed sigaction is valid; the handler only touches an atomic and calls an
    // async-signal-safe function.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        action.sa_flags = 0;
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
    }
}

/// Elsewhere Ctrl-C keeps its default behaviour (atomic writes still leave no half files).
#[cfg(not(unix))]
pub fn install() {}

/// Put back the default SIGINT behaviour.
#[cfg(unix)]
pub fn uninstall() {
    // SAFETY: restoring the default disposition.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
    }
}

/// Nothing to undo elsewhere.
#[cfg(not(unix))]
pub fn uninstall() {}
