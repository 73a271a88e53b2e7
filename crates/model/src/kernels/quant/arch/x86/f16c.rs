//! IEEE halves to f32 with x86's F16C: exact, as the portable conversion is
//! ([`crate::kernels::quant::codecs`]), and 8 values an instruction.
use std::arch::x86_64::*;

/// IEEE halves → f32 with F16C, as many as both `src` (2 bytes each) and `out` hold.
///
/// # Safety
/// The CPU must have AVX and F16C.
#[target_feature(enable = "avx,f16c")]
pub(crate) unsafe fn decode(src: &[u8], out: &mut [f32]) {
    let n = (src.len() / 2).min(out.len());
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: values i..i + 8 ≤ n are inside both slices (16 bytes of src from 2i,
        // 8 f32 of out from i); unaligned load and store.
        unsafe {
            let h = _mm_loadu_si128(src.as_ptr().add(2 * i).cast());
            _mm256_storeu_ps(out.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
        }
        i += 8;
    }
    for (j, y) in out.iter_mut().enumerate().take(n).skip(i) {
        *y = crate::kernels::quant::codecs::f16_to_f32(u16::from_le_bytes([
            src[2 * j],
            src[2 * j + 1],
        ]));
    }
}
