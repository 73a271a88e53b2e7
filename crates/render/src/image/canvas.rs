//! The RGB canvas picture figures are painted on ([`super::picture`]): layout coordinates in
//! the figure's pixels at scale factor 1, painted at [`ImageOptions::scale_factor`] pixels each,
//! in the colours of [`ImageOptions::theme`], with attention coloured by
//! [`ImageOptions::colormap`] on [`ImageOptions::scale`] (a picture's `auto` is linear).

use super::font;
use super::scale::{ColorScale, Scale};
use super::theme::Palette;
use super::{ImageError, ImageOptions, MAX_PNG_PIXELS};
use crate::colormap::{Ramp, Rgb};

/// How a picture figure looks: the options' palette, colour map and scale, and its pixels per
/// layout pixel.
pub(crate) struct Look {
    pub pal: Palette,
    pub ramp: Ramp,
    pub scale: ColorScale,
    pub k: f64,
}

impl Look {
    pub(crate) fn of(opts: &ImageOptions) -> Look {
        Look {
            pal: Palette::of(opts.theme),
            ramp: Ramp::new(opts.colormap, opts.theme),
            // The overlay already fades weak patches into the picture; auto keeps it linear.
            scale: match opts.scale {
                ColorScale::Auto => ColorScale::Linear,
                s => s,
            },
            k: opts.scale_factor as f64,
        }
    }

    /// The scale of values whose largest is that of `values`.
    pub(crate) fn scale_of<'a>(&self, values: impl IntoIterator<Item = &'a f32>) -> Scale {
        Scale::up_to(values, self.scale)
    }

    /// Layout pixels to canvas pixels.
    pub(crate) fn px(&self, v: usize) -> usize {
        ((v as f64 * self.k).round() as usize).max(1)
    }
}

fn rgb(c: Rgb) -> [u8; 3] {
    [c.0, c.1, c.2]
}

/// RGB pixels, drawn on in layout coordinates.
pub(crate) struct Canvas {
    /// Width in pixels.
    pub w: usize,
    /// Height in pixels.
    pub h: usize,
    pub px: Vec<u8>,
    k: f64,
}

impl Canvas {
    /// A canvas of `w × h` layout pixels in the theme's background, or why it would be too
    /// large (more than [`MAX_PNG_PIXELS`] at the scale factor).
    pub(crate) fn new(w: usize, h: usize, look: &Look) -> Result<Canvas, ImageError> {
        let (pw, ph) = (look.px(w), look.px(h));
        if pw as u64 * ph as u64 > MAX_PNG_PIXELS {
            return Err(ImageError::TooManyPixels {
                factor: look.k as f32,
                w: pw as u32,
                h: ph as u32,
            });
        }
        let bg = rgb(look.pal.background);
        Ok(Canvas {
            w: pw,
            h: ph,
            px: bg.repeat(pw * ph),
            k: look.k,
        })
    }

    fn at(&self, v: i32) -> i32 {
        (v as f64 * self.k).round() as i32
    }

    fn put(&mut self, x: i32, y: i32, rgb: [u8; 3], a: f32) {
        if x < 0 || y < 0 || x as usize >= self.w || y as usize >= self.h {
            return;
        }
        let i = (y as usize * self.w + x as usize) * 3;
        for (d, &s) in self.px[i..i + 3].iter_mut().zip(&rgb) {
            *d = (*d as f32 * (1.0 - a) + s as f32 * a).round() as u8;
        }
    }

    /// `s` at `size` layout pixels, its anchor (left, middle of the lower-case letters) at
    /// `(x, y)`.
    pub(crate) fn text(&mut self, s: &str, size: f64, x: i32, y: i32, color: Rgb) {
        let (x, y) = (self.at(x), self.at(y));
        let c = rgb(color);
        font::rasterize(s, size * self.k, false, 0.0, |dx, dy, a| {
            self.put(x + dx, y + dy, c, a)
        });
    }

    /// A filled rectangle.
    pub(crate) fn rect(&mut self, x: i32, y: i32, w: i32, h: i32, color: Rgb) {
        let (x0, y0, x1, y1) = (self.at(x), self.at(y), self.at(x + w), self.at(y + h));
        let c = rgb(color);
        for yy in y0..y1.max(y0 + 1) {
            for xx in x0..x1.max(x0 + 1) {
                self.put(xx, yy, c, 1.0);
            }
        }
    }

    /// A frame `t` layout pixels thick inside the rectangle.
    pub(crate) fn frame(&mut self, x: i32, y: i32, w: i32, h: i32, t: i32, color: Rgb) {
        self.rect(x, y, w, t, color);
        self.rect(x, y + h - t, w, t, color);
        self.rect(x, y, t, h, color);
        self.rect(x + w - t, y, t, h, color);
    }

    /// Copy `src` (`pw × ph` pixels) with its top left at layout `(x, y)`.
    pub(crate) fn blit(&mut self, src: &[u8], pw: usize, ph: usize, x: i32, y: i32) {
        let (x0, y0) = (self.at(x).max(0) as usize, self.at(y).max(0) as usize);
        for yy in 0..ph {
            let cy = y0 + yy;
            if cy >= self.h {
                break;
            }
            let n = pw.min(self.w.saturating_sub(x0));
            let d = (cy * self.w + x0) * 3;
            self.px[d..d + n * 3].copy_from_slice(&src[yy * pw * 3..(yy * pw + n) * 3]);
        }
    }

    /// A vertical colour bar at `(x, y)`, `h` tall, of `scale` in `look`'s colours, its ticks
    /// labelled by `label` (the value's number, or for a bar of each overlay's own scale a
    /// share of its largest weight), and `caption` lines under it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn colour_bar(
        &mut self,
        look: &Look,
        (x, y, h): (i32, i32, i32),
        scale: &Scale,
        ticks: &[(f32, String)],
        caption: &[String],
    ) {
        let w = 14;
        let (py0, py1) = (self.at(y), self.at(y + h));
        for py in py0..py1 {
            let t = 1.0 - (py - py0) as f32 / (py1 - py0 - 1).max(1) as f32;
            let c = rgb(look.ramp.at(t));
            for px in self.at(x)..self.at(x + w) {
                self.put(px, py, c, 1.0);
            }
        }
        self.frame(x - 1, y - 1, w + 2, h + 2, 1, look.pal.frame);
        for (v, label) in ticks {
            let ty = y + ((1.0 - scale.unit(*v)) * (h - 1) as f32).round() as i32;
            self.rect(x + w + 1, ty, 4, 1, look.pal.frame);
            self.text(label, 11.0, x + w + 7, ty, look.pal.text);
        }
        for (i, line) in caption.iter().enumerate() {
            self.text(
                line,
                10.0,
                x - 2,
                y + h + 16 + 13 * i as i32,
                look.pal.muted,
            );
        }
    }
}
