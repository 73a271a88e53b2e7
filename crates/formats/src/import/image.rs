//! A vision model's `image` section of attnviz's JSON export (`docs/json.md`) read back: the
//! patch grid, what each token is, the preprocessing, the layers' token norms, the pooling head
//! (SigLIP) and the picture the model saw (`view_png`), so that `render` draws the same views on
//! the picture as the run did. Every size is checked against the attention it comes with, and
//! the picture is decoded only at the size the section states, which is bounded.

use base64::Engine;

use crate::attention::image::{Cell, ImageInput, Pooling, Preprocessing, Resize, Windows};
use crate::doc::image::ImageDoc;

/// The largest side of the picture a section may state: far above any model's input
/// (ViTs run at 224–518), and bounding the decode at 3 × 4096² bytes.
const MAX_SIDE: usize = 4096;

/// What does not fit in a document's image section (displays after the file's name).
#[derive(Debug, thiserror::Error)]
pub enum ImageSectionError {
    /// Windows that are not one flag per layer, or of no patch.
    #[error("its image's windows are not one flag per captured layer ({layers}) with a side of at least 1 patch")]
    Windows {
        /// The captured layers.
        layers: usize,
    },
    /// An input size out of range.
    #[error("its image's input is {width}×{height} pixels (1 to {MAX_SIDE} a side)")]
    InputSize {
        /// Its width.
        width: usize,
        /// Its height.
        height: usize,
    },
    /// Patches that do not fit the input.
    #[error(
        "its image has a {rows}×{cols} grid of {patch}-pixel patches over a {width}×{height} input"
    )]
    Patches {
        /// Grid rows.
        rows: usize,
        /// Grid columns.
        cols: usize,
        /// The patch size.
        patch: usize,
        /// The input's width.
        width: usize,
        /// The input's height.
        height: usize,
    },
    /// A grid other than the input's in patches.
    #[error("its image has a {rows}×{cols} grid, but its {width}×{height} input in {patch}-pixel patches makes {}×{}", .height / .patch, .width / .patch)]
    Grid {
        /// Grid rows.
        rows: usize,
        /// Grid columns.
        cols: usize,
        /// The patch size.
        patch: usize,
        /// The input's width.
        width: usize,
        /// The input's height.
        height: usize,
    },
    /// Another number of cells than tokens.
    #[error("its image lists {cells} cells for {tokens} tokens; give one cell per token")]
    Cells {
        /// Cells listed.
        cells: usize,
        /// Tokens.
        tokens: usize,
    },
    /// A patch outside the grid.
    #[error("its image has a patch {row},{col} outside its {rows}×{cols} grid")]
    PatchOutside {
        /// The patch's row.
        row: usize,
        /// Its column.
        col: usize,
        /// Grid rows.
        rows: usize,
        /// Grid columns.
        cols: usize,
    },
    /// Norms of another shape than layers × tokens.
    #[error("its image's norms are not [layers][tokens] ({layers} × {tokens})")]
    Norms {
        /// Layers.
        layers: usize,
        /// Tokens.
        tokens: usize,
    },
    /// Pooling weights of another shape, or not finite.
    #[error("its image's pooling weights are not [heads][tokens] ({heads} × {tokens}) of finite numbers")]
    Pooling {
        /// Heads stated.
        heads: usize,
        /// Tokens.
        tokens: usize,
    },
    /// A resize filter attnviz does not write.
    #[error("its image was resized with `{0}`, not nearest, bilinear, bicubic or lanczos")]
    Filter(String),
    /// A view that is not base64.
    #[error("its image's view_png is not base64: {0}")]
    ViewBase64(#[source] base64::DecodeError),
    /// A view that is not a PNG.
    #[error("its image's view_png is not a PNG: {0}")]
    ViewPng(#[source] png::DecodingError),
    /// A view of another size than the input.
    #[error("its image's view_png is {view_width}×{view_height} pixels, but the model's input was {width}×{height}")]
    ViewSize {
        /// The view's width.
        view_width: usize,
        /// The view's height.
        view_height: usize,
        /// The input's width.
        width: usize,
        /// The input's height.
        height: usize,
    },
    /// A view that is not 8-bit RGB.
    #[error("its image's view_png is not 8-bit RGB")]
    ViewColor,
    /// A view whose pixels cannot be decoded.
    #[error("its image's view_png is damaged: {0}")]
    ViewDamaged(#[source] png::DecodingError),
}

/// `image` as the views read it, for attention over `tokens` tokens in `layers` captured
/// layers; an error names what does not fit.
pub(super) fn input(
    doc: ImageDoc,
    tokens: usize,
    layers: usize,
) -> Result<ImageInput, ImageSectionError> {
    let [rows, cols] = doc.grid;
    let [w, h] = doc.input;
    if w == 0 || h == 0 || w > MAX_SIDE || h > MAX_SIDE {
        return Err(ImageSectionError::InputSize {
            width: w,
            height: h,
        });
    }
    let p = doc.patch;
    if rows == 0 || cols == 0 || p == 0 || p > w.min(h) {
        return Err(ImageSectionError::Patches {
            rows,
            cols,
            patch: p,
            width: w,
            height: h,
        });
    }
    // The grid is what the input makes in patches (as the model cut it), so it is bounded
    // by the input: a stated [10⁹, 10⁹] asked the views for a 4·10¹⁸-byte grid.
    if [rows, cols] != [h / p, w / p] {
        return Err(ImageSectionError::Grid {
            rows,
            cols,
            patch: p,
            width: w,
            height: h,
        });
    }
    if doc.cells.len() != tokens {
        return Err(ImageSectionError::Cells {
            cells: doc.cells.len(),
            tokens,
        });
    }
    for cell in &doc.cells {
        if let Cell::Patch { row, col } = *cell {
            if row >= rows || col >= cols {
                return Err(ImageSectionError::PatchOutside {
                    row,
                    col,
                    rows,
                    cols,
                });
            }
        }
    }
    if !doc.norms.is_empty()
        && (doc.norms.len() != layers || doc.norms.iter().any(|n| n.len() != tokens))
    {
        return Err(ImageSectionError::Norms { layers, tokens });
    }
    let pooling = match doc.pooling {
        None => None,
        Some(p) => {
            if p.heads == 0
                || p.weights.len() != p.heads
                || p.weights.iter().any(|r| r.len() != tokens)
                || p.weights.iter().flatten().any(|v| !v.is_finite())
            {
                return Err(ImageSectionError::Pooling {
                    heads: p.heads,
                    tokens,
                });
            }
            let flat: Vec<f32> = p.weights.concat();
            Some(Pooling::new(&flat, p.heads))
        }
    };
    let windows = match doc.windows {
        None => None,
        Some(w) if w.side >= 1 && w.layers.len() == layers => Some(Windows {
            side: w.side,
            layers: w.layers,
        }),
        Some(_) => return Err(ImageSectionError::Windows { layers }),
    };
    let resize = match doc.preprocessing.resize {
        None => None,
        Some(r) => Some(Resize {
            width: r.width,
            height: r.height,
            filter: filter_name(&r.filter)?,
        }),
    };
    let view = match &doc.view_png {
        Some(data) => decode_view(data, w, h)?,
        None => Vec::new(),
    };
    Ok(ImageInput {
        source: doc.source,
        original: doc.original,
        input: doc.input,
        patch: doc.patch,
        grid: doc.grid,
        preprocessing: Preprocessing {
            color: doc.preprocessing.color,
            resize,
            crop: doc.preprocessing.crop,
            rescale: doc.preprocessing.rescale,
            normalize: doc.preprocessing.normalize,
            positions_from: doc.preprocessing.positions_from,
        },
        cells: doc.cells,
        norms: doc.norms,
        pooling,
        windows,
        view,
    })
}

/// The resize filters attnviz writes.
fn filter_name(name: &str) -> Result<&'static str, ImageSectionError> {
    ["nearest", "bilinear", "bicubic", "lanczos"]
        .into_iter()
        .find(|f| *f == name)
        .ok_or_else(|| ImageSectionError::Filter(name.to_string()))
}

/// `view_png` (base64 PNG, 8-bit RGB) as `w × h × 3` bytes; any other size is refused from the
/// header, before the pixels are decoded.
fn decode_view(data: &str, w: usize, h: usize) -> Result<Vec<u8>, ImageSectionError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(ImageSectionError::ViewBase64)?;
    let mut decoder = png::Decoder::new(bytes.as_slice());
    decoder.set_limits(png::Limits {
        bytes: 3 * MAX_SIDE * MAX_SIDE,
    });
    let mut reader = decoder.read_info().map_err(ImageSectionError::ViewPng)?;
    let info = reader.info();
    let (pw, ph) = (info.width as usize, info.height as usize);
    if (pw, ph) != (w, h) {
        return Err(ImageSectionError::ViewSize {
            view_width: pw,
            view_height: ph,
            width: w,
            height: h,
        });
    }
    if info.color_type != png::ColorType::Rgb || info.bit_depth != png::BitDepth::Eight {
        return Err(ImageSectionError::ViewColor);
    }
    let mut px = vec![0u8; w * h * 3];
    reader
        .next_frame(&mut px)
        .map_err(ImageSectionError::ViewDamaged)?;
    Ok(px)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png_b64(w: u32, h: u32, color: png::ColorType) -> String {
        let channels = if color == png::ColorType::Rgb { 3 } else { 1 };
        let mut out = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut out, w, h);
            enc.set_color(color);
            let px: Vec<u8> = (0..w * h * channels).map(|i| i as u8).collect();
            enc.write_header().unwrap().write_image_data(&px).unwrap();
        }
        base64::engine::general_purpose::STANDARD.encode(out)
    }

    #[test]
    fn the_view_decodes_at_the_stated_size_only() {
        let px = decode_view(&png_b64(4, 2, png::ColorType::Rgb), 4, 2).unwrap();
        assert_eq!(px, (0..24).map(|i| i as u8).collect::<Vec<_>>());
        let e = decode_view(&png_b64(4, 2, png::ColorType::Rgb), 2, 4)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("is 4×2 pixels, but the model's input was 2×4"),
            "{e}"
        );
        let e = decode_view(&png_b64(4, 2, png::ColorType::Grayscale), 4, 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("8-bit RGB"), "{e}");
        assert!(decode_view("%%%", 4, 2)
            .unwrap_err()
            .to_string()
            .contains("base64"));
    }

    #[test]
    fn cells_must_fit_the_tokens_and_the_grid() {
        let section = |cells: &str| {
            serde_json::from_str::<ImageDoc>(&format!(
                r#"{{"source": "a.png", "original": [8, 8], "input": [8, 8], "patch": 4,
                    "grid": [2, 2], "preprocessing": {{"color": "rgb8", "resize": null,
                    "crop": null, "rescale": null, "normalize": null, "positions_from": null}},
                    "cells": {cells}}}"#
            ))
            .unwrap()
        };
        let ok = r#"[{"kind": "class"}, {"kind": "patch", "row": 0, "col": 0},
            {"kind": "patch", "row": 0, "col": 1}, {"kind": "patch", "row": 1, "col": 0},
            {"kind": "patch", "row": 1, "col": 1}]"#;
        let read = input(section(ok), 5, 2).unwrap();
        assert_eq!(read.special_tokens(), vec![0]);
        assert!(input(section(ok), 4, 2)
            .unwrap_err()
            .to_string()
            .contains("5 cells for 4 tokens"));
        let off = r#"[{"kind": "patch", "row": 2, "col": 0}]"#;
        let huge = serde_json::from_str::<ImageDoc>(
            r#"{"source": "a.png", "original": [8, 8], "input": [8, 8], "patch": 4,
                "grid": [1000000000, 1000000000], "preprocessing": {"color": "rgb8",
                "resize": null, "crop": null, "rescale": null, "normalize": null,
                "positions_from": null}, "cells": [{"kind": "class"}]}"#,
        )
        .unwrap();
        let e = input(huge, 1, 2).unwrap_err().to_string();
        assert!(
            e.contains(
                "1000000000×1000000000 grid, but its 8×8 input in 4-pixel patches makes 2×2"
            ),
            "{e}"
        );
        assert!(input(section(off), 1, 2)
            .unwrap_err()
            .to_string()
            .contains("outside its 2×2 grid"));
    }
}
