//! The routed-experts feed-forward block of mixture-of-experts decoders (Mixtral, Qwen3-MoE,
//! OLMoE): a router (a linear map to one logit per expert), a softmax over all experts, the
//! `top_k` most probable chosen per token (renormalised to sum to 1 where the model does so:
//! `norm_topk_prob`), and each chosen expert's gated MLP run on the rows routed to it only,
//! its output weighted and added back.
//!
//! Mirrors transformers 5's `MixtralSparseMoeBlock` (and `Qwen3MoeSparseMoeBlock`,
//! `OlmoeSparseMoeBlock`): the experts' outputs are added in ascending expert order, as its
//! `index_add_` loop adds them, so the sums agree with it term for term.
//!
//! Checkpoints store the experts one by one (`experts.{e}.gate_proj`, …, Mixtral's
//! `experts.{e}.w1`/`w3`/`w2`), which is what transformers 5 saves and what is on the hub, or
//! merged into 3-D tensors (`experts.gate_up_proj` `[experts, 2·inner, hidden]`,
//! `experts.down_proj` `[experts, hidden, inner]`, transformers 5's in-memory layout); both are
//! read ([`ExpertNames`]). A GGUF file's experts (llama.cpp's merged `ffn_gate_exps`,
//! `ffn_up_exps`, `ffn_down_exps`, `[experts, …]` in their block format) come through the
//! per-expert names: each expert's matrix is its slice of the merged tensor, kept as stored
//! in the file's memory map ([`crate::formats::tensors::TensorMap`]), so only the chosen
//! experts' blocks are ever decoded, inside the quantised products.
//!
//! gpt-oss's experts ([`Experts::load_gpt_oss`], transformers' `GptOssExperts`) are merged the
//! other way round (`gate_up_proj` `[experts, hidden, 2·inner]` with gate and up interleaved,
//! `down_proj` `[experts, inner, hidden]`), with biases, through a clamped SwiGLU
//! ([`ClampedSwiglu`]); its router (`GptOssTopKRouter`: a linear map with a bias, the top k
//! logits, a softmax over those) is the softmax over all experts renormalised over the chosen.

use super::layers::{FeedForward, FfnNames, Linear, LinearReader};
use crate::error::{Error, InputError};
use crate::formats::tensors::{Name, Tensors};
use crate::formats::weights::{MatrixWeight, StoredMatrix, Weight};
use crate::kernels::quant::{QuantError, QuantType};
use crate::kernels::{Activation, Layout};

/// What one router decided for `rows` rows: the probability of every expert, and the chosen
/// experts with their weights, best first.
#[derive(Clone, Debug, PartialEq)]
pub struct Routing {
    /// Experts.
    pub experts: usize,
    /// Experts chosen per row.
    pub top_k: usize,
    /// Whether the weights are the chosen probabilities renormalised to sum to 1.
    pub renormalised: bool,
    /// `softmax(router logits)` over all experts, `[rows, experts]` (DeepSeek-V3: each
    /// logit's sigmoid, the scores its router chooses by before the correction bias).
    pub probs: Vec<f32>,
    /// The chosen experts, `[rows, top_k]`, most probable first (among equal probabilities the
    /// lower number first).
    pub chosen: Vec<u32>,
    /// The weight each chosen expert's output is added with, `[rows, top_k]`: its probability,
    /// divided by the chosen ones' sum where the model renormalises.
    pub weights: Vec<f32>,
}

impl Routing {
    /// Rows routed.
    pub fn rows(&self) -> usize {
        self.chosen.len() / self.top_k.max(1)
    }

    /// The rows `from..from + count`, as a routing of their own.
    pub fn rows_range(&self, from: usize, count: usize) -> Routing {
        let (e, k) = (self.experts, self.top_k);
        Routing {
            experts: e,
            top_k: k,
            renormalised: self.renormalised,
            probs: self.probs[from * e..(from + count) * e].to_vec(),
            chosen: self.chosen[from * k..(from + count) * k].to_vec(),
            weights: self.weights[from * k..(from + count) * k].to_vec(),
        }
    }
}

/// How a model's router turns its logits into weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouterSettings {
    /// Experts (`num_local_experts`, `num_experts`).
    pub experts: usize,
    /// Experts chosen per token (`num_experts_per_tok`).
    pub top_k: usize,
    /// Whether the chosen experts' probabilities are divided by their sum (Mixtral always;
    /// Qwen3-MoE and OLMoE as `norm_topk_prob` says).
    pub norm_topk_prob: bool,
}

/// The softmax over all experts, then the `top_k` largest (ties: the lower expert first, as
/// `torch.topk` on CPU returns them), renormalised where `settings` says: for `rows` rows of
/// router logits `[rows, experts]`.
pub fn route(logits: &[f32], rows: usize, settings: RouterSettings) -> Routing {
    let (e, k) = (settings.experts, settings.top_k);
    assert_eq!(logits.len(), rows * e, "router logits");
    let mut probs = Vec::with_capacity(rows * e);
    let mut chosen = Vec::with_capacity(rows * k);
    let mut weights = Vec::with_capacity(rows * k);
    let mut order: Vec<u32> = Vec::with_capacity(e);
    for row in logits.chunks_exact(e) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let start = probs.len();
        probs.extend(row.iter().map(|v| (v - max).exp()));
        let p = &mut probs[start..];
        let sum: f32 = p.iter().sum();
        p.iter_mut().for_each(|v| *v /= sum);
        order.clear();
        order.extend(0..e as u32);
        // Stable: equal probabilities keep the lower expert first.
        order.sort_by(|&a, &b| p[b as usize].total_cmp(&p[a as usize]));
        let top = &order[..k];
        let from = weights.len();
        weights.extend(top.iter().map(|&i| p[i as usize]));
        chosen.extend_from_slice(top);
        if settings.norm_topk_prob {
            let w = &mut weights[from..];
            let total: f32 = w.iter().sum();
            w.iter_mut().for_each(|v| *v /= total);
        }
    }
    Routing {
        experts: e,
        top_k: k,
        renormalised: settings.norm_topk_prob,
        probs,
        chosen,
        weights,
    }
}

/// How a router turns its logits into scores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scoring {
    /// The softmax over all experts (DeepSeek-V2).
    Softmax,
    /// Each logit's sigmoid on its own (DeepSeek-V3).
    Sigmoid,
}

/// How a group of experts is scored for the group-limited choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupScore {
    /// Its best expert's score (DeepSeek-V2's `group_limited_greedy`).
    Max,
    /// The sum of its two best experts' scores (DeepSeek-V3's `noaux_tc`).
    TopTwoSum,
}

/// DeepSeek's routers (transformers' `DeepseekV2TopkRouter`, `DeepseekV3TopkRouter`): scores
/// from the logits ([`Scoring`]), plus a correction bias for the choice only (V3's
/// `e_score_correction_bias`); with `groups > 1` the experts are cut into that many equal
/// groups, the `topk_group` best groups kept ([`GroupScore`]) and the others' experts masked
/// out; the `top_k` best remaining experts chosen; their weights their scores (V2: the masked
/// scores the choice read; V3: the scores without the bias), divided by their sum + 1e-20
/// where `normalise`, times `scaling` (`routed_scaling_factor`).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupRouting {
    /// How logits become scores.
    pub scoring: Scoring,
    /// Groups of experts (`n_group`; 1: no group limit).
    pub groups: usize,
    /// Groups kept (`topk_group`).
    pub topk_group: usize,
    /// How a group is scored.
    pub group_score: GroupScore,
    /// Added to the scores for the choice (`e_score_correction_bias`, `[experts]`).
    pub bias: Option<Vec<f32>>,
    /// What a masked expert's choice score becomes (V2: 0, V3: −∞).
    pub masked: f32,
    /// Whether the weights are the masked choice scores (V2) rather than the scores (V3).
    pub weights_from_choice: bool,
    /// Whether the chosen weights are divided by their sum (+1e-20).
    pub normalise: bool,
    /// The factor on the weights (`routed_scaling_factor`).
    pub scaling: f32,
}

/// DeepSeek's routing ([`GroupRouting`]) of `rows` rows of router logits `[rows, experts]`: the
/// chosen experts best first by the score they were chosen by (ties: the lower expert first),
/// and [`Routing::probs`] the scores over all experts (softmax or sigmoid, before any bias).
pub fn route_grouped(
    logits: &[f32],
    rows: usize,
    settings: RouterSettings,
    g: &GroupRouting,
) -> Routing {
    let (e, k) = (settings.experts, settings.top_k);
    assert_eq!(logits.len(), rows * e, "router logits");
    let per_group = e / g.groups.max(1);
    let mut probs = Vec::with_capacity(rows * e);
    let mut chosen = Vec::with_capacity(rows * k);
    let mut weights = Vec::with_capacity(rows * k);
    let mut order: Vec<u32> = Vec::with_capacity(e);
    let by = |v: &[f32], order: &mut Vec<u32>, n: usize| {
        order.clear();
        order.extend(0..n as u32);
        // Stable: equal scores keep the lower number first.
        order.sort_by(|&a, &b| v[b as usize].total_cmp(&v[a as usize]));
    };
    for row in logits.chunks_exact(e) {
        let start = probs.len();
        match g.scoring {
            Scoring::Softmax => {
                let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                probs.extend(row.iter().map(|v| (v - max).exp()));
                let p = &mut probs[start..];
                let sum: f32 = p.iter().sum();
                p.iter_mut().for_each(|v| *v /= sum);
            }
            Scoring::Sigmoid => probs.extend(row.iter().map(|v| 1.0 / (1.0 + (-v).exp()))),
        }
        let p = &probs[start..];
        let mut choice: Vec<f32> = match &g.bias {
            Some(b) => p.iter().zip(b).map(|(s, b)| s + b).collect(),
            None => p.to_vec(),
        };
        if g.groups > 1 && g.topk_group < g.groups {
            let group_scores: Vec<f32> = choice
                .chunks_exact(per_group)
                .map(|c| match g.group_score {
                    GroupScore::Max => c.iter().copied().fold(f32::NEG_INFINITY, f32::max),
                    GroupScore::TopTwoSum => {
                        let (mut a, mut b) = (f32::NEG_INFINITY, f32::NEG_INFINITY);
                        for &v in c {
                            if v > a {
                                (a, b) = (v, a);
                            } else if v > b {
                                b = v;
                            }
                        }
                        if per_group < 2 {
                            a
                        } else {
                            a + b
                        }
                    }
                })
                .collect();
            by(&group_scores, &mut order, g.groups);
            let mut keep = vec![false; g.groups];
            for &grp in &order[..g.topk_group] {
                keep[grp as usize] = true;
            }
            for (i, c) in choice.iter_mut().enumerate() {
                if !keep[i / per_group] {
                    *c = g.masked;
                }
            }
        }
        by(&choice, &mut order, e);
        let top = &order[..k];
        let from = weights.len();
        let source = if g.weights_from_choice { &choice } else { p };
        weights.extend(top.iter().map(|&i| source[i as usize]));
        chosen.extend_from_slice(top);
        let w = &mut weights[from..];
        if g.normalise {
            let total: f32 = w.iter().sum::<f32>() + 1e-20;
            w.iter_mut().for_each(|v| *v /= total);
        }
        w.iter_mut().for_each(|v| *v *= g.scaling);
    }
    Routing {
        experts: e,
        top_k: k,
        renormalised: g.normalise,
        probs,
        chosen,
        weights,
    }
}

/// Where a routed-experts block's tensors are (module paths): the router, and the experts
/// under one module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpertNames {
    /// The router's linear map (`mlp.gate`, Mixtral's `block_sparse_moe.gate`).
    pub router: Name,
    /// The module holding the experts (`mlp.experts`): numbered sub-modules, or merged
    /// `gate_up_proj` and `down_proj` tensors.
    pub experts: Name,
    /// The leaf names of one numbered expert's gate, up and down maps (`gate_proj`, `up_proj`,
    /// `down_proj`; Mixtral's `w1`, `w3`, `w2`).
    pub leaves: [&'static str; 3],
}

impl ExpertNames {
    /// Expert `e`'s maps, when stored one by one.
    pub fn expert(&self, e: usize) -> FfnNames {
        let x = self.experts.pp(e);
        FfnNames::Gated {
            gate: x.pp(self.leaves[0]),
            up: x.pp(self.leaves[1]),
            down: x.pp(self.leaves[2]),
        }
    }

    /// The merged `[experts, 2·inner, hidden]` gate-and-up tensor's name.
    pub fn merged_gate_up(&self) -> String {
        self.experts.tensor("gate_up_proj")
    }

    /// The merged `[experts, hidden, inner]` down tensor's name.
    pub fn merged_down(&self) -> String {
        self.experts.tensor("down_proj")
    }
}

/// gpt-oss's activation of its experts: `gate` clamped above at `limit`, `up` to `±limit`,
/// then `(up + 1) · gate · σ(alpha · gate)` (transformers' `GptOssExperts._apply_gate`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClampedSwiglu {
    /// The sigmoid's gain (`swiglu_alpha`, 1.702).
    pub alpha: f32,
    /// The clamp (`swiglu_limit`, 7.0).
    pub limit: f32,
}

impl ClampedSwiglu {
    /// `gate[i] ← (clamp(up[i]) + 1) · g · σ(alpha · g)` with `g = min(gate[i], limit)`.
    pub fn apply(&self, gate: &mut [f32], up: &[f32]) {
        for (g, &u) in gate.iter_mut().zip(up) {
            let x = g.min(self.limit);
            let u = u.clamp(-self.limit, self.limit);
            let glu = x * (1.0 / (1.0 + (-(x * self.alpha)).exp()));
            *g = (u + 1.0) * glu;
        }
    }
}

/// A routed-experts block with its weights.
pub struct Experts {
    /// The router, `hidden → experts` (gpt-oss's with a bias).
    router: Linear,
    /// Each expert's gated MLP.
    experts: Vec<FeedForward>,
    settings: RouterSettings,
    /// gpt-oss's clamped activation in place of each expert's own; `None` for the others.
    clamped: Option<ClampedSwiglu>,
    /// DeepSeek's scoring and group-limited choice; `None`: the softmax's top k.
    grouped: Option<GroupRouting>,
    /// Experts every token goes through, added unweighted (DeepSeek's `shared_experts`).
    shared: Option<FeedForward>,
}

impl Experts {
    /// The block `names` gives, `hidden → inner → hidden` per expert with `activation`, the
    /// numbered experts' maps read by `linear`, merged ones decoded from `t`.
    pub fn load(
        t: &dyn Tensors,
        names: &ExpertNames,
        hidden: usize,
        inner: usize,
        activation: Activation,
        settings: RouterSettings,
        linear: LinearReader<'_>,
    ) -> Result<Experts, Error> {
        let router = linear(&names.router, hidden, settings.experts)?;
        let n = settings.experts;
        let experts = if t.shape(&names.merged_gate_up()).is_some() {
            let gate_up = t.weight(&names.merged_gate_up(), &[n, 2 * inner, hidden])?;
            let down = t.weight(&names.merged_down(), &[n, hidden, inner])?;
            let map = |data: &[f32], outputs: usize, inputs: usize| {
                Linear::new(
                    Weight::owned(data.to_vec(), vec![outputs, inputs]),
                    Layout::OutIn,
                    None,
                )
            };
            let block = inner * hidden;
            (0..n)
                .map(|e| {
                    let gu = &gate_up[e * 2 * block..][..2 * block];
                    FeedForward::Gated {
                        // `.chunk(2, dim=-1)` of the product: the gate first, then up.
                        gate: map(&gu[..block], inner, hidden),
                        up: map(&gu[block..], inner, hidden),
                        activation,
                        down: map(&down[e * block..][..block], hidden, inner),
                    }
                })
                .collect()
        } else {
            (0..n)
                .map(|e| FeedForward::load(&names.expert(e), hidden, inner, activation, linear))
                .collect::<Result<Vec<_>, Error>>()?
        };
        Ok(Experts {
            router,
            experts,
            settings,
            clamped: None,
            grouped: None,
            shared: None,
        })
    }

    /// gpt-oss's experts under `names.experts`, its router `names.router` read by `router`
    /// (with its bias), through `swiglu`, in whichever of three layouts the source holds:
    /// - transformers' in-memory one, float: `gate_up_proj` `[experts, hidden, 2·inner]`, gate
    ///   and up interleaved along the last dimension, `gate_up_proj_bias` `[experts, 2·inner]`,
    ///   `down_proj` `[experts, inner, hidden]`, `down_proj_bias` `[experts, hidden]`;
    /// - the released checkpoints' MXFP4 (`gate_up_proj_blocks` `[experts, 2·inner, hidden/32,
    ///   16]` and `gate_up_proj_scales` `[experts, 2·inner, hidden/32]`, rows interleaved gate
    ///   and up; `down_proj_blocks`/`_scales` `[experts, hidden, inner/32, …]`; the same
    ///   biases): the blocks stay 4-bit ([`mxfp4_rows`]), decoded inside the products;
    /// - llama.cpp's, through per-expert names (`experts.{e}.gate_proj.weight`, slices of
    ///   `ffn_gate_exps` kept in their block format, MXFP4 included) with merged biases
    ///   (`experts.gate_proj.bias` `[experts, inner]`, …).
    pub fn load_gpt_oss(
        t: &dyn Tensors,
        names: &ExpertNames,
        hidden: usize,
        inner: usize,
        settings: RouterSettings,
        swiglu: ClampedSwiglu,
        router: LinearReader<'_>,
    ) -> Result<Experts, Error> {
        let router = router(&names.router, hidden, settings.experts)?;
        let n = settings.experts;
        let experts = if t
            .shape(&names.experts.tensor("gate_up_proj_blocks"))
            .is_some()
        {
            gpt_oss_mxfp4(t, names, hidden, inner, n)?
        } else if t.shape(&names.merged_gate_up()).is_some() {
            gpt_oss_merged(t, names, hidden, inner, n)?
        } else {
            gpt_oss_split(t, names, hidden, inner, n)?
        };
        Ok(Experts {
            router,
            experts,
            settings,
            clamped: Some(swiglu),
            grouped: None,
            shared: None,
        })
    }

    /// Expert `e` over `rows` rows of `x`: its own MLP, or gpt-oss's clamped SwiGLU over its
    /// gate and up maps.
    fn run_expert(&self, e: usize, x: &[f32], rows: usize) -> Vec<f32> {
        match (&self.experts[e], self.clamped) {
            (FeedForward::Gated { gate, up, down, .. }, Some(swiglu)) => {
                let mut g = gate.forward(x, rows, Activation::Identity);
                let u = up.forward(x, rows, Activation::Identity);
                swiglu.apply(&mut g, &u);
                down.forward(&g, rows, Activation::Identity)
            }
            (expert, _) => expert.forward(x, rows),
        }
    }

    /// The same block, routing as `grouped` says (DeepSeek's routers).
    pub fn with_groups(mut self, grouped: GroupRouting) -> Experts {
        self.grouped = Some(grouped);
        self
    }

    /// The same block with `shared` run on every token and added to the routed experts' sum.
    pub fn with_shared(mut self, shared: FeedForward) -> Experts {
        self.shared = Some(shared);
        self
    }

    /// Its router's settings.
    pub fn settings(&self) -> RouterSettings {
        self.settings
    }

    /// The router's decisions for the `rows` rows of `x`.
    pub fn route(&self, x: &[f32], rows: usize) -> Routing {
        let logits = self.router.forward(x, rows, Activation::Identity);
        match &self.grouped {
            Some(g) => route_grouped(&logits, rows, self.settings, g),
            None => route(&logits, rows, self.settings),
        }
    }

    /// `rows` rows of `x` through the block, with the router's decisions: each expert runs on
    /// the rows routed to it only.
    pub fn forward(&self, x: &[f32], rows: usize) -> (Vec<f32>, Routing) {
        let routing = self.route(x, rows);
        let hidden = self.router.inputs();
        let k = self.settings.top_k;
        let mut out = vec![0f32; rows * hidden];
        let mut picked: Vec<(usize, f32)> = Vec::new();
        let mut gathered: Vec<f32> = Vec::new();
        for e in 0..self.experts.len() {
            picked.clear();
            for r in 0..rows {
                for j in 0..k {
                    if routing.chosen[r * k + j] as usize == e {
                        picked.push((r, routing.weights[r * k + j]));
                    }
                }
            }
            if picked.is_empty() {
                continue;
            }
            gathered.clear();
            for &(r, _) in &picked {
                gathered.extend_from_slice(&x[r * hidden..][..hidden]);
            }
            let y = self.run_expert(e, &gathered, picked.len());
            for (&(r, w), row) in picked.iter().zip(y.chunks_exact(hidden)) {
                for (o, v) in out[r * hidden..][..hidden].iter_mut().zip(row) {
                    *o += v * w;
                }
            }
        }
        if let Some(shared) = &self.shared {
            let y = shared.forward(x, rows);
            for (o, v) in out.iter_mut().zip(&y) {
                *o += v;
            }
        }
        (out, routing)
    }
}

/// gpt-oss's float experts in transformers' in-memory layout (see [`Experts::load_gpt_oss`]).
fn gpt_oss_merged(
    t: &dyn Tensors,
    names: &ExpertNames,
    hidden: usize,
    inner: usize,
    n: usize,
) -> Result<Vec<FeedForward>, Error> {
    let gate_up = t.weight(&names.merged_gate_up(), &[n, hidden, 2 * inner])?;
    let gate_up_bias = t.weight(&names.experts.tensor("gate_up_proj_bias"), &[n, 2 * inner])?;
    let down = t.weight(&names.merged_down(), &[n, inner, hidden])?;
    let down_bias = t.weight(&names.experts.tensor("down_proj_bias"), &[n, hidden])?;
    Ok((0..n)
        .map(|e| {
            let gu = &gate_up[e * hidden * 2 * inner..][..hidden * 2 * inner];
            let gub = &gate_up_bias[e * 2 * inner..][..2 * inner];
            // `[outputs, inputs]` of the gate (even columns) or up (odd columns) half.
            let half = |odd: usize| {
                let mut w = vec![0f32; inner * hidden];
                for i in 0..inner {
                    for h in 0..hidden {
                        w[i * hidden + h] = gu[h * 2 * inner + 2 * i + odd];
                    }
                }
                let b: Vec<f32> = (0..inner).map(|i| gub[2 * i + odd]).collect();
                Linear::new(
                    Weight::owned(w, vec![inner, hidden]),
                    Layout::OutIn,
                    Some(Weight::owned(b, vec![inner])),
                )
            };
            let d = &down[e * inner * hidden..][..inner * hidden];
            let mut w = vec![0f32; hidden * inner];
            for i in 0..inner {
                for h in 0..hidden {
                    w[h * inner + i] = d[i * hidden + h];
                }
            }
            FeedForward::Gated {
                gate: half(0),
                up: half(1),
                activation: Activation::Identity,
                down: Linear::new(
                    Weight::owned(w, vec![hidden, inner]),
                    Layout::OutIn,
                    Some(Weight::owned(
                        down_bias[e * hidden..][..hidden].to_vec(),
                        vec![hidden],
                    )),
                ),
            }
        })
        .collect())
}

/// gpt-oss's experts through per-expert names with merged biases (a GGUF file's `ffn_*_exps`,
/// see [`Experts::load_gpt_oss`]): each expert's matrices as the source keeps them.
fn gpt_oss_split(
    t: &dyn Tensors,
    names: &ExpertNames,
    hidden: usize,
    inner: usize,
    n: usize,
) -> Result<Vec<FeedForward>, Error> {
    let [gate, up, down] = names.leaves;
    let bias = |leaf: &str, width: usize| t.weight(&names.experts.pp(leaf).bias(), &[n, width]);
    let (gate_bias, up_bias, down_bias) =
        (bias(gate, inner)?, bias(up, inner)?, bias(down, hidden)?);
    (0..n)
        .map(|e| {
            let x = names.experts.pp(e);
            let map = |leaf: &str, outputs: usize, inputs: usize, b: &[f32]| {
                Ok::<_, Error>(Linear::new(
                    t.matrix(&x.pp(leaf).weight(), &[outputs, inputs])?,
                    Layout::OutIn,
                    Some(Weight::owned(
                        b[e * outputs..][..outputs].to_vec(),
                        vec![outputs],
                    )),
                ))
            };
            Ok(FeedForward::Gated {
                gate: map(gate, inner, hidden, &gate_bias)?,
                up: map(up, inner, hidden, &up_bias)?,
                activation: Activation::Identity,
                down: map(down, hidden, inner, &down_bias)?,
            })
        })
        .collect()
}

/// Values per MXFP4 block.
const MXFP4_BLOCK: usize = 32;

/// gpt-oss's MXFP4 experts as the released safetensors checkpoints store them (see
/// [`Experts::load_gpt_oss`]): each expert's gate, up and down matrices stay 4-bit, their
/// blocks moved into ggml's layout ([`mxfp4_rows`]), never widened to f32.
fn gpt_oss_mxfp4(
    t: &dyn Tensors,
    names: &ExpertNames,
    hidden: usize,
    inner: usize,
    n: usize,
) -> Result<Vec<FeedForward>, Error> {
    let x = &names.experts;
    let packed = |leaf: &str, rows: usize, cols: usize| -> Result<(&[u8], &[u8]), Error> {
        let name = x.tensor(&format!("{leaf}_blocks"));
        if !cols.is_multiple_of(MXFP4_BLOCK) {
            return Err(InputError::Mxfp4 {
                tensor: name,
                problem: QuantError::PartialBlock {
                    dtype: "MXFP4",
                    block: MXFP4_BLOCK,
                    inputs: cols,
                },
            }
            .into());
        }
        let per_row = cols / MXFP4_BLOCK;
        let blocks = t.bytes(&name, &[n, rows, per_row, 16])?;
        let scales = t.bytes(&x.tensor(&format!("{leaf}_scales")), &[n, rows, per_row])?;
        Ok((blocks, scales))
    };
    let (gu_blocks, gu_scales) = packed("gate_up_proj", 2 * inner, hidden)?;
    let (d_blocks, d_scales) = packed("down_proj", hidden, inner)?;
    let gate_up_bias = t.weight(&x.tensor("gate_up_proj_bias"), &[n, 2 * inner])?;
    let down_bias = t.weight(&x.tensor("down_proj_bias"), &[n, hidden])?;
    let matrix = |leaf: &str, bytes: Vec<u8>, outputs: usize, inputs: usize| {
        let tensor = x.tensor(&format!("{leaf}_blocks"));
        let m =
            StoredMatrix::owned(bytes, QuantType::Mxfp4, outputs, inputs).map_err(|problem| {
                Error::from(InputError::Mxfp4 {
                    tensor: tensor.clone(),
                    problem,
                })
            })?;
        if let Some((index, value)) = m.first_non_finite() {
            return Err(InputError::TensorNotFinite {
                origin: "the checkpoint".to_string(),
                name: tensor,
                value,
                index,
            }
            .into());
        }
        Ok::<_, Error>(MatrixWeight::Stored(m))
    };
    let (gu_row, d_row) = (hidden / MXFP4_BLOCK * 16, inner / MXFP4_BLOCK * 16);
    (0..n)
        .map(|e| {
            let gu = &gu_blocks[e * 2 * inner * gu_row..][..2 * inner * gu_row];
            let gus = &gu_scales[e * 2 * inner * gu_row / 16..][..2 * inner * gu_row / 16];
            let gub = &gate_up_bias[e * 2 * inner..][..2 * inner];
            // Gate: the even rows, up: the odd ones (interleaved as the product's columns are).
            let half = |odd: usize| {
                let rows = (0..inner).map(|i| 2 * i + odd);
                let w = matrix(
                    "gate_up_proj",
                    mxfp4_rows(gu, gus, rows, gu_row),
                    inner,
                    hidden,
                )?;
                let b: Vec<f32> = (0..inner).map(|i| gub[2 * i + odd]).collect();
                Ok::<_, Error>(Linear::new(
                    w,
                    Layout::OutIn,
                    Some(Weight::owned(b, vec![inner])),
                ))
            };
            let d = &d_blocks[e * hidden * d_row..][..hidden * d_row];
            let ds = &d_scales[e * hidden * d_row / 16..][..hidden * d_row / 16];
            let down = matrix(
                "down_proj",
                mxfp4_rows(d, ds, 0..hidden, d_row),
                hidden,
                inner,
            )?;
            let (gate, up) = (half(0)?, half(1)?);
            // Copied: this expert's stored bytes need not stay resident beside the copy.
            for bytes in [gu, gus, d, ds] {
                t.release_bytes(bytes);
            }
            Ok(FeedForward::Gated {
                gate,
                up,
                activation: Activation::Identity,
                down: Linear::new(
                    down,
                    Layout::OutIn,
                    Some(Weight::owned(
                        down_bias[e * hidden..][..hidden].to_vec(),
                        vec![hidden],
                    )),
                ),
            })
        })
        .collect()
}

/// Rows `rows` of a matrix in transformers' MXFP4 layout (`blocks`: `row_bytes` bytes a row,
/// 16 per block, byte j holding value 2j in its low nibble and 2j + 1 in its high one;
/// `scales`: one E8M0 byte per block), in ggml's `block_mxfp4` layout (the scale byte, then 16
/// bytes, byte j holding value j low and j + 16 high): the same codes and scales, moved. What
/// llama.cpp's converter does (`transform_nibble_layout`, `repack_mxfp4`).
pub fn mxfp4_rows(
    blocks: &[u8],
    scales: &[u8],
    rows: impl Iterator<Item = usize>,
    row_bytes: usize,
) -> Vec<u8> {
    let per_row = row_bytes / 16;
    let mut out = Vec::with_capacity(blocks.len() / 16 * 17);
    for r in rows {
        let src = &blocks[r * row_bytes..][..row_bytes];
        let s = &scales[r * per_row..][..per_row];
        for (b, &scale) in src.chunks_exact(16).zip(s) {
            let mut codes = [0u8; 32];
            for j in 0..16 {
                codes[2 * j] = b[j] & 0x0f;
                codes[2 * j + 1] = b[j] >> 4;
            }
            out.push(scale);
            out.extend((0..16).map(|j| codes[j] | (codes[j + 16] << 4)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::testing::random;

    fn settings(norm: bool) -> RouterSettings {
        RouterSettings {
            experts: 5,
            top_k: 2,
            norm_topk_prob: norm,
        }
    }

    #[test]
    fn routing_is_the_softmax_s_top_k_renormalised_where_asked() {
        let logits = [0.5f32, 2.0, -1.0, 2.0, 1.0, 3.0, 0.0, 0.0, 0.0, -2.0];
        for norm in [false, true] {
            let r = route(&logits, 2, settings(norm));
            // Row 0: experts 1 and 3 tie; the lower comes first.
            assert_eq!(r.chosen, vec![1, 3, 0, 1]);
            for (row, l) in logits.chunks(5).enumerate() {
                let z: f64 = l.iter().map(|&v| (v as f64).exp()).sum();
                let p: Vec<f64> = l.iter().map(|&v| (v as f64).exp() / z).collect();
                for (i, &v) in r.probs[row * 5..][..5].iter().enumerate() {
                    assert!((v as f64 - p[i]).abs() < 1e-6);
                }
                let top = &r.chosen[row * 2..][..2];
                let total: f64 = top.iter().map(|&e| p[e as usize]).sum();
                for (j, &e) in top.iter().enumerate() {
                    let want = if norm {
                        p[e as usize] / total
                    } else {
                        p[e as usize]
                    };
                    assert!((r.weights[row * 2 + j] as f64 - want).abs() < 1e-6);
                }
            }
        }
    }

    #[test]
    fn grouped_routing_keeps_the_best_groups_and_their_best_experts() {
        let (e, k, groups, keep) = (12usize, 3usize, 4usize, 2usize);
        let rows = 40;
        let logits = random(rows * e, 11, 2.0);
        let bias = random(e, 12, 0.3);
        let settings = RouterSettings {
            experts: e,
            top_k: k,
            norm_topk_prob: true,
        };
        for (scoring, group_score) in [
            (Scoring::Sigmoid, GroupScore::TopTwoSum),
            (Scoring::Softmax, GroupScore::Max),
        ] {
            let v3 = scoring == Scoring::Sigmoid;
            let g = GroupRouting {
                scoring,
                groups,
                topk_group: keep,
                group_score,
                bias: v3.then(|| bias.clone()),
                masked: if v3 { f32::NEG_INFINITY } else { 0.0 },
                weights_from_choice: !v3,
                normalise: v3,
                scaling: 2.5,
            };
            let r = route_grouped(&logits, rows, settings, &g);
            for row in 0..rows {
                let l = &logits[row * e..][..e];
                // Scores in f64, independently of the kernel.
                let scores: Vec<f64> = if v3 {
                    l.iter()
                        .map(|&x| 1.0 / (1.0 + (-(x as f64)).exp()))
                        .collect()
                } else {
                    let z: f64 = l.iter().map(|&x| (x as f64).exp()).sum();
                    l.iter().map(|&x| (x as f64).exp() / z).collect()
                };
                for (a, b) in r.probs[row * e..][..e].iter().zip(&scores) {
                    assert!((*a as f64 - b).abs() < 1e-6);
                }
                let choice: Vec<f64> = (0..e)
                    .map(|i| scores[i] + if v3 { bias[i] as f64 } else { 0.0 })
                    .collect();
                let group_of = |i: usize| i / (e / groups);
                let group_value = |grp: usize| {
                    let mut v: Vec<f64> = (0..e)
                        .filter(|&i| group_of(i) == grp)
                        .map(|i| choice[i])
                        .collect();
                    v.sort_by(|a, b| b.total_cmp(a));
                    if v3 {
                        v[0] + v[1]
                    } else {
                        v[0]
                    }
                };
                let chosen = &r.chosen[row * k..][..k];
                let used: std::collections::BTreeSet<usize> =
                    chosen.iter().map(|&c| group_of(c as usize)).collect();
                assert!(used.len() <= keep, "row {row}: groups {used:?}");
                // Every group not used scores below the lowest used one, unless it was kept but
                // held none of the best experts: at least, no dropped group beats all kept.
                let lowest_used = used
                    .iter()
                    .map(|&grp| group_value(grp))
                    .fold(f64::MAX, f64::min);
                let better = (0..groups)
                    .filter(|grp| !used.contains(grp) && group_value(*grp) > lowest_used)
                    .count();
                assert!(
                    better + used.len() <= keep,
                    "row {row}: a better group was dropped"
                );
                // No expert of a used group left out beats a chosen one.
                let worst_chosen = chosen
                    .iter()
                    .map(|&c| choice[c as usize])
                    .fold(f64::MAX, f64::min);
                for i in (0..e).filter(|i| used.contains(&group_of(*i))) {
                    if !chosen.contains(&(i as u32)) {
                        assert!(choice[i] <= worst_chosen, "row {row}: expert {i} skipped");
                    }
                }
                // Best first.
                for pair in chosen.windows(2) {
                    assert!(choice[pair[0] as usize] >= choice[pair[1] as usize]);
                }
                let w: Vec<f64> = chosen.iter().map(|&c| scores[c as usize]).collect();
                let total: f64 = w.iter().sum();
                for (j, got) in r.weights[row * k..][..k].iter().enumerate() {
                    let want = if v3 { w[j] / total * 2.5 } else { w[j] * 2.5 };
                    assert!(
                        (*got as f64 - want).abs() < 1e-5,
                        "row {row}: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_clamped_swiglu_clamps_gate_above_and_up_both_ways() {
        let swiglu = ClampedSwiglu {
            alpha: 1.702,
            limit: 1.5,
        };
        let gate = [-3.0f32, -0.5, 0.0, 0.7, 1.5, 4.0];
        let up = [5.0f32, -4.0, 0.3, -1.0, 2.0, -0.2];
        let mut out = gate;
        swiglu.apply(&mut out, &up);
        for i in 0..gate.len() {
            // transformers' _apply_gate in f64.
            let g = (gate[i] as f64).min(1.5);
            let u = (up[i] as f64).clamp(-1.5, 1.5);
            let want = (u + 1.0) * g / (1.0 + (-g * 1.702).exp());
            assert!(
                (out[i] as f64 - want).abs() < 1e-6,
                "{i}: {} vs {want}",
                out[i]
            );
        }
    }

    #[test]
    fn each_row_gets_its_chosen_experts_weighted_sum() {
        let (hidden, inner) = (6, 4);
        let lin = |seed: u64, o: usize, i: usize| {
            Linear::new(
                Weight::owned(random(o * i, seed, 1.0), vec![o, i]),
                Layout::OutIn,
                None,
            )
        };
        let block = Experts {
            router: lin(1, 5, hidden),
            experts: (0..5)
                .map(|e| FeedForward::Gated {
                    gate: lin(10 + e, inner, hidden),
                    up: lin(20 + e, inner, hidden),
                    activation: Activation::Silu,
                    down: lin(30 + e, hidden, inner),
                })
                .collect(),
            settings: settings(true),
            clamped: None,
            grouped: None,
            shared: None,
        };
        let rows = 7;
        let x = random(rows * hidden, 3, 1.0);
        let (out, routing) = block.forward(&x, rows);
        for r in 0..rows {
            let row = &x[r * hidden..][..hidden];
            let mut want = vec![0f32; hidden];
            for j in 0..2 {
                let e = routing.chosen[r * 2 + j] as usize;
                let y = block.experts[e].forward(row, 1);
                for (w, v) in want.iter_mut().zip(&y) {
                    *w += v * routing.weights[r * 2 + j];
                }
            }
            for (a, b) in out[r * hidden..][..hidden].iter().zip(&want) {
                assert!((a - b).abs() < 1e-5, "row {r}: {a} vs {b}");
            }
        }
    }
}
