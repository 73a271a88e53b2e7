//! The `attnviz` binary: parse arguments, run the library, print errors once, on one line.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = attnviz::cli::Args::parse();
    attnviz::threads::configure(args.threads);
    match attnviz::run::run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
