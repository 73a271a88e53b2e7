//! The gated delta rule (linear attention) of the Qwen3-Next and Qwen3.5 hybrids: a block
//! that mixes tokens through a decaying state written with the delta rule, and the exact
//! token-mixing matrix it applies. Mirrors transformers 5's `Qwen3NextGatedDeltaNet` and
//! `Qwen3_5GatedDeltaNet` with the torch fallbacks `torch_chunk_gated_delta_rule` and
//! `causal_conv1d_fn`:
//!
//! - the input projections give q, k, v, the output gate z and the per-value-head β and decay
//!   inputs (stored as Qwen3-Next's two maps grouped per key head or Qwen3.5's four plain ones:
//!   [`DeltaLayout`]); q, k and v go through a depthwise causal convolution and SiLU;
//! - per value head, with q and k L2-normalised and q scaled by `1/√d_k`, `S_t = α_t (I − β_t
//!   k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ`, `o_t = S_tᵀ q_t` (α_t = exp(g_t), g = −exp(A_log)·
//!   softplus(a + dt_bias), β = sigmoid(b)); a key head's q and k serve `value_heads /
//!   key_heads` consecutive value heads;
//! - `o` through an RMSNorm gated by `silu(z)` (its weight applied as stored), then `out_proj`.
//!
//! The block has no softmax map, but its token mixing is linear in the values: `o_t = Σ_{s≤t}
//! A_{t,s} v_s` with `A_{t,s} = β_s k_sᵀ M_{s+1}ᵀ⋯M_tᵀ q_t`, `M_r = α_r (I − β_r k_r k_rᵀ)`
//! ([`GatedDeltaNet::mixing`] writes it out per value head).

use crate::blocks::layers::{out_in_linear, Linear};
use crate::error::Error;
use crate::formats::tensors::{Name, Tensors};
use crate::formats::weights::Weight;
use crate::kernels::{self, Activation, Layout};

/// How a gated delta layer's input projections are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeltaLayout {
    /// Qwen3-Next's `in_proj_qkvz` and `in_proj_ba`, their outputs grouped per key head: `[q
    /// (d_k) | k (d_k) | v (r·d_v) | z (r·d_v)]` and `[b (r) | a (r)]`, r value heads per key
    /// head.
    Grouped,
    /// Qwen3.5's `in_proj_qkv` (`[every q | every k | every v]`), `in_proj_z`, `in_proj_b` and
    /// `in_proj_a`.
    Split,
}

/// A gated delta layer's input projections, as stored.
enum Projections {
    Grouped { qkvz: Linear, ba: Linear },
    Split(Box<SplitMaps>),
}

/// Qwen3.5's four maps.
struct SplitMaps {
    qkv: Linear,
    z: Linear,
    b: Linear,
    a: Linear,
}

/// The shape of the gated delta (linear attention) layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinearShape {
    /// Query/key heads (`linear_num_key_heads`).
    pub key_heads: usize,
    /// Value heads (`linear_num_value_heads`), a multiple of the key heads.
    pub value_heads: usize,
    /// Size of a query/key head.
    pub key_dim: usize,
    /// Size of a value head.
    pub value_dim: usize,
    /// The causal convolution's width (`linear_conv_kernel_dim`).
    pub conv_kernel: usize,
}

impl LinearShape {
    /// The convolved channels: queries, keys, values.
    pub fn conv_channels(&self) -> usize {
        2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim
    }
}

/// `in_proj_qkvz` (per key head: its query, key, values and output gate) joined back from the
/// two maps llama.cpp's converter splits it into: `in_proj_qkv` (`attn_qkv`: every head's
/// queries, then keys, then values) and `in_proj_z` (`attn_gate`), dequantised.
fn joined_qkvz(
    t: &dyn Tensors,
    a: &Name,
    lin: LinearShape,
    hidden: usize,
) -> Result<Linear, Error> {
    let (kd, vd) = (lin.key_heads * lin.key_dim, lin.value_heads * lin.value_dim);
    let qkv = t.weight(&a.pp("in_proj_qkv").weight(), &[2 * kd + vd, hidden])?;
    let z = t.weight(&a.pp("in_proj_z").weight(), &[vd, hidden])?;
    let group = vd / lin.key_heads;
    let mut w = Vec::with_capacity((2 * kd + 2 * vd) * hidden);
    for h in 0..lin.key_heads {
        let rows = |m: &[f32], first: usize, count: usize| {
            m[first * hidden..(first + count) * hidden].to_vec()
        };
        w.extend(rows(&qkv, h * lin.key_dim, lin.key_dim));
        w.extend(rows(&qkv, kd + h * lin.key_dim, lin.key_dim));
        w.extend(rows(&qkv, 2 * kd + h * group, group));
        w.extend(rows(&z, h * group, group));
    }
    Ok(Linear::new(
        Weight::owned(w, vec![2 * kd + 2 * vd, hidden]),
        Layout::OutIn,
        None,
    ))
}

/// A gated delta-rule (linear attention) block.
pub struct GatedDeltaNet {
    shape: LinearShape,
    proj: Projections,
    /// The depthwise causal convolution, `[channels, kernel]`.
    conv: Vec<f32>,
    dt_bias: Vec<f32>,
    /// `−exp(A_log)` per value head.
    neg_a: Vec<f32>,
    /// The gated RMSNorm's weight (applied as stored, not `1 + w`).
    norm: Vec<f32>,
    eps: f32,
    out_proj: Linear,
    /// Whether the value heads are stored in llama.cpp's tiled order (value head `i` of every
    /// key head, then `i + 1`: value head `h` reads key head `h % key_heads`) rather than
    /// transformers' grouped one (each key head's value heads together: `h / (value_heads /
    /// key_heads)`). Qwen3.5 GGUF files with fewer key heads than value heads.
    tiled: bool,
}

/// One gated delta layer's inputs to the rule, for one sequence of `n` tokens.
pub struct DeltaInputs {
    /// Tokens.
    pub n: usize,
    /// Per value head and token, the L2-normalised query scaled by `1/√d_k` (`[value_heads,
    /// n, key_dim]`; a key head's query repeated for each of its value heads).
    pub q: Vec<f32>,
    /// The L2-normalised keys, `[value_heads, n, key_dim]`.
    pub k: Vec<f32>,
    /// The values after the convolution and SiLU, `[value_heads, n, value_dim]`.
    pub v: Vec<f32>,
    /// The decay of the state, `α = exp(g)`, `[value_heads, n]`.
    pub alpha: Vec<f32>,
    /// The write strength `β`, `[value_heads, n]`.
    pub beta: Vec<f32>,
    /// The output gate z, `[n, value_heads · value_dim]`.
    z: Vec<f32>,
}

/// `x / √(Σx² + 1e-6)` (transformers' `l2norm`).
fn l2norm(x: &mut [f32]) {
    let s: f32 = x.iter().map(|v| v * v).sum();
    let inv = 1.0 / (s + 1e-6).sqrt();
    x.iter_mut().for_each(|v| *v *= inv);
}

/// `log(1 + eˣ)`, linear past 20 (torch's threshold).
fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

/// The logistic function.
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

impl GatedDeltaNet {
    /// Load the block under `a` (`layers.{i}.linear_attn`) from `hidden`-wide inputs. With
    /// `gguf`, the tensors are as llama.cpp's converter stores them: Qwen3-Next's
    /// `in_proj_qkvz` split into `in_proj_qkv` (`attn_qkv`: every key head's queries, then keys,
    /// then values) and `in_proj_z` (`attn_gate`), joined back here; the decay rates stored as
    /// `ssm_a = −exp(A_log)`; the convolution `[channels, kernel]`; Qwen3.5's value heads, with
    /// fewer key heads than value heads, in the converter's tiled order (`_LinearAttentionVReorderBase`:
    /// the v rows of `in_proj_qkv` and the v channels of the convolution, the rows of `in_proj_z`,
    /// `in_proj_b`, `in_proj_a`, `ssm_a` and `dt_bias`, the columns of `out_proj`), read so
    /// (each value head's key head found by the tiled rule; [`GatedDeltaNet::mixing`] in
    /// transformers' order).
    pub fn load(
        t: &dyn Tensors,
        a: &Name,
        shape: LinearShape,
        layout: DeltaLayout,
        hidden: usize,
        eps: f32,
        gguf: bool,
    ) -> Result<GatedDeltaNet, Error> {
        let linear =
            |name: &str, inputs, outputs| out_in_linear(t, &a.pp(name), inputs, outputs, false);
        let (kd, vd, nv) = (
            shape.key_heads * shape.key_dim,
            shape.value_heads * shape.value_dim,
            shape.value_heads,
        );
        let proj = match layout {
            DeltaLayout::Grouped => Projections::Grouped {
                qkvz: if gguf {
                    joined_qkvz(t, a, shape, hidden)?
                } else {
                    linear("in_proj_qkvz", hidden, 2 * kd + 2 * vd)?
                },
                ba: linear("in_proj_ba", hidden, 2 * nv)?,
            },
            DeltaLayout::Split => Projections::Split(Box::new(SplitMaps {
                qkv: linear("in_proj_qkv", hidden, 2 * kd + vd)?,
                z: linear("in_proj_z", hidden, vd)?,
                b: linear("in_proj_b", hidden, nv)?,
                a: linear("in_proj_a", hidden, nv)?,
            })),
        };
        let channels = shape.conv_channels();
        let (conv, neg_a) = if gguf {
            (
                t.weight(&a.pp("conv1d").weight(), &[channels, shape.conv_kernel])?
                    .to_vec(),
                t.weight(&a.tensor("ssm_a"), &[nv])?.to_vec(),
            )
        } else {
            let a_log = t.weight(&a.tensor("A_log"), &[nv])?;
            (
                t.weight(&a.pp("conv1d").weight(), &[channels, 1, shape.conv_kernel])?
                    .to_vec(),
                a_log.iter().map(|&x| -x.exp()).collect(),
            )
        };
        Ok(GatedDeltaNet {
            shape,
            proj,
            conv,
            dt_bias: t.weight(&a.tensor("dt_bias"), &[nv])?.to_vec(),
            neg_a,
            norm: t
                .weight(&a.pp("norm").weight(), &[shape.value_dim])?
                .to_vec(),
            eps,
            out_proj: linear("out_proj", vd, hidden)?,
            tiled: gguf && layout == DeltaLayout::Split && shape.key_heads != shape.value_heads,
        })
    }

    /// Its shape.
    pub fn shape(&self) -> LinearShape {
        self.shape
    }

    /// The rule's inputs for the `n` rows of `x` (one sequence, after the input norm).
    pub fn inputs(&self, x: &[f32], n: usize) -> DeltaInputs {
        let s = self.shape;
        let (nk, nv, dk, dv) = (s.key_heads, s.value_heads, s.key_dim, s.value_dim);
        let r = nv / nk;
        let (kd, vd) = (nk * dk, nv * dv);
        let channels = s.conv_channels();
        let mut mixed = vec![0f32; n * channels];
        let mut z = vec![0f32; n * vd];
        let (mut b, mut a) = (vec![0f32; n * nv], vec![0f32; n * nv]);
        match &self.proj {
            Projections::Grouped { qkvz, ba } => {
                let qkvz = qkvz.forward(x, n, Activation::Identity);
                let ba = ba.forward(x, n, Activation::Identity);
                // fix_query_key_value_ordering: per key head, [q (dk) | k (dk) | v (r·dv) | z
                // (r·dv)]; per key head, [b (r) | a (r)].
                let group = 2 * dk + 2 * r * dv;
                for t in 0..n {
                    let row = &qkvz[t * (2 * kd + 2 * vd)..][..2 * kd + 2 * vd];
                    let out = &mut mixed[t * channels..][..channels];
                    for g in 0..nk {
                        let src = &row[g * group..][..group];
                        out[g * dk..][..dk].copy_from_slice(&src[..dk]);
                        out[kd + g * dk..][..dk].copy_from_slice(&src[dk..2 * dk]);
                        out[2 * kd + g * r * dv..][..r * dv]
                            .copy_from_slice(&src[2 * dk..][..r * dv]);
                        z[t * vd + g * r * dv..][..r * dv]
                            .copy_from_slice(&src[2 * dk + r * dv..][..r * dv]);
                        let src = &ba[t * 2 * nv + g * 2 * r..][..2 * r];
                        b[t * nv + g * r..][..r].copy_from_slice(&src[..r]);
                        a[t * nv + g * r..][..r].copy_from_slice(&src[r..]);
                    }
                }
            }
            Projections::Split(maps) => {
                // Already in the convolution's order; z, b and a per value head.
                mixed = maps.qkv.forward(x, n, Activation::Identity);
                z = maps.z.forward(x, n, Activation::Identity);
                b = maps.b.forward(x, n, Activation::Identity);
                a = maps.a.forward(x, n, Activation::Identity);
            }
        }
        // Depthwise causal convolution (zeros before the first token), then SiLU.
        let kernel = s.conv_kernel;
        let mut conv = vec![0f32; n * channels];
        for t in 0..n {
            for c in 0..channels {
                let w = &self.conv[c * kernel..][..kernel];
                let mut acc = 0f32;
                for (j, &wj) in w.iter().enumerate() {
                    // Tap j reads token t + j − (kernel − 1).
                    if let Some(src) = (t + j).checked_sub(kernel - 1) {
                        acc += wj * mixed[src * channels + c];
                    }
                }
                conv[t * channels + c] = kernels::activation::silu(acc);
            }
        }
        let (mut q, mut k) = (vec![0f32; nv * n * dk], vec![0f32; nv * n * dk]);
        let mut v = vec![0f32; nv * n * dv];
        let (mut alpha, mut beta) = (vec![0f32; nv * n], vec![0f32; nv * n]);
        let scale = 1.0 / (dk as f32).sqrt();
        for h in 0..nv {
            let g = if self.tiled { h % nk } else { h / r };
            for t in 0..n {
                let row = &conv[t * channels..][..channels];
                let qh = &mut q[(h * n + t) * dk..][..dk];
                qh.copy_from_slice(&row[g * dk..][..dk]);
                l2norm(qh);
                qh.iter_mut().for_each(|x| *x *= scale);
                let kh = &mut k[(h * n + t) * dk..][..dk];
                kh.copy_from_slice(&row[kd + g * dk..][..dk]);
                l2norm(kh);
                v[(h * n + t) * dv..][..dv].copy_from_slice(&row[2 * kd + h * dv..][..dv]);
                let decay = self.neg_a[h] * softplus(a[t * nv + h] + self.dt_bias[h]);
                alpha[h * n + t] = decay.exp();
                beta[h * n + t] = sigmoid(b[t * nv + h]);
            }
        }
        DeltaInputs {
            n,
            q,
            k,
            v,
            alpha,
            beta,
            z,
        }
    }

    /// The rule's output `[value_heads, n, value_dim]`, by the recurrence over the state.
    pub fn recurrent(&self, inp: &DeltaInputs) -> Vec<f32> {
        let s = self.shape;
        let (nv, dk, dv, n) = (s.value_heads, s.key_dim, s.value_dim, inp.n);
        let mut out = vec![0f32; nv * n * dv];
        let mut state = vec![0f32; dk * dv];
        let mut mem = vec![0f32; dv];
        for h in 0..nv {
            state.fill(0.0);
            for t in 0..n {
                let (q, k) = (
                    &inp.q[(h * n + t) * dk..][..dk],
                    &inp.k[(h * n + t) * dk..][..dk],
                );
                let v = &inp.v[(h * n + t) * dv..][..dv];
                let (alpha, beta) = (inp.alpha[h * n + t], inp.beta[h * n + t]);
                state.iter_mut().for_each(|x| *x *= alpha);
                mem.fill(0.0);
                for i in 0..dk {
                    for j in 0..dv {
                        mem[j] += state[i * dv + j] * k[i];
                    }
                }
                for j in 0..dv {
                    mem[j] = (v[j] - mem[j]) * beta;
                }
                for i in 0..dk {
                    for j in 0..dv {
                        state[i * dv + j] += k[i] * mem[j];
                    }
                }
                let o = &mut out[(h * n + t) * dv..][..dv];
                for i in 0..dk {
                    for j in 0..dv {
                        o[j] += state[i * dv + j] * q[i];
                    }
                }
            }
        }
        out
    }

    /// The token-mixing matrix the rule applies to the values, `[value_heads, n, n]`: `o_t =
    /// Σ_{s≤t} A[t, s] · v_s` exactly, with `A[t, s] = β_s k_s · u_s` where `u_t = q_t` and
    /// `u_{s−1} = α_s (u_s − β_s k_s (k_s · u_s))` (the state's updates, read backwards from
    /// the query). Zero above the diagonal; rows need not sum to 1 and may be negative. The
    /// value heads are in transformers' order whatever order the file stores them in.
    pub fn mixing(&self, inp: &DeltaInputs) -> Vec<f32> {
        let s = self.shape;
        let (nv, dk, n) = (s.value_heads, s.key_dim, inp.n);
        let mut out = vec![0f32; nv * n * n];
        let mut u = vec![0f64; dk];
        for head in 0..nv {
            let h = self.stored_head(head);
            let out = &mut out[head * n * n..][..n * n];
            for t in 0..n {
                for (ui, &qi) in u.iter_mut().zip(&inp.q[(h * n + t) * dk..][..dk]) {
                    *ui = qi as f64;
                }
                for src in (0..=t).rev() {
                    let k = &inp.k[(h * n + src) * dk..][..dk];
                    let ku: f64 = k.iter().zip(&u).map(|(&a, b)| a as f64 * b).sum();
                    let beta = inp.beta[h * n + src] as f64;
                    out[t * n + src] = (beta * ku) as f32;
                    let alpha = inp.alpha[h * n + src] as f64;
                    for (ui, &ki) in u.iter_mut().zip(k) {
                        *ui = alpha * (*ui - beta * ki as f64 * ku);
                    }
                }
            }
        }
        out
    }

    /// A `[value_heads, …]` array of the stored heads (the rule's output, the values) with its
    /// heads in transformers' order, as [`GatedDeltaNet::mixing`] gives them.
    pub fn in_model_order(&self, x: Vec<f32>) -> Vec<f32> {
        if !self.tiled {
            return x;
        }
        let per = x.len() / self.shape.value_heads;
        (0..self.shape.value_heads)
            .flat_map(|head| {
                let h = self.stored_head(head);
                x[h * per..][..per].iter().copied()
            })
            .collect()
    }

    /// Where transformers' value head `head` (value head `head % r` of key head `head / r`, r
    /// value heads per key head) is stored: there, or at `(head % r) · key_heads + head / r` in
    /// the tiled order.
    fn stored_head(&self, head: usize) -> usize {
        if !self.tiled {
            return head;
        }
        let r = self.shape.value_heads / self.shape.key_heads;
        (head % r) * self.shape.key_heads + head / r
    }

    /// [`GatedDeltaNet::mixing`] of the first `len` tokens only, `[value_heads, len, len]`
    /// (the rule is causal: later tokens do not change earlier rows).
    pub fn mixing_prefix(&self, inp: &DeltaInputs, len: usize) -> Vec<f32> {
        let full = self.mixing(inp);
        let n = inp.n;
        if len == n {
            return full;
        }
        let mut out = Vec::with_capacity(self.shape.value_heads * len * len);
        for h in 0..self.shape.value_heads {
            for t in 0..len {
                out.extend_from_slice(&full[(h * n + t) * n..][..len]);
            }
        }
        out
    }

    /// The block's output `[n, hidden]` from the rule's output `core` (`[value_heads, n,
    /// value_dim]`): the gated RMSNorm, then `out_proj`.
    pub fn finish(&self, core: &[f32], inp: &DeltaInputs) -> Vec<f32> {
        let s = self.shape;
        let (nv, dv, n) = (s.value_heads, s.value_dim, inp.n);
        let mut normed = vec![0f32; n * nv * dv];
        for t in 0..n {
            for h in 0..nv {
                let o = &core[(h * n + t) * dv..][..dv];
                let var = o.iter().map(|x| x * x).sum::<f32>() / dv as f32;
                let inv = 1.0 / (var + self.eps).sqrt();
                let z = &inp.z[t * nv * dv + h * dv..][..dv];
                let dst = &mut normed[t * nv * dv + h * dv..][..dv];
                for j in 0..dv {
                    dst[j] = self.norm[j] * (o[j] * inv) * kernels::activation::silu(z[j]);
                }
            }
        }
        self.out_proj.forward(&normed, n, Activation::Identity)
    }

    /// The block over one sequence's `n` rows of `x`.
    pub fn forward(&self, x: &[f32], n: usize) -> Vec<f32> {
        let inp = self.inputs(x, n);
        let core = self.recurrent(&inp);
        self.finish(&core, &inp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::weights::Weight;
    use crate::kernels::Layout;

    /// A random gated delta block: the mixing matrix times the values is the recurrence's
    /// output, exactly up to rounding.
    #[test]
    fn the_mixing_matrix_times_the_values_is_the_rule_s_output() {
        use crate::kernels::testing::random;
        let shape = LinearShape {
            key_heads: 2,
            value_heads: 4,
            key_dim: 8,
            value_dim: 6,
            conv_kernel: 3,
        };
        let hidden = 12;
        let (kd, vd) = (16, 24);
        let w = |rows: usize, cols: usize, seed: u64| {
            Linear::new(
                Weight::owned(random(rows * cols, seed, 0.5), vec![rows, cols]),
                Layout::OutIn,
                None,
            )
        };
        let net = GatedDeltaNet {
            shape,
            proj: Projections::Grouped {
                qkvz: w(2 * kd + 2 * vd, hidden, 1),
                ba: w(8, hidden, 2),
            },
            conv: random(shape.conv_channels() * 3, 3, 0.5),
            dt_bias: random(4, 4, 0.5),
            neg_a: random(4, 5, 0.5).iter().map(|x| -(x.abs() + 0.1)).collect(),
            norm: vec![1.0; 6],
            eps: 1e-6,
            out_proj: w(hidden, vd, 6),
            tiled: false,
        };
        let n = 9;
        let inp = net.inputs(&random(n * hidden, 7, 0.5), n);
        let core = net.recurrent(&inp);
        let a = net.mixing(&inp);
        let dv = shape.value_dim;
        let mut worst = 0f32;
        for h in 0..4 {
            for t in 0..n {
                for j in 0..dv {
                    let mut acc = 0f64;
                    for s in 0..n {
                        acc += a[(h * n + t) * n + s] as f64 * inp.v[(h * n + s) * dv + j] as f64;
                    }
                    worst = worst.max((acc as f32 - core[(h * n + t) * dv + j]).abs());
                }
                for s in t + 1..n {
                    assert_eq!(a[(h * n + t) * n + s], 0.0);
                }
            }
        }
        assert!(worst < 1e-5, "{worst}");
        assert!(
            a.iter().any(|&x| x < 0.0),
            "some mixing weights are negative"
        );
    }

    /// Qwen3.5's four plain projections holding Qwen3-Next's grouped rows, reordered, give the
    /// rule the same inputs: the two layouts are read as transformers orders them.
    #[test]
    fn the_split_layout_is_the_grouped_one_reordered() {
        use crate::kernels::testing::random;
        let shape = LinearShape {
            key_heads: 2,
            value_heads: 6,
            key_dim: 4,
            value_dim: 5,
            conv_kernel: 4,
        };
        let (nk, nv, dk, dv) = (2, 6, 4, 5);
        let (r, kd, vd, hidden) = (nv / nk, nk * dk, nv * dv, 7);
        let qkvz = random((2 * kd + 2 * vd) * hidden, 11, 0.5);
        let ba = random(2 * nv * hidden, 12, 0.5);
        let rows = |from: &[f32], which: &[usize]| -> Linear {
            let data: Vec<f32> = which
                .iter()
                .flat_map(|&i| from[i * hidden..][..hidden].iter().copied())
                .collect();
            Linear::new(
                Weight::owned(data, vec![which.len(), hidden]),
                Layout::OutIn,
                None,
            )
        };
        let group = 2 * dk + 2 * r * dv;
        let (mut qkv, mut z, mut b, mut a) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for g in 0..nk {
            qkv.extend(g * group..g * group + dk);
        }
        for g in 0..nk {
            qkv.extend(g * group + dk..g * group + 2 * dk);
        }
        for g in 0..nk {
            qkv.extend(g * group + 2 * dk..g * group + 2 * dk + r * dv);
            z.extend(g * group + 2 * dk + r * dv..(g + 1) * group);
            b.extend(g * 2 * r..g * 2 * r + r);
            a.extend(g * 2 * r + r..(g + 1) * 2 * r);
        }
        let all = |count: usize| (0..count).collect::<Vec<_>>();
        let net = |proj: Projections| GatedDeltaNet {
            shape,
            proj,
            conv: random(shape.conv_channels() * 4, 13, 0.5),
            dt_bias: random(nv, 14, 0.5),
            neg_a: random(nv, 15, 0.5)
                .iter()
                .map(|x| -(x.abs() + 0.1))
                .collect(),
            norm: vec![1.0; dv],
            eps: 1e-6,
            out_proj: Linear::new(
                Weight::owned(random(hidden * vd, 16, 0.5), vec![hidden, vd]),
                Layout::OutIn,
                None,
            ),
            tiled: false,
        };
        let grouped = net(Projections::Grouped {
            qkvz: rows(&qkvz, &all(2 * kd + 2 * vd)),
            ba: rows(&ba, &all(2 * nv)),
        });
        let split = net(Projections::Split(Box::new(SplitMaps {
            qkv: rows(&qkvz, &qkv),
            z: rows(&qkvz, &z),
            b: rows(&ba, &b),
            a: rows(&ba, &a),
        })));
        let n = 6;
        let x = random(n * hidden, 17, 0.5);
        let (one, two) = (grouped.inputs(&x, n), split.inputs(&x, n));
        for (what, p, q) in [
            ("q", &one.q, &two.q),
            ("k", &one.k, &two.k),
            ("v", &one.v, &two.v),
            ("alpha", &one.alpha, &two.alpha),
            ("beta", &one.beta, &two.beta),
            ("z", &one.z, &two.z),
        ] {
            let worst = p
                .iter()
                .zip(q)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(worst < 1e-6, "{what}: {worst}");
        }
        let worst = grouped
            .forward(&x, n)
            .iter()
            .zip(&split.forward(&x, n))
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst < 1e-6, "output: {worst}");
    }

    /// The converter's tiled value heads (`_LinearAttentionVReorderBase`: value head i of every
    /// key head, then i + 1) read as tiled give the same block output, and the same token
    /// mixing, rule output and values in transformers' order, as the grouped original.
    #[test]
    fn tiled_value_heads_are_read_as_transformers_orders_them() {
        use crate::kernels::testing::random;
        let shape = LinearShape {
            key_heads: 2,
            value_heads: 6,
            key_dim: 4,
            value_dim: 5,
            conv_kernel: 4,
        };
        let (nk, nv, dk, dv, kernel) = (2, 6, 4, 5, 4);
        let (r, kd, vd, hidden) = (nv / nk, nk * dk, nv * dv, 7);
        // Where tiled head t's rows come from: head (t % nk) · r + t / nk in grouped order.
        let source = |t: usize| (t % nk) * r + t / nk;
        let heads = |width: usize| -> Vec<usize> {
            (0..nv)
                .flat_map(|t| (0..width).map(move |j| source(t) * width + j))
                .collect()
        };
        let pick = |from: &[f32], which: &[usize], width: usize| -> Vec<f32> {
            which
                .iter()
                .flat_map(|&i| from[i * width..][..width].iter().copied())
                .collect()
        };
        let linear = |data: Vec<f32>, rows: usize, cols: usize| {
            Linear::new(Weight::owned(data, vec![rows, cols]), Layout::OutIn, None)
        };
        let (qkv, z) = (
            random((2 * kd + vd) * hidden, 21, 0.5),
            random(vd * hidden, 22, 0.5),
        );
        let (b, a) = (random(nv * hidden, 23, 0.5), random(nv * hidden, 24, 0.5));
        let conv = random(shape.conv_channels() * kernel, 25, 0.5);
        let dt_bias = random(nv, 26, 0.5);
        let neg_a: Vec<f32> = random(nv, 27, 0.5)
            .iter()
            .map(|x| -(x.abs() + 0.1))
            .collect();
        let out = random(hidden * vd, 28, 0.5);
        let qk_then = |v: Vec<usize>| -> Vec<usize> {
            (0..2 * kd)
                .chain(v.into_iter().map(|i| 2 * kd + i))
                .collect()
        };
        let grouped = GatedDeltaNet {
            shape,
            proj: Projections::Split(Box::new(SplitMaps {
                qkv: linear(qkv.clone(), 2 * kd + vd, hidden),
                z: linear(z.clone(), vd, hidden),
                b: linear(b.clone(), nv, hidden),
                a: linear(a.clone(), nv, hidden),
            })),
            conv: conv.clone(),
            dt_bias: dt_bias.clone(),
            neg_a: neg_a.clone(),
            norm: random(dv, 29, 0.5),
            eps: 1e-6,
            out_proj: linear(out.clone(), hidden, vd),
            tiled: false,
        };
        let out_tiled: Vec<f32> = (0..hidden)
            .flat_map(|o| {
                let row = &out[o * vd..][..vd];
                heads(dv).into_iter().map(move |i| row[i])
            })
            .collect();
        let tiled = GatedDeltaNet {
            shape,
            proj: Projections::Split(Box::new(SplitMaps {
                qkv: linear(pick(&qkv, &qk_then(heads(dv)), hidden), 2 * kd + vd, hidden),
                z: linear(pick(&z, &heads(dv), hidden), vd, hidden),
                b: linear(pick(&b, &heads(1), hidden), nv, hidden),
                a: linear(pick(&a, &heads(1), hidden), nv, hidden),
            })),
            conv: pick(&conv, &qk_then(heads(dv)), kernel),
            dt_bias: pick(&dt_bias, &heads(1), 1),
            neg_a: pick(&neg_a, &heads(1), 1),
            norm: grouped.norm.clone(),
            eps: 1e-6,
            out_proj: linear(out_tiled, hidden, vd),
            tiled: true,
        };
        let n = 6;
        let x = random(n * hidden, 30, 0.5);
        let (one, two) = (grouped.inputs(&x, n), tiled.inputs(&x, n));
        let worst = |p: &[f32], q: &[f32]| {
            assert_eq!(p.len(), q.len());
            p.iter()
                .zip(q)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max)
        };
        for (what, p, q) in [
            ("output", grouped.forward(&x, n), tiled.forward(&x, n)),
            ("mixing", grouped.mixing(&one), tiled.mixing(&two)),
            (
                "rule output",
                grouped.recurrent(&one),
                tiled.in_model_order(tiled.recurrent(&two)),
            ),
            ("values", one.v.clone(), tiled.in_model_order(two.v.clone())),
        ] {
            let d = worst(&p, &q);
            assert!(d < 1e-6, "{what}: {d}");
        }
        // Read as grouped, the tiled file would pair value heads with the wrong key heads.
        let wrong = GatedDeltaNet {
            tiled: false,
            ..tiled
        };
        assert!(worst(&grouped.forward(&x, n), &wrong.forward(&x, n)) > 1e-3);
    }
}
