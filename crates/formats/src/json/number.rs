//! The numbers of the JSON export: one head's matrix written as JSON text, each weight rounded
//! to 6 significant digits (the default) or in full (the shortest decimal that reads back as the
//! same f32). Byte for byte what `docs/json.md` promises; the document around them is
//! `render/json.rs`.

/// One head's matrix (rows of `n` values) as `[[..],[..]]`; one row per line would be too airy:
/// rows are kept on one line each, separated by a space.
pub(super) fn format_matrix(m: &[f32], n: usize, full: bool) -> Vec<u8> {
    let mut out = Vec::new();
    format_matrix_into(&mut out, m, n, full);
    out
}

/// [`format_matrix`] into `out`, replacing what it held.
pub(super) fn format_matrix_into(out: &mut Vec<u8>, m: &[f32], n: usize, full: bool) {
    out.clear();
    // Room for the longest usual values ("0.0123456" in 6 digits, "0.012345678" in full) and
    // their commas without reallocating.
    out.reserve(m.len() * if full { 13 } else { 11 } + n * 4 + 2);
    let mut ryu_buf = ryu::Buffer::new();
    out.push(b'[');
    for (q, row) in m.chunks_exact(n.max(1)).enumerate() {
        if q > 0 {
            out.extend_from_slice(b", ");
        }
        out.push(b'[');
        for (k, &v) in row.iter().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            if full {
                push_full(out, v, &mut ryu_buf);
            } else {
                push_6sig(out, v);
            }
        }
        out.push(b']');
    }
    out.push(b']');
}

/// Shortest representation that reads back as the same f32 (ryu), made JSON-valid.
pub(super) fn push_full(out: &mut Vec<u8>, v: f32, buf: &mut ryu::Buffer) {
    if !v.is_finite() {
        // JSON has no NaN/inf; attention probabilities never are, but never emit invalid JSON.
        out.extend_from_slice(b"null");
        return;
    }
    let s = buf.format_finite(v);
    out.extend_from_slice(s.strip_suffix(".0").unwrap_or(s).as_bytes());
}

/// `v` rounded to 6 significant digits, in the shortest of plain or exponent notation.
///
/// Written into a 16-byte stack buffer and appended with one fixed-size copy, and rounded with
/// an add and a truncating cast rather than `f64::round` (a libm call on the baseline target):
/// the product rounded is below 2²⁴, where `⌊y + 0.5⌋` is exactly `round(y)` (adding 0.5 is
/// exact there). The six digits come from two lookups in a table of "000".."999", and every
/// notation copies them whole and then counts only the significant ones. The bytes are those
/// of the plain digit-by-digit version this replaced (kept in the tests as the reference).
#[inline]
pub(super) fn push_6sig(out: &mut Vec<u8>, v: f32) {
    if !v.is_finite() {
        out.extend_from_slice(b"null");
        return;
    }
    if v == 0.0 {
        out.push(b'0');
        return;
    }
    // At most "-0.0000dddddd" (13 bytes) or "-d.ddddde-45" (12).
    let mut buf = [0u8; 16];
    let mut len = usize::from(v < 0.0);
    buf[0] = b'-';
    let x = (v as f64).abs();
    // Decimal exponent from the binary one (log10 2 ≈ 0.30103), off by at most one for normal
    // numbers; subnormals (tiny attention weights do occur) take log10.
    let bits = (v.to_bits() >> 23) & 0xff;
    let mut exp = if bits == 0 {
        x.log10().floor() as i32
    } else {
        // ⌊e·log10 2⌋ in integers (78913 / 2¹⁸ ≈ log10 2; exact for |e| < 1650).
        ((bits as i32 - 127) * 78_913) >> 18
    };
    let round = |y: f64| (y + 0.5) as u64;
    let mut mant = round(x * pow10(5 - exp));
    // Settle on exactly six digits; also catches rounding that carries into a seventh.
    for _ in 0..4 {
        if mant >= 1_000_000 {
            exp += 1;
        } else if mant < 100_000 {
            exp -= 1;
        } else {
            break;
        }
        mant = round(x * pow10(5 - exp));
    }
    let (hi, lo) = (
        DIGITS3[(mant / 1000) as usize % 1000],
        DIGITS3[(mant % 1000) as usize],
    );
    let digits = [hi[0], hi[1], hi[2], lo[0], lo[1], lo[2]];
    let mut sig = 6;
    let mut m = mant;
    while sig > 1 && m % 10 == 0 {
        m /= 10;
        sig -= 1;
    }
    if (-5..0).contains(&exp) {
        // 0.000ddd: "0.0000" whole, then the digits over the zeros that are not needed.
        buf[len..len + 6].copy_from_slice(b"0.0000");
        len += 2 + (-exp - 1) as usize;
        buf[len..len + 6].copy_from_slice(&digits);
        len += sig;
    } else if (0..6).contains(&exp) {
        // Integer part first; digits past `sig` are zeros, which an integer part keeps.
        let int_len = exp as usize + 1;
        buf[len..len + 6].copy_from_slice(&digits);
        len += int_len;
        if sig > int_len {
            buf[len] = b'.';
            buf[len + 1..len + 1 + sig - int_len].copy_from_slice(&digits[int_len..sig]);
            len += 1 + sig - int_len;
        }
    } else {
        buf[len] = digits[0];
        len += 1;
        if sig > 1 {
            buf[len] = b'.';
            buf[len + 1..len + sig].copy_from_slice(&digits[1..sig]);
            len += sig;
        }
        buf[len] = b'e';
        len += 1;
        if exp < 0 {
            buf[len] = b'-';
            len += 1;
        }
        let e = exp.unsigned_abs();
        if e >= 10 {
            buf[len] = b'0' + (e / 10 % 10) as u8;
            len += 1;
        }
        buf[len] = b'0' + (e % 10) as u8;
        len += 1;
    }
    out.reserve(buf.len());
    // SAFETY: `reserve` made room for at least 16 more bytes past `out.len()`, so copying the
    // whole 16-byte buffer there stays inside the allocation (one fixed-size copy instead of a
    // `memcpy` call of `len` bytes); `len ≤ 13` of them are initialised values of the text,
    // and only those become part of the vector.
    unsafe {
        let end = out.len();
        std::ptr::copy_nonoverlapping(buf.as_ptr(), out.as_mut_ptr().add(end), buf.len());
        out.set_len(end + len);
    }
}

/// "000" to "999": three digits per lookup.
static DIGITS3: [[u8; 3]; 1000] = {
    let mut table = [[0u8; 3]; 1000];
    let mut i = 0;
    while i < 1000 {
        table[i] = [
            b'0' + (i / 100) as u8,
            b'0' + (i / 10 % 10) as u8,
            b'0' + (i % 10) as u8,
        ];
        i += 1;
    }
    table
};

/// 10^k for the exponents an f32 can need (|k| ≤ 50), from a table built once.
#[inline]
pub(super) fn pow10(k: i32) -> f64 {
    const LIMIT: i32 = 60;
    static TABLE: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| (-LIMIT..=LIMIT).map(|k| 10f64.powi(k)).collect());
    table[(k.clamp(-LIMIT, LIMIT) + LIMIT) as usize]
}
