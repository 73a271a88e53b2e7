//! Picture files decoded row by row: each row reaches a [`Rows`] as 8-bit RGB as soon as it
//! is decoded, so that the model's resize ([`super::resample::RowResize`]) can shrink it at
//! once and a photo of many megapixels never has to be held whole.
//!
//! - **JPEG** through libjpeg-turbo ([`super::jpeg`]): the decoder PIL uses, so the pixels are
//!   PIL's exactly (islow IDCT, fancy upsampling), CMYK and YCCK included; its scans and their
//!   work bounded. A baseline JPEG streams; a progressive one keeps its coefficients (libjpeg's
//!   own buffer, 2 bytes a sample) until its last scan.
//! - **PNG** through the `png` crate: non-interlaced files stream; Adam7-interlaced ones are
//!   decoded whole. Palettes, low bit depths and `tRNS` are expanded; 16-bit samples keep their
//!   high byte, as PIL's `RGB;16B` and `RGBA;16B` modes read them, except 16-bit gray, which PIL
//!   opens as `I;16` and clips to 0–255. Its colour profile and text chunks are checked first
//!   as PIL checks them ([`super::png_chunks`]), and otherwise skipped.
//! - **WebP** through the `image` crate, whole (its decoder has no row interface).
//! - **Pixels in memory** ([`super::PixelRows`]) are read a row at a time, as a file's.
//!
//! Alpha (RGBA, gray + alpha, a palette with transparency) is composited onto white, as
//! transformers' `convert_to_rgb` does. Every decoder runs under the size caps of the parent
//! module, checked on the header before any pixel is decoded, and stops between rows (JPEG:
//! also between scans) once its [`Cancel`] flag is set.

use std::io::{BufRead, BufReader, Cursor, Seek};
use std::path::Path;

use super::{check_size, ImageSource, PixelsError, Rgb, MAX_DECODE_BYTES, MAX_SIDE};
use crate::cancel::Cancel;

/// A reader of a picture's bytes: a file's, or bytes in memory.
pub(super) trait Input: BufRead + Seek {}
impl<T: BufRead + Seek> Input for T {}

/// A fresh reader of `source` from its first byte.
pub(super) fn open<'a>(
    source: &'a ImageSource,
    path: &Path,
) -> Result<Box<dyn Input + 'a>, PixelsError> {
    Ok(match source {
        ImageSource::File(file) => {
            Box::new(BufReader::new(std::fs::File::open(file).map_err(|e| {
                PixelsError::Read {
                    path: path.to_path_buf(),
                    source: e,
                }
            })?))
        }
        ImageSource::Bytes { bytes, .. } => Box::new(Cursor::new(&bytes[..])),
        // Pixels are read by rows ([`pixel_rows`]), never as a file.
        ImageSource::Pixels { .. } => Box::new(Cursor::new(&[][..])),
    })
}

/// Where decoded rows go.
pub(super) trait Rows {
    /// The picture is `width × height` pixels of colour type `color` (`rgb8`, `l8`, `rgba8`,
    /// …); called once, before the first row.
    fn begin(&mut self, width: usize, height: usize, color: &str);
    /// The next row, top to bottom: `width × 3` bytes of RGB.
    fn row(&mut self, rgb: &[u8]);
}

/// Every row of a picture, kept: [`super::decode`]'s sink.
#[derive(Default)]
pub(super) struct Whole(pub Rgb);

impl Rows for Whole {
    fn begin(&mut self, width: usize, height: usize, color: &str) {
        self.0 = Rgb {
            width,
            height,
            data: Vec::with_capacity(width * height * 3),
            color: color.to_string(),
        };
    }

    fn row(&mut self, rgb: &[u8]) {
        self.0.data.extend_from_slice(rgb);
    }
}

/// Decode `source` (PNG, JPEG or WebP, by content; or pixels in memory) into `rows`, until
/// `cancel` is set.
pub(super) fn read(
    source: &ImageSource,
    rows: &mut dyn Rows,
    cancel: &Cancel,
) -> Result<(), PixelsError> {
    let path = source.shown();
    let path = path.as_path();
    if cancel.is_cancelled() {
        return Err(PixelsError::Cancelled {
            path: path.to_path_buf(),
        });
    }
    match source {
        ImageSource::Pixels { pixels, .. } => return pixel_rows(pixels, path, rows, cancel),
        ImageSource::File(file) => {
            let meta = std::fs::metadata(file).map_err(|source| PixelsError::Read {
                path: path.to_path_buf(),
                source,
            })?;
            if !meta.is_file() {
                return Err(PixelsError::NotAFile {
                    path: path.to_path_buf(),
                });
            }
        }
        ImageSource::Bytes { .. } => {}
    }
    let mut head = [0u8; 32];
    let n = read_up_to(&mut open(source, path)?, &mut head).map_err(|e| PixelsError::Read {
        path: path.to_path_buf(),
        source: e,
    })?;
    let head = &head[..n];
    match image::guess_format(head) {
        Ok(image::ImageFormat::Jpeg) => super::jpeg::decode(source, path, rows, cancel),
        Ok(image::ImageFormat::Png) => png(source, path, rows, cancel),
        Ok(image::ImageFormat::WebP) => webp(source, path, rows),
        Ok(format) => Err(corrupt(path, Corruption::Format(format))),
        Err(_) => Err(corrupt(path, Corruption::UnknownFormat)),
    }
}

/// Pixels in memory, a row at a time.
fn pixel_rows(
    pixels: &super::SharedPixels,
    path: &Path,
    rows: &mut dyn Rows,
    cancel: &Cancel,
) -> Result<(), PixelsError> {
    let (w, h) = pixels.0.size();
    super::check_array_size(w, h)?;
    rows.begin(w, h, &pixels.0.color());
    let mut rgb = Vec::with_capacity(w * 3);
    for y in 0..h {
        if cancel.is_cancelled() {
            return Err(PixelsError::Cancelled {
                path: path.to_path_buf(),
            });
        }
        pixels.0.row(y, &mut rgb).map_err(PixelsError::Rows)?;
        if rgb.len() != w * 3 {
            return Err(super::ArrayProblem::Row {
                y,
                len: rgb.len(),
                width: w,
            }
            .into());
        }
        rows.row(&rgb);
    }
    Ok(())
}

fn read_up_to(file: &mut dyn Input, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Why a picture file is not one attnviz decodes (displays inside `FILE is not a readable
/// image (…)`).
#[derive(Debug, thiserror::Error)]
pub enum Corruption {
    /// A format the `image` crate recognises but attnviz does not read (GIF, BMP, TIFF, …).
    #[error("{0:?} files are not read")]
    Format(image::ImageFormat),
    /// Bytes of no known picture format.
    #[error("unknown format")]
    UnknownFormat,
    /// A PNG whose rows stop before its height says.
    #[error("the file ends before its last row")]
    EndsBeforeLastRow,
    /// A JPEG that ends before its image data does (libjpeg's warning, which PIL refuses as
    /// "image file is truncated").
    #[error("the file ends before its image data does (truncated)")]
    Truncated,
    /// The `png` crate cannot decode it: its own error (the external cause).
    #[error("{0}")]
    Png(#[source] png::DecodingError),
    /// The `image` crate cannot decode it (WebP): its own error (the external cause).
    #[error("{0}")]
    Image(#[source] image::ImageError),
    /// The `mozjpeg` crate cannot decode it: its own error (the external cause).
    #[error("{0}")]
    Jpeg(#[source] std::io::Error),
    /// libjpeg stopped on an error.
    #[error("{cause}")]
    Libjpeg {
        /// libjpeg's own message (the external cause).
        cause: String,
    },
}

pub(super) fn corrupt(path: &Path, problem: Corruption) -> PixelsError {
    PixelsError::Corrupt {
        path: path.to_path_buf(),
        problem,
    }
}

/// Blend RGBA (or gray + alpha) pixels onto white, as transformers' `convert_to_rgb` does.
fn on_white(c: u8, a: u8) -> u8 {
    let (c, a) = (c as u32, a as u32);
    ((c * a + 255 * (255 - a) + 127) / 255) as u8
}

/// One row of `channels` samples per pixel (1 gray, 2 gray + alpha, 3 RGB, 4 RGBA) as RGB
/// into `out`, alpha composited onto white as transformers' `convert_to_rgb` does.
pub fn to_rgb(row: &[u8], channels: usize, out: &mut Vec<u8>) {
    out.clear();
    match channels {
        1 => out.extend(row.iter().flat_map(|&v| [v, v, v])),
        2 => out.extend(row.chunks_exact(2).flat_map(|p| {
            let v = on_white(p[0], p[1]);
            [v, v, v]
        })),
        3 => out.extend_from_slice(row),
        _ => out.extend(row.chunks_exact(4).flat_map(|p| {
            [
                on_white(p[0], p[3]),
                on_white(p[1], p[3]),
                on_white(p[2], p[3]),
            ]
        })),
    }
}

// ---------------------------------------------------------------------------------------------
// PNG

fn png(
    source: &ImageSource,
    path: &Path,
    rows: &mut dyn Rows,
    cancel: &Cancel,
) -> Result<(), PixelsError> {
    // The colour profile and text chunks, as PIL reads them: refused where PIL refuses them,
    // then skipped (neither changes the pixels PIL hands over).
    super::png_chunks::check(&mut open(source, path)?).map_err(|e| match e {
        super::png_chunks::ChunkError::Refused(refusal) => PixelsError::Chunk {
            path: path.to_path_buf(),
            refusal,
        },
        super::png_chunks::ChunkError::Io(source) => PixelsError::Read {
            path: path.to_path_buf(),
            source,
        },
    })?;
    let mut decoder = png::Decoder::new_with_limits(
        open(source, path)?,
        png::Limits {
            bytes: MAX_DECODE_BYTES as usize,
        },
    );
    decoder.set_ignore_iccp_chunk(true);
    decoder.set_ignore_text_chunk(true);
    // PIL opens 16-bit gray as mode `I;16` and clips it to 0–255 on the way to RGB (a value of
    // 1000 is white, not 4); every other 16-bit type keeps its high byte (`RGB;16B`, …).
    let gray16 = {
        let mut probe = png::Decoder::new(open(source, path)?);
        probe.set_ignore_iccp_chunk(true);
        probe.set_ignore_text_chunk(true);
        let probe = probe.read_header_info().map_err(|e| png_error(path, e))?;
        probe.color_type == png::ColorType::Grayscale && probe.bit_depth == png::BitDepth::Sixteen
    };
    decoder.set_transformations(if gray16 {
        png::Transformations::EXPAND
    } else {
        png::Transformations::EXPAND | png::Transformations::STRIP_16
    });
    let mut reader = decoder.read_info().map_err(|e| png_error(path, e))?;
    let info = reader.info();
    let (w, h) = (info.width as u64, info.height as u64);
    if info.animation_control.is_some() {
        return Err(PixelsError::Animated {
            path: path.to_path_buf(),
            format: "APNG",
        });
    }
    check_size(path, w, h)?;
    let deep = info.bit_depth == png::BitDepth::Sixteen;
    let interlaced = info.interlaced;
    let (color, _) = reader.output_color_type();
    let (channels, name) = match color {
        png::ColorType::Grayscale => (1, "l"),
        png::ColorType::GrayscaleAlpha => (2, "la"),
        png::ColorType::Rgb | png::ColorType::Indexed => (3, "rgb"),
        png::ColorType::Rgba => (4, "rgba"),
    };
    let (w, h) = (w as usize, h as usize);
    rows.begin(w, h, &format!("{name}{}", if deep { 16 } else { 8 }));
    let mut rgb = Vec::with_capacity(w * 3);
    let mut clipped = Vec::new();
    let mut convert = |row: &[u8], rgb: &mut Vec<u8>| {
        if gray16 {
            // Big-endian samples (a `tRNS` gray made an alpha sample beside each).
            clipped.clear();
            clipped.extend(
                row.chunks_exact(2)
                    .map(|s| u16::from_be_bytes([s[0], s[1]]).min(255) as u8),
            );
            if channels == 2 {
                // The alpha samples: their high byte.
                for (i, s) in row.chunks_exact(4).enumerate() {
                    clipped[2 * i + 1] = s[2];
                }
            }
            to_rgb(&clipped[..w * channels], channels, rgb);
        } else {
            to_rgb(&row[..w * channels], channels, rgb);
        }
    };
    if interlaced {
        // Adam7 hands rows over pass by pass: the whole frame first.
        let mut frame = vec![0u8; reader.output_buffer_size()];
        let out = reader
            .next_frame(&mut frame)
            .map_err(|e| png_error(path, e))?;
        for row in frame[..out.buffer_size()]
            .chunks_exact(out.line_size)
            .take(h)
        {
            convert(row, &mut rgb);
            rows.row(&rgb);
        }
        return Ok(());
    }
    for _ in 0..h {
        if cancel.is_cancelled() {
            return Err(PixelsError::Cancelled {
                path: path.to_path_buf(),
            });
        }
        let row = reader
            .next_row()
            .map_err(|e| png_error(path, e))?
            .ok_or_else(|| corrupt(path, Corruption::EndsBeforeLastRow))?;
        convert(row.data(), &mut rgb);
        rows.row(&rgb);
    }
    Ok(())
}

fn png_error(path: &Path, e: png::DecodingError) -> PixelsError {
    match e {
        png::DecodingError::LimitsExceeded => PixelsError::TooLarge {
            path: path.to_path_buf(),
            width: 0,
            height: 0,
        },
        e => corrupt(path, Corruption::Png(e)),
    }
}

// ---------------------------------------------------------------------------------------------
// WebP (whole: the `image` crate's decoder has no row interface)

fn webp(source: &ImageSource, path: &Path, rows: &mut dyn Rows) -> Result<(), PixelsError> {
    let format = image::ImageFormat::WebP;
    let image_error = |e: image::ImageError| match e {
        image::ImageError::Limits(_) => PixelsError::TooLarge {
            path: path.to_path_buf(),
            width: 0,
            height: 0,
        },
        e => corrupt(path, Corruption::Image(e)),
    };
    let open = || open(source, path);
    let dec = image::codecs::webp::WebPDecoder::new(open()?).map_err(image_error)?;
    if dec.has_animation() {
        return Err(PixelsError::Animated {
            path: path.to_path_buf(),
            format: "animated WebP",
        });
    }
    let mut reader = image::io::Reader::with_format(open()?, format);
    let (w, h) = reader.into_dimensions().map_err(image_error)?;
    check_size(path, w as u64, h as u64)?;
    reader = image::io::Reader::with_format(open()?, format);
    let mut limits = image::io::Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    reader.limits(limits);
    let img = reader.decode().map_err(image_error)?;
    let color = format!("{:?}", img.color()).to_lowercase();
    let (channels, data) = match img {
        image::DynamicImage::ImageRgb8(rgb) => (3, rgb.into_raw()),
        image::DynamicImage::ImageRgba8(rgba) => (4, rgba.into_raw()),
        image::DynamicImage::ImageLumaA8(la) => (2, la.into_raw()),
        image::DynamicImage::ImageLuma8(l) => (1, l.into_raw()),
        other => (3, other.to_rgb8().into_raw()),
    };
    let (w, h) = (w as usize, h as usize);
    rows.begin(w, h, &color);
    let mut rgb = Vec::with_capacity(w * 3);
    for row in data.chunks_exact(w * channels) {
        to_rgb(row, channels, &mut rgb);
        rows.row(&rgb);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pixels::{decode_source, ImageSource};
    use std::path::PathBuf;

    /// Each problem shows the sentence `PixelsError::Corrupt` carried before it was typed (the
    /// old code is quoted above each).
    #[test]
    fn problems_read_as_the_sentences_they_replace() {
        let shown = |problem| corrupt(Path::new("cat.gif"), problem).to_string();
        let old = |reason: &str| {
            // format!("{} is not a readable image ({reason}); give a PNG, JPEG or WebP file")
            format!("cat.gif is not a readable image ({reason}); give a PNG, JPEG or WebP file")
        };
        // format!("{f:?} files are not read")
        assert_eq!(
            shown(Corruption::Format(image::ImageFormat::Gif)),
            old("Gif files are not read")
        );
        // "unknown format"
        assert_eq!(shown(Corruption::UnknownFormat), old("unknown format"));
        // "the file ends before its last row"
        assert_eq!(
            shown(Corruption::EndsBeforeLastRow),
            old("the file ends before its last row")
        );
        // "the file ends before its image data does (truncated)"
        assert_eq!(
            shown(Corruption::Truncated),
            old("the file ends before its image data does (truncated)")
        );
        // jpeg_message(cinfo): libjpeg's text as it is
        assert_eq!(
            shown(Corruption::Libjpeg {
                cause: "Bogus marker length".into()
            }),
            old("Bogus marker length")
        );
        // e.to_string() of the decoder crates' errors
        let e = std::io::Error::other("reader failed");
        assert_eq!(shown(Corruption::Jpeg(e)), old("reader failed"));
        let e = png::DecodingError::LimitsExceeded;
        let text = e.to_string();
        assert_eq!(shown(Corruption::Png(e)), old(&text));
        let e = image::ImageError::IoError(std::io::Error::other("short read"));
        assert_eq!(shown(Corruption::Image(e)), old("short read"));
    }

    fn decode(bytes: Vec<u8>) -> PixelsError {
        let source = ImageSource::Bytes {
            name: "upload".into(),
            bytes: bytes.into(),
        };
        decode_source(&source).expect_err("a broken picture")
    }

    fn fixture(name: &str) -> Vec<u8> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/images");
        std::fs::read(dir.join(name)).unwrap()
    }

    #[test]
    fn the_decoders_say_what_they_found() {
        let e = decode(b"GIF89a...".to_vec());
        assert!(
            matches!(
                e,
                PixelsError::Corrupt {
                    problem: Corruption::Format(image::ImageFormat::Gif),
                    ..
                }
            ),
            "{e:?}"
        );
        let e = decode(b"no picture at all".to_vec());
        assert!(
            matches!(
                e,
                PixelsError::Corrupt {
                    problem: Corruption::UnknownFormat,
                    ..
                }
            ),
            "{e:?}"
        );
        // A baseline JPEG cut in its scan (which starts at byte 609 of 1841).
        let jpeg = fixture("wide45x37.jpg");
        let e = decode(jpeg[..1200].to_vec());
        assert!(
            matches!(
                e,
                PixelsError::Corrupt {
                    problem: Corruption::Truncated,
                    ..
                }
            ),
            "{e:?}"
        );
        // Its frame header (at byte 158) with a length of 0: libjpeg's own error.
        let mut bad = jpeg.clone();
        bad[160..162].copy_from_slice(&[0, 0]);
        let e = decode(bad);
        assert!(
            matches!(
                &e,
                PixelsError::Corrupt {
                    problem: Corruption::Libjpeg { cause },
                    ..
                } if cause == "Bogus marker length"
            ),
            "{e:?}"
        );
        // A PNG cut in its pixel data: the png crate's error.
        let png = fixture("wide45x37.png");
        let e = decode(png[..png.len() / 2].to_vec());
        assert!(
            matches!(
                e,
                PixelsError::Corrupt {
                    problem: Corruption::Png(png::DecodingError::IoError(_)),
                    ..
                }
            ),
            "{e:?}"
        );
    }
}
