//! Position schemes: which row of a position table each token reads, and tables computed
//! rather than learned.
//!
//! - [`Positions::Absolute`]: token `i` reads row `i` (BERT, ALBERT, ELECTRA, DistilBERT, GPT-2).
//! - [`Positions::PaddingOffset`]: RoBERTa's and XLM-R's `padding_idx + 1 + i`, counted over
//!   non-padding tokens only, as transformers' `create_position_ids_from_input_ids` does.
//! - [`sinusoidal_table`]: the fixed sine/cosine table of DistilBERT's `sinusoidal_pos_embds`
//!   (interleaved) and of Marian (halves), computed in f64 as numpy does, then rounded to f32.
//!
//! Schemes that act inside attention rather than on the embeddings live elsewhere: rotary
//! embeddings ([`super::rotary`]) rotate the query and key vectors in place before
//! [`super::attention()`] reads them, so that the captured q/k are the rotated ones; relative
//! position biases (T5, issue 11) are a [`super::ScoreBias`] added to the scores.

/// How token positions map to rows of a learned position table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Positions {
    /// Row `i` for token `i`.
    Absolute,
    /// RoBERTa: `padding_idx + 1 + (number of non-padding tokens up to and including i) − 1`
    /// for a non-padding token, `padding_idx` for a padding token. The table has
    /// `max length + padding_idx + 1` rows.
    PaddingOffset {
        /// The padding token id (`pad_token_id`), which is also the padding row.
        padding_idx: u32,
    },
}

impl Positions {
    /// How many rows of the table are taken by something other than the first token: the
    /// longest input is `table rows − offset`.
    pub fn offset(self) -> usize {
        match self {
            Positions::Absolute => 0,
            Positions::PaddingOffset { padding_idx } => padding_idx as usize + 1,
        }
    }

    /// The table row of each token of one sequence, appended to `out`.
    pub fn rows(self, ids: &[u32], out: &mut Vec<usize>) {
        match self {
            Positions::Absolute => out.extend(0..ids.len()),
            Positions::PaddingOffset { padding_idx } => {
                // transformers: mask = ids != pad; (cumsum(mask) * mask) + pad.
                let mut count = 0usize;
                out.extend(ids.iter().map(|&id| {
                    if id == padding_idx {
                        padding_idx as usize
                    } else {
                        count += 1;
                        count + padding_idx as usize
                    }
                }));
            }
        }
    }
}

/// How a sinusoidal table places its sines and cosines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SinusoidalLayout {
    /// Column `j` holds `sin` for even `j` and `cos` for odd `j` of `pos / 10000^(2⌊j/2⌋/dim)`
    /// (DistilBERT's `create_sinusoidal_embeddings`).
    Interleaved,
    /// The first `⌈dim/2⌉` columns hold the sines and the rest the cosines, column `c` of each
    /// half at frequency `10000^(−2c/dim)` (Marian's `MarianSinusoidalPositionalEmbedding`).
    Halves,
}

/// A `[positions, dim]` table of sines and cosines, row-major.
pub fn sinusoidal_table(positions: usize, dim: usize, layout: SinusoidalLayout) -> Vec<f32> {
    let angle =
        |pos: usize, j: usize| pos as f64 / 10000f64.powf(2.0 * (j / 2) as f64 / dim as f64);
    let mut table = vec![0f32; positions * dim];
    let sines = dim.div_ceil(2);
    for (pos, row) in table.chunks_exact_mut(dim.max(1)).enumerate() {
        for (c, v) in row.iter_mut().enumerate() {
            *v = match layout {
                SinusoidalLayout::Interleaved if c % 2 == 0 => angle(pos, c).sin(),
                SinusoidalLayout::Interleaved => angle(pos, c).cos(),
                SinusoidalLayout::Halves if c < sines => angle(pos, 2 * c).sin(),
                SinusoidalLayout::Halves => angle(pos, 2 * (c - sines) + 1).cos(),
            } as f32;
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roberta_positions_skip_padding() {
        let p = Positions::PaddingOffset { padding_idx: 1 };
        let mut rows = Vec::new();
        // <s> a b </s> with a literal <pad> inside: it keeps the padding row and does not count.
        p.rows(&[0, 7, 1, 8, 2], &mut rows);
        assert_eq!(rows, vec![2, 3, 1, 4, 5]);
        assert_eq!(p.offset(), 2);
        let mut rows = Vec::new();
        Positions::Absolute.rows(&[5, 5, 5], &mut rows);
        assert_eq!(rows, vec![0, 1, 2]);
    }

    #[test]
    fn sinusoidal_tables_follow_their_formulas() {
        // Values from numpy, as transformers builds them (dim 6, position 3):
        // pos / 10000 ** (2 * (j // 2) / 6) for j = 0..6, then sin/cos.
        let dim = 6;
        let t = sinusoidal_table(4, dim, SinusoidalLayout::Interleaved);
        let a = [
            3.0,
            3.0 / 10000f64.powf(1.0 / 3.0),
            3.0 / 10000f64.powf(2.0 / 3.0),
        ];
        let want = [
            a[0].sin(),
            a[0].cos(),
            a[1].sin(),
            a[1].cos(),
            a[2].sin(),
            a[2].cos(),
        ];
        for (j, w) in want.iter().enumerate() {
            assert_eq!(t[3 * dim + j], *w as f32, "interleaved column {j}");
        }
        let h = sinusoidal_table(4, dim, SinusoidalLayout::Halves);
        let want = [
            a[0].sin(),
            a[1].sin(),
            a[2].sin(),
            a[0].cos(),
            a[1].cos(),
            a[2].cos(),
        ];
        for (j, w) in want.iter().enumerate() {
            assert_eq!(h[3 * dim + j], *w as f32, "halves column {j}");
        }
        // Row 0: sin 0 = 0, cos 0 = 1.
        assert_eq!(&h[..dim], &[0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
        // An odd width puts one more sine than cosine (Marian's sentinel).
        let odd = sinusoidal_table(2, 5, SinusoidalLayout::Halves);
        assert_eq!(&odd[..5], &[0.0, 0.0, 0.0, 1.0, 1.0]);
    }
}
