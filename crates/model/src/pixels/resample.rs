//! Pillow's resampling (`Image.resize` with `BILINEAR`, `BICUBIC`, `LANCZOS` or `NEAREST`) on
//! 8-bit RGB, reproduced operation for operation so that a vision model sees the pixels
//! transformers' PIL image processors give it: the filter's support is widened by the
//! downscale factor (antialiasing), the weights are normalised and rounded to 22-bit fixed
//! point, the image is resampled horizontally then vertically, each pass rounded and clipped to
//! 8 bits (Pillow's `libImaging/Resample.c`). A plain bilinear resample differs from this by a
//! level on many pixels, which moves a random tiny ViT's attention by about 1e-2
//! (`tests/reference/make_vision.py` measures what a non-PIL resize moves).

/// A resampling filter, as `preprocessor_config.json`'s `resample` numbers them (PIL's enum).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Filter {
    /// 0: nearest neighbour.
    Nearest,
    /// 1: Lanczos (a = 3).
    Lanczos,
    /// 2: bilinear (triangle).
    Bilinear,
    /// 3: bicubic (a = −0.5).
    Bicubic,
    /// 4: box.
    Box,
    /// 5: Hamming.
    Hamming,
}

impl Filter {
    /// The filter PIL numbers `n`.
    pub fn from_pil(n: u64) -> Option<Filter> {
        Some(match n {
            0 => Filter::Nearest,
            1 => Filter::Lanczos,
            2 => Filter::Bilinear,
            3 => Filter::Bicubic,
            4 => Filter::Box,
            5 => Filter::Hamming,
            _ => return None,
        })
    }

    /// Its name for people.
    pub fn as_str(self) -> &'static str {
        match self {
            Filter::Nearest => "nearest",
            Filter::Lanczos => "lanczos",
            Filter::Bilinear => "bilinear",
            Filter::Bicubic => "bicubic",
            Filter::Box => "box",
            Filter::Hamming => "hamming",
        }
    }

    fn support(self) -> f64 {
        match self {
            Filter::Nearest | Filter::Box => 0.5,
            Filter::Bilinear | Filter::Hamming => 1.0,
            Filter::Bicubic => 2.0,
            Filter::Lanczos => 3.0,
        }
    }

    fn weight(self, x: f64) -> f64 {
        fn sinc(x: f64) -> f64 {
            if x == 0.0 {
                1.0
            } else {
                let x = x * std::f64::consts::PI;
                x.sin() / x
            }
        }
        match self {
            Filter::Nearest | Filter::Box => {
                if x > -0.5 && x <= 0.5 {
                    1.0
                } else {
                    0.0
                }
            }
            Filter::Bilinear => {
                let x = x.abs();
                if x < 1.0 {
                    1.0 - x
                } else {
                    0.0
                }
            }
            Filter::Hamming => {
                let x = x.abs();
                if x == 0.0 {
                    1.0
                } else if x >= 1.0 {
                    0.0
                } else {
                    let t = x * std::f64::consts::PI;
                    t.sin() / t * (0.54 + 0.46 * t.cos())
                }
            }
            Filter::Bicubic => {
                const A: f64 = -0.5;
                let x = x.abs();
                if x < 1.0 {
                    ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
                } else if x < 2.0 {
                    (((x - 5.0) * x + 8.0) * x - 4.0) * A
                } else {
                    0.0
                }
            }
            Filter::Lanczos => {
                if x > -3.0 && x < 3.0 {
                    sinc(x) * sinc(x / 3.0)
                } else {
                    0.0
                }
            }
        }
    }
}

const PRECISION_BITS: u32 = 32 - 8 - 2;

/// For each output pixel, the first input pixel it reads and its fixed-point weights
/// (Pillow's `precompute_coeffs` and `normalize_coeffs_8bpc`).
struct Coeffs {
    starts: Vec<usize>,
    weights: Vec<Vec<i32>>,
}

fn coeffs(in_size: usize, out_size: usize, filter: Filter) -> Coeffs {
    let scale = in_size as f64 / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = filter.support() * filterscale;
    let ss = 1.0 / filterscale;
    let mut starts = Vec::with_capacity(out_size);
    let mut weights = Vec::with_capacity(out_size);
    for xx in 0..out_size {
        let center = (xx as f64 + 0.5) * scale;
        // C's (int) truncates toward zero.
        let xmin = ((center - support + 0.5) as i64).max(0) as usize;
        let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
        let ws: Vec<f64> = (xmin..xmax)
            .map(|x| filter.weight((x as f64 - center + 0.5) * ss))
            .collect();
        let total: f64 = ws.iter().sum();
        let fixed = ws
            .iter()
            .map(|&w| {
                let w = if total != 0.0 { w / total } else { w };
                let k = w * (1u64 << PRECISION_BITS) as f64;
                if k < 0.0 {
                    (-0.5 + k) as i32
                } else {
                    (0.5 + k) as i32
                }
            })
            .collect();
        starts.push(xmin);
        weights.push(fixed);
    }
    Coeffs { starts, weights }
}

fn clip8(v: i64) -> u8 {
    (v >> PRECISION_BITS).clamp(0, 255) as u8
}

/// `rgb` (`width × height` pixels, 3 bytes each) resized to `out_w × out_h` as Pillow's
/// `Image.resize((out_w, out_h), filter)` resizes an RGB image.
pub fn resize(
    rgb: &[u8],
    width: usize,
    height: usize,
    out_w: usize,
    out_h: usize,
    filter: Filter,
) -> Vec<u8> {
    assert_eq!(
        rgb.len(),
        width * height * 3,
        "an RGB image of {width}×{height}"
    );
    let mut rows = RowResize::new(width, height, out_w, out_h, filter);
    for row in rgb.chunks_exact(width * 3) {
        rows.push(row);
    }
    rows.finish()
}

/// [`resize`] fed one input row at a time, top to bottom, so that a decoder can hand over each
/// row as it decodes it: the horizontal pass runs on each row as it comes, and only the rows
/// the vertical pass reads are kept, already at the output width. A picture of any size then
/// takes `height × out_w × 3` bytes here, never `height × width × 3`. The result is
/// [`resize`]'s, byte for byte (it is how [`resize`] runs).
pub struct RowResize {
    width: usize,
    out_w: usize,
    out_h: usize,
    /// NEAREST (and a change of size): rows are picked, not filtered.
    nearest: bool,
    /// The horizontal pass's weights, when the width changes.
    horiz: Option<Coeffs>,
    /// The vertical pass's weights, when the height changes.
    vert: Option<Coeffs>,
    /// Input rows `first..last` are the ones the output reads.
    first: usize,
    last: usize,
    /// For NEAREST: each output row's input row.
    picks: Vec<usize>,
    /// The vertical pass runs first (on the kept input rows, at the input width), then the
    /// horizontal one: what Pillow 13 does when the width grows and the height shrinks.
    vertical_first: bool,
    /// The next input row.
    y: usize,
    /// The kept rows at the output width (NEAREST: the output rows made so far).
    kept: Vec<u8>,
}

impl RowResize {
    /// A resize of a `width × height` picture to `out_w × out_h` with `filter`.
    pub fn new(width: usize, height: usize, out_w: usize, out_h: usize, filter: Filter) -> Self {
        let same = (out_w, out_h) == (width, height);
        let nearest = filter == Filter::Nearest && !same;
        let horiz = (!same && !nearest && out_w != width).then(|| coeffs(width, out_w, filter));
        let vert = (!same && !nearest && out_h != height).then(|| coeffs(height, out_h, filter));
        let (first, last) = match &vert {
            Some(v) => {
                let l = out_h - 1;
                (v.starts[0], v.starts[l] + v.weights[l].len())
            }
            None => (0, height),
        };
        let picks = if nearest {
            (0..out_h).map(|y| nearest_pick(y, out_h, height)).collect()
        } else {
            Vec::new()
        };
        // Pillow 13 (measured against its `Image.resize`, bicubic and bilinear, over random
        // sizes): a picture made wider and shorter is resized vertically first, each pass
        // rounding to 8 bits; every other change of both sides horizontally first.
        let vertical_first = horiz.is_some() && vert.is_some() && out_w > width && out_h < height;
        let kept_w = if same || vertical_first { width } else { out_w };
        let kept_rows = if nearest { out_h } else { last - first };
        RowResize {
            width,
            out_w,
            out_h,
            nearest,
            horiz,
            vert,
            first,
            last,
            picks,
            vertical_first,
            y: 0,
            kept: Vec::with_capacity(kept_rows * kept_w * 3),
        }
    }

    /// Hand over the next input row (`width × 3` bytes).
    pub fn push(&mut self, row: &[u8]) {
        assert_eq!(row.len(), self.width * 3, "a row of {} pixels", self.width);
        let y = self.y;
        self.y += 1;
        if self.nearest {
            let from = self.kept.len() / (self.out_w * 3);
            let to = from + self.picks[from..].iter().take_while(|&&p| p == y).count();
            for _ in from..to {
                for x in 0..self.out_w {
                    let sx = nearest_pick(x, self.out_w, self.width);
                    self.kept.extend_from_slice(&row[sx * 3..][..3]);
                }
            }
            return;
        }
        if y < self.first || y >= self.last {
            return;
        }
        match &self.horiz {
            Some(horiz) if !self.vertical_first => {
                horizontal(horiz, row, self.out_w, &mut self.kept)
            }
            _ => self.kept.extend_from_slice(row),
        }
    }

    /// The resized picture, `out_w × out_h × 3` bytes, once every input row was pushed.
    pub fn finish(self) -> Vec<u8> {
        let Some(vert) = &self.vert else {
            return self.kept;
        };
        let temp = &self.kept;
        let w3 = if self.vertical_first {
            self.width * 3
        } else {
            self.out_w * 3
        };
        let half = 1i64 << (PRECISION_BITS - 1);
        let mut out = vec![0u8; w3 * self.out_h];
        for yy in 0..self.out_h {
            let (start, ks) = (vert.starts[yy] - self.first, &vert.weights[yy]);
            for x in 0..w3 {
                let mut ss = half;
                for (y, &k) in ks.iter().enumerate() {
                    ss += temp[(start + y) * w3 + x] as i64 * k as i64;
                }
                out[yy * w3 + x] = clip8(ss);
            }
        }
        match &self.horiz {
            Some(horiz) if self.vertical_first => {
                let mut wide = Vec::with_capacity(self.out_w * 3 * self.out_h);
                for row in out.chunks_exact(w3) {
                    horizontal(horiz, row, self.out_w, &mut wide);
                }
                wide
            }
            _ => out,
        }
    }
}

/// Pillow's horizontal pass over one row of RGB pixels, `out_w` pixels appended to `out`.
fn horizontal(horiz: &Coeffs, row: &[u8], out_w: usize, out: &mut Vec<u8>) {
    let half = 1i64 << (PRECISION_BITS - 1);
    for xx in 0..out_w {
        let (start, ks) = (horiz.starts[xx], &horiz.weights[xx]);
        for c in 0..3 {
            let mut ss = half;
            for (x, &k) in ks.iter().enumerate() {
                ss += row[(start + x) * 3 + c] as i64 * k as i64;
            }
            out.push(clip8(ss));
        }
    }
}

/// Pillow's `NEAREST`: the input pixel (of `inp`) under output pixel `o`'s centre (of `out`).
fn nearest_pick(o: usize, out: usize, inp: usize) -> usize {
    (((o as f64 + 0.5) * inp as f64 / out as f64) as usize).min(inp - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_sum_to_one_in_fixed_point_and_supports_widen_when_shrinking() {
        for filter in [Filter::Bilinear, Filter::Bicubic, Filter::Lanczos] {
            let c = coeffs(100, 10, filter);
            for ks in &c.weights {
                let sum: i64 = ks.iter().map(|&k| k as i64).sum();
                assert!(
                    (sum - (1 << PRECISION_BITS)).abs() <= ks.len() as i64,
                    "{sum}"
                );
            }
            // 10× down: bilinear reads 2·10 pixels around each centre, not 2.
            let wide = coeffs(100, 10, filter).weights[5].len();
            let narrow = coeffs(10, 100, filter).weights[50].len();
            assert!(wide > 4 * narrow, "{filter:?}: {wide} vs {narrow}");
        }
    }

    #[test]
    fn a_flat_image_stays_flat_and_the_same_size_is_a_copy() {
        let img = vec![77u8; 9 * 7 * 3];
        for filter in [
            Filter::Bilinear,
            Filter::Bicubic,
            Filter::Lanczos,
            Filter::Nearest,
        ] {
            let out = resize(&img, 9, 7, 4, 5, filter);
            assert!(out.iter().all(|&v| v == 77), "{filter:?}");
        }
        let ramp: Vec<u8> = (0..9 * 7 * 3).map(|i| i as u8).collect();
        assert_eq!(resize(&ramp, 9, 7, 9, 7, Filter::Bicubic), ramp);
    }
}
