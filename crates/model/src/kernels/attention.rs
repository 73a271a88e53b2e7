//! Multi-head scaled dot-product attention with capture: the probabilities (and, on request, the
//! query and key vectors) are written once, straight into the caller's buffers.
//!
//! The variations between families are parameters of [`AttentionSpec`]:
//! - **mask**: bidirectional (encoders) or causal (decoders: query `i` sees keys `0..=i`, shifted
//!   right by `keys − queries` when the keys run ahead of the queries, as with a KV cache);
//! - **heads → key/value heads**: grouped-query attention shares one key/value head among
//!   several query heads ([`AttentionSpec::kv_head`]: the identity for ordinary multi-head
//!   attention, `h / (heads / kv_heads)` for Llama's GQA);
//! - **scale**: `1/√d` for most families, 1 for T5;
//! - **sliding window**: a causal query sees only the `window` keys ending at its own position
//!   (Mistral, Gemma 2/3, Qwen with `use_sliding_window`); keys before the window get exactly 0;
//! - **image blocks**: under a causal mask, runs of keys that also see each other in full
//!   ([`Block`]: Gemma 3's image tokens attend bidirectionally within one picture);
//! - **soft-capping**: scores become `tanh(s/c)·c` before the mask and softmax (Gemma 2);
//! - **score bias**: something added to the scores before the softmax ([`ScoreBias`]: T5's
//!   relative position buckets);
//! - **sinks**: a learned logit per head that enters each row's softmax as one more key without
//!   a value (gpt-oss's `sinks`): the row's probabilities over the real keys then sum to less
//!   than 1, the rest being the sink's ([`AttentionSpec::sink_logits`]);
//! - **operands**: queries, keys and values are read with strides from wherever they are (the
//!   fused Q|K|V projection of self-attention, or a decoder's queries against an encoder's keys
//!   and values in cross-attention, where query and key lengths differ).

use super::gemm::Parallelism;
use rayon::prelude::*;

use super::{exp, SharedMut, LANES};
use attnviz_core::attention::summary::SummaryBuilder;
use std::sync::Mutex;

/// Which keys each query may see: every (non-padding) key (encoders), or keys up to the query's
/// own position (decoders). The same type the captured value carries, so that what the kernel
/// computed is what the views are told.
pub use crate::attention::MaskKind as Mask;

/// A bias added to the attention scores (after scaling, before the mask and the softmax).
pub trait ScoreBias: Sync {
    /// Add the bias of sequence `sequence`, head `head` and query `query` to `scores`, that
    /// query's row over keys `0..scores.len()`.
    fn add(&self, sequence: usize, head: usize, query: usize, scores: &mut [f32]);
}

/// A run of positions `start..end` of sequence `sequence` (key positions, counted from the
/// first cached key) whose queries see every key of the run, later ones included, on top of a
/// causal mask: transformers' `or_mask_function` over Gemma 3's image tokens (`windowed`: a
/// sliding window still applies on top, as its `and_mask_function`), or its
/// `block_sequence_ids` over PaliGemma's prefix (not `windowed`: the block is ORed onto the
/// windowed causal mask, so a query sees its whole block however far back it starts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// The sequence of the batch.
    pub sequence: usize,
    /// The first position of the run.
    pub start: usize,
    /// One past its last.
    pub end: usize,
    /// Whether a sliding window still cuts inside the run.
    pub windowed: bool,
}

/// Where one operand (queries, keys or values) of a batch sits: the vector of head `h` for
/// token `t` of sequence `s` is `data[(s·tokens + t)·stride + offset + h·head_dim ..][..head_dim]`,
/// with `tokens` the padded length of that side (see [`AttentionSpec`]).
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a> {
    /// The buffer.
    pub data: &'a [f32],
    /// Where head 0 starts within a row.
    pub offset: usize,
    /// Values per row.
    pub stride: usize,
}

/// The shape and variations of one attention call.
#[derive(Clone, Copy)]
pub struct AttentionSpec<'a> {
    /// Sequences in the batch.
    pub batch: usize,
    /// Rows per sequence on the query side, padding included.
    pub query_tokens: usize,
    /// Rows per sequence on the key/value side, padding included.
    pub key_tokens: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// The key/value head each query head reads (`heads` entries, each `< kv_heads`).
    pub kv_head: &'a [usize],
    /// Size of one head's vectors.
    pub head_dim: usize,
    /// Factor on `q·k` (`1/√head_dim` for most families).
    pub scale: f32,
    /// Which keys a query sees.
    pub mask: Mask,
    /// Added to the scores before the softmax, if any.
    pub bias: Option<&'a dyn ScoreBias>,
    /// A causal sliding window: query `i` sees keys `i − window + 1 ..= i` (transformers'
    /// `kv_idx > q_idx − sliding_window`); `None`: every earlier key.
    pub window: Option<usize>,
    /// Soft-capping of the scaled scores, `tanh(s/c)·c` (Gemma 2's
    /// `attn_logit_softcapping`), applied before the bias and the mask.
    pub softcap: Option<f32>,
    /// Runs of positions that see each other in full under the causal mask (empty: none).
    pub blocks: &'a [Block],
    /// One learned sink logit per query head (gpt-oss's `self_attn.sinks`), taking its share of
    /// every row's softmax as an extra column that is then dropped (transformers' eager
    /// attention): the probabilities over the keys sum to `1 − sink mass`. `None`: no sink.
    pub sink_logits: Option<&'a [f32]>,
}

/// A zeroed buffer of `len` floats for the captured probabilities (75 MB for MiniLM at 512
/// tokens), written once, in full, by [`attention`].
///
/// The memory comes fresh from the kernel (`calloc` of a large block maps new zero pages, so
/// nothing is written here), and on Linux it is marked for transparent huge pages before the
/// first write: the kernel then faults it in 2 MiB at a time instead of 4 KiB, about 40 faults
/// instead of 18 000 for those 75 MB. Measured on MiniLM at 512 tokens: repeated forward passes
/// ran about 20 % faster, and a single CLI run took the same time. (The weights are not marked:
/// on this VM a first-touched huge page often comes from memory the host has taken back, and
/// loading bert-base that way took twice as long.) Without huge pages (disabled, or another OS)
/// it is a plain zeroed `Vec`.
pub fn capture_buffer(len: usize) -> Vec<f32> {
    let mut buf = vec![0f32; len];
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = buf.as_mut_ptr() as usize;
        let end = start + len * std::mem::size_of::<f32>();
        let (first, last) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
        if last > first {
            // SAFETY: advice on pages inside our own allocation; it changes no contents.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    last - first,
                    libc::MADV_HUGEPAGE,
                );
            }
        }
    }
    buf
}

/// Where one sequence's captured values for one layer go.
pub struct CaptureSink<'a> {
    /// Attention probabilities `[heads, queries, keys]`, row = query, column = key; `None` when
    /// they are not kept (a layer left out of the capture, or a generation step), and each task
    /// then works in a buffer of its own block's size.
    pub probs: Option<&'a mut [f32]>,
    /// Query vectors `[heads, queries, head_dim]` and key vectors `[kv_heads, keys, head_dim]`,
    /// as the scores used them (before the scale), when asked for.
    pub query_key: Option<(&'a mut [f32], &'a mut [f32])>,
    /// A long input's summary of this layer ([`SummaryBuilder`]): each block of rows is
    /// summarised once its softmax is done, then forgotten. Usually with `probs: None`, so the
    /// layer never holds more than each task's block of rows.
    pub summary: Option<&'a mut SummaryBuilder>,
}

#[inline(always)]
fn max_of(xs: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for i in 0..LANES {
            acc[i] = if c[i] > acc[i] { c[i] } else { acc[i] };
        }
    }
    let mut m = f32::NEG_INFINITY;
    for &v in acc.iter().chain(rest) {
        m = if v > m { v } else { m };
    }
    m
}

/// `xs[i] = exp(xs[i] − shift)`; returns the sum of the results.
#[inline(always)]
fn exp_shifted_sum(xs: &mut [f32], shift: f32) -> f32 {
    let mut acc = [0f32; LANES];
    let mut chunks = xs.chunks_exact_mut(LANES);
    for c in &mut chunks {
        for i in 0..LANES {
            c[i] = exp(c[i] - shift);
            acc[i] += c[i];
        }
    }
    let mut tail = 0f32;
    for v in chunks.into_remainder() {
        *v = exp(*v - shift);
        tail += *v;
    }
    acc.iter().sum::<f32>() + tail
}

/// Lanes of partial sums in the one-query kernels: a zmm register's worth.
const DOT_LANES: usize = 16;

/// One query's scores, `out[j] = scale · (q · k_j)` for the keys `j < out.len()`, key `j` the
/// `q.len()` values at `k[j · stride..]`. On AVX-512, head sizes of whole vectors take eight
/// keys at a time and add their eight sums up together ([`one_query_scores_avx512`]): one
/// shuffle tree for eight keys instead of a horizontal sum per key, which was half of the
/// instructions at a head size of 64 (Whisper's cross-attention over 1,500 frames, read once
/// per generated token).
fn one_query_scores(q: &[f32], k: &[f32], stride: usize, scale: f32, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        let d = q.len();
        let fits = out.is_empty() || k.len() >= (out.len() - 1) * stride + d;
        if d > 0 && d.is_multiple_of(16) && fits && attnviz_core::simd::isa() == super::Isa::Avx512
        {
            // SAFETY: the CPU has AVX-512 (checked at run time by `isa`), and every key the
            // kernel reads, `k[j · stride..][..d]` for `j < out.len()`, is inside `k` (`fits`).
            unsafe { one_query_scores_avx512(q, k, stride, scale, out) };
            return;
        }
    }
    one_query_scores_portable(q, k, stride, scale, out);
}

/// [`one_query_scores`] with AVX-512, eight keys at a time.
///
/// # Safety
/// The CPU has AVX-512F; `q.len()` is a multiple of 16 and `k` holds `(out.len() − 1) · stride +
/// q.len()` values at least.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn one_query_scores_avx512(
    q: &[f32],
    k: &[f32],
    stride: usize,
    scale: f32,
    out: &mut [f32],
) {
    use std::arch::x86_64::*;
    let chunks = q.len() / 16;
    let (qp, kp) = (q.as_ptr(), k.as_ptr());
    let n = out.len();
    let mut j = 0;
    while j + 8 <= n {
        let mut acc = [_mm512_setzero_ps(); 8];
        for c in 0..chunks {
            // SAFETY: values c·16.. + 16 ≤ q.len() of q, and of key j + r < n (the contract).
            unsafe {
                let qv = _mm512_loadu_ps(qp.add(c * 16));
                for (r, acc) in acc.iter_mut().enumerate() {
                    *acc = _mm512_fmadd_ps(
                        qv,
                        _mm512_loadu_ps(kp.add((j + r) * stride + c * 16)),
                        *acc,
                    );
                }
            }
        }
        // Per 128-bit lane L: [a₀+a₂, b₀+b₂, a₁+a₃, b₁+b₃] for the pairs (0, 1), (2, 3), …
        let pair = |a: __m512, b: __m512| {
            _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b))
        };
        // Per lane L: the four keys' sums over that lane, [A_L, B_L, C_L, D_L].
        let four = |ab: __m512, cd: __m512| {
            _mm512_add_ps(
                _mm512_shuffle_ps::<0b01_00_01_00>(ab, cd),
                _mm512_shuffle_ps::<0b11_10_11_10>(ab, cd),
            )
        };
        let t0 = four(pair(acc[0], acc[1]), pair(acc[2], acc[3]));
        let t1 = four(pair(acc[4], acc[5]), pair(acc[6], acc[7]));
        // Lanes [t0₀+t0₂, t0₁+t0₃, t1₀+t1₂, t1₁+t1₃], then each pair of lanes added.
        let u = _mm512_add_ps(
            _mm512_shuffle_f32x4::<0b01_00_01_00>(t0, t1),
            _mm512_shuffle_f32x4::<0b11_10_11_10>(t0, t1),
        );
        let v = _mm512_add_ps(u, _mm512_shuffle_f32x4::<0b10_11_00_01>(u, u));
        let sums = _mm512_castps512_ps256(_mm512_shuffle_f32x4::<0b00_00_10_00>(v, v));
        // SAFETY: outputs j..j + 8 ≤ n.
        unsafe {
            _mm256_storeu_ps(
                out.as_mut_ptr().add(j),
                _mm256_mul_ps(sums, _mm256_set1_ps(scale)),
            )
        };
        j += 8;
    }
    for (j, o) in out.iter_mut().enumerate().skip(j) {
        let mut acc = _mm512_setzero_ps();
        for c in 0..chunks {
            // SAFETY: as above, for key j < n.
            unsafe {
                acc = _mm512_fmadd_ps(
                    _mm512_loadu_ps(qp.add(c * 16)),
                    _mm512_loadu_ps(kp.add(j * stride + c * 16)),
                    acc,
                );
            }
        }
        *o = scale * _mm512_reduce_add_ps(acc);
    }
}

multiversion! {
    /// [`one_query_scores`] on any CPU: a horizontal sum per key.
    fn one_query_scores_portable(q: &[f32], k: &[f32], stride: usize, scale: f32, out: &mut [f32]) {
        let d = q.len();
        let whole = d / DOT_LANES * DOT_LANES;
        for (j, o) in out.iter_mut().enumerate() {
            let kj = &k[j * stride..][..d];
            let mut acc = [0f32; DOT_LANES];
            for (qc, kc) in q[..whole].chunks_exact(DOT_LANES).zip(kj[..whole].chunks_exact(DOT_LANES)) {
                for i in 0..DOT_LANES {
                    acc[i] += qc[i] * kc[i];
                }
            }
            let mut sum = 0f32;
            for (a, b) in q[whole..].iter().zip(&kj[whole..]) {
                sum += a * b;
            }
            *o = scale * (acc.iter().sum::<f32>() + sum);
        }
    }
}

multiversion! {
    /// One query's context, `out = Σ_j p_j · v_j` over the keys `j < p.len()`, value `j` the
    /// `out.len()` values at `v[j · stride..]`.
    fn one_query_mix(p: &[f32], v: &[f32], stride: usize, out: &mut [f32]) {
        let d = out.len();
        out.fill(0.0);
        for (j, &pj) in p.iter().enumerate() {
            for (o, x) in out.iter_mut().zip(&v[j * stride..][..d]) {
                *o += pj * x;
            }
        }
    }
}

multiversion! {
    /// Softmax of the first `width` values of each row of `block` (rows of `stride` values), in
    /// place: `exp(x − max) / Σ exp(x − max)`. −∞ entries (masked keys) become exactly 0.
    pub fn softmax_rows(block: &mut [f32], stride: usize, width: usize) {
        for row in block.chunks_exact_mut(stride) {
            let row = &mut row[..width];
            let max = max_of(row);
            let sum = exp_shifted_sum(row, max);
            let inv = 1.0 / sum;
            for v in row.iter_mut() {
                *v *= inv;
            }
        }
    }
}

/// Softmax of the first `width` values of each row of `block` (rows of `stride` values) and
/// one more logit `sink` that is then dropped, in place: `exp(x − m) / (Σ exp(x − m) + exp(sink
/// − m))` with `m` the largest of the row and the sink (transformers' gpt-oss eager attention:
/// the sink column concatenated, the max subtracted, softmax, the column dropped). −∞ entries
/// become exactly 0; the row sums to 1 less the sink's share.
pub fn softmax_rows_with_sink(block: &mut [f32], stride: usize, width: usize, sink: f32) {
    for row in block.chunks_exact_mut(stride) {
        let row = &mut row[..width];
        let max = max_of(row).max(sink);
        let sum = exp_shifted_sum(row, max) + exp(sink - max);
        let inv = 1.0 / sum;
        for v in row.iter_mut() {
            *v *= inv;
        }
    }
}

/// Query rows per task: enough tasks for every thread to stay busy (three per thread, so a
/// thread slowed by other work on the machine is made up for), but as many rows as possible
/// otherwise, since each gemm call packs its operands anew (at 512 tokens, 256-row blocks ran
/// 15 % faster than 64-row ones), and no more than fit a block of scores in a core's L2 cache
/// (512 KiB) between the softmax and `P·V`.
fn block_rows(spec: &AttentionSpec<'_>, key_lengths: &[usize]) -> usize {
    let longest = key_lengths.iter().copied().max().unwrap_or(1).max(1);
    let total_rows = spec.batch * spec.heads * spec.query_tokens;
    let threads = rayon::current_num_threads().max(1);
    let for_threads = total_rows.div_ceil(3 * threads);
    let for_cache = (128 * 1024 / longest).max(16);
    for_threads.clamp(16, 256).min(for_cache)
}

/// Multi-head attention with capture.
///
/// For each sequence `s` of the batch, its first `query_lengths[s]` query rows attend over its
/// first `key_lengths[s]` keys (padding keys get exactly zero probability, as with an additive
/// −∞ mask). For each head `h`: `P = softmax(scale·Q_h·K_gᵀ + bias, mask)` with `g =
/// kv_head[h]`, written into `sinks[s].probs`, then `P·V_g` into `context` (`[batch,
/// query_tokens, heads·head_dim]`, heads concatenated). Rows of padding queries get a zero
/// context (nothing reads them: no real query sees a padding key). The query and key vectors go
/// to `sinks[s].query_key` when it is `Some`.
#[allow(clippy::too_many_arguments)]
pub fn attention(
    q: Operand<'_>,
    k: Operand<'_>,
    v: Operand<'_>,
    spec: &AttentionSpec<'_>,
    query_lengths: &[usize],
    key_lengths: &[usize],
    sinks: &mut [CaptureSink<'_>],
    context: &mut [f32],
) {
    let &AttentionSpec {
        batch,
        query_tokens: nq,
        key_tokens: nk,
        heads,
        kv_heads,
        kv_head,
        head_dim: d,
        scale,
        mask,
        bias,
        window,
        softcap,
        blocks,
        sink_logits,
    } = spec;
    let hidden = heads * d;
    assert!(
        kv_head.len() == heads && kv_head.iter().all(|&g| g < kv_heads),
        "one key/value head below {kv_heads} per query head"
    );
    assert!(
        window.is_none_or(|w| w > 0 && mask == Mask::Causal),
        "a sliding window is a positive width under a causal mask"
    );
    assert!(
        blocks.is_empty() || mask == Mask::Causal,
        "image blocks widen a causal mask"
    );
    assert!(
        sink_logits.is_none_or(|s| s.len() == heads),
        "one sink logit per query head"
    );
    let fits = |o: &Operand<'_>, rows: usize, width: usize| {
        o.offset + width <= o.stride && o.data.len() >= batch * rows * o.stride
    };
    assert!(fits(&q, nq, hidden), "query operand shape");
    assert!(fits(&k, nk, kv_heads * d), "key operand shape");
    assert!(fits(&v, nk, kv_heads * d), "value operand shape");
    assert_eq!(context.len(), batch * nq * hidden, "context shape");
    assert!(
        query_lengths.len() == batch && key_lengths.len() == batch && sinks.len() == batch,
        "one length pair and sink per sequence"
    );
    for ((sink, &lq), &lk) in sinks.iter().zip(query_lengths).zip(key_lengths) {
        assert!(
            (1..=nq).contains(&lq) && (1..=nk).contains(&lk),
            "sequence lengths {lq}, {lk} outside 1..={nq}, 1..={nk}"
        );
        assert!(
            mask == Mask::Bidirectional || lk >= lq,
            "a causal mask needs at least as many keys as queries"
        );
        if let Some(probs) = &sink.probs {
            assert_eq!(probs.len(), heads * lq * lk, "probability buffer");
        }
        if let Some((qs, ks)) = &sink.query_key {
            assert!(
                qs.len() == heads * lq * d && ks.len() == kv_heads * lk * d,
                "query/key buffers"
            );
        }
    }
    let block = block_rows(spec, key_lengths);

    // One task per (sequence, head, block of real query rows).
    let mut tasks = Vec::new();
    for (s, &len) in query_lengths.iter().enumerate() {
        for h in 0..heads {
            for r in (0..len).step_by(block) {
                tasks.push((s, h, r, (r + block).min(len)));
            }
        }
    }
    let probs: Vec<Option<SharedMut>> = sinks
        .iter_mut()
        .map(|k| k.probs.as_mut().map(|p| SharedMut(p.as_mut_ptr())))
        .collect();
    // Padding query rows: zero context.
    for (s, &len) in query_lengths.iter().enumerate() {
        context[(s * nq + len) * hidden..(s + 1) * nq * hidden].fill(0.0);
    }
    let ctx = SharedMut(context.as_mut_ptr());
    let shapes: Vec<_> = sinks
        .iter()
        .map(|k| k.summary.as_ref().map(|b| b.shape().clone()))
        .collect();
    let summaries: Vec<Option<Mutex<&mut SummaryBuilder>>> = sinks
        .iter_mut()
        .map(|k| k.summary.as_deref_mut().map(Mutex::new))
        .collect();

    tasks.par_iter().for_each(|&(s, h, r0, r1)| {
        let (lq, lk) = (query_lengths[s], key_lengths[s]);
        let g = kv_head[h];
        let rows = r1 - r0;
        // Causal: query i sees keys 0..=i + shift; keys from r1 + shift on are masked for the
        // whole block, so they are neither computed nor read.
        let shift = lk - lq.min(lk);
        let block_of = |p: usize| {
            blocks
                .iter()
                .find(|b| b.sequence == s && b.start <= p && p < b.end)
        };
        // A query inside a block sees its block's keys up to the block's end.
        let block_end = |p: usize| block_of(p).map_or(p + 1, |b| b.end.max(p + 1));
        let cols = match mask {
            Mask::Bidirectional => lk,
            Mask::Causal => (r0..r1)
                .map(|i| block_end(i + shift))
                .max()
                .unwrap_or(r1 + shift)
                .min(lk),
        };
        let qp = &q.data[(s * nq + r0) * q.stride + q.offset + h * d..];
        let kp = &k.data[s * nk * k.stride + k.offset + g * d..];
        let vp = &v.data[s * nk * v.stride + v.offset + g * d..];
        let mut scratch = Vec::new();
        let p: &mut [f32] = match probs[s] {
            // SAFETY: tasks own disjoint rows r0..r1 of head h of sequence s, inside sink s's
            // [heads, lq, lk] buffer (checked above).
            Some(buf) => unsafe {
                std::slice::from_raw_parts_mut(buf.ptr().add((h * lq + r0) * lk), rows * lk)
            },
            None => {
                scratch.resize(rows * lk, 0.0);
                &mut scratch
            }
        };
        if rows == 1 {
            // One query (a generated token): dot products, not a gemm call that packs Kᵀ.
            one_query_scores(&qp[..d], kp, k.stride, scale, &mut p[..cols]);
        } else {
            // SAFETY: lhs rows r0..r1 of Q (row stride q.stride, d values each) and rhs Kᵀ over
            // keys 0..cols (column stride k.stride, d values each) lie inside the operands checked
            // above; dst is the task's [rows, lk] block of `p`, of which columns 0..cols are written.
            unsafe {
                super::gemm::gemm(
                    rows,
                    cols,
                    d,
                    p.as_mut_ptr(),
                    1,
                    lk as isize,
                    false,
                    qp.as_ptr(),
                    1,
                    q.stride as isize,
                    kp.as_ptr(),
                    k.stride as isize,
                    1,
                    0.0,
                    scale,
                    Parallelism::None,
                );
            }
        }
        for (i, row) in p.chunks_exact_mut(lk).enumerate() {
            let query = r0 + i;
            if let Some(cap) = softcap {
                for v in &mut row[..cols] {
                    *v = (*v / cap).tanh() * cap;
                }
            }
            if let Some(bias) = bias {
                bias.add(s, h, query, &mut row[..cols]);
            }
            if mask == Mask::Causal {
                row[block_end(query + shift).min(cols)..cols].fill(f32::NEG_INFINITY);
            }
            if let Some(w) = window {
                // Keys more than `w − 1` positions before the query's own, but for those of an
                // unwindowed block it is in.
                let mut first = (query + shift + 1).saturating_sub(w).min(cols);
                if let Some(b) = block_of(query + shift).filter(|b| !b.windowed) {
                    first = first.min(b.start);
                }
                row[..first].fill(f32::NEG_INFINITY);
            }
            row[cols..].fill(0.0);
        }
        match sink_logits {
            Some(sinks) => softmax_rows_with_sink(p, lk, cols, sinks[h]),
            None => softmax_rows(p, lk, cols),
        }
        if let (Some(shape), Some(builder)) = (&shapes[s], &summaries[s]) {
            let part = shape.summarise(h, r0, p, lk, shift);
            builder
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .merge(part);
        }
        if rows == 1 {
            // SAFETY: context row r0, columns h·d..(h+1)·d of sequence s belong to this task
            // alone (inside `context`, checked above).
            let out = unsafe {
                std::slice::from_raw_parts_mut(ctx.ptr().add((s * nq + r0) * hidden + h * d), d)
            };
            one_query_mix(&p[..cols], vp, v.stride, out);
        } else {
            // SAFETY: context rows r0..r1, columns h·d..(h+1)·d of sequence s belong to this task
            // alone; lhs is the task's P block (keys 0..cols), rhs V over keys 0..cols (row stride
            // v.stride) lies inside the value operand.
            unsafe {
                super::gemm::gemm(
                    rows,
                    d,
                    cols,
                    ctx.ptr().add((s * nq + r0) * hidden + h * d),
                    1,
                    hidden as isize,
                    false,
                    p.as_ptr(),
                    1,
                    lk as isize,
                    vp.as_ptr(),
                    1,
                    v.stride as isize,
                    0.0,
                    1.0,
                    Parallelism::None,
                );
            }
        }
    });

    // The vectors the scores were made of, for the neuron view.
    for (s, sink) in sinks.iter_mut().enumerate() {
        let Some((qs, ks)) = sink.query_key.as_mut() else {
            continue;
        };
        let (lq, lk) = (query_lengths[s], key_lengths[s]);
        for h in 0..heads {
            for t in 0..lq {
                let src = (s * nq + t) * q.stride + q.offset + h * d;
                qs[(h * lq + t) * d..][..d].copy_from_slice(&q.data[src..][..d]);
            }
        }
        for g in 0..kv_heads {
            for t in 0..lk {
                let src = (s * nk + t) * k.stride + k.offset + g * d;
                ks[(g * lk + t) * d..][..d].copy_from_slice(&k.data[src..][..d]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::random;
    use super::*;

    /// The eight-key AVX-512 scores equal the portable ones within the rounding of the order of
    /// the sums, for head sizes the fast kernel takes (16, 48, 64) and one it leaves (72),
    /// key counts around multiples of eight, and strides wider than a key.
    #[test]
    fn one_query_scores_agree_on_every_instruction_set() {
        for d in [16usize, 48, 64, 72] {
            for n in [0usize, 1, 7, 8, 9, 23, 64, 1500] {
                let stride = 3 * d + 5;
                let q = random(d, d as u64, 1.0);
                let k = random(n.saturating_sub(1) * stride + d, 7 + n as u64, 1.0);
                let mut portable = vec![0f32; n];
                one_query_scores_portable(&q, &k, stride, 0.125, &mut portable);
                for isa in attnviz_core::simd::isa_levels() {
                    let mut out = vec![f32::NAN; n];
                    attnviz_core::simd::with_isa(isa, || {
                        one_query_scores(&q, &k, stride, 0.125, &mut out)
                    });
                    for j in 0..n {
                        let kj = &k[j * stride..][..d];
                        let bound: f32 = q.iter().zip(kj).map(|(a, b)| (a * b).abs()).sum::<f32>()
                            * 0.125
                            * (d as f32 * f32::EPSILON);
                        assert!(
                            (out[j] - portable[j]).abs() <= bound + f32::MIN_POSITIVE,
                            "{isa:?} d {d} n {n} key {j}: {} vs {}",
                            out[j],
                            portable[j]
                        );
                    }
                }
            }
        }
    }

    fn softmax_f64(row: &[f32]) -> Vec<f64> {
        let max = row.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x as f64));
        let e: Vec<f64> = row.iter().map(|&x| (x as f64 - max).exp()).collect();
        let sum: f64 = e.iter().sum();
        e.iter().map(|x| x / sum).collect()
    }

    #[test]
    fn softmax_matches_f64() {
        let mut worst: f64 = 0.0;
        for (width, scale) in [
            (1, 1.0),
            (7, 3.0),
            (16, 10.0),
            (33, 20.0),
            (512, 30.0),
            (513, 5.0),
        ] {
            let rows = 9;
            let input = random(rows * width, width as u64, scale);
            let mut ours = input.clone();
            softmax_rows(&mut ours, width, width);
            for (got, want) in ours.chunks(width).zip(input.chunks(width)) {
                let want = softmax_f64(want);
                let sum: f64 = got.iter().map(|&x| x as f64).sum();
                assert!((sum - 1.0).abs() < 1e-5, "row sum {sum}");
                for (&g, &w) in got.iter().zip(&want) {
                    worst = worst.max((g as f64 - w).abs());
                }
            }
        }
        eprintln!("softmax: max |error| {worst:.3e}");
        assert!(worst < 1e-6, "softmax error {worst:e}");
        // A row with a huge spread: the small entries underflow to exactly 0, never NaN; −∞
        // (a masked key) gives exactly 0.
        let mut row = vec![0.0, -200.0, 100.0, -1e30, f32::NEG_INFINITY];
        softmax_rows(&mut row, 5, 5);
        assert_eq!(row, vec![0.0, 0.0, 1.0, 0.0, 0.0]);
        // Only the first `width` values of each row are touched.
        let mut rows = vec![1.0, 1.0, 7.0, 2.0, 2.0, 7.0];
        softmax_rows(&mut rows, 3, 2);
        assert_eq!(rows, vec![0.5, 0.5, 7.0, 0.5, 0.5, 7.0]);
    }

    #[test]
    fn a_sink_takes_its_share_of_each_row() {
        let (rows, width) = (5, 13);
        let input = random(rows * width, 17, 4.0);
        for sink in [-3.0f32, 0.0, 2.5, 9.0] {
            let mut ours = input.clone();
            // A masked key stays exactly 0.
            ours[3] = f32::NEG_INFINITY;
            let mut with_mask = input.clone();
            with_mask[3] = f32::NEG_INFINITY;
            softmax_rows_with_sink(&mut ours, width, width, sink);
            for (got, row) in ours.chunks(width).zip(with_mask.chunks(width)) {
                // The sink as one more column, softmax in f64, the column dropped.
                let mut full: Vec<f32> = row.to_vec();
                full.push(sink);
                let want = softmax_f64(&full);
                for (&g, &w) in got.iter().zip(&want) {
                    assert!((g as f64 - w).abs() < 1e-6, "{g} vs {w}");
                }
                let sum: f64 = got.iter().map(|&x| x as f64).sum();
                assert!((1.0 - sum - want[width]).abs() < 1e-6, "sink {sink}");
            }
            assert_eq!(ours[3], 0.0);
        }
    }

    #[test]
    fn every_instruction_set_computes_the_same() {
        let input = random(4096, 7, 8.0);
        let mut dispatched = input.clone();
        softmax_rows(&mut dispatched, 64, 64);
        let mut baseline = input.clone();
        for row in baseline.chunks_exact_mut(64) {
            let max = max_of(row);
            let sum = exp_shifted_sum(row, max);
            row.iter_mut().for_each(|v| *v *= 1.0 / sum);
        }
        assert_eq!(dispatched, baseline);
    }

    /// A bias that depends on head, query and key: `0.3·(h + 1)·cos(q − 2k)`.
    struct Wavy;
    impl ScoreBias for Wavy {
        fn add(&self, _s: usize, head: usize, query: usize, scores: &mut [f32]) {
            for (key, v) in scores.iter_mut().enumerate() {
                *v += Self::at(head, query, key) as f32;
            }
        }
    }
    impl Wavy {
        fn at(head: usize, query: usize, key: usize) -> f64 {
            0.3 * (head + 1) as f64 * ((query as f64) - 2.0 * key as f64).cos()
        }
    }

    /// One test setting: a batch with separate query and key/value buffers.
    struct Case {
        q_lens: Vec<usize>,
        k_lens: Vec<usize>,
        nq: usize,
        nk: usize,
        heads: usize,
        kv_heads: usize,
        d: usize,
        mask: Mask,
        bias: bool,
        scale: f32,
        window: Option<usize>,
        softcap: Option<f32>,
        blocks: Vec<Block>,
    }

    /// Naive attention in f64 for sequence `s`: probabilities `[heads, lq, lk]` and the context
    /// rows `[lq, heads·d]`.
    fn naive(c: &Case, s: usize, q: &[f32], k: &[f32], v: &[f32]) -> (Vec<f64>, Vec<f64>) {
        let (lq, lk, d) = (c.q_lens[s], c.k_lens[s], c.d);
        let (qw, kw) = (c.heads * d, c.kv_heads * d);
        let group = c.heads / c.kv_heads;
        let mut probs = vec![0.0; c.heads * lq * lk];
        let mut context = vec![0.0; lq * qw];
        for h in 0..c.heads {
            let g = h / group;
            for i in 0..lq {
                let scores: Vec<f64> = (0..lk)
                    .map(|j| {
                        let dot: f64 = (0..d)
                            .map(|x| {
                                q[(s * c.nq + i) * qw + h * d + x] as f64
                                    * k[(s * c.nk + j) * kw + g * d + x] as f64
                            })
                            .sum();
                        let mut score = dot * c.scale as f64;
                        if let Some(cap) = c.softcap {
                            score = (score / cap as f64).tanh() * cap as f64;
                        }
                        if c.bias {
                            score += Wavy::at(h, i, j);
                        }
                        let p = i + (lk - lq);
                        // As transformers builds the mask: a windowed block is ORed onto the
                        // causal mask before the window; an unwindowed one after it.
                        let block = c
                            .blocks
                            .iter()
                            .find(|b| b.sequence == s && (b.start..b.end).contains(&p));
                        let same = block.is_some_and(|b| (b.start..b.end).contains(&j));
                        let causal = c.mask == Mask::Bidirectional || j <= p;
                        let windowed = c.window.is_none_or(|w| p < j + w);
                        let seen = match block {
                            Some(b) if b.windowed => (causal || same) && windowed,
                            Some(_) => causal && windowed || same,
                            None => causal && windowed,
                        };
                        if !seen {
                            score = f64::NEG_INFINITY;
                        }
                        score
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = scores.iter().map(|x| (x - max).exp()).collect();
                let sum: f64 = e.iter().sum();
                for j in 0..lk {
                    let p = e[j] / sum;
                    probs[(h * lq + i) * lk + j] = p;
                    for x in 0..d {
                        context[i * qw + h * d + x] +=
                            p * v[(s * c.nk + j) * kw + g * d + x] as f64;
                    }
                }
            }
        }
        (probs, context)
    }

    fn op(data: &[f32], stride: usize) -> Operand<'_> {
        Operand {
            data,
            offset: 0,
            stride,
        }
    }

    fn check(c: &Case) {
        let batch = c.q_lens.len();
        let d = c.d;
        let (qw, kw) = (c.heads * d, c.kv_heads * d);
        let q = random(batch * c.nq * qw, 11 + c.nq as u64, 2.0);
        let k = random(batch * c.nk * kw, 12 + c.nk as u64, 2.0);
        let v = random(batch * c.nk * kw, 13, 2.0);
        let group = c.heads / c.kv_heads;
        let kv_head: Vec<usize> = (0..c.heads).map(|h| h / group).collect();
        let mut bufs: Vec<(Vec<f32>, Vec<f32>, Vec<f32>)> = c
            .q_lens
            .iter()
            .zip(&c.k_lens)
            .map(|(&lq, &lk)| {
                (
                    vec![f32::NAN; c.heads * lq * lk],
                    vec![f32::NAN; c.heads * lq * d],
                    vec![f32::NAN; c.kv_heads * lk * d],
                )
            })
            .collect();
        let mut sinks: Vec<CaptureSink> = bufs
            .iter_mut()
            .map(|(p, q, k)| CaptureSink {
                probs: Some(p),
                query_key: Some((q, k)),
                summary: None,
            })
            .collect();
        let mut context = vec![f32::NAN; batch * c.nq * qw];
        let spec = AttentionSpec {
            batch,
            query_tokens: c.nq,
            key_tokens: c.nk,
            heads: c.heads,
            kv_heads: c.kv_heads,
            kv_head: &kv_head,
            head_dim: d,
            scale: c.scale,
            mask: c.mask,
            bias: if c.bias { Some(&Wavy) } else { None },
            window: c.window,
            softcap: c.softcap,
            blocks: &c.blocks,
            sink_logits: None,
        };
        attention(
            op(&q, qw),
            op(&k, kw),
            op(&v, kw),
            &spec,
            &c.q_lens,
            &c.k_lens,
            &mut sinks,
            &mut context,
        );
        drop(sinks);
        let what = format!(
            "lengths {:?}/{:?}, {} heads over {}, {:?}, bias {}",
            c.q_lens, c.k_lens, c.heads, c.kv_heads, c.mask, c.bias
        );
        for s in 0..batch {
            let (lq, lk) = (c.q_lens[s], c.k_lens[s]);
            let (probs, ctx) = naive(c, s, &q, &k, &v);
            let worst_p = bufs[s]
                .0
                .iter()
                .zip(&probs)
                .map(|(&a, &b)| (a as f64 - b).abs())
                .fold(0.0, f64::max);
            assert!(worst_p < 1e-6, "probabilities off by {worst_p:e} ({what})");
            if c.mask == Mask::Causal && c.blocks.is_empty() {
                for h in 0..c.heads {
                    for i in 0..lq {
                        for j in i + (lk - lq) + 1..lk {
                            assert_eq!(bufs[s].0[(h * lq + i) * lk + j], 0.0, "masked ({what})");
                        }
                        if let Some(w) = c.window {
                            for j in 0..(i + (lk - lq) + 1).saturating_sub(w) {
                                let p = bufs[s].0[(h * lq + i) * lk + j];
                                assert_eq!(p, 0.0, "outside the window ({what})");
                            }
                        }
                    }
                }
            }
            let ours = &context[s * c.nq * qw..][..c.nq * qw];
            let worst_c = ours[..lq * qw]
                .iter()
                .zip(&ctx)
                .map(|(&a, &b)| (a as f64 - b).abs())
                .fold(0.0, f64::max);
            assert!(worst_c < 1e-5, "context off by {worst_c:e} ({what})");
            assert!(
                ours[lq * qw..].iter().all(|&x| x == 0.0),
                "padding rows get a zero context ({what})"
            );
            for h in 0..c.heads {
                for t in 0..lq {
                    let src = (s * c.nq + t) * qw + h * d;
                    assert_eq!(&bufs[s].1[(h * lq + t) * d..][..d], &q[src..][..d]);
                }
            }
            for g in 0..c.kv_heads {
                for t in 0..lk {
                    let src = (s * c.nk + t) * kw + g * d;
                    assert_eq!(&bufs[s].2[(g * lk + t) * d..][..d], &k[src..][..d]);
                }
            }
        }
    }

    #[test]
    fn self_attention_matches_naive_loops_with_padding_and_capture() {
        for (lengths, n, heads, d) in [
            (vec![5], 5, 2, 4),
            (vec![70, 33, 1], 70, 3, 8),
            (vec![130], 130, 12, 32),
        ] {
            check(&Case {
                q_lens: lengths.clone(),
                k_lens: lengths,
                nq: n,
                nk: n,
                heads,
                kv_heads: heads,
                d,
                mask: Mask::Bidirectional,
                bias: false,
                scale: 1.0 / (d as f32).sqrt(),
                window: None,
                softcap: None,
                blocks: Vec::new(),
            });
        }
    }

    #[test]
    fn causal_mask_sees_only_earlier_keys() {
        for (lengths, n, heads, d) in [(vec![6], 6, 2, 4), (vec![300, 41, 1], 300, 3, 16)] {
            check(&Case {
                q_lens: lengths.clone(),
                k_lens: lengths,
                nq: n,
                nk: n,
                heads,
                kv_heads: heads,
                d,
                mask: Mask::Causal,
                bias: false,
                scale: 1.0 / (d as f32).sqrt(),
                window: None,
                softcap: None,
                blocks: Vec::new(),
            });
        }
        // Queries behind a cache of earlier keys: the last query sees every key.
        check(&Case {
            q_lens: vec![3, 1],
            k_lens: vec![10, 4],
            nq: 3,
            nk: 10,
            heads: 2,
            kv_heads: 2,
            d: 8,
            mask: Mask::Causal,
            bias: false,
            scale: 0.25,
            window: None,
            softcap: None,
            blocks: Vec::new(),
        });
    }

    #[test]
    fn sliding_window_and_softcap_match_naive_loops() {
        // Windows narrower than the input (one of 1 key, the query itself), with padding,
        // grouped heads, soft-capped scores and queries behind a cache.
        for (window, softcap) in [(1, None), (4, None), (17, Some(5.0)), (64, Some(50.0))] {
            check(&Case {
                q_lens: vec![40, 9],
                k_lens: vec![40, 9],
                nq: 40,
                nk: 40,
                heads: 4,
                kv_heads: 2,
                d: 8,
                mask: Mask::Causal,
                bias: false,
                scale: 1.0 / 8f32.sqrt(),
                window: Some(window),
                softcap,
                blocks: Vec::new(),
            });
        }
        check(&Case {
            q_lens: vec![3, 1],
            k_lens: vec![10, 4],
            nq: 3,
            nk: 10,
            heads: 2,
            kv_heads: 2,
            d: 8,
            mask: Mask::Causal,
            bias: false,
            scale: 0.25,
            window: Some(3),
            softcap: Some(2.0),
            blocks: Vec::new(),
        });
    }

    #[test]
    fn image_blocks_see_each_other_in_full_under_the_causal_mask() {
        // Two runs in a batch of two, under a sliding window and behind a cache: a query in a
        // run sees the run's later keys, one before or after it does not.
        let blocks = vec![
            Block {
                sequence: 0,
                start: 3,
                end: 9,
                windowed: true,
            },
            Block {
                sequence: 0,
                start: 12,
                end: 14,
                windowed: true,
            },
            Block {
                sequence: 1,
                start: 0,
                end: 5,
                windowed: true,
            },
        ];
        // The same runs unwindowed (PaliGemma's prefix): the window does not cut inside them.
        let unwindowed: Vec<Block> = blocks
            .iter()
            .map(|b| Block {
                windowed: false,
                ..*b
            })
            .collect();
        for (window, q_lens, blocks) in [
            (None, vec![20, 7], &blocks),
            (Some(4), vec![20, 7], &blocks),
            (None, vec![15, 4], &blocks),
            (Some(2), vec![20, 7], &unwindowed),
            (Some(3), vec![15, 4], &unwindowed),
        ] {
            check(&Case {
                q_lens,
                k_lens: vec![20, 7],
                nq: 20,
                nk: 20,
                heads: 2,
                kv_heads: 1,
                d: 8,
                mask: Mask::Causal,
                bias: false,
                scale: 0.5,
                window,
                softcap: None,
                blocks: blocks.clone(),
            });
        }
    }

    #[test]
    fn grouped_query_heads_share_key_value_heads() {
        // 12 query heads over 4 and over 1 (multi-query) key/value heads, with and without
        // the causal mask.
        for (kv_heads, mask) in [
            (4, Mask::Bidirectional),
            (4, Mask::Causal),
            (1, Mask::Causal),
        ] {
            check(&Case {
                q_lens: vec![37, 20],
                k_lens: vec![37, 20],
                nq: 37,
                nk: 37,
                heads: 12,
                kv_heads,
                d: 8,
                mask,
                bias: false,
                scale: 1.0 / 8f32.sqrt(),
                window: None,
                softcap: None,
                blocks: Vec::new(),
            });
        }
    }

    #[test]
    fn cross_attention_and_score_bias() {
        // Queries from one sequence, keys and values from another of a different length
        // (cross-attention), unscaled scores plus a bias (T5).
        check(&Case {
            q_lens: vec![7, 2],
            k_lens: vec![19, 11],
            nq: 7,
            nk: 19,
            heads: 4,
            kv_heads: 4,
            d: 8,
            mask: Mask::Bidirectional,
            bias: true,
            scale: 1.0,
            window: None,
            softcap: None,
            blocks: Vec::new(),
        });
        check(&Case {
            q_lens: vec![29],
            k_lens: vec![29],
            nq: 29,
            nk: 29,
            heads: 4,
            kv_heads: 2,
            d: 16,
            mask: Mask::Causal,
            bias: true,
            scale: 1.0,
            window: None,
            softcap: None,
            blocks: Vec::new(),
        });
    }

    #[test]
    fn operands_are_read_with_their_offsets_and_strides() {
        // Q, K and V side by side in one [n, 3·hidden] buffer (the fused projection), as the
        // encoders call it: the same result as three separate buffers.
        let (n, heads, d) = (9, 2, 4);
        let hidden = heads * d;
        let qkv = random(n * 3 * hidden, 5, 2.0);
        let part = |p: usize| -> Vec<f32> {
            qkv.chunks(3 * hidden)
                .flat_map(|row| row[p * hidden..][..hidden].to_vec())
                .collect()
        };
        let (q, k, v) = (part(0), part(1), part(2));
        let kv_head = [0, 1];
        let spec = AttentionSpec {
            batch: 1,
            query_tokens: n,
            key_tokens: n,
            heads,
            kv_heads: heads,
            kv_head: &kv_head,
            head_dim: d,
            scale: 0.5,
            mask: Mask::Bidirectional,
            bias: None,
            window: None,
            softcap: None,
            blocks: &[],
            sink_logits: None,
        };
        let run = |ops: [Operand<'_>; 3]| {
            let mut probs = vec![0.0; heads * n * n];
            let mut context = vec![0.0; n * hidden];
            let mut sinks = [CaptureSink {
                probs: Some(&mut probs),
                query_key: None,
                summary: None,
            }];
            attention(
                ops[0],
                ops[1],
                ops[2],
                &spec,
                &[n],
                &[n],
                &mut sinks,
                &mut context,
            );
            (probs, context)
        };
        let fused = run([0, 1, 2].map(|p| Operand {
            data: &qkv,
            offset: p * hidden,
            stride: 3 * hidden,
        }));
        let separate = run([&q, &k, &v].map(|data| Operand {
            data,
            offset: 0,
            stride: hidden,
        }));
        assert_eq!(fused, separate);
    }
}
