//! The application layer: the only code that knows the command line. [`cli`] defines the flags
//! (clap; [`suggest`] parses them, with "did you mean" for near misses), [`plan`] checks them
//! once into typed library values (a run request and the plan of its outputs), [`flows`]
//! carries the plan out with the library (a run, `attnviz render`, corpus mode, merge; [`serve`]
//! runs the web app), [`error`] holds the one error type and its notes, and [`words`] words the
//! library's typed errors with the flags. The library never sees a flag.

pub mod cli;
pub mod diff;
pub mod error;
pub mod flows;
/// `attnviz models`: the models on this machine.
pub mod models;
pub mod plan;
mod progress;
/// `attnviz serve`: the live web app.
pub mod serve;
pub mod signals;
pub mod suggest;
mod words;
