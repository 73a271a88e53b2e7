//! Renderers: each takes an [`crate::Attention`] (plus analysis results) and options, and writes
//! one kind of output. None of them knows the model exists.

pub mod colormap;
mod colormap_tables;
pub mod fonts;
pub mod html;
pub mod image;
pub mod json;
pub mod stats_table;
pub mod terminal;

pub use colormap::Colormap;
pub use image::Theme;

/// Whether terminal output (the attention view, the statistics table) uses colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColorChoice {
    /// Colour when the output is a terminal and `NO_COLOR` is not set.
    #[default]
    Auto,
    /// Always 24-bit colour.
    Always,
    /// Plain text.
    Never,
}

crate::choice!(ColorChoice {
    Auto => ("auto", "Colour when standard output is a terminal and NO_COLOR is not set"),
    Always => ("always", "Always 24-bit colour"),
    Never => ("never", "Plain text"),
});

impl ColorChoice {
    /// Whether to colour output going to a stream that is (or is not) a terminal: `auto` only
    /// when it is one and `NO_COLOR` is unset or empty.
    pub fn enabled(self, is_terminal: bool) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            }
        }
    }
}
