//! A PNG's colour profile and text chunks, checked as PIL checks them before the pixels are
//! decoded: what PIL refuses is refused, what it passes over is passed over.
//!
//! A compressed chunk is a decompression bomb in waiting: a 600 KB `iCCP` chunk inflates to
//! 600 MiB, and the `png` crate would inflate it whole (within its memory limit) only to throw
//! the profile away. PIL (`PngImagePlugin`) inflates an `iCCP`, `zTXt` or compressed `iTXt`
//! chunk at most to `MAX_TEXT_CHUNK` (`ImageFile.SAFEBLOCK`, 1 MiB) and raises ValueError
//! ("Decompressed data too large") when there is more; it raises SyntaxError for an unknown
//! compression method in `iCCP` or `zTXt`, and ValueError once the text of all text chunks
//! passes `MAX_TEXT_MEMORY` (64 MiB). A stream zlib cannot inflate is no error there: the
//! profile or text is dropped. This module walks the chunks once (before and after the image
//! data, as `Image.open` and `load` do), streams each of those chunks through an inflater that
//! stops one byte past 1 MiB, and holds at most that; the decoder then skips them.

use std::io::{self, Read, SeekFrom};

use super::read::Input;

/// PIL's `PngImagePlugin.MAX_TEXT_CHUNK`: the most one compressed chunk may inflate to.
pub const MAX_TEXT_CHUNK: u64 = 1 << 20;
/// PIL's `PngImagePlugin.MAX_TEXT_MEMORY`: the most text all text chunks may hold together.
pub const MAX_TEXT_MEMORY: u64 = 64 * MAX_TEXT_CHUNK;

/// A PNG chunk PIL refuses (displays after the file's name).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// More text in all text chunks than PIL reads.
    #[error("holds more than {} MiB of text in its text chunks, more than PIL reads (PngImagePlugin.MAX_TEXT_MEMORY)", MAX_TEXT_MEMORY >> 20)]
    TextMemory,
    /// A chunk that inflates past PIL's bound.
    #[error("has a {chunk} chunk that inflates past {} MiB, more than PIL inflates (PngImagePlugin.MAX_TEXT_CHUNK: a decompression bomb); save it again without it", MAX_TEXT_CHUNK >> 20)]
    Inflates {
        /// The chunk, for people (`colour profile (iCCP)`).
        chunk: &'static str,
    },
    /// A compression method other than zlib.
    #[error("has a {chunk} chunk of compression method {method}, which PIL refuses (only 0, zlib, exists)")]
    Method {
        /// The chunk, for people.
        chunk: &'static str,
        /// The method.
        method: u8,
    },
    /// An empty colour profile chunk.
    #[error("has an empty colour profile chunk (iCCP), which PIL cannot read")]
    EmptyProfile,
}

/// Why the walk stopped.
#[derive(Debug)]
pub(super) enum ChunkError {
    /// What PIL refuses.
    Refused(Refusal),
    /// The file could not be read.
    Io(io::Error),
}

impl From<io::Error> for ChunkError {
    fn from(e: io::Error) -> Self {
        ChunkError::Io(e)
    }
}

/// Walk the chunks of the PNG `input` (from its first byte) and refuse what PIL refuses. A file
/// that ends early or is otherwise damaged passes: the decoder says what is wrong with it.
pub(super) fn check(input: &mut dyn Input) -> Result<(), ChunkError> {
    let mut signature = [0u8; 8];
    if !read_all(input, &mut signature)? {
        return Ok(());
    }
    let mut text_memory = 0u64;
    loop {
        let mut head = [0u8; 8];
        if !read_all(input, &mut head)? {
            return Ok(());
        }
        let length = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as u64;
        let kind = [head[4], head[5], head[6], head[7]];
        if &kind == b"IEND" {
            return Ok(());
        }
        let mut body = (&mut *input).take(length);
        let text = match &kind {
            b"iCCP" => {
                iccp(&mut body)?;
                0
            }
            b"tEXt" => text(&mut body)?,
            b"zTXt" => ztxt(&mut body)?,
            b"iTXt" => itxt(&mut body)?,
            _ => 0,
        };
        text_memory += text;
        if text_memory > MAX_TEXT_MEMORY {
            return Err(ChunkError::Refused(Refusal::TextMemory));
        }
        // The rest of the chunk, and its CRC.
        let rest = body.limit();
        input.seek(SeekFrom::Current(rest as i64 + 4))?;
    }
}

/// Fill `buf`; `false` at the end of the file (a part read is dropped).
fn read_all(input: &mut dyn Read, buf: &mut [u8]) -> io::Result<bool> {
    match input.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

/// The next byte of the chunk, `None` at its end.
fn byte(body: &mut dyn Read) -> io::Result<Option<u8>> {
    let mut b = [0u8; 1];
    Ok(read_all(body, &mut b)?.then_some(b[0]))
}

/// Read up to the next NUL (consumed), counting the bytes before it and handing them to
/// `each`; `None` when the chunk ends first (PIL's `split(b"\0", 1)` fails).
fn until_nul(body: &mut dyn Read, mut each: impl FnMut(u8)) -> io::Result<Option<u64>> {
    let mut n = 0;
    loop {
        match byte(body)? {
            None => return Ok(None),
            Some(0) => return Ok(Some(n)),
            Some(b) => {
                each(b);
                n += 1;
            }
        }
    }
}

/// How many bytes the chunk has left (read and dropped).
fn count_rest(body: &mut dyn Read) -> io::Result<u64> {
    io::copy(body, &mut io::sink())
}

/// What inflating the rest of a chunk as PIL's `_safe_zlib_decompress` does gives: `Ok(Some)`
/// the data (at most [`MAX_TEXT_CHUNK`] bytes), `Ok(None)` a stream zlib fails on (PIL's
/// `zlib.error`), `Err` more than PIL inflates.
fn inflate(body: &mut dyn Read, chunk: &'static str) -> Result<Option<Vec<u8>>, ChunkError> {
    let mut out = Vec::new();
    let inflated = flate2::read::ZlibDecoder::new(body)
        .take(MAX_TEXT_CHUNK + 1)
        .read_to_end(&mut out);
    if out.len() as u64 > MAX_TEXT_CHUNK {
        return Err(ChunkError::Refused(Refusal::Inflates { chunk }));
    }
    Ok(inflated.is_ok().then_some(out))
}

fn unknown_method(method: u8, chunk: &'static str) -> ChunkError {
    ChunkError::Refused(Refusal::Method { chunk, method })
}

/// `chunk_iCCP`: the profile's name up to a NUL, the compression method, the profile.
fn iccp(body: &mut dyn Read) -> Result<(), ChunkError> {
    let mut first = None;
    let method = match until_nul(body, |b| {
        first.get_or_insert(b);
    })? {
        Some(_) => byte(body)?,
        // No NUL: PIL's `s.find(b"\0")` is -1, so it takes the chunk's first byte as the method
        // (the rest of the name is then the "profile": it is not inflated past it).
        None => first,
    };
    match method {
        // An empty chunk: PIL fails on indexing it.
        None => Err(ChunkError::Refused(Refusal::EmptyProfile)),
        Some(0) => inflate(body, "colour profile (iCCP)").map(drop),
        Some(m) => Err(unknown_method(m, "colour profile (iCCP)")),
    }
}

/// `chunk_tEXt`: a keyword, a NUL and Latin-1 text; the text counts when the keyword is not
/// empty.
fn text(body: &mut dyn Read) -> Result<u64, ChunkError> {
    match until_nul(body, |_| {})? {
        Some(key) if key > 0 => Ok(count_rest(body)?),
        _ => Ok(0),
    }
}

/// `chunk_zTXt`: a keyword, a NUL, the compression method and the compressed Latin-1 text.
fn ztxt(body: &mut dyn Read) -> Result<u64, ChunkError> {
    let Some(key) = until_nul(body, |_| {})? else {
        return Ok(0);
    };
    match byte(body)? {
        None => Ok(0),
        Some(0) => {
            let text = inflate(body, "compressed text (zTXt)")?.unwrap_or_default();
            Ok(if key > 0 { text.len() as u64 } else { 0 })
        }
        Some(m) => Err(unknown_method(m, "compressed text (zTXt)")),
    }
}

/// `chunk_iTXt`: keyword, NUL, compression flag and method, language, NUL, translated
/// keyword, NUL, UTF-8 text; it counts (in characters) only when the language, the
/// translated keyword and the text are all valid UTF-8.
fn itxt(body: &mut dyn Read) -> Result<u64, ChunkError> {
    if until_nul(body, |_| {})?.is_none() {
        return Ok(0);
    }
    let (Some(flag), Some(method)) = (byte(body)?, byte(body)?) else {
        return Ok(0);
    };
    let mut names = Utf8::default();
    for _ in 0..2 {
        if until_nul(body, |b| names.feed(&[b]))?.is_none() {
            return Ok(0);
        }
        names.end();
    }
    let mut text = Utf8::default();
    if flag != 0 {
        if method != 0 {
            return Ok(0);
        }
        match inflate(body, "compressed international text (iTXt)")? {
            Some(inflated) => text.feed(&inflated),
            None => return Ok(0),
        }
    } else {
        let mut buf = [0u8; 64 << 10];
        loop {
            let n = body.read(&mut buf)?;
            if n == 0 {
                break;
            }
            text.feed(&buf[..n]);
        }
    }
    text.end();
    Ok(if names.valid && text.valid {
        text.chars
    } else {
        0
    })
}

/// UTF-8 checked and its characters counted as the bytes arrive.
struct Utf8 {
    /// The bytes of a character cut at the end of the last piece.
    carry: Vec<u8>,
    chars: u64,
    valid: bool,
}

impl Default for Utf8 {
    fn default() -> Self {
        Utf8 {
            carry: Vec::new(),
            chars: 0,
            valid: true,
        }
    }
}

impl Utf8 {
    fn feed(&mut self, bytes: &[u8]) {
        if !self.valid {
            return;
        }
        let mut piece = std::mem::take(&mut self.carry);
        piece.extend_from_slice(bytes);
        match std::str::from_utf8(&piece) {
            Ok(s) => self.chars += s.chars().count() as u64,
            Err(e) if e.error_len().is_none() => {
                let (good, cut) = piece.split_at(e.valid_up_to());
                self.chars += std::str::from_utf8(good).map_or(0, |s| s.chars().count()) as u64;
                self.carry = cut.to_vec();
            }
            Err(_) => self.valid = false,
        }
    }

    /// The end of one string: a character cut there makes it invalid.
    fn end(&mut self) {
        if !self.carry.is_empty() {
            self.valid = false;
            self.carry.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Cursor, Write};

    /// A PNG's chunks after its signature (no IHDR or IDAT: the walk needs none).
    fn png_of(chunks: &[(&[u8; 4], Vec<u8>)]) -> Vec<u8> {
        let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
        for (kind, body) in chunks {
            out.extend((body.len() as u32).to_be_bytes());
            out.extend(*kind);
            out.extend(body);
            out.extend([0, 0, 0, 0]); // the CRC: not the walk's business
        }
        out.extend(b"\0\0\0\0IEND\xaeB`\x82");
        out
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(data).unwrap();
        z.finish().unwrap()
    }

    fn walk(png: &[u8]) -> Result<(), String> {
        check(&mut Cursor::new(png)).map_err(|e| match e {
            ChunkError::Refused(why) => why.to_string(),
            ChunkError::Io(e) => panic!("{e}"),
        })
    }

    fn with_name(name: &[u8], method: u8, data: &[u8]) -> Vec<u8> {
        [name, &[0, method], data].concat()
    }

    #[test]
    fn a_profile_that_inflates_past_pils_bound_is_refused_and_one_within_it_passes() {
        // 1 MiB + 1 of zeros: PIL's `_safe_zlib_decompress` leaves an unconsumed tail.
        let bomb = zlib(&vec![0u8; (MAX_TEXT_CHUNK + 1) as usize]);
        assert!(bomb.len() < 4096, "a bomb: {} bytes", bomb.len());
        let e = walk(&png_of(&[(b"iCCP", with_name(b"icc", 0, &bomb))])).unwrap_err();
        assert!(e.contains("iCCP") && e.contains("1 MiB"), "{e}");
        // Exactly 1 MiB inflates, as in PIL.
        let full = zlib(&vec![0u8; MAX_TEXT_CHUNK as usize]);
        walk(&png_of(&[(b"iCCP", with_name(b"icc", 0, &full))])).unwrap();
        // After the image data too (PIL reads those chunks when it loads the pixels).
        let late = png_of(&[
            (b"IDAT", vec![1, 2, 3]),
            (b"iCCP", with_name(b"icc", 0, &bomb)),
        ]);
        assert!(walk(&late).is_err());
    }

    #[test]
    fn what_pil_passes_over_passes_and_what_it_refuses_is_refused() {
        // A stream zlib fails on: PIL drops the profile.
        walk(&png_of(&[(b"iCCP", with_name(b"icc", 0, b"not zlib"))])).unwrap();
        // An unknown method: PIL's SyntaxError.
        let e = walk(&png_of(&[(b"iCCP", with_name(b"icc", 1, b""))])).unwrap_err();
        assert!(e.contains("method 1"), "{e}");
        let e = walk(&png_of(&[(b"zTXt", with_name(b"k", 7, b""))])).unwrap_err();
        assert!(e.contains("zTXt") && e.contains("method 7"), "{e}");
        assert!(walk(&png_of(&[(b"iCCP", vec![])])).is_err());
        // Compressed text past 1 MiB: zTXt and iTXt alike.
        let bomb = zlib(&vec![b'a'; (MAX_TEXT_CHUNK + 1) as usize]);
        assert!(walk(&png_of(&[(b"zTXt", with_name(b"k", 0, &bomb))])).is_err());
        let itxt = [&b"k\0\x01\0en\0key\0"[..], &bomb].concat();
        assert!(walk(&png_of(&[(b"iTXt", itxt)])).is_err());
        // iTXt with an unknown method is skipped by PIL, whatever it holds.
        let skipped = [&b"k\0\x01\x05en\0key\0"[..], &bomb].concat();
        walk(&png_of(&[(b"iTXt", skipped)])).unwrap();
    }

    #[test]
    fn text_past_64_mib_in_all_is_refused_counted_as_pil_counts_it() {
        let mib = zlib(&vec![b'a'; MAX_TEXT_CHUNK as usize]);
        let ztxt = (b"zTXt", with_name(b"k", 0, &mib));
        walk(&png_of(&vec![ztxt.clone(); 64])).unwrap();
        let e = walk(&png_of(&vec![ztxt.clone(); 65])).unwrap_err();
        assert!(e.contains("64 MiB"), "{e}");
        // Text under an empty keyword is not counted; neither is iTXt that is not UTF-8.
        let nameless = (b"zTXt", with_name(b"", 0, &mib));
        walk(&png_of(&vec![nameless; 65])).unwrap();
        let latin = [&b"k\0\x01\0en\0key\0"[..], &zlib(&vec![0xe9; 1 << 20])].concat();
        walk(&png_of(&vec![(b"iTXt", latin); 65])).unwrap();
        // UTF-8 counts characters: 2-byte characters count once.
        let mut u = Utf8::default();
        u.feed("é".as_bytes().split_at(1).0);
        u.feed("é".as_bytes().split_at(1).1);
        u.end();
        assert!(u.valid && u.chars == 1);
    }
}
