//! The application layer: the only code that knows the command line. [`cli`] defines the flags
//! (clap), [`plan`] checks them into typed library values, and [`run`] carries the plan out with
//! the library (model, analysis, renderers, corpus mode), which never sees a flag.

pub mod bars;
pub mod cli;
pub mod plan;
pub mod run;
pub mod words;
