//! Renderers: each takes an [`Attention`](crate::attention::Attention) (plus analysis results) and options, and writes
//! one kind of output. None of them knows the model exists.

// The layers below, under the names this crate's code has always used.
use attnviz_analysis as analysis;
use attnviz_core::{attention, choice, output};
/// The JSON documents (written and read in `attnviz-formats`).
pub use attnviz_formats::json;
use attnviz_model::pixels;

pub mod band;
pub mod colormap;
mod colormap_tables;
pub mod compare;
pub mod fonts;
pub mod heads_table;
pub mod html;
pub mod image;
pub mod lens_table;
pub mod mixing_table;
pub mod router_table;
pub mod speech;
pub mod stats_table;
pub mod summary_table;
pub mod term;
pub mod terminal;

pub use colormap::Colormap;

/// A colour-scale end or tick for people: three significant digits, trailing zeros dropped
/// (`1`, `0.5`, `0.512`, `0.0213`; below 0.001, `1.2e-4`). Every colour bar and legend of every
/// output prints its numbers this way.
pub fn scale_number(v: f32) -> String {
    let a = v.abs();
    if a == 0.0 || !a.is_finite() {
        return if a == 0.0 { "0".into() } else { v.to_string() };
    }
    if a < 1e-3 {
        let s = format!("{v:.1e}");
        return s.replace(".0e", "e");
    }
    let decimals = (2 - a.log10().floor() as i32).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// How a view names the two axes of an attention matrix: the rows (queries) and the columns
/// (keys). Every output uses these words.
pub const QUERY_AXIS: &str = "query (attending from)";
/// See [`QUERY_AXIS`].
pub const KEY_AXIS: &str = "key (attended to)";
/// The caption of every colour bar of attention weights.
pub const WEIGHT_CAPTION: &str = "attention weight";

/// The caption of a colour bar of shares: each row's shares of what reaches the query
/// (value-weighted and norm-aware attention, ALTI, value zeroing).
pub const SHARE_CAPTION: &str = "share of the row";

/// The caption of the colour bar of `att`'s weights: [`SHARE_CAPTION`] where they are shares
/// ([`Attention::holds`](crate::attention::Attention::holds)), else [`WEIGHT_CAPTION`].
pub fn weight_caption(att: &crate::attention::Attention) -> &'static str {
    if att.holds.is_shares() {
        SHARE_CAPTION
    } else {
        WEIGHT_CAPTION
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn scale_numbers_have_three_significant_digits() {
        let f = super::scale_number;
        assert_eq!(f(1.0), "1");
        assert_eq!(f(0.5), "0.5");
        assert_eq!(f(0.51234), "0.512");
        assert_eq!(f(0.021349), "0.0213");
        assert_eq!(f(0.00012), "1.2e-4");
        assert_eq!(f(12.345), "12.3");
        assert_eq!(f(0.0), "0");
    }
}
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
