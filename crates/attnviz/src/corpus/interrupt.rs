//! Ctrl-C during a corpus run: the first one asks the run to stop after the sentences in
//! flight (their files and the corpus summary are still written); a second one ends the process
//! at once, removing the files still being written ([`crate::cleanup`]), with status 130. The
//! library only raises and polls the flags; the application's signal handler reads them
//! ([`crate::cleanup::on_signal`]).

use crate::cleanup;

/// Whether Ctrl-C was pressed (or SIGTERM received) since [`install`].
pub fn requested() -> bool {
    cleanup::stop_requested()
}

/// The signal that asked to stop (2: SIGINT, 15: SIGTERM).
pub fn signal() -> i32 {
    match cleanup::stop_signal() {
        0 => 2,
        s => s,
    }
}

/// Make the next SIGINT or SIGTERM a request to stop, for an application whose handler reads
/// [`crate::cleanup::on_signal`] (without one, signals keep their default behaviour).
pub fn install() {
    cleanup::set_graceful(true);
}

/// Back to an immediate (cleaning) exit on SIGINT.
pub fn uninstall() {
    cleanup::set_graceful(false);
}
