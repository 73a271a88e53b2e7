//! Image input for the vision families: decode a PNG, JPEG or WebP file with bounded memory,
//! then make the model's input as transformers' PIL image processors do from the model's
//! `preprocessor_config.json`: RGB conversion, resize (fixed size or shortest edge; PIL's
//! filters, [`resample`]), centre crop, rescale and normalise, in that order. The result keeps
//! the 8-bit picture the model saw, for the views to draw on.

pub mod jpeg;
pub mod png_chunks;
mod read;
pub mod resample;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::attention::image::{Preprocessing, Resize};
use crate::cancel::Cancel;
pub use read::{to_rgb, Corruption};
pub use resample::Filter;

/// The largest side a decoded image may have (the header is read first, so a bigger one is
/// refused before any pixel is decoded).
pub const MAX_SIDE: u32 = 16_384;
/// The most pixels a decoded image may have: 64 megapixels (192 MiB as RGB).
pub const MAX_PIXELS: u64 = 64 << 20;
/// The most bytes a decoder may hold at once.
pub const MAX_DECODE_BYTES: u64 = 512 << 20;

/// Why an image could not be read or prepared.
#[derive(Debug, thiserror::Error)]
pub enum PixelsError {
    /// The file cannot be read.
    #[error("cannot read image {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// A folder, a FIFO or a device.
    #[error("cannot read image {}: not a regular file", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// Not a PNG, JPEG or WebP, or damaged.
    #[error("{} is not a readable image ({problem}); give a PNG, JPEG or WebP file", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        problem: Corruption,
    },
    /// Larger than the limits (a decompression bomb, or a huge scan).
    #[error("{} is {width}×{height} pixels, more than attnviz decodes (at most {MAX_SIDE} a side and {} megapixels); scale it down first", path.display(), MAX_PIXELS >> 20)]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its width.
        width: u64,
        /// Its height.
        height: u64,
    },
    /// No pixels at all.
    #[error("{} is an empty image (0×0 pixels)", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// An animation: which frame to read is not obvious.
    #[error("{} is animated ({format}); give a still image (one frame saved as PNG)", path.display())]
    Animated {
        /// The file.
        path: PathBuf,
        /// `APNG` or `animated WebP`.
        format: &'static str,
    },
    /// A JPEG whose scans would take far more work than its pixels need (a progressive file
    /// made to hold the decoder; [`jpeg`]).
    #[error("{} {work}; save it again as a baseline JPEG or a PNG", path.display())]
    TooMuchWork {
        /// The file.
        path: PathBuf,
        /// What would take the time.
        work: jpeg::TooMuchWork,
    },
    /// A PNG chunk PIL refuses: a colour profile or text that inflates past PIL's bounds, an
    /// unknown compression method ([`png_chunks`]).
    #[error("{} {refusal}", path.display())]
    Chunk {
        /// The file.
        path: PathBuf,
        /// Which chunk, and why.
        refusal: png_chunks::Refusal,
    },
    /// Reading was stopped: its [`Cancel`] flag was set (a request that timed out).
    #[error("reading {} was cancelled", path.display())]
    Cancelled {
        /// The file.
        path: PathBuf,
    },
    /// An array that is not an image.
    #[error(transparent)]
    Array(#[from] ArrayProblem),
    /// Pixels in memory whose row could not be read (the [`PixelRows`] implementation's error).
    #[error("{0}")]
    Rows(#[source] RowError),
    /// preprocessor_config.json cannot be read.
    #[error("{}: {source}", path.display())]
    ConfigRead {
        /// The file.
        path: PathBuf,
        /// Why.
        source: crate::small_file::ReadError,
    },
    /// preprocessor_config.json cannot be used.
    #[error("{}: {problem}", path.display())]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: ProcessorError,
    },
}

/// Why pixels in memory are not an image attnviz reads.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArrayProblem {
    /// An array of no pixels.
    #[error("the image array is empty (0 pixels)")]
    EmptyArray,
    /// An array over [`MAX_PIXELS`].
    #[error("the image array is {width}×{height} pixels, more than {} megapixels", MAX_PIXELS >> 20)]
    ArrayTooLarge {
        /// Its width.
        width: usize,
        /// Its height.
        height: usize,
    },
    /// An array whose length is not its shape's.
    #[error("the image array holds {len} values, not {height}×{width}×{channels}")]
    Length {
        /// Values it holds.
        len: usize,
        /// Its height.
        height: usize,
        /// Its width.
        width: usize,
        /// Its channels.
        channels: usize,
    },
    /// Channels other than 1, 3 or 4.
    #[error("an image array has 1, 3 or 4 channels, not {0}")]
    Channels(usize),
    /// Pixels of no size.
    #[error("the image is empty ({width}×{height} pixels)")]
    Empty {
        /// Its width.
        width: usize,
        /// Its height.
        height: usize,
    },
    /// Pixels over the size caps.
    #[error("the image is {width}×{height} pixels, more than attnviz reads (at most {MAX_SIDE} a side and {} megapixels); scale it down first", MAX_PIXELS >> 20)]
    TooLarge {
        /// Its width.
        width: usize,
        /// Its height.
        height: usize,
    },
    /// A row of another length than the width says.
    #[error("row {y} of the image array gave {len} values, not {width}×3")]
    Row {
        /// The row.
        y: usize,
        /// Values it gave.
        len: usize,
        /// The width.
        width: usize,
    },
}

/// Why a [`PixelRows`] could not give a row: its own error, in words.
pub type RowError = Box<dyn std::error::Error + Send + Sync>;

/// What is wrong with a `preprocessor_config.json` (displays after the file's name).
#[derive(Debug, thiserror::Error)]
pub enum ProcessorError {
    /// Not JSON.
    #[error("not valid JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// A size out of range.
    #[error("{key} {value} is not a size from 1 to {MAX_INPUT_SIDE} pixels")]
    Side {
        /// The key.
        key: String,
        /// Its value, as JSON.
        value: String,
    },
    /// A size that is neither height and width nor a shortest or longest edge.
    #[error("{key} {value} has neither height and width nor shortest_edge nor longest_edge")]
    Size {
        /// The key.
        key: &'static str,
        /// Its value, as JSON.
        value: String,
    },
    /// `do_resize` without `size`.
    #[error("do_resize is set but size is missing")]
    NoSize,
    /// A resampling filter PIL does not have.
    #[error("resample {0} is not one of PIL's filters 0–5")]
    Resample(String),
    /// `do_center_crop` without `crop_size`.
    #[error("do_center_crop is set but crop_size is missing")]
    NoCropSize,
    /// A crop size given as a shortest edge.
    #[error("crop_size needs height and width")]
    CropEdge,
    /// A count the processor reads (a pan-and-scan setting) that is not a whole number.
    #[error("{key} {value} is not a whole number of 0 or more")]
    NotACount {
        /// The key.
        key: &'static str,
        /// The value, as JSON.
        value: String,
    },
    /// A mean or standard deviation entry (or a ratio) that is not a number.
    #[error("{key} {value} is not a number")]
    NotANumber {
        /// The key.
        key: &'static str,
        /// The entry, as JSON.
        value: String,
    },
    /// A mean or standard deviation that is not three numbers.
    #[error("{key} {value} is not three numbers")]
    NotThree {
        /// The key.
        key: &'static str,
        /// Its value, as JSON.
        value: String,
    },
    /// A standard deviation that divides by zero.
    #[error("image_std {0:?} has a zero or non-finite value")]
    Std([f64; 3]),
    /// `pan_and_scan_min_crop_size` 0: no crop can be that small.
    #[error("pan_and_scan_min_crop_size is 0; give the smallest crop side in pixels (Gemma 3's processor uses 256)")]
    MinCrop,
}

/// Where a picture comes from: a file, its file's bytes already in memory (a server's
/// upload), which are decoded without touching the file system, or pixels in memory (a numpy
/// array), read a row at a time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageSource {
    /// A picture file.
    File(PathBuf),
    /// A picture file's bytes.
    Bytes {
        /// What names the picture in messages and views (`upload.jpg`).
        name: String,
        /// The file's bytes.
        bytes: Arc<[u8]>,
    },
    /// Pixels that are no file.
    Pixels {
        /// What names the picture in messages and views (`image`).
        name: String,
        /// The rows.
        pixels: SharedPixels,
    },
}

/// Pixels in memory that are not a file (a numpy array the Python package hands over), read a
/// row at a time, so that they are converted only as the model's resize takes them and never
/// copied whole. Checked like a file's pixels: the size caps first, before any row is read.
pub trait PixelRows: Send + Sync {
    /// `(width, height)`.
    fn size(&self) -> (usize, usize);
    /// The colour type the rows are made from (`rgb8`, `l8`, `rgba8`, …), for the views.
    fn color(&self) -> String;
    /// Row `y` (from the top) as `width × 3` bytes of RGB into `out` (cleared first); an error
    /// whose message is one line.
    fn row(&self, y: usize, out: &mut Vec<u8>) -> Result<(), RowError>;
}

/// A shared [`PixelRows`]; two are equal when they are the same pixels.
#[derive(Clone)]
pub struct SharedPixels(pub Arc<dyn PixelRows>);

impl std::fmt::Debug for SharedPixels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (w, h) = self.0.size();
        write!(f, "SharedPixels({w}×{h} {})", self.0.color())
    }
}

impl PartialEq for SharedPixels {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SharedPixels {}

impl ImageSource {
    /// How messages name the picture: the file's path, or the bytes' name.
    pub fn shown(&self) -> PathBuf {
        match self {
            ImageSource::File(path) => path.clone(),
            ImageSource::Bytes { name, .. } | ImageSource::Pixels { name, .. } => {
                PathBuf::from(name)
            }
        }
    }

    /// The picture's name in the views: the file's name, or the bytes' name.
    pub fn name(&self) -> String {
        match self {
            ImageSource::File(path) => path.file_name().map_or_else(
                || path.display().to_string(),
                |n| n.to_string_lossy().into(),
            ),
            ImageSource::Bytes { name, .. } | ImageSource::Pixels { name, .. } => name.clone(),
        }
    }
}

impl From<PathBuf> for ImageSource {
    fn from(path: PathBuf) -> Self {
        ImageSource::File(path)
    }
}

impl From<&Path> for ImageSource {
    fn from(path: &Path) -> Self {
        ImageSource::File(path.to_path_buf())
    }
}

impl From<&PathBuf> for ImageSource {
    fn from(path: &PathBuf) -> Self {
        ImageSource::File(path.clone())
    }
}

/// An 8-bit RGB picture.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rgb {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// `width · height · 3` bytes, row-major.
    pub data: Vec<u8>,
    /// The colour type it was decoded from (`rgb8`, `l8`, …).
    pub color: String,
}

impl Rgb {
    /// A picture from `height × width × channels` bytes (1: gray, 3: RGB, 4: RGBA, whose alpha
    /// is composited onto white as transformers' `convert_to_rgb` does).
    pub fn from_array(
        data: &[u8],
        height: usize,
        width: usize,
        channels: usize,
    ) -> Result<Rgb, PixelsError> {
        if width == 0 || height == 0 {
            return Err(ArrayProblem::EmptyArray.into());
        }
        if width as u64 * height as u64 > MAX_PIXELS {
            return Err(ArrayProblem::ArrayTooLarge { width, height }.into());
        }
        if data.len() != width * height * channels {
            return Err(ArrayProblem::Length {
                len: data.len(),
                height,
                width,
                channels,
            }
            .into());
        }
        let (rgb, color) = match channels {
            1 => (data.iter().flat_map(|&v| [v, v, v]).collect(), "l8"),
            3 => (data.to_vec(), "rgb8"),
            4 => (
                data.chunks_exact(4)
                    .flat_map(|p| {
                        let a = p[3] as u32;
                        let blend = |c: u8| ((c as u32 * a + 255 * (255 - a) + 127) / 255) as u8;
                        [blend(p[0]), blend(p[1]), blend(p[2])]
                    })
                    .collect(),
                "rgba8",
            ),
            c => return Err(ArrayProblem::Channels(c).into()),
        };
        Ok(Rgb {
            width,
            height,
            data: rgb,
            color: color.into(),
        })
    }
}

/// Decode `path` (PNG, JPEG or WebP, by content) to RGB with bounded memory: the header is read
/// first and an image over [`MAX_SIDE`] a side or [`MAX_PIXELS`] is refused before decoding;
/// animations are refused. JPEG is decoded as PIL decodes it (libjpeg-turbo), pixel for pixel.
/// A model's input is better made with [`ImageProcessor::prepare_file`], which never holds the whole
/// picture.
pub fn decode(path: &Path) -> Result<Rgb, PixelsError> {
    decode_source(&ImageSource::from(path))
}

/// [`decode`] of a file or of bytes in memory.
pub fn decode_source(source: &ImageSource) -> Result<Rgb, PixelsError> {
    let mut whole = read::Whole::default();
    read::read(source, &mut whole, &Cancel::new())?;
    Ok(whole.0)
}

/// The size caps of a decoded picture, for pixels in memory (an array, an image object):
/// checked on their size, before any of them is read ([`PixelsError::Array`]).
pub fn check_array_size(width: usize, height: usize) -> Result<(), PixelsError> {
    if width == 0 || height == 0 {
        return Err(ArrayProblem::Empty { width, height }.into());
    }
    let (w, h) = (width as u64, height as u64);
    if w > MAX_SIDE as u64 || h > MAX_SIDE as u64 || w.saturating_mul(h) > MAX_PIXELS {
        return Err(ArrayProblem::TooLarge { width, height }.into());
    }
    Ok(())
}

fn check_size(path: &Path, w: u64, h: u64) -> Result<(), PixelsError> {
    if w == 0 || h == 0 {
        return Err(PixelsError::Empty {
            path: path.to_path_buf(),
        });
    }
    if w > MAX_SIDE as u64 || h > MAX_SIDE as u64 || w * h > MAX_PIXELS {
        return Err(PixelsError::TooLarge {
            path: path.to_path_buf(),
            width: w,
            height: h,
        });
    }
    Ok(())
}

/// Qwen2-VL's processor's `pixel_values` of one picture: its `[channels, height, width]` pixels
/// cut into `patch`-pixel patches, each repeated over `frames` frames and flattened (channel,
/// frame, row, column), the patches in the processor's order: `merge × merge` squares row by
/// row, the patches of each square row by row inside it. `[patches, channels · frames · patch²]`.
pub fn merge_window_patches(
    pixels: &[f32],
    width: usize,
    height: usize,
    patch: usize,
    merge: usize,
    frames: usize,
) -> Vec<f32> {
    let channels = pixels.len() / (width * height).max(1);
    let (rows, cols) = (height / patch, width / patch);
    let mut out = Vec::with_capacity(rows * cols * channels * frames * patch * patch);
    for br in 0..rows / merge {
        for bc in 0..cols / merge {
            for a in 0..merge {
                for b in 0..merge {
                    let (r, c) = (br * merge + a, bc * merge + b);
                    for ch in 0..channels {
                        for _ in 0..frames {
                            for y in 0..patch {
                                let at = (ch * height + r * patch + y) * width + c * patch;
                                out.extend_from_slice(&pixels[at..at + patch]);
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// How the size of the resized image is chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Size {
    /// Exactly `width × height`.
    Fixed {
        /// Width.
        width: usize,
        /// Height.
        height: usize,
    },
    /// The shorter side becomes this, the aspect ratio kept (the longer side truncated).
    ShortestEdge(usize),
    /// The longer side becomes this (larger or smaller), the aspect ratio kept: the other side
    /// truncated, then rounded up to an even number (Idefics3's and SmolVLM's
    /// `_resize_output_size_rescale_to_max_len`), no side above 4096.
    LongestEdge(usize),
    /// Qwen2-VL's `smart_resize`: each side a multiple of `factor` (patch × merge size), the
    /// aspect ratio kept as nearly as that allows, the area between `min_pixels` and
    /// `max_pixels`.
    Pixels {
        /// What each side is a multiple of.
        factor: usize,
        /// The least area.
        min_pixels: usize,
        /// The largest area.
        max_pixels: usize,
    },
}

/// Idefics3's and SmolVLM's tiling (`max_image_size`, `do_image_splitting`): the resized
/// picture cut into square tiles of the tower's size, row by row, then the whole picture
/// resized to one tile (the global view).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiles {
    /// A tile's side in pixels (`max_image_size.longest_edge`).
    pub side: usize,
    /// Whether a picture larger than one tile is split (`do_image_splitting`); when not, it is
    /// resized to one tile.
    pub split: bool,
}

/// Gemma 3's pan-and-scan (`do_pan_and_scan`, `pan_and_scan_min_crop_size`,
/// `pan_and_scan_max_num_crops`, `pan_and_scan_min_ratio_to_activate`): a picture whose longer
/// side is at least `min_ratio` times the other is given whole and also cut, before any resize,
/// into 2 to `max_crops` crops along its longer side, each resized as the whole is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PanAndScan {
    /// The least crop side in pixels.
    pub min_crop: usize,
    /// The most crops.
    pub max_crops: usize,
    /// The least ratio of the longer side to the shorter for a picture to be cut.
    pub min_ratio: f64,
}

impl PanAndScan {
    /// Gemma3Processor's defaults, taken where the file says `null`.
    pub const DEFAULT: PanAndScan = PanAndScan {
        min_crop: 256,
        max_crops: 4,
        min_ratio: 1.2,
    };

    /// The crops of a `width × height` picture, `[x, y, width, height]` each, left to right or
    /// top to bottom (the last one cut short by the edge); none when the picture is not long
    /// enough or a crop would be smaller than `min_crop`. Gemma3ImageProcessor's `pan_and_scan`.
    pub fn crops(&self, width: usize, height: usize) -> Vec<[usize; 4]> {
        let (long, short) = (width.max(height), width.min(height));
        if short == 0 || (long as f64 / short as f64) < self.min_ratio {
            return Vec::new();
        }
        // Round half up, no more crops than the least crop side allows, within [2, max].
        let n = ((long as f64 / short as f64 + 0.5).floor() as usize)
            .min(long / self.min_crop.max(1))
            .max(2)
            .min(self.max_crops);
        let (across, down) = if width >= height { (n, 1) } else { (1, n) };
        let (cw, ch) = (width.div_ceil(across), height.div_ceil(down));
        if cw.min(ch) < self.min_crop {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(n);
        for r in 0..down {
            for c in 0..across {
                let (x, y) = (c * cw, r * ch);
                // A crop past the edge would be empty (transformers fails on it); only a
                // `max_crops` above 4 with tiny crops can ask for one.
                if x < width && y < height {
                    out.push([x, y, cw.min(width - x), ch.min(height - y)]);
                }
            }
        }
        out
    }
}

/// A picture as a tiling processor makes it ([`ImageProcessor::prepare_tiles_until`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Tiled {
    /// The tiles row by row, then the global view (Idefics3); or the whole picture, then its
    /// crops (Gemma 3's pan-and-scan, `whole_first`); one frame when the picture was not cut.
    pub frames: Vec<Prepared>,
    /// Rows and columns of tiles or crops; `[0, 0]` when the picture was not cut (its one frame
    /// is the whole picture).
    pub tiles: [usize; 2],
    /// Whether the whole picture comes first, before its crops (pan-and-scan), rather than
    /// last, after its tiles.
    pub whole_first: bool,
}

impl Tiled {
    /// Where frame `k` sits in the grid of tiles (row, column), or `None` for the whole
    /// picture.
    pub fn at(&self, k: usize) -> Option<[usize; 2]> {
        let cols = self.tiles[1];
        let tile = if self.whole_first {
            k.checked_sub(1)?
        } else {
            k
        };
        (cols > 0 && tile < self.tiles[0] * cols).then(|| [tile / cols, tile % cols])
    }

    /// The frame that shows the whole picture.
    pub fn into_whole(mut self) -> Option<Prepared> {
        if self.whole_first {
            (!self.frames.is_empty()).then(|| self.frames.swap_remove(0))
        } else {
            self.frames.pop()
        }
    }
}

/// transformers' `smart_resize` (Qwen2-VL's image processor): `(height, width)` of a
/// `height × width` picture, each a multiple of `factor`, with Python's rounding (half to even).
pub fn smart_resize(
    height: usize,
    width: usize,
    factor: usize,
    min_pixels: usize,
    max_pixels: usize,
) -> (usize, usize) {
    let (h, w, f) = (height as f64, width as f64, factor as f64);
    let mut h_bar = (h / f).round_ties_even() as usize * factor;
    let mut w_bar = (w / f).round_ties_even() as usize * factor;
    if h_bar * w_bar > max_pixels {
        let beta = (h * w / max_pixels as f64).sqrt();
        h_bar = factor.max((h / beta / f).floor() as usize * factor);
        w_bar = factor.max((w / beta / f).floor() as usize * factor);
    } else if h_bar * w_bar < min_pixels {
        let beta = (min_pixels as f64 / (h * w)).sqrt();
        h_bar = (h * beta / f).ceil() as usize * factor;
        w_bar = (w * beta / f).ceil() as usize * factor;
    }
    (h_bar, w_bar)
}

/// A model's `preprocessor_config.json`, read with transformers' defaults for the PIL
/// processors.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageProcessor {
    /// `do_resize` and `size`.
    pub resize: Option<Size>,
    /// `resample`.
    pub filter: Filter,
    /// `do_center_crop` and `crop_size` (`[width, height]`).
    pub crop: Option<[usize; 2]>,
    /// `do_rescale` and `rescale_factor`.
    pub rescale: Option<f64>,
    /// `do_normalize`, `image_mean` and `image_std`.
    pub normalize: Option<[[f64; 3]; 2]>,
    /// `max_image_size` and `do_image_splitting`, when the processor tiles pictures.
    pub tiles: Option<Tiles>,
    /// Gemma 3's pan-and-scan, when `do_pan_and_scan` asks for it.
    pub pan_and_scan: Option<PanAndScan>,
}

/// OpenAI CLIP's mean and standard deviation (transformers' `OPENAI_CLIP_MEAN`, `_STD`).
const CLIP_MEAN_STD: ([f64; 3], [f64; 3]) = (
    [0.481_454_66, 0.457_827_5, 0.408_210_73],
    [0.268_629_54, 0.261_302_58, 0.275_777_11],
);

/// The largest side a preprocessor may ask for.
const MAX_INPUT_SIDE: usize = 8192;

impl ImageProcessor {
    /// Read `path`.
    pub fn load(path: &Path) -> Result<ImageProcessor, PixelsError> {
        let text = crate::small_file::read_text(path, 1 << 20, "preprocessor_config.json")
            .map_err(|source| PixelsError::ConfigRead {
                path: path.to_path_buf(),
                source,
            })?;
        Self::parse(&text).map_err(|problem| PixelsError::Config {
            path: path.to_path_buf(),
            problem,
        })
    }

    /// Parse the text of a `preprocessor_config.json`.
    pub fn parse(text: &str) -> Result<ImageProcessor, ProcessorError> {
        let v: Value = serde_json::from_str(text).map_err(ProcessorError::Json)?;
        let flag = |k: &str, default: bool| v.get(k).and_then(Value::as_bool).unwrap_or(default);
        let side = |s: &Value, k: &str| -> Result<Option<usize>, ProcessorError> {
            match s.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(x) => match x.as_u64() {
                    Some(n) if n >= 1 && n as usize <= MAX_INPUT_SIDE => Ok(Some(n as usize)),
                    _ => Err(ProcessorError::Side {
                        key: k.to_string(),
                        value: x.to_string(),
                    }),
                },
            }
        };
        let size_of = |k: &'static str| -> Result<Option<Size>, ProcessorError> {
            let Some(s) = v.get(k) else { return Ok(None) };
            if let Some(n) = s.as_u64() {
                let n = side(&serde_json::json!({ "n": n }), "n")?.unwrap_or(0);
                return Ok(Some(Size::Fixed {
                    width: n,
                    height: n,
                }));
            }
            match (
                side(s, "height")?,
                side(s, "width")?,
                side(s, "shortest_edge")?,
                side(s, "longest_edge")?,
            ) {
                (Some(height), Some(width), _, _) => Ok(Some(Size::Fixed { width, height })),
                (_, _, Some(e), _) => Ok(Some(Size::ShortestEdge(e))),
                (_, _, _, Some(e)) => Ok(Some(Size::LongestEdge(e))),
                _ => Err(ProcessorError::Size {
                    key: k,
                    value: s.to_string(),
                }),
            }
        };
        // Qwen2-VL's image processor (Qwen2.5-VL's too): smart_resize between a least and a
        // largest area, bicubic and CLIP's mean and spread unless the file says otherwise.
        let qwen = v.get("merge_size").is_some()
            || v.get("image_processor_type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.starts_with("Qwen2VL") || t.starts_with("Qwen2_5_VL"));
        let resize = if !flag("do_resize", true) {
            None
        } else if qwen {
            let count = |k: &str| -> Result<Option<usize>, ProcessorError> {
                match v.get(k).or_else(|| v.get("size").and_then(|s| s.get(k))) {
                    None | Some(Value::Null) => Ok(None),
                    Some(x) => match x.as_u64() {
                        Some(n) if n >= 1 && n <= (MAX_INPUT_SIDE * MAX_INPUT_SIDE) as u64 => {
                            Ok(Some(n as usize))
                        }
                        _ => Err(ProcessorError::Side {
                            key: k.to_string(),
                            value: x.to_string(),
                        }),
                    },
                }
            };
            let patch = count("patch_size")?.unwrap_or(14);
            let merge = count("merge_size")?.unwrap_or(2);
            let min_pixels = match count("min_pixels")? {
                Some(n) => n,
                None => count("shortest_edge")?.unwrap_or(56 * 56),
            };
            let max_pixels = match count("max_pixels")? {
                Some(n) => n,
                None => count("longest_edge")?.unwrap_or(28 * 28 * 1280),
            };
            if min_pixels > max_pixels || patch * merge > MAX_INPUT_SIDE {
                return Err(ProcessorError::Size {
                    key: "size",
                    value: format!(
                        "{{\"shortest_edge\": {min_pixels}, \"longest_edge\": {max_pixels}}}"
                    ),
                });
            }
            Some(Size::Pixels {
                factor: patch * merge,
                min_pixels,
                max_pixels,
            })
        } else {
            Some(size_of("size")?.ok_or(ProcessorError::NoSize)?)
        };
        let filter = match v.get("resample") {
            None | Some(Value::Null) if qwen => Filter::Bicubic,
            None | Some(Value::Null) => Filter::Bilinear,
            Some(x) => x
                .as_u64()
                .and_then(Filter::from_pil)
                .ok_or_else(|| ProcessorError::Resample(x.to_string()))?,
        };
        let crop = if flag("do_center_crop", false) {
            match size_of("crop_size")?.ok_or(ProcessorError::NoCropSize)? {
                Size::Fixed { width, height } => Some([width, height]),
                Size::ShortestEdge(_) | Size::LongestEdge(_) | Size::Pixels { .. } => {
                    return Err(ProcessorError::CropEdge)
                }
            }
        } else {
            None
        };
        let rescale = if flag("do_rescale", true) {
            Some(
                v.get("rescale_factor")
                    .and_then(Value::as_f64)
                    .unwrap_or(1.0 / 255.0),
            )
        } else {
            None
        };
        let triple = |k: &'static str, default: [f64; 3]| -> Result<[f64; 3], ProcessorError> {
            match v.get(k) {
                None | Some(Value::Null) => Ok(default),
                Some(Value::Array(a)) if a.len() == 3 => {
                    let mut out = [0.0; 3];
                    for (o, x) in out.iter_mut().zip(a) {
                        *o = x.as_f64().ok_or_else(|| ProcessorError::NotANumber {
                            key: k,
                            value: x.to_string(),
                        })?;
                    }
                    Ok(out)
                }
                Some(x) if x.is_number() => Ok([x.as_f64().unwrap_or(0.0); 3]),
                Some(x) => Err(ProcessorError::NotThree {
                    key: k,
                    value: x.to_string(),
                }),
            }
        };
        let normalize = if flag("do_normalize", true) {
            let (mean, std) = if qwen {
                CLIP_MEAN_STD
            } else {
                ([0.5; 3], [0.5; 3])
            };
            let mean = triple("image_mean", mean)?;
            let std = triple("image_std", std)?;
            if std.iter().any(|&s| s == 0.0 || !s.is_finite()) {
                return Err(ProcessorError::Std(std));
            }
            Some([mean, std])
        } else {
            None
        };
        let pan_and_scan = if flag("do_pan_and_scan", false) {
            let d = PanAndScan::DEFAULT;
            let count =
                |k: &'static str, default: usize| -> Result<usize, ProcessorError> {
                    match v.get(k) {
                        None | Some(Value::Null) => Ok(default),
                        Some(x) => x.as_u64().map(|n| n as usize).ok_or_else(|| {
                            ProcessorError::NotACount {
                                key: k,
                                value: x.to_string(),
                            }
                        }),
                    }
                };
            let min_crop = count("pan_and_scan_min_crop_size", d.min_crop)?;
            if min_crop == 0 {
                return Err(ProcessorError::MinCrop);
            }
            let min_ratio = match v.get("pan_and_scan_min_ratio_to_activate") {
                None | Some(Value::Null) => d.min_ratio,
                Some(x) => x.as_f64().ok_or_else(|| ProcessorError::NotANumber {
                    key: "pan_and_scan_min_ratio_to_activate",
                    value: x.to_string(),
                })?,
            };
            Some(PanAndScan {
                min_crop,
                max_crops: count("pan_and_scan_max_num_crops", d.max_crops)?,
                min_ratio,
            })
        } else {
            None
        };
        let tiles = match size_of("max_image_size")? {
            None => None,
            Some(Size::LongestEdge(side)) => Some(Tiles {
                side,
                split: flag("do_image_splitting", true),
            }),
            Some(_) => {
                return Err(ProcessorError::Size {
                    key: "max_image_size",
                    value: v["max_image_size"].to_string(),
                })
            }
        };
        Ok(ImageProcessor {
            resize,
            filter,
            crop,
            rescale,
            normalize,
            tiles,
            pan_and_scan,
        })
    }

    /// The model's input made from `img`: `[3, height, width]` f32 values, the 8-bit picture
    /// before rescaling, and the steps taken.
    pub fn prepare(&self, img: &Rgb) -> Prepared {
        let mut resizing = Resizing::new(self);
        read::Rows::begin(&mut resizing, img.width, img.height, &img.color);
        for row in img.data.chunks_exact(img.width * 3) {
            read::Rows::row(&mut resizing, row);
        }
        self.finish(resizing)
    }

    /// The model's input made from the picture file (or its bytes) `source` ([`decode`]'s
    /// formats and limits),
    /// as [`ImageProcessor::prepare`] makes it from the decoded picture, byte for byte. Each row
    /// is resized as it is decoded (a baseline JPEG or non-interlaced PNG is never held whole),
    /// so memory follows the model's input size (the picture's height × the resized width),
    /// not the file's pixel count.
    pub fn prepare_file(&self, source: &ImageSource) -> Result<Prepared, PixelsError> {
        self.prepare_until(source, &Cancel::new())
    }

    /// [`ImageProcessor::prepare_file`] that stops, with [`PixelsError::Cancelled`], once
    /// `cancel` is set: between rows, and for a JPEG between scans.
    pub fn prepare_until(
        &self,
        source: &ImageSource,
        cancel: &Cancel,
    ) -> Result<Prepared, PixelsError> {
        let mut resizing = Resizing::new(self);
        read::read(source, &mut resizing, cancel)?;
        Ok(self.finish(resizing))
    }

    /// The new size of a `w × h` picture, when it is resized.
    fn resized(&self, w: usize, h: usize) -> Option<(usize, usize)> {
        Some(match self.resize? {
            Size::Fixed { width, height } => (width, height),
            Size::ShortestEdge(s) => {
                // transformers' get_resize_output_image_size: the long side truncated.
                let (short, long) = if w <= h { (w, h) } else { (h, w) };
                let new_long = (s as f64 * long as f64 / short as f64) as usize;
                let new_long = new_long.clamp(1, MAX_INPUT_SIDE * 8);
                if w <= h {
                    (s, new_long)
                } else {
                    (new_long, s)
                }
            }
            Size::LongestEdge(s) => {
                let (w, h) = longest_edge(w, h, s);
                below(w, h, MAX_TILED_SIDE)
            }
            Size::Pixels {
                factor,
                min_pixels,
                max_pixels,
            } => {
                let (h, w) = smart_resize(h, w, factor, min_pixels, max_pixels);
                (
                    w.clamp(factor, MAX_INPUT_SIDE * 8),
                    h.clamp(factor, MAX_INPUT_SIDE * 8),
                )
            }
        })
    }

    /// `source` as a tiling processor makes it (Idefics3's and SmolVLM's, [`Tiles`]): resized
    /// as [`ImageProcessor::prepare_until`] resizes it, then (when it splits) resized again to
    /// whole tiles and cut into them row by row, and the whole picture resized to one tile
    /// last; or (when it does not split) resized to one tile. Each resize is Pillow's on the
    /// 8-bit picture, as transformers' PIL processor runs them; each frame is then rescaled
    /// and normalised. A processor without tiles gives the one frame `prepare_until` gives.
    pub fn prepare_tiles_until(
        &self,
        source: &ImageSource,
        cancel: &Cancel,
    ) -> Result<Tiled, PixelsError> {
        if let Some(pas) = self.pan_and_scan {
            return self.pan_and_scan(source, pas, cancel);
        }
        let whole = self.prepare_until(source, cancel)?;
        let Some(tiles) = self.tiles else {
            return Ok(Tiled {
                frames: vec![whole],
                tiles: [0, 0],
                whole_first: false,
            });
        };
        let t = tiles.side;
        let (w, h) = (whole.width, whole.height);
        let frame = |data: Vec<u8>, fw: usize, fh: usize, resized: (usize, usize)| {
            let mut steps = whole.steps.clone();
            steps.resize = Some(Resize {
                width: resized.0,
                height: resized.1,
                filter: self.filter.as_str(),
            });
            Prepared {
                pixels: self.normalized(&data),
                width: fw,
                height: fh,
                view: data,
                original: whole.original,
                steps,
            }
        };
        if !tiles.split {
            let data = resample::resize(&whole.view, w, h, t, t, self.filter);
            return Ok(Tiled {
                frames: vec![frame(data, t, t, (t, t))],
                tiles: [0, 0],
                whole_first: false,
            });
        }
        // resize_for_vision_encoder: each side up to a whole number of tiles.
        let aspect = w as f64 / h as f64;
        let (nw, nh) = if w >= h {
            let nw = w.div_ceil(t) * t;
            let nh = ((nw as f64 / aspect) as usize).div_ceil(t) * t;
            (nw, nh)
        } else {
            let nh = h.div_ceil(t) * t;
            let nw = ((nh as f64 * aspect) as usize).div_ceil(t) * t;
            (nw, nh)
        };
        let (nw, nh) = (nw.max(t), nh.max(t));
        let big = resample::resize(&whole.view, w, h, nw, nh, self.filter);
        if nw <= t && nh <= t {
            return Ok(Tiled {
                frames: vec![frame(big, t, t, (t, t))],
                tiles: [0, 0],
                whole_first: false,
            });
        }
        let (rows, cols) = (nh / t, nw / t);
        let mut frames = Vec::with_capacity(rows * cols + 1);
        for r in 0..rows {
            for c in 0..cols {
                let mut data = Vec::with_capacity(t * t * 3);
                for y in r * t..(r + 1) * t {
                    data.extend_from_slice(&big[(y * nw + c * t) * 3..][..t * 3]);
                }
                frames.push(frame(data, t, t, (nw, nh)));
            }
        }
        let global = resample::resize(&big, nw, nh, t, t, self.filter);
        frames.push(frame(global, t, t, (t, t)));
        Ok(Tiled {
            frames,
            tiles: [rows, cols],
            whole_first: false,
        })
    }

    /// `source` as Gemma 3's processor makes it with pan-and-scan: the whole picture, then
    /// (when it is long enough) its crops, each cut from the decoded 8-bit picture and prepared
    /// as the whole is (resized, rescaled, normalised).
    fn pan_and_scan(
        &self,
        source: &ImageSource,
        pas: PanAndScan,
        cancel: &Cancel,
    ) -> Result<Tiled, PixelsError> {
        let img = decode_source(source)?;
        let crops = pas.crops(img.width, img.height);
        let mut frames = vec![self.prepare(&img)];
        for &[x, y, w, h] in &crops {
            if cancel.is_cancelled() {
                return Err(PixelsError::Cancelled {
                    path: source.shown(),
                });
            }
            let mut data = Vec::with_capacity(w * h * 3);
            for row in y..y + h {
                data.extend_from_slice(&img.data[(row * img.width + x) * 3..][..w * 3]);
            }
            let mut frame = self.prepare(&Rgb {
                width: w,
                height: h,
                data,
                color: img.color.clone(),
            });
            frame.original = [img.width, img.height];
            frames.push(frame);
        }
        let tiles = match crops.len() {
            0 => [0, 0],
            n if img.width >= img.height => [1, n],
            n => [n, 1],
        };
        Ok(Tiled {
            frames,
            tiles,
            whole_first: true,
        })
    }

    /// `data` (8-bit RGB, row-major) rescaled and normalised, channel-first.
    fn normalized(&self, data: &[u8]) -> Vec<f32> {
        let n = data.len() / 3;
        let mut pixels = vec![0f32; 3 * n];
        for (i, px) in data.chunks_exact(3).enumerate() {
            for c in 0..3 {
                // As numpy does it: rescale in float64 then to float32, normalise in float32.
                let mut v = px[c] as f64;
                if let Some(s) = self.rescale {
                    v *= s;
                }
                let mut v = v as f32;
                if let Some([mean, std]) = self.normalize {
                    v = (v - mean[c] as f32) / std[c] as f32;
                }
                pixels[c * n + i] = v;
            }
        }
        pixels
    }

    /// Crop, rescale and normalise what the resize made.
    fn finish(&self, resizing: Resizing) -> Prepared {
        let Resizing {
            rows,
            original,
            size: (mut w, mut h),
            color,
            ..
        } = resizing;
        let mut data = match rows {
            Some(rows) => rows.finish(),
            None => Vec::new(),
        };
        let mut steps = Preprocessing {
            color,
            resize: None,
            crop: None,
            rescale: self.rescale,
            normalize: self.normalize,
            positions_from: None,
        };
        if self.resize.is_some() {
            steps.resize = Some(Resize {
                width: w,
                height: h,
                filter: self.filter.as_str(),
            });
        }
        if let Some([cw, ch]) = self.crop {
            data = center_crop(&data, w, h, cw, ch);
            (w, h) = (cw, ch);
            steps.crop = Some([cw, ch]);
        }
        Prepared {
            pixels: self.normalized(&data),
            width: w,
            height: h,
            view: data,
            original,
            steps,
        }
    }
}

/// The largest side Idefics3's processors resize a picture to (`MAX_IMAGE_SIZE`).
const MAX_TILED_SIDE: usize = 4096;

/// Idefics3's `_resize_output_size_rescale_to_max_len`: the longer side becomes `max`, the
/// other follows the aspect ratio (truncated, then up to an even number), at least 1.
fn longest_edge(w: usize, h: usize, max: usize) -> (usize, usize) {
    let aspect = w as f64 / h as f64;
    let (w, h) = if w >= h {
        let mut h = (max as f64 / aspect) as usize;
        if !h.is_multiple_of(2) {
            h += 1;
        }
        (max, h)
    } else {
        let mut w = (max as f64 * aspect) as usize;
        if !w.is_multiple_of(2) {
            w += 1;
        }
        (w, max)
    };
    (w.max(1), h.max(1))
}

/// Idefics3's `_resize_output_size_scale_below_upper_bound`: the longer side at most `max`.
fn below(w: usize, h: usize, max: usize) -> (usize, usize) {
    let aspect = w as f64 / h as f64;
    let (w, h) = if w >= h && w > max {
        (max, (max as f64 / aspect) as usize)
    } else if h > w && h > max {
        ((max as f64 * aspect) as usize, max)
    } else {
        (w, h)
    };
    (w.max(1), h.max(1))
}

/// The resize of a model's input as the decoder hands over rows
/// ([`ImageProcessor::prepare_file`]).
struct Resizing<'a> {
    processor: &'a ImageProcessor,
    /// The resize under way (the picture's own size when the processor does not resize).
    rows: Option<resample::RowResize>,
    /// The picture's `[width, height]`.
    original: [usize; 2],
    /// The size after the resize.
    size: (usize, usize),
    color: String,
}

impl<'a> Resizing<'a> {
    fn new(processor: &'a ImageProcessor) -> Self {
        Resizing {
            processor,
            rows: None,
            original: [0, 0],
            size: (0, 0),
            color: String::new(),
        }
    }
}

impl read::Rows for Resizing<'_> {
    fn begin(&mut self, width: usize, height: usize, color: &str) {
        let (nw, nh) = self
            .processor
            .resized(width, height)
            .unwrap_or((width, height));
        self.rows = Some(resample::RowResize::new(
            width,
            height,
            nw,
            nh,
            self.processor.filter,
        ));
        self.original = [width, height];
        self.size = (nw, nh);
        self.color = color.to_string();
    }

    fn row(&mut self, rgb: &[u8]) {
        if let Some(rows) = self.rows.as_mut() {
            rows.push(rgb);
        }
    }
}

/// transformers' `center_crop`: the centre `cw × ch` (top/left rounded down), padded with
/// zeros where the image is smaller.
fn center_crop(data: &[u8], w: usize, h: usize, cw: usize, ch: usize) -> Vec<u8> {
    let mut out = vec![0u8; cw * ch * 3];
    if cw <= w && ch <= h {
        let (top, left) = ((h - ch) / 2, (w - cw) / 2);
        for y in 0..ch {
            out[y * cw * 3..][..cw * 3]
                .copy_from_slice(&data[((top + y) * w + left) * 3..][..cw * 3]);
        }
        return out;
    }
    // Pad to at least the crop, the image centred (ceil), then crop.
    let (nw, nh) = (cw.max(w), ch.max(h));
    let (pt, pl) = ((nh - h).div_ceil(2), (nw - w).div_ceil(2));
    let mut padded = vec![0u8; nw * nh * 3];
    for y in 0..h {
        padded[((pt + y) * nw + pl) * 3..][..w * 3].copy_from_slice(&data[y * w * 3..][..w * 3]);
    }
    let (top, left) = ((nh - ch) / 2, (nw - cw) / 2);
    for y in 0..ch {
        out[y * cw * 3..][..cw * 3]
            .copy_from_slice(&padded[((top + y) * nw + left) * 3..][..cw * 3]);
    }
    out
}

/// A model's input made from a picture ([`ImageProcessor::prepare`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Prepared {
    /// `[3, height, width]`, channel-first.
    pub pixels: Vec<f32>,
    /// Width.
    pub width: usize,
    /// Height.
    pub height: usize,
    /// The 8-bit RGB picture after resize and crop, `[height, width, 3]`.
    pub view: Vec<u8>,
    /// The picture as given, `[width, height]`.
    pub original: [usize; 2],
    /// The steps taken.
    pub steps: Preprocessing,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processor_defaults_and_refusals() {
        let p = ImageProcessor::parse(r#"{"size": {"height": 224, "width": 224}}"#).unwrap();
        assert_eq!(
            p.resize,
            Some(Size::Fixed {
                width: 224,
                height: 224
            })
        );
        assert_eq!(p.filter, Filter::Bilinear);
        assert_eq!(p.crop, None);
        assert_eq!(p.normalize, Some([[0.5; 3], [0.5; 3]]));
        let e = ImageProcessor::parse(r#"{"size": {"height": 0, "width": 3}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("height 0"), "{e}");
        let e = ImageProcessor::parse(r#"{"resample": 9, "size": 3}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("resample 9"), "{e}");
        let e = ImageProcessor::parse(r#"{"image_std": [0, 1, 1], "size": 3}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("zero"), "{e}");
        // Pan-and-scan: Gemma3Processor's defaults where the file says null, its own values
        // otherwise, and settings that cannot be refused in one line.
        let pas = |text: &str| ImageProcessor::parse(text).ok().map(|p| p.pan_and_scan);
        assert_eq!(pas(r#"{"do_pan_and_scan": null, "size": 3}"#), Some(None));
        assert_eq!(
            pas(r#"{"do_pan_and_scan": true, "pan_and_scan_min_crop_size": null, "size": 3}"#),
            Some(Some(PanAndScan::DEFAULT))
        );
        assert_eq!(
            pas(
                r#"{"do_pan_and_scan": true, "pan_and_scan_min_crop_size": 16,
                    "pan_and_scan_max_num_crops": 3, "pan_and_scan_min_ratio_to_activate": 1.5,
                    "size": 3}"#
            ),
            Some(Some(PanAndScan {
                min_crop: 16,
                max_crops: 3,
                min_ratio: 1.5
            }))
        );
        for (text, says) in [
            (
                r#"{"do_pan_and_scan": true, "pan_and_scan_min_crop_size": 0, "size": 3}"#,
                "is 0",
            ),
            (
                r#"{"do_pan_and_scan": true, "pan_and_scan_max_num_crops": -1, "size": 3}"#,
                "-1 is not a whole number",
            ),
            (
                r#"{"do_pan_and_scan": true, "pan_and_scan_min_ratio_to_activate": "x", "size": 3}"#,
                "is not a number",
            ),
        ] {
            let e = ImageProcessor::parse(text).unwrap_err().to_string();
            assert!(e.contains(says) && !e.contains('\n'), "{e}");
        }
    }

    /// The crops Gemma3ImageProcessor's `pan_and_scan` cuts, for every size and both settings
    /// the reference records (`make_gemma3_vlm.py --variant pan-and-scan`).
    #[test]
    fn pan_and_scan_cuts_the_crops_transformers_cuts() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/reference/tiny-gemma3-vlm-pas.json");
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let cases = manifest["pan_and_scan_boxes"].as_array().unwrap();
        assert!(cases.len() >= 20);
        let mut cut = 0;
        for case in cases {
            let n = |v: &serde_json::Value| v.as_u64().unwrap() as usize;
            let s = &case["settings"];
            let pas = PanAndScan {
                min_crop: n(&s["pan_and_scan_min_crop_size"]),
                max_crops: n(&s["pan_and_scan_max_num_crops"]),
                min_ratio: s["pan_and_scan_min_ratio_to_activate"].as_f64().unwrap(),
            };
            let (w, h) = (n(&case["size"][0]), n(&case["size"][1]));
            let want: Vec<[usize; 4]> = case["boxes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| [n(&b[0]), n(&b[1]), n(&b[2]), n(&b[3])])
                .collect();
            assert_eq!(pas.crops(w, h), want, "{w}x{h} under {pas:?}");
            cut += usize::from(!want.is_empty());
        }
        // Both kinds are among them: pictures cut and pictures left whole.
        assert!(cut > 5 && cut < cases.len());
    }

    #[test]
    fn qwen_s_smart_resize_is_transformers_with_python_s_rounding() {
        // (height, width, min, max) -> transformers' smart_resize(factor 28), printed by
        // transformers 5.24: the round, min and max branches, and 1.5 and 2.5 rounding to even.
        for ((h, w, min, max), want) in [
            ((64, 80, 3136, 6272), (56, 84)),
            ((37, 45, 3136, 6272), (56, 84)),
            ((42, 70, 3136, 1003520), (56, 56)),
            ((1000, 3000, 3136, 200704), (252, 756)),
            ((5, 900, 3136, 1003520), (28, 756)),
        ] {
            assert_eq!(smart_resize(h, w, 28, min, max), want, "{h}x{w}");
        }
        let p = ImageProcessor::parse(
            r#"{"min_pixels": 3136, "max_pixels": 6272, "patch_size": 14, "merge_size": 2,
                "image_processor_type": "Qwen2VLImageProcessor"}"#,
        )
        .unwrap();
        assert_eq!(p.filter, Filter::Bicubic);
        assert_eq!(p.normalize, Some([CLIP_MEAN_STD.0, CLIP_MEAN_STD.1]));
        assert_eq!(p.resized(80, 64), Some((84, 56)));
        let sized = ImageProcessor::parse(
            r#"{"size": {"shortest_edge": 3136, "longest_edge": 6272}, "merge_size": 2}"#,
        )
        .unwrap();
        assert_eq!(sized.resize, p.resize);
        assert!(ImageProcessor::parse(
            r#"{"min_pixels": 9000, "max_pixels": 6272, "merge_size": 2}"#
        )
        .is_err());
    }

    #[test]
    fn shortest_edge_keeps_the_aspect_and_crop_pads_small_images() {
        let p = ImageProcessor::parse(
            r#"{"size": {"shortest_edge": 4}, "do_center_crop": true, "crop_size": {"height": 2, "width": 6}, "do_normalize": false, "do_rescale": false}"#,
        )
        .unwrap();
        let img = Rgb::from_array(&[100; 10 * 5 * 3], 5, 10, 3).unwrap();
        let out = p.prepare(&img);
        assert_eq!(
            out.steps.resize.as_ref().map(|r| (r.width, r.height)),
            Some((8, 4))
        );
        assert_eq!((out.width, out.height), (6, 2));
        assert!(out.pixels.iter().all(|&v| v == 100.0));
        // A crop wider than the image pads with zeros on both sides.
        let padded = center_crop(&[9; 2 * 2 * 3], 2, 2, 4, 2);
        assert_eq!(&padded[..3], &[0, 0, 0]);
        assert_eq!(&padded[3..6], &[9, 9, 9]);
    }

    #[test]
    fn bytes_in_memory_decode_as_their_file_and_are_named_by_their_name() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/images");
        let p = ImageProcessor::parse(r#"{"size": {"height": 24, "width": 20}, "resample": 3}"#)
            .unwrap();
        for name in [
            "wide45x37.jpg",
            "wide45x37.png",
            "gray45x37.png",
            "big80x64.png",
        ] {
            let file = ImageSource::File(dir.join(name));
            let bytes = ImageSource::Bytes {
                name: "upload".into(),
                bytes: std::fs::read(dir.join(name)).unwrap().into(),
            };
            assert_eq!(
                decode_source(&file).unwrap(),
                decode_source(&bytes).unwrap()
            );
            // Each row resized as it is decoded gives the resize of the whole picture.
            let streamed = p.prepare_file(&bytes).unwrap();
            assert_eq!(
                streamed,
                p.prepare(&decode_source(&file).unwrap()),
                "{name}"
            );
        }
        let junk = ImageSource::Bytes {
            name: "upload".into(),
            bytes: b"GIF89a...".to_vec().into(),
        };
        let e = decode_source(&junk).unwrap_err().to_string();
        assert!(e.starts_with("upload is not a readable image (Gif"), "{e}");
    }
}
