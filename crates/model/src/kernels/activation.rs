//! Element-wise activations: GELU (exact and tanh), ReLU, SiLU, and the gated form
//! `act(gate) · up` of SwiGLU-style feed-forward blocks.

use rayon::prelude::*;

use super::{erf, exp, PARALLEL_MIN};

/// GELU with the error function, as transformers' `gelu`: `x · ½ · (1 + erf(x/√2))`.
#[inline(always)]
pub fn gelu_erf(x: f32) -> f32 {
    x * 0.5 * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// GELU's tanh approximation (`gelu_new`): `½x(1 + tanh(√(2/π)(x + 0.044715x³)))`, with
/// `tanh(u) = 1 − 2/(e²ᵘ + 1)`.
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let u = SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x);
    let tanh = 1.0 - 2.0 / (exp(2.0 * u) + 1.0);
    0.5 * x * (1.0 + tanh)
}

/// SiLU (swish), as transformers' `silu`: `x · σ(x) = x / (1 + e⁻ˣ)`. Below −88 the
/// denominator is +∞ and the result −0, as in torch.
#[inline(always)]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + exp(-x))
}

multiversion! {
    /// [`gelu_erf`] on every element, in place.
    pub fn gelu_erf_in_place(xs: &mut [f32]) {
        for v in xs.iter_mut() {
            *v = gelu_erf(*v);
        }
    }
}

multiversion! {
    /// [`gelu_tanh`] on every element, in place.
    pub fn gelu_tanh_in_place(xs: &mut [f32]) {
        for v in xs.iter_mut() {
            *v = gelu_tanh(*v);
        }
    }
}

multiversion! {
    /// [`silu`] on every element, in place.
    pub fn silu_in_place(xs: &mut [f32]) {
        for v in xs.iter_mut() {
            *v = silu(*v);
        }
    }
}

fn relu_in_place(xs: &mut [f32]) {
    xs.iter_mut().for_each(|v| *v = v.max(0.0));
}

/// An element-wise function applied to a linear map's output (or to the gate of a gated block).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// None: `x·W + b`.
    Identity,
    /// [`gelu_erf`].
    GeluErf,
    /// [`gelu_tanh`].
    GeluTanh,
    /// `max(x, 0)`.
    Relu,
    /// [`silu`].
    Silu,
}

impl Activation {
    /// The activation transformers' `ACT2FN[name]` computes, for the names we run exactly.
    pub fn from_hf_name(name: &str) -> Option<Activation> {
        match name {
            "gelu" | "gelu_python" => Some(Activation::GeluErf),
            // gelu_fast is the same polynomial written as x·0.797…·(1 + 0.044715·x²).
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Some(Activation::GeluTanh),
            "relu" => Some(Activation::Relu),
            "silu" | "swish" => Some(Activation::Silu),
            _ => None,
        }
    }

    /// The names [`Activation::from_hf_name`] accepts, for error messages.
    pub const HF_NAMES: &'static str =
        "gelu, gelu_python, gelu_new, gelu_pytorch_tanh, gelu_fast, relu, silu or swish";

    fn in_place(self) -> Option<fn(&mut [f32])> {
        match self {
            Activation::Identity => None,
            Activation::GeluErf => Some(gelu_erf_in_place),
            Activation::GeluTanh => Some(gelu_tanh_in_place),
            Activation::Relu => Some(relu_in_place),
            Activation::Silu => Some(silu_in_place),
        }
    }

    /// Apply to every element of `xs`, in place (in parallel when there are many).
    pub fn apply(self, xs: &mut [f32]) {
        let Some(f) = self.in_place() else {
            return;
        };
        if xs.len() < PARALLEL_MIN {
            f(xs);
        } else {
            xs.par_chunks_mut(16 * 1024).for_each(f);
        }
    }
}

/// The gate of a gated feed-forward block (SwiGLU for `Silu`, GeGLU for the GELUs):
/// `gate[i] = act(gate[i]) · up[i]`, in place.
pub fn gate(gate: &mut [f32], up: &[f32], activation: Activation) {
    assert_eq!(gate.len(), up.len(), "gate and up shapes");
    let run = |g: &mut [f32], u: &[f32]| {
        activation.apply(g);
        for (g, u) in g.iter_mut().zip(u) {
            *g *= u;
        }
    };
    if gate.len() < PARALLEL_MIN {
        run(gate, up);
    } else {
        gate.par_chunks_mut(16 * 1024)
            .zip(up.par_chunks(16 * 1024))
            .for_each(|(g, u)| run(g, u));
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::random;
    use super::*;

    #[test]
    fn gelu_follows_its_formulas() {
        extern "C" {
            fn erf(x: f64) -> f64;
        }
        let xs: Vec<f32> = (-10_000..=10_000).map(|i| i as f32 / 1000.0).collect();
        let mut ours = xs.clone();
        gelu_erf_in_place(&mut ours);
        let mut tanh = xs.clone();
        gelu_tanh_in_place(&mut tanh);
        let (mut worst_erf, mut worst_tanh): (f64, f64) = (0.0, 0.0);
        for ((&x, &g), &t) in xs.iter().zip(&ours).zip(&tanh) {
            let x = x as f64;
            // SAFETY: pure libm function.
            let exact = x * 0.5 * (1.0 + unsafe { erf(x / 2f64.sqrt()) });
            worst_erf = worst_erf.max((g as f64 - exact).abs());
            let c = (2.0 / std::f64::consts::PI).sqrt();
            let exact_tanh = 0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh());
            worst_tanh = worst_tanh.max((t as f64 - exact_tanh).abs());
        }
        eprintln!(
            "gelu_erf: max |error| {worst_erf:.3e}; gelu_tanh: {worst_tanh:.3e} on [-10, 10]"
        );
        assert!(worst_erf < 1.5e-6, "gelu_erf error {worst_erf:e}");
        assert!(worst_tanh < 1.5e-6, "gelu_tanh error {worst_tanh:e}");
        // Exact GELU x·Φ(x) at a few points, from Python: x * 0.5 * (1 + math.erf(x / sqrt(2))).
        let at = |x: f32| ours[xs.iter().position(|&v| v == x).unwrap()] as f64;
        assert!((at(1.0) - 0.841_344_746_068_542_9).abs() < 1e-6);
        assert!((at(-1.0) + 0.158_655_253_931_457_05).abs() < 1e-6);
        assert!((at(2.0) - 1.954_499_736_103_641_6).abs() < 1e-6);
        assert!((at(-3.0) + 0.004_049_694_094_890_31).abs() < 1e-6);
    }

    #[test]
    fn silu_follows_its_formula() {
        let xs: Vec<f32> = (-12_000..=12_000).map(|i| i as f32 * 1e-2).collect();
        let mut ours = xs.clone();
        Activation::Silu.apply(&mut ours);
        let mut worst: f64 = 0.0;
        for (&x, &y) in xs.iter().zip(&ours) {
            let x = x as f64;
            let exact = x / (1.0 + (-x).exp());
            // Relative to the value's size: silu grows like x.
            worst = worst.max((y as f64 - exact).abs() / exact.abs().max(1.0));
        }
        eprintln!("silu: max error {worst:.3e} on [-120, 120]");
        assert!(worst < 5e-7, "silu error {worst:e}");
        assert_eq!(silu(-200.0), 0.0);
        assert_eq!(silu(200.0), 200.0);
        assert!(silu(f32::NAN).is_nan());
    }

    #[test]
    fn gated_blocks_multiply_the_activated_gate_by_up() {
        // Long enough for the parallel path, with a tail.
        let n = 70_001;
        let g0 = random(n, 31, 6.0);
        let up = random(n, 32, 2.0);
        for act in [Activation::Silu, Activation::GeluTanh, Activation::GeluErf] {
            let mut g = g0.clone();
            gate(&mut g, &up, act);
            for i in (0..n).step_by(97) {
                let mut want = [g0[i]];
                act.apply(&mut want);
                assert_eq!(g[i], want[0] * up[i], "{act:?} at {i}");
            }
        }
    }

    #[test]
    fn names_map_to_transformers_functions() {
        assert_eq!(Activation::from_hf_name("gelu"), Some(Activation::GeluErf));
        assert_eq!(
            Activation::from_hf_name("gelu_pytorch_tanh"),
            Some(Activation::GeluTanh)
        );
        assert_eq!(Activation::from_hf_name("swish"), Some(Activation::Silu));
        assert_eq!(Activation::from_hf_name("quick_gelu"), None);
    }

    #[test]
    fn every_instruction_set_computes_the_same() {
        // The dispatched versions must agree bit for bit with the baseline body.
        let input = random(4096, 7, 8.0);
        for (f, one) in [
            (
                gelu_erf_in_place as fn(&mut [f32]),
                gelu_erf as fn(f32) -> f32,
            ),
            (gelu_tanh_in_place, gelu_tanh),
            (silu_in_place, silu),
        ] {
            let mut dispatched = input.clone();
            f(&mut dispatched);
            let baseline: Vec<f32> = input.iter().map(|&x| one(x)).collect();
            assert_eq!(dispatched, baseline);
        }
    }
}
