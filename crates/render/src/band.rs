//! A vision-language model's pictures as bands of the language model's token × token matrix:
//! each picture's run of image tokens ([`Attention::pictures`]) becomes one unit, labelled by the
//! picture and its grid (`picture 1 · 24×24`), instead of hundreds of `<img1 r,c>` rows and
//! columns.
//!
//! The band's column holds the sum of each row's attention to the picture's tokens, and its row
//! the mean of the picture's tokens' rows (the word-level merge's rule,
//! [`crate::analysis::merge_matrices`]); every other cell is unchanged, so each row still sums
//! to what it summed to (1). The band spans the picture's tokens, so [`Attention::is_masked`]
//! decides its cells as it does the tokens': a key band is seen by every query after the
//! picture's first token, and a picture's band sees itself (its tokens see earlier ones, or,
//! for Gemma 3, each other in full). Every view that draws the matrix (figures, terminal) draws
//! the [`Banded::attention`]; the HTML report does the same from its data's pictures
//! (`assets/report/bands.js`).

use std::ops::Range;

use crate::attention::image::PictureTokens;
use crate::attention::{Attention, Units};

/// How a view names a picture's band: `picture 1 · 24×24` (the picture's number from 1, and
/// its patch grid, rows × columns).
pub fn band_label(index: usize, picture: &PictureTokens) -> String {
    let [rows, cols] = picture.image.grid;
    format!("{} · {rows}×{cols}", picture.name(index))
}

/// One picture's band in a [`Banded`] view.
#[derive(Clone, Debug, PartialEq)]
pub struct Band {
    /// Which picture (0-based, in [`Attention::pictures`]' order).
    pub picture: usize,
    /// The band's unit in the banded view.
    pub unit: usize,
    /// How many of the original view's units it holds.
    pub units: usize,
    /// Its label ([`band_label`]).
    pub label: String,
}

/// An attention with each picture's units collapsed into one band ([`banded`]).
#[derive(Clone, Debug)]
pub struct Banded {
    /// The banded attention: its units are the original's, each picture's run replaced by one.
    pub attention: Attention,
    /// The bands, in order.
    pub bands: Vec<Band>,
    rows: Vec<Range<usize>>,
    cols: Vec<Range<usize>>,
    shape: (usize, usize),
}

impl Banded {
    /// Any `[n_queries × n_keys]` matrix (or a stack of them) over the original units (the
    /// rollout, ALTI's contributions) banded as the attention is: columns of a band summed,
    /// rows averaged. `None` when `matrix` is not a whole number of such matrices.
    pub fn matrix(&self, matrix: &[f32]) -> Option<Vec<f32>> {
        let (nq, nk) = self.shape;
        (nq * nk > 0 && matrix.len().is_multiple_of(nq * nk))
            .then(|| crate::analysis::merge_matrices(matrix, nq, nk, &self.rows, &self.cols))
    }

    /// The note a view writes under a banded matrix: what a band's row and column hold.
    pub fn note(&self) -> String {
        let names: Vec<&str> = self.bands.iter().map(|b| b.label.as_str()).collect();
        format!(
            "{}: each picture's image tokens as one band, its column the sum of a row's \
             attention to them, its row the mean of their rows (rows still sum to 1)",
            names.join(", ")
        )
    }
}

/// `att` with each picture's image tokens collapsed into one band ([`Band`]), or `None` when it
/// has no picture among its units.
pub fn banded(att: &Attention) -> Option<Banded> {
    if att.pictures.is_empty() {
        return None;
    }
    let (rows, row_bands) = groups(att.queries(), &att.pictures);
    let (cols, col_bands) = groups(att.keys(), &att.pictures);
    if row_bands.is_empty() && col_bands.is_empty() {
        return None;
    }
    let side = |units: &Units, groups: &[Range<usize>], bands: &[(usize, usize)]| {
        let mut merged = crate::analysis::merge_units(units, groups);
        for &(unit, p) in bands {
            let label = band_label(p, &att.pictures[p]);
            merged.labels[unit] = label.clone();
            merged.display[unit] = label;
            merged.surfaces[unit] = String::new();
        }
        merged
    };
    let queries = side(att.queries(), &rows, &row_bands);
    let keys = (!att.is_square()).then(|| side(att.keys(), &cols, &col_bands));
    let shape = (att.n_queries(), att.n_keys());
    let weights = crate::analysis::merge_matrices(att.weights(), shape.0, shape.1, &rows, &cols);
    let attention = att
        .derive(att.level, att.special_excluded, queries, keys, weights)
        .expect("banding keeps units and weights consistent");
    let listed = if row_bands.is_empty() {
        (&col_bands, &cols)
    } else {
        (&row_bands, &rows)
    };
    let bands = listed
        .0
        .iter()
        .map(|&(unit, picture)| Band {
            picture,
            unit,
            units: listed.1[unit].len(),
            label: band_label(picture, &att.pictures[picture]),
        })
        .collect();
    Some(Banded {
        attention,
        bands,
        rows,
        cols,
        shape,
    })
}

/// The runs of `units` that form one unit each once banded (a picture's units together, every
/// other unit alone), and each band as (its unit in the banded view, its picture).
fn groups(units: &Units, pictures: &[PictureTokens]) -> (Vec<Range<usize>>, Vec<(usize, usize)>) {
    let picture_of = |u: usize| {
        let start = units.spans[u].start;
        pictures.iter().position(|p| p.tokens().contains(&start))
    };
    let mut groups: Vec<Range<usize>> = Vec::new();
    let mut bands = Vec::new();
    let mut last = None;
    for u in 0..units.len() {
        let p = picture_of(u);
        match (p, last) {
            (Some(p), Some(l)) if p == l => {
                groups.last_mut().expect("a group before").end = u + 1;
            }
            _ => {
                if let Some(p) = p {
                    bands.push((groups.len(), p));
                }
                groups.push(u..u + 1);
            }
        }
        last = p;
    }
    (groups, bands)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::fixtures::synthetic;
    use crate::attention::{HeadSel, MaskKind, Selection};

    /// `<s>`, a 1 × 2 picture's two image tokens (units 1 and 2), `a`, `b`, one layer and head,
    /// causal: each row's weights are over the keys up to it, and sum to 1.
    const ROWS: [[f32; 5]; 5] = [
        [1.0, 0.0, 0.0, 0.0, 0.0],
        [0.6, 0.4, 0.0, 0.0, 0.0],
        [0.2, 0.3, 0.5, 0.0, 0.0],
        [0.1, 0.2, 0.3, 0.4, 0.0],
        [0.1, 0.2, 0.3, 0.15, 0.25],
    ];

    fn pictured(bidirectional: bool, rows: &[[f32; 5]; 5]) -> Attention {
        let labels = ["<s>", "<img1 0,0>", "<img1 0,1>", "a", "b"];
        let att = synthetic(&labels, 1, 1);
        let weights = rows.iter().flatten().copied().collect();
        let mut att = att
            .derive(att.level, false, att.queries().clone(), None, weights)
            .unwrap()
            .with_mask(MaskKind::Causal);
        // The prompt as a person typed it (the figures quote it).
        att.text = "a b".into();
        let image = crate::attention::fixtures::two_patch_picture();
        att.with_pictures(vec![PictureTokens {
            first: 1,
            image,
            bidirectional,
            tile: None,
        }])
        .unwrap()
    }

    fn close(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6)
    }

    #[test]
    fn a_picture_becomes_one_band_whose_column_sums_and_whose_row_averages() {
        let att = pictured(false, &ROWS);
        let b = banded(&att).expect("a picture to band");
        let banded = &b.attention;
        assert_eq!(banded.n_queries(), 4);
        assert_eq!(
            banded.queries().display,
            ["<s>", "picture 1 · 1×2", "a", "b"]
        );
        assert_eq!(banded.queries().spans[1], 1..3);
        assert_eq!(
            b.bands,
            [Band {
                picture: 0,
                unit: 1,
                units: 2,
                label: "picture 1 · 1×2".into()
            }]
        );
        let m = banded.head(0, 0);
        // Text rows keep their text cells; the band column is columns 1 + 2 of the row.
        assert!(close(&m[0..4], &[1.0, 0.0, 0.0, 0.0]));
        assert!(close(&m[8..12], &[0.1, 0.2 + 0.3, 0.4, 0.0]));
        assert!(close(&m[12..16], &[0.1, 0.2 + 0.3, 0.15, 0.25]));
        // The band's row is the mean of rows 1 and 2, each with its columns 1 + 2 summed:
        // ([0.6, 0.4, 0, 0] + [0.2, 0.8, 0, 0]) / 2.
        assert!(close(
            &m[4..8],
            &[(0.6 + 0.2) / 2.0, (0.4 + 0.8) / 2.0, 0.0, 0.0]
        ));
        for q in 0..4 {
            let sum: f32 = m[q * 4..(q + 1) * 4].iter().sum();
            assert!((sum - 1.0).abs() < 1e-6, "row {q} sums to {sum}");
        }
        // Another matrix over the same units is banded alike.
        let flat: Vec<f32> = ROWS.iter().flatten().copied().collect();
        assert!(close(&b.matrix(&flat).unwrap(), m));
        assert_eq!(b.matrix(&flat[..7]), None);
        assert!(b.note().starts_with("picture 1 · 1×2: "), "{}", b.note());
    }

    #[test]
    fn figures_and_terminal_draw_the_band_unless_asked_to_expand() {
        use crate::image::{render_svg, FigureSpec, ImageOptions};
        use crate::terminal::{write_matrix_view, write_view, MatrixText, TerminalOptions};
        let att = pictured(false, &ROWS);
        let flat: Vec<f32> = ROWS.iter().flatten().copied().collect();
        let figures = [
            FigureSpec::Head {
                layer: 0,
                head: HeadSel::Index(0),
            },
            FigureSpec::Layer { layer: 0 },
            FigureSpec::Model,
            FigureSpec::rollout(0, &flat),
        ];
        for expand_pictures in [false, true] {
            let options = ImageOptions {
                expand_pictures,
                ..ImageOptions::default()
            };
            for fig in &figures {
                let svg = render_svg(&att, fig, &options).unwrap();
                assert_eq!(svg.contains("picture 1 · 1×2"), !expand_pictures, "{fig:?}");
                // The model figure's thumbnails name no unit.
                if !matches!(fig, FigureSpec::Model) {
                    assert_eq!(svg.contains("img1 0,1"), expand_pictures, "{fig:?}");
                }
            }
            let opts = TerminalOptions {
                expand_pictures,
                ..TerminalOptions::default()
            };
            let mut out = Vec::new();
            write_view(&att, Selection::new(0, HeadSel::Index(0)), &opts, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            assert_eq!(
                text.contains("picture 1 · 1×2: "),
                !expand_pictures,
                "{text}"
            );
            assert_eq!(text.contains("<img1 0,1>"), expand_pictures, "{text}");
            if !expand_pictures {
                assert!(
                    text.contains("3 tokens + picture 1 (2 image tokens)"),
                    "{text}"
                );
                // The band's row: its weights to the sink and to itself ((0.6 + 0.2) / 2 and
                // (0.4 + 0.8) / 2), listed as its strongest links.
                assert!(
                    text.contains("picture 1 → picture 1 0.600  <s>       0.400"),
                    "{text}"
                );
                // Rows are numbered by their first token, as `--query N` numbers them: `a` is
                // token 3, after the picture's tokens 1 and 2.
                assert!(text.contains("\n3 a         → "), "{text}");
            }
            let words = MatrixText {
                title: "ALTI".into(),
                axes: String::new(),
                caption: "contribution".into(),
                top_heading: "top {top}".into(),
            };
            let mut out = Vec::new();
            write_matrix_view(&att, &flat, &words, &opts, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            assert_eq!(
                text.contains("picture 1 · 1×2: "),
                !expand_pictures,
                "{text}"
            );
        }
    }

    #[test]
    fn text_alone_has_no_band() {
        let att = synthetic(&["<s>", "a", "b"], 1, 1);
        assert!(banded(&att).is_none());
    }

    #[test]
    fn masks_follow_the_picture_collapsed_and_expanded() {
        // LLaVA: the picture's tokens are causal among themselves; Gemma 3: they see each
        // other in full (its row 1 may weigh token 2).
        let mut gemma = ROWS;
        gemma[1] = [0.5, 0.3, 0.2, 0.0, 0.0];
        for (bidirectional, rows) in [(false, ROWS), (true, gemma)] {
            let att = pictured(bidirectional, &rows);
            assert_eq!(att.is_masked(1, 2), !bidirectional);
            assert!(!att.is_masked(2, 1));
            let b = banded(&att).unwrap().attention;
            // The band sees itself, and the sink; a query before it does not see it, nor does
            // it see the text after it.
            assert!(!b.is_masked(1, 1));
            assert!(!b.is_masked(1, 0));
            assert!(b.is_masked(0, 1));
            assert!(b.is_masked(1, 2));
            assert!(!b.is_masked(2, 1));
            let m = b.head(0, 0);
            let band_row: f32 = m[4..8].iter().sum();
            assert!((band_row - 1.0).abs() < 1e-6);
            // The band's own cell is the mean of the picture rows' weight on the picture.
            let own = ((rows[1][1] + rows[1][2]) + (rows[2][1] + rows[2][2])) / 2.0;
            assert!((m[5] - own).abs() < 1e-6, "{} vs {own}", m[5]);
        }
    }
}
