//! The `attnviz` binary: parse arguments, run the library, print errors once, on one line.

mod app;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args = app::suggest::parse_args();
    // Ctrl-C / SIGTERM remove this run's unfinished files, then exit 130 / 143.
    app::signals::install();
    match app::flows::run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Not eprintln!: a closed stderr must not turn an error into a panic. A message may
            // quote text from a file (a GGUF's metadata, a template's exception): its control
            // characters are shown, not sent to the terminal, and the error stays one line.
            let _ = attnviz::render::term::write_message(
                &mut std::io::stderr(),
                &format!("error: {e}"),
            );
            ExitCode::from(e.exit_code())
        }
    }
}
