//! WOFF 1.0 (W3C, 2012): an sfnt font with each table zlib-compressed. Every browser reads it
//! and it is a third to a half smaller than the TrueType it wraps. No maintained crate writes
//! WOFF 1.0 (WOFF2 writers pull in a Brotli encoder), and the format is a header, a table
//! directory and the tables, so it is written here with the zlib encoder the PNG path already
//! uses.

use std::io::Write;

use flate2::write::ZlibEncoder;
use flate2::Compression;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Wrap the sfnt (TrueType or CFF OpenType) font `sfnt` as WOFF 1.0. `None` if `sfnt` is not a
/// well-formed sfnt.
pub(crate) fn encode(sfnt: &[u8]) -> Option<Vec<u8>> {
    let flavor = u32_at(sfnt, 0)?;
    let count = u16_at(sfnt, 4)? as usize;
    let mut tables = Vec::with_capacity(count);
    for i in 0..count {
        let rec = 12 + 16 * i;
        let tag = u32_at(sfnt, rec)?;
        let checksum = u32_at(sfnt, rec + 4)?;
        let offset = u32_at(sfnt, rec + 8)? as usize;
        let len = u32_at(sfnt, rec + 12)? as usize;
        let data = sfnt.get(offset..offset.checked_add(len)?)?;
        tables.push((tag, checksum, data));
    }
    tables.sort_by_key(|t| t.0);

    let header_len = 44 + 20 * count;
    let mut directory = Vec::with_capacity(20 * count);
    let mut body = Vec::new();
    let mut sfnt_size = 12 + 16 * count;
    for &(tag, checksum, data) in &tables {
        let mut z = ZlibEncoder::new(Vec::new(), Compression::best());
        z.write_all(data).ok()?;
        let packed = z.finish().ok()?;
        let stored: &[u8] = if packed.len() < data.len() {
            &packed
        } else {
            data
        };
        let offset = header_len + body.len();
        directory.extend_from_slice(&tag.to_be_bytes());
        directory.extend_from_slice(&(offset as u32).to_be_bytes());
        directory.extend_from_slice(&(stored.len() as u32).to_be_bytes());
        directory.extend_from_slice(&(data.len() as u32).to_be_bytes());
        directory.extend_from_slice(&checksum.to_be_bytes());
        body.extend_from_slice(stored);
        body.resize(body.len().next_multiple_of(4), 0);
        sfnt_size += data.len().next_multiple_of(4);
    }
    let total = header_len + body.len();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(b"wOFF");
    out.extend_from_slice(&flavor.to_be_bytes());
    out.extend_from_slice(&(total as u32).to_be_bytes());
    out.extend_from_slice(&(count as u16).to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes()); // reserved
    out.extend_from_slice(&(sfnt_size as u32).to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes()); // font version 1.0 (informational)
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&[0; 20]); // no metadata, no private data
    out.extend_from_slice(&directory);
    out.extend_from_slice(&body);
    Some(out)
}

/// Unwrap WOFF 1.0 back into an sfnt (for tests: what a browser does before using the font).
#[cfg(test)]
pub(crate) fn decode(woff: &[u8]) -> Option<Vec<u8>> {
    use std::io::Read;
    if woff.get(0..4)? != b"wOFF" || u32_at(woff, 8)? as usize != woff.len() {
        return None;
    }
    let count = u16_at(woff, 12)? as usize;
    let mut tables = Vec::new();
    for i in 0..count {
        let rec = 44 + 20 * i;
        let tag = u32_at(woff, rec)?;
        let offset = u32_at(woff, rec + 4)? as usize;
        let comp = u32_at(woff, rec + 8)? as usize;
        let orig = u32_at(woff, rec + 12)? as usize;
        let checksum = u32_at(woff, rec + 16)?;
        let stored = woff.get(offset..offset + comp)?;
        let data = if comp < orig {
            let mut d = Vec::new();
            flate2::read::ZlibDecoder::new(stored)
                .read_to_end(&mut d)
                .ok()?;
            d
        } else {
            stored.to_vec()
        };
        if data.len() != orig {
            return None;
        }
        tables.push((tag, checksum, data));
    }
    let mut out = Vec::new();
    out.extend_from_slice(&u32_at(woff, 4)?.to_be_bytes());
    out.extend_from_slice(&(count as u16).to_be_bytes());
    out.extend_from_slice(&[0; 6]); // search fields: unused by parsers
    let mut offset = 12 + 16 * count;
    let mut body = Vec::new();
    for (tag, checksum, data) in &tables {
        out.extend_from_slice(&tag.to_be_bytes());
        out.extend_from_slice(&checksum.to_be_bytes());
        out.extend_from_slice(&(offset as u32).to_be_bytes());
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        body.extend_from_slice(data);
        body.resize(body.len().next_multiple_of(4), 0);
        offset = 12 + 16 * count + body.len();
    }
    out.extend_from_slice(&body);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fonts::FontId;
    use rustybuzz::ttf_parser;

    #[test]
    fn round_trips_and_shrinks() {
        let ttf = FontId::Hebrew.bytes();
        let woff = encode(ttf).unwrap();
        assert!(
            woff.len() < ttf.len() * 3 / 4,
            "{} vs {}",
            woff.len(),
            ttf.len()
        );
        let back = decode(&woff).unwrap();
        let face = ttf_parser::Face::parse(&back, 0).unwrap();
        assert!(face.glyph_index('ש').is_some());
        // the header's sfnt size is what the decoded font occupies
        assert_eq!(u32_at(&woff, 16).unwrap() as usize, back.len());
        assert!(encode(b"not a font").is_none());
    }
}
