//! Hostile pictures written on the fly: progressive JPEGs made of many cheap scans (each
//! header a dozen bytes, each scan another pass of the decoder over the picture) and PNGs
//! whose colour profile is a decompression bomb. The same cases, at the sizes of the issue,
//! come from `scripts/hostile/pictures.py`.

use std::io::Write;

/// What follows a progressive JPEG's first scan (DC of every component, no data).
#[derive(Clone, Copy, Debug)]
pub enum Scans {
    /// `n` AC scans (band 1–63) over one component each, in turn, with no data at all:
    /// libjpeg warns that the data ended and goes over every block of the component.
    EmptyAc(usize),
    /// One AC scan of the first component (band 1–63, point transform 1), then `n`
    /// refinement scans of the same band: each block of each scan ends in an end-of-band run
    /// (15 bits per 16,384 blocks), and a refinement checks all 63 coefficients of each block.
    Refine(usize),
    /// `n` more DC scans over every component at once (interleaved), with no data.
    InterleavedDc(usize),
}

fn segment(marker: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![0xff, marker];
    out.extend(((body.len() + 2) as u16).to_be_bytes());
    out.extend(body);
    out
}

/// A progressive JPEG of `width × height` pixels, `components` of them (1: gray, 3: three
/// at full resolution), all zero coefficients, its scans as `scans` says. Quantisation tables
/// of 1, one-code Huffman tables (DC: category 0; AC: a run of 16,384 blocks ending their
/// band).
pub fn progressive_jpeg(width: u16, height: u16, components: u8, scans: Scans) -> Vec<u8> {
    let mut out = vec![0xff, 0xd8];
    out.extend(segment(0xdb, &[&[0u8][..], &[1u8; 64]].concat()));
    let mut sof = vec![8];
    sof.extend(height.to_be_bytes());
    sof.extend(width.to_be_bytes());
    sof.push(components);
    for id in 1..=components {
        sof.extend([id, 0x11, 0]);
    }
    out.extend(segment(0xc2, &sof));
    let one_code = |class: u8, symbol: u8| {
        let mut body = vec![class, 1];
        body.extend([0u8; 15]);
        body.push(symbol);
        body
    };
    out.extend(segment(0xc4, &one_code(0x00, 0x00)));
    out.extend(segment(0xc4, &one_code(0x10, 0xe0)));
    let blocks = (width as usize).div_ceil(8) * (height as usize).div_ceil(8);
    let all: Vec<u8> = (1..=components).flat_map(|id| [id, 0]).collect();
    let sos = |comps: &[u8], ss: u8, se: u8, ahal: u8| {
        let mut body = vec![(comps.len() / 2) as u8];
        body.extend(comps);
        body.extend([ss, se, ahal]);
        segment(0xda, &body)
    };
    // The DC scan, with no data: libjpeg warns that it ended early and leaves every DC at 0.
    out.extend(sos(&all, 0, 0, 0));
    // An end-of-band run of 16,384 blocks: the code `0` and 14 zero bits, as often as needed.
    let runs = vec![0u8; (15 * blocks.div_ceil(16384)).div_ceil(8)];
    match scans {
        Scans::EmptyAc(n) => {
            for i in 0..n {
                let id = 1 + (i % components as usize) as u8;
                out.extend(sos(&[id, 0], 1, 63, 0));
            }
        }
        Scans::Refine(n) => {
            out.extend(sos(&[1, 0], 1, 63, 0x01));
            out.extend(&runs);
            for _ in 0..n {
                out.extend(sos(&[1, 0], 1, 63, 0x10));
                out.extend(&runs);
            }
        }
        Scans::InterleavedDc(n) => {
            for _ in 0..n {
                out.extend(sos(&all, 0, 0, 0));
            }
        }
    }
    out.extend([0xff, 0xd9]);
    out
}

/// A 4 × 4 RGB PNG with an `iCCP` chunk whose profile inflates to `inflated` zero bytes.
pub fn png_with_profile(inflated: usize) -> Vec<u8> {
    let mut plain = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut plain, 4, 4);
        enc.set_color(png::ColorType::Rgb);
        let mut w = enc.write_header().unwrap();
        w.write_image_data(&[200u8; 4 * 4 * 3]).unwrap();
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    let mut left = inflated;
    while left > 0 {
        let n = left.min(zeros.len());
        z.write_all(&zeros[..n]).unwrap();
        left -= n;
    }
    let body = [&b"iCCP"[..], b"bomb\0\0", &z.finish().unwrap()].concat();
    let mut chunk = ((body.len() - 4) as u32).to_be_bytes().to_vec();
    chunk.extend(&body);
    chunk.extend(crc32fast::hash(&body).to_be_bytes());
    // After the signature and IHDR (8 + 25 bytes), where a profile belongs.
    [&plain[..33], &chunk, &plain[33..]].concat()
}
