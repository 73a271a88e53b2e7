//! Colour maps: a value in `[0, 1]` to an sRGB colour, for the images and the terminal alike.
//!
//! The tables are matplotlib's, written by `scripts/make_colormaps.py` into `colormap_tables.rs`.
//! plotters' own `colormaps` feature offers viridis but not magma, inferno, plasma or cividis, so
//! we carry the published 256-entry tables instead (about 4 KB each as text).

use super::colormap_tables as tables;
use crate::image::Theme;

/// Colour maps for heatmaps (all perceptually uniform except greys, which is monotone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Colormap {
    /// Blue-green-yellow (default).
    #[default]
    Viridis,
    /// Black-purple-orange-white.
    Magma,
    /// Black-purple-orange-yellow.
    Inferno,
    /// Blue-purple-yellow.
    Plasma,
    /// Colour-blind friendly blue-yellow.
    Cividis,
    /// White to black (black to white in dark theme).
    Greys,
}

crate::choice!(Colormap {
    Viridis => ("viridis", "Blue-green-yellow (default)"),
    Magma => ("magma", "Black-purple-orange-white"),
    Inferno => ("inferno", "Black-purple-orange-yellow"),
    Plasma => ("plasma", "Blue-purple-yellow"),
    Cividis => ("cividis", "Colour-blind friendly blue-yellow"),
    Greys => ("greys", "White to black (black to white in dark theme)"),
});

/// An sRGB colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rgb(pub u8, pub u8, pub u8);

/// A colour map as the renderer uses it: 256 entries, index 0 for the lowest value.
#[derive(Clone, Copy)]
pub(crate) struct Ramp {
    table: &'static [[u8; 3]; 256],
    reversed: bool,
}

impl Ramp {
    /// The ramp for `map` in `theme`. Greys runs white → black on light backgrounds and
    /// black → white on dark ones, so low values always fade into the background.
    pub(crate) fn new(map: Colormap, theme: Theme) -> Self {
        let table = match map {
            Colormap::Viridis => &tables::VIRIDIS,
            Colormap::Magma => &tables::MAGMA,
            Colormap::Inferno => &tables::INFERNO,
            Colormap::Plasma => &tables::PLASMA,
            Colormap::Cividis => &tables::CIVIDIS,
            Colormap::Greys => &tables::GREYS,
        };
        // matplotlib's Greys already runs white → black.
        let reversed = map == Colormap::Greys && theme == Theme::Dark;
        Ramp { table, reversed }
    }

    /// Colour of `t`, clamped to `[0, 1]`. Not-a-number maps to the lowest colour.
    pub(crate) fn at(&self, t: f32) -> Rgb {
        let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
        let mut i = (t * 255.0).round() as usize;
        if self.reversed {
            i = 255 - i;
        }
        let [r, g, b] = self.table[i];
        Rgb(r, g, b)
    }
}

/// Viridis, the terminal views' colour map.
pub(crate) fn viridis(t: f32) -> Rgb {
    Ramp::new(Colormap::Viridis, Theme::Light).at(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::choice::Choice;

    /// CIE L* (perceived lightness) of an sRGB colour.
    fn lightness(c: Rgb) -> f64 {
        let lin = |v: u8| {
            let v = v as f64 / 255.0;
            if v <= 0.04045 {
                v / 12.92
            } else {
                ((v + 0.055) / 1.055).powf(2.4)
            }
        };
        let y = 0.2126 * lin(c.0) + 0.7152 * lin(c.1) + 0.0722 * lin(c.2);
        if y > 216.0 / 24389.0 {
            116.0 * y.cbrt() - 16.0
        } else {
            y * 24389.0 / 27.0
        }
    }

    #[test]
    fn every_map_is_monotone_in_lightness() {
        // The defining property of these maps: lightness rises steadily from low to high values
        // (falls, for Greys on a light background). A swapped, reversed or garbled table fails.
        for &map in Colormap::ALL {
            for theme in [Theme::Light, Theme::Dark] {
                let ramp = Ramp::new(map, theme);
                let l: Vec<f64> = (0..=255)
                    .map(|i| lightness(ramp.at(i as f32 / 255.0)))
                    .collect();
                let rising = l[255] > l[0];
                let want_rising = !(map == Colormap::Greys && theme == Theme::Light);
                assert_eq!(rising, want_rising, "{map:?} {theme:?}");
                for w in l.windows(2) {
                    // allow 8-bit rounding wobble
                    let step = if rising { w[1] - w[0] } else { w[0] - w[1] };
                    assert!(step > -0.6, "{map:?} {theme:?} not monotone: {w:?}");
                }
                assert!(
                    (l[255] - l[0]).abs() > 60.0,
                    "{map:?} spans too little lightness"
                );
            }
        }
    }

    #[test]
    fn viridis_ends_are_the_published_ones() {
        // Endpoints from the viridis paper's table (#440154 and #fde725).
        let v = Ramp::new(Colormap::Viridis, Theme::Light);
        assert_eq!(v.at(0.0), Rgb(0x44, 0x01, 0x54));
        assert_eq!(v.at(1.0), Rgb(0xfd, 0xe7, 0x25));
        assert_eq!(v.at(f32::NAN), v.at(0.0));
        assert_eq!(v.at(7.0), v.at(1.0));
    }
}
