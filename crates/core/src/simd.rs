//! Run-time dispatch of SIMD code: the best instruction set this CPU has (or a lower one
//! `ATTNVIZ_ISA` asks for), and [`multiversion!`](crate::multiversion), which compiles a loop
//! for AVX-512, AVX2+FMA and the baseline and calls the best. Every crate's element-wise loops
//! (the model's kernels, the analyses, the report's payload) dispatch through here, so a whole
//! run uses one instruction set.

use std::sync::OnceLock;

/// The instruction sets the kernels are compiled for, best first.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    /// AVX-512 (F, BW, DQ, VL) with FMA.
    Avx512,
    /// AVX2 with FMA.
    Avx2,
    /// The target's baseline (SSE2 on x86-64).
    Baseline,
}

impl Isa {
    fn name(self) -> &'static str {
        match self {
            Isa::Avx512 => "AVX-512",
            Isa::Avx2 => "AVX2+FMA",
            Isa::Baseline => "baseline",
        }
    }
}

/// The best instruction set this CPU supports.
pub fn detected() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512dq")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("fma")
        {
            return Isa::Avx512;
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return Isa::Avx2;
        }
    }
    Isa::Baseline
}

/// What `ATTNVIZ_ISA` asks for, if it names an instruction set.
fn requested() -> Option<Isa> {
    match std::env::var("ATTNVIZ_ISA")
        .ok()?
        .to_ascii_lowercase()
        .as_str()
    {
        "avx512" | "avx-512" => Some(Isa::Avx512),
        "avx2" => Some(Isa::Avx2),
        "baseline" | "sse2" | "none" => Some(Isa::Baseline),
        _ => None,
    }
}

// Always compiled, not only under `cfg(test)`: the crates above test their kernels at each
// level, and a feature for it would make `cargo test` build every crate a second time
// (tests/suite/build_sharing.rs). The check is one thread-local read per dispatch.
thread_local! {
    /// A test's choice for this thread (see [`with_isa`]).
    static FORCED: std::cell::Cell<Option<Isa>> = const { std::cell::Cell::new(None) };
}

/// The instruction set every kernel runs on: the best the CPU has, or a lower one that
/// `ATTNVIZ_ISA` (`avx512`, `avx2`, `baseline`) asks for, read once. Lowering it stands in for
/// an older CPU: `ATTNVIZ_ISA=avx2` on an AVX-512 machine runs the code an AVX2-only machine
/// runs, gemm's kernels included (gemm's kernels follow it: `attnviz_model::kernels::gemm`).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub fn isa() -> Isa {
    if let Some(isa) = FORCED.with(|f| f.get()) {
        return isa;
    }
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        let best = detected();
        requested().map_or(best, |r| r.max(best))
    })
}

/// The instruction set the kernels use, in words, with what the CPU has when `ATTNVIZ_ISA`
/// lowered it: for benchmarks to print beside their figures.
pub fn instruction_set() -> String {
    let (used, best) = (isa(), detected());
    if used == best {
        used.name().to_string()
    } else {
        format!("{} (ATTNVIZ_ISA; the CPU has {})", used.name(), best.name())
    }
}

/// The instruction sets this CPU supports, best first (tests run each).
#[doc(hidden)]
pub fn isa_levels() -> Vec<Isa> {
    [Isa::Avx512, Isa::Avx2, Isa::Baseline]
        .into_iter()
        .filter(|&i| i >= detected())
        .collect()
}

/// Runs `f` with the kernels dispatched on this thread to `isa` (which the CPU must have): for
/// tests.
#[doc(hidden)]
pub fn with_isa<R>(isa: Isa, f: impl FnOnce() -> R) -> R {
    assert!(isa >= detected(), "{isa:?} is not supported here");
    let before = FORCED.with(|c| c.replace(Some(isa)));
    let r = f();
    FORCED.with(|c| c.set(before));
    r
}

/// Define a function whose body is compiled for AVX-512, for AVX2 and for the baseline target,
/// and dispatch to the best one the CPU supports (any module of the crate may use it). The body must call only `#[inline(always)]`
/// helpers, so they are compiled with the same features.
#[macro_export]
macro_rules! multiversion {
    ($(#[$attr:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $body:block) => {
        $(#[$attr])*
        $vis fn $name($($arg: $ty),*) {
            #[inline(always)]
            fn body($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
                unsafe fn avx512($($arg: $ty),*) {
                    body($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) {
                    body($($arg),*)
                }
                match $crate::simd::isa() {
                    // SAFETY: `isa()` checked at run time that the CPU has these features.
                    $crate::simd::Isa::Avx512 => return unsafe { avx512($($arg),*) },
                    $crate::simd::Isa::Avx2 => return unsafe { avx2($($arg),*) },
                    $crate::simd::Isa::Baseline => {}
                }
            }
            body($($arg),*)
        }
    };
}
