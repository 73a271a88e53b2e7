//! Colours of everything that is not a heatmap cell: background, text, frames, dividers.

/// Light or dark background.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Theme {
    /// Dark text on white.
    #[default]
    Light,
    /// Light text on near-black.
    Dark,
}

crate::choice!(Theme {
    Light => ("light", "Dark text on white"),
    Dark => ("dark", "Light text on near-black"),
});

pub(crate) use crate::colormap::Rgb;

/// The colours of one theme.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Palette {
    /// Page background.
    pub background: Rgb,
    /// Titles, token labels, tick labels.
    pub text: Rgb,
    /// Subtitles, special-token labels, captions.
    pub muted: Rgb,
    /// Frames around heatmaps and the colour bar, tick marks.
    pub frame: Rgb,
    /// Outer stroke of the segment A/B divider (a halo, so it shows on any cell colour).
    pub divider_halo: Rgb,
    /// Inner stroke of the segment A/B divider.
    pub divider: Rgb,
    /// Lines of the hatch over masked cells.
    pub hatch: Rgb,
    /// Labels of the tokens the model generated.
    pub generated: Rgb,
}

impl Palette {
    /// The palette of `theme`.
    pub(crate) fn of(theme: Theme) -> Self {
        match theme {
            Theme::Light => Palette {
                background: Rgb(0xff, 0xff, 0xff),
                text: Rgb(0x1f, 0x1f, 0x1f),
                muted: Rgb(0x6b, 0x6b, 0x6b),
                frame: Rgb(0x5a, 0x5a, 0x5a),
                divider_halo: Rgb(0x00, 0x00, 0x00),
                divider: Rgb(0xff, 0xff, 0xff),
                hatch: Rgb(0x9a, 0x9a, 0x9a),
                generated: Rgb(0xb3, 0x4d, 0x00),
            },
            Theme::Dark => Palette {
                background: Rgb(0x16, 0x18, 0x1c),
                text: Rgb(0xe6, 0xe6, 0xe6),
                muted: Rgb(0xa0, 0xa4, 0xab),
                frame: Rgb(0x9a, 0x9e, 0xa6),
                divider_halo: Rgb(0x00, 0x00, 0x00),
                divider: Rgb(0xff, 0xff, 0xff),
                hatch: Rgb(0x6e, 0x73, 0x7c),
                generated: Rgb(0xff, 0xa6, 0x57),
            },
        }
    }
}
