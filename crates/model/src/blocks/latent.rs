//! Multi-head latent attention's projections (DeepSeek-V2/V3's MLA): the queries through a
//! low-rank bottleneck (`q_a_proj` → RMSNorm → `q_b_proj`, or one `q_proj`), the keys and
//! values through a compressed latent (`kv_a_proj_with_mqa` → its first `kv_lora_rank` values
//! through an RMSNorm → `kv_b_proj` into each head's key part without positions and its value),
//! and one rotary key (`qk_rope_head_dim` values from `kv_a_proj_with_mqa`) shared by every head.
//!
//! [`LatentProjection::project`] writes what the decoder's attention reads: the usual
//! `[q heads | k heads | v heads]` row, `heads` of each, every head `slot` values wide, as
//! transformers' eager attention sees them before the rotary embedding: a query head is
//! `[q_nope | q_pe]`, a key head `[k_nope | k_pe]` (the shared `k_pe` in every head), a value
//! head `[v | 0 …]`. The slot is the wider of `qk_nope + qk_rope` and `v_head_dim`; what does
//! not fill it is zero, which adds exact zeros to every dot product and to nothing else (the
//! output projection's columns there are zero too). The decoder rotates the `q_pe`/`k_pe`
//! part alone ([`super::decoder::LayerOptions::rope_offset`]).
//!
//! DeepSeek lays the rotary values out in interleaved pairs `(x0, x1), (x2, x3), …`
//! (V2's complex multiplication, V3's `apply_rotary_pos_emb_interleave`); with `interleaved`
//! they are gathered here into halves `[x0, x2, … | x1, x3, …]`, so the half-split rotation
//! turns the same pairs by the same angles: V3's own output layout, a fixed permutation of V2's
//! (the same dot products, so the same attention).

use super::layers::{Linear, Norm};
use crate::kernels::{Activation, Output};

/// How the queries are made.
pub enum LatentQuery {
    /// One map `hidden → heads · (qk_nope + qk_rope)` (`q_proj`, `q_lora_rank` null).
    Direct(Linear),
    /// `q_b_proj(norm(q_a_proj(x)))`.
    LowRank(Box<LowRankQuery>),
}

/// The low-rank query maps (`q_lora_rank` set).
pub struct LowRankQuery {
    /// `hidden → q_lora_rank` (`q_a_proj`).
    pub down: Linear,
    /// RMSNorm over the `q_lora_rank` values (`q_a_layernorm`).
    pub norm: Norm,
    /// `q_lora_rank → heads · (qk_nope + qk_rope)` (`q_b_proj`).
    pub up: Linear,
}

/// One layer's latent-attention projections with their sizes.
pub struct LatentProjection {
    /// The queries.
    pub query: LatentQuery,
    /// `hidden → kv_lora_rank + qk_rope` (`kv_a_proj_with_mqa`).
    pub kv_down: Linear,
    /// RMSNorm over the latent's `kv_lora_rank` values (`kv_a_layernorm`).
    pub kv_norm: Norm,
    /// `kv_lora_rank → heads · (qk_nope + v_head_dim)` (`kv_b_proj`).
    pub kv_up: Linear,
    /// Heads.
    pub heads: usize,
    /// Key/query values without positions per head (`qk_nope_head_dim`).
    pub nope: usize,
    /// Rotary values per head (`qk_rope_head_dim`).
    pub rope: usize,
    /// Value size per head (`v_head_dim`).
    pub value: usize,
    /// Whether the rotary values come in interleaved pairs (see the module documentation).
    pub interleaved: bool,
}

impl LatentProjection {
    /// The latent's size (`kv_lora_rank`).
    pub fn kv_rank(&self) -> usize {
        self.kv_norm.width()
    }

    /// The width of one head's slot: `max(qk_nope + qk_rope, v_head_dim)`.
    pub fn slot(&self) -> usize {
        (self.nope + self.rope).max(self.value)
    }

    /// The `[rows, 3 · heads · slot]` rows of queries, keys and values of `rows` normalised
    /// rows `x`, laid out as the module documentation says (before the rotary embedding).
    pub fn project(&self, x: &[f32], rows: usize) -> Vec<f32> {
        let (heads, nope, rope, value) = (self.heads, self.nope, self.rope, self.value);
        let (qk, slot) = (nope + rope, self.slot());
        let width = 3 * heads * slot;
        let q = match &self.query {
            LatentQuery::Direct(map) => map.forward(x, rows, Activation::Identity),
            LatentQuery::LowRank(q) => {
                let low = q.down.forward(x, rows, Activation::Identity);
                let low = q.norm.forward(&low, None);
                q.up.forward(&low, rows, Activation::Identity)
            }
        };
        let rank = self.kv_rank();
        let compressed = self.kv_down.forward(x, rows, Activation::Identity);
        let mut latent = Vec::with_capacity(rows * rank);
        for row in compressed.chunks_exact(rank + rope) {
            latent.extend_from_slice(&row[..rank]);
        }
        let latent = self.kv_norm.forward(&latent, None);
        let kv_width = heads * (nope + value);
        let mut kv = vec![0f32; rows * kv_width];
        self.kv_up.forward_into(
            &latent,
            rows,
            Output {
                data: &mut kv,
                stride: kv_width,
                col0: 0,
            },
            Activation::Identity,
        );
        let mut out = vec![0f32; rows * width];
        for r in 0..rows {
            let row = &mut out[r * width..][..width];
            let q_row = &q[r * heads * qk..][..heads * qk];
            let k_pe = &compressed[r * (rank + rope) + rank..][..rope];
            let kv_row = &kv[r * kv_width..][..kv_width];
            for h in 0..heads {
                let q_head = &q_row[h * qk..][..qk];
                let qs = &mut row[h * slot..][..qk];
                qs[..nope].copy_from_slice(&q_head[..nope]);
                self.place_rotary(&q_head[nope..], &mut qs[nope..]);
                let k_at = heads * slot + h * slot;
                let kv_head = &kv_row[h * (nope + value)..][..nope + value];
                row[k_at..][..nope].copy_from_slice(&kv_head[..nope]);
                self.place_rotary(k_pe, &mut row[k_at + nope..][..rope]);
                let v_at = 2 * heads * slot + h * slot;
                row[v_at..][..value].copy_from_slice(&kv_head[nope..]);
            }
        }
        out
    }

    /// Copy rotary values `from` into `to`, gathering interleaved pairs into halves.
    fn place_rotary(&self, from: &[f32], to: &mut [f32]) {
        if !self.interleaved {
            to.copy_from_slice(from);
            return;
        }
        let half = from.len() / 2;
        for i in 0..half {
            to[i] = from[2 * i];
            to[half + i] = from[2 * i + 1];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::weights::Weight;
    use crate::kernels::testing::random;
    use crate::kernels::Layout;

    /// Plain f64 products of a `[outputs, inputs]` matrix `w` with `x`.
    fn matvec(w: &[f32], x: &[f64], outputs: usize) -> Vec<f64> {
        let inputs = x.len();
        (0..outputs)
            .map(|o| (0..inputs).map(|i| w[o * inputs + i] as f64 * x[i]).sum())
            .collect()
    }

    fn rms(x: &[f64], w: &[f32], eps: f64) -> Vec<f64> {
        let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
        let s = 1.0 / (ms + eps).sqrt();
        x.iter().zip(w).map(|(v, g)| v * s * *g as f64).collect()
    }

    #[test]
    fn heads_hold_the_split_latent_and_the_shared_rotary_key_gathered_from_pairs() {
        let (hidden, heads, nope, rope, value, rank, q_rank) = (10, 3, 4, 4, 3, 6, 5);
        let qk = nope + rope;
        let weights = |seed, o, i| random(o * i, seed, 0.5);
        let (wqa, wqb) = (weights(1, q_rank, hidden), weights(2, heads * qk, q_rank));
        let (wkva, wkvb) = (
            weights(3, rank + rope, hidden),
            weights(4, heads * (nope + value), rank),
        );
        let gq: Vec<f32> = random(q_rank, 5, 0.1).iter().map(|v| 1.0 + v).collect();
        let gkv: Vec<f32> = random(rank, 6, 0.1).iter().map(|v| 1.0 + v).collect();
        let eps = 1e-6;
        let owned = |w: &[f32], o: usize, i: usize| {
            Linear::new(Weight::owned(w.to_vec(), vec![o, i]), Layout::OutIn, None)
        };
        let block = LatentProjection {
            query: LatentQuery::LowRank(Box::new(LowRankQuery {
                down: owned(&wqa, q_rank, hidden),
                norm: Norm::from_weights(Weight::owned(gq.clone(), vec![q_rank]), None, eps),
                up: owned(&wqb, heads * qk, q_rank),
            })),
            kv_down: owned(&wkva, rank + rope, hidden),
            kv_norm: Norm::from_weights(Weight::owned(gkv.clone(), vec![rank]), None, eps),
            kv_up: owned(&wkvb, heads * (nope + value), rank),
            heads,
            nope,
            rope,
            value,
            interleaved: true,
        };
        assert_eq!(block.slot(), qk);
        let rows = 2;
        let x = random(rows * hidden, 7, 1.0);
        let out = block.project(&x, rows);
        let width = 3 * heads * qk;
        for r in 0..rows {
            let xr: Vec<f64> = x[r * hidden..][..hidden]
                .iter()
                .map(|&v| v as f64)
                .collect();
            let q = matvec(&wqb, &rms(&matvec(&wqa, &xr, q_rank), &gq, eps), heads * qk);
            let c = matvec(&wkva, &xr, rank + rope);
            let kv = matvec(&wkvb, &rms(&c[..rank], &gkv, eps), heads * (nope + value));
            let got = &out[r * width..][..width];
            let close = |a: f32, b: f64, what: &str| {
                assert!((a as f64 - b).abs() < 1e-5, "row {r} {what}: {a} vs {b}");
            };
            for h in 0..heads {
                for i in 0..nope {
                    close(got[h * qk + i], q[h * qk + i], "q_nope");
                    close(
                        got[heads * qk + h * qk + i],
                        kv[h * (nope + value) + i],
                        "k_nope",
                    );
                }
                // Pairs (2i, 2i+1) gathered into halves.
                for i in 0..rope / 2 {
                    close(
                        got[h * qk + nope + i],
                        q[h * qk + nope + 2 * i],
                        "q_pe even",
                    );
                    let odd = q[h * qk + nope + 2 * i + 1];
                    close(got[h * qk + nope + rope / 2 + i], odd, "q_pe odd");
                    let k = heads * qk + h * qk + nope;
                    close(got[k + i], c[rank + 2 * i], "k_pe even");
                    close(got[k + rope / 2 + i], c[rank + 2 * i + 1], "k_pe odd");
                }
                for i in 0..qk {
                    let v = 2 * heads * qk + h * qk + i;
                    if i < value {
                        close(got[v], kv[h * (nope + value) + nope + i], "v");
                    } else {
                        assert_eq!(got[v], 0.0, "row {r} head {h}: the value slot's padding");
                    }
                }
            }
        }
    }
}
