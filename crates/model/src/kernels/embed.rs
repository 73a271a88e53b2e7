//! The embedding gather: word (+ token type) (+ position) rows summed, then normalised.

use rayon::prelude::*;

use super::norm::normalize_row;
use super::PARALLEL_MIN;

/// Embedding tables and their LayerNorm. Every table has rows of `width` values.
pub struct EmbeddingTables<'a> {
    /// `[vocab, width]`.
    pub word: &'a [f32],
    /// `[max_positions, width]`; `None` for models without learned or fixed position rows.
    pub position: Option<&'a [f32]>,
    /// `[type_vocab, width]`; `None` for models without token types (DistilBERT).
    pub token_type: Option<&'a [f32]>,
    /// LayerNorm γ and β, `[width]` each, and ε; `None` for models that normalise later.
    pub norm: Option<(&'a [f32], &'a [f32], f32)>,
    /// Row width.
    pub width: usize,
}

multiversion! {
    fn embed_rows(
        tables: &EmbeddingTables<'_>,
        ids: &[u32],
        types: &[u32],
        positions: &[usize],
        out: &mut [f32],
    ) {
        let w = tables.width;
        for (i, (o, &id)) in out.chunks_exact_mut(w).zip(ids).enumerate() {
            o.copy_from_slice(&tables.word[id as usize * w..][..w]);
            // Same order as transformers: (words + token types) + positions.
            if let Some(table) = tables.token_type {
                let row = &table[types[i] as usize * w..][..w];
                for (o, t) in o.iter_mut().zip(row) {
                    *o += t;
                }
            }
            if let Some(table) = tables.position {
                let row = &table[positions[i] * w..][..w];
                for (o, p) in o.iter_mut().zip(row) {
                    *o += p;
                }
            }
            if let Some((gamma, beta, eps)) = tables.norm {
                normalize_row(o, gamma, beta, eps);
            }
        }
    }
}

/// Input embeddings of a batch into `out` (`[tokens, width]`): for each token, its word row,
/// plus its token type row and its position row where the model has those tables, then
/// LayerNorm where it has one. `types` and `positions` (table rows, see
/// [`super::positions::Positions`]) have one entry per token; `types` is ignored without a
/// token type table. Ids, types and positions must be inside their tables (the model checks its
/// inputs first); out of range, this panics.
pub fn embed(
    tables: &EmbeddingTables<'_>,
    ids: &[u32],
    types: &[u32],
    positions: &[usize],
    out: &mut [f32],
) {
    let w = tables.width;
    assert!(
        w > 0 && out.len() == ids.len() * w,
        "embedding output shape"
    );
    assert!(
        positions.len() == ids.len() && (tables.token_type.is_none() || types.len() == ids.len()),
        "one type and one position per token"
    );
    if out.len() < PARALLEL_MIN {
        return embed_rows(tables, ids, types, positions, out);
    }
    let rows = (8 * 1024 / w).max(1);
    let types_per_task = if tables.token_type.is_some() { rows } else { 0 };
    out.par_chunks_mut(rows * w)
        .zip(ids.par_chunks(rows))
        .zip(positions.par_chunks(rows))
        .enumerate()
        .for_each(|(c, ((o, i), p))| {
            let t = if types_per_task > 0 {
                &types[c * rows..][..i.len()]
            } else {
                &[]
            };
            embed_rows(tables, i, t, p, o)
        });
}

#[cfg(test)]
mod tests {
    use super::super::norm::layer_norm;
    use super::super::testing::random;
    use super::*;

    #[test]
    fn embeddings_sum_their_tables_then_normalize() {
        let (vocab, positions, types, width) = (50, 20, 2, 24);
        let word = random(vocab * width, 8, 1.0);
        let position = random(positions * width, 9, 1.0);
        let token_type = random(types * width, 10, 1.0);
        let gamma = random(width, 11, 1.0);
        let beta = random(width, 12, 1.0);
        // Many tokens, for the parallel path too.
        for count in [10usize, 3000] {
            let ids: Vec<u32> = (0..count as u32).map(|i| (i * 7) % vocab as u32).collect();
            let tys: Vec<u32> = (0..count as u32).map(|i| i % 2).collect();
            let rows: Vec<usize> = (0..count).map(|i| (i * 3) % positions).collect();
            for (with_types, with_positions, with_norm) in [
                (true, true, true),
                (false, true, true),
                (false, false, false),
                (true, false, true),
            ] {
                let tables = EmbeddingTables {
                    word: &word,
                    position: with_positions.then_some(position.as_slice()),
                    token_type: with_types.then_some(token_type.as_slice()),
                    norm: with_norm.then_some((gamma.as_slice(), beta.as_slice(), 1e-12)),
                    width,
                };
                let mut out = vec![0.0; count * width];
                embed(&tables, &ids, &tys, &rows, &mut out);
                for t in 0..count {
                    let sum: Vec<f32> = (0..width)
                        .map(|i| {
                            let mut v = word[ids[t] as usize * width + i];
                            if with_types {
                                v += token_type[tys[t] as usize * width + i];
                            }
                            if with_positions {
                                v += position[rows[t] * width + i];
                            }
                            v
                        })
                        .collect();
                    let want = if with_norm {
                        let mut want = vec![0.0; width];
                        layer_norm(&sum, None, &gamma, &beta, 1e-12, &mut want);
                        want
                    } else {
                        sum
                    };
                    assert_eq!(&out[t * width..][..width], &want[..], "token {t}");
                }
            }
        }
    }
}
