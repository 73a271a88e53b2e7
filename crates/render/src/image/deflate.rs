//! A PNG's image data compressed in parts at once, as pigz does: the scanlines are filtered
//! (PNG's Sub filter, what the `png` crate applies by default), cut into parts of about
//! [`PART_BYTES`] at scanline boundaries, and each part is deflated on its own; every part but
//! the last ends on a sync flush (byte-aligned, not final), so the parts laid end to end are
//! one deflate stream, which the zlib header and the Adler-32 of all the data wrap. A part
//! starts without the previous part's window, which costs about 1 % of the file (Whisper's
//! words over 1,500 frames, 1704 × 1359 pixels in 4 parts: 494 → 499 KB); deflating it on one
//! thread took about 40 ms of a Whisper run's second (`docs/performance.md`). The cut depends
//! on the image's size only, never on the threads, so the bytes are the same on every
//! machine.

use flate2::{Compress, Compression, FlushCompress, Status};
use rayon::prelude::*;

/// Filtered bytes per part (rounded to whole scanlines).
const PART_BYTES: usize = 2 << 20;

/// The zlib stream of `rgb` (`height` rows of `width` RGB pixels) filtered with PNG's Sub
/// filter, for a PNG's IDAT chunk.
pub(crate) fn idat(
    rgb: &[u8],
    width: usize,
    height: usize,
) -> Result<Vec<u8>, flate2::CompressError> {
    let stride = width * 3;
    assert_eq!(rgb.len(), stride * height, "RGB rows");
    let mut filtered = vec![0u8; (stride + 1) * height];
    filtered
        .par_chunks_mut(stride + 1)
        .zip(rgb.par_chunks(stride.max(1)))
        .for_each(|(out, line)| sub_filter(line, out));
    let rows_per_part = (PART_BYTES / (stride + 1)).max(1);
    let parts: Vec<&[u8]> = filtered.chunks(rows_per_part * (stride + 1)).collect();
    let last = parts.len().saturating_sub(1);
    let deflated = parts
        .par_iter()
        .enumerate()
        .map(|(i, part)| deflate(part, i == last))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = Vec::with_capacity(deflated.iter().map(Vec::len).sum::<usize>() + 6);
    // CMF 0x78 (deflate, 32 KiB window) and FLG 0x9C (default level, no dictionary), as zlib
    // writes for level 6.
    out.extend_from_slice(&[0x78, 0x9C]);
    if parts.is_empty() {
        // No scanline: an empty final stored block.
        out.extend_from_slice(&[0x01, 0x00, 0x00, 0xFF, 0xFF]);
    }
    for d in &deflated {
        out.extend_from_slice(d);
    }
    out.extend_from_slice(&simd_adler32::adler32(&filtered.as_slice()).to_be_bytes());
    Ok(out)
}

/// One scanline with its filter byte (1, Sub): each byte less the byte of the pixel before.
fn sub_filter(line: &[u8], out: &mut [u8]) {
    out[0] = 1;
    let out = &mut out[1..];
    out[..line.len().min(3)].copy_from_slice(&line[..line.len().min(3)]);
    for i in 3..line.len() {
        out[i] = line[i].wrapping_sub(line[i - 3]);
    }
}

/// `data` deflated at the default level (raw, no header): ending on a final block when
/// `last`, else on a sync flush.
fn deflate(data: &[u8], last: bool) -> Result<Vec<u8>, flate2::CompressError> {
    let mut c = Compress::new(Compression::default(), false);
    let mut out = Vec::with_capacity(data.len() / 4 + 1024);
    let flush = if last {
        FlushCompress::Finish
    } else {
        FlushCompress::Sync
    };
    loop {
        let read = c.total_in() as usize;
        let status = c.compress_vec(&data[read..], &mut out, flush)?;
        let done = c.total_in() as usize == data.len()
            && match status {
                Status::StreamEnd => true,
                // A sync flush is complete once the output has room left over.
                Status::Ok | Status::BufError => !last && out.len() < out.capacity(),
            };
        if done {
            return Ok(out);
        }
        out.reserve(out.capacity().max(64 * 1024));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// The stream inflates (with flate2's own zlib decoder, which checks the Adler-32) to the
    /// Sub-filtered scanlines, for images of one part, of several, of one pixel and of none.
    #[test]
    fn the_parts_are_one_zlib_stream_of_the_filtered_rows() {
        for (w, h) in [(1usize, 1usize), (7, 3), (1200, 900), (333, 2000), (5, 0)] {
            let rgb: Vec<u8> = (0..w * h * 3)
                .map(|i| {
                    ((i * 2_654_435_761usize) >> 13) as u8 & if i % 7 == 0 { 0xff } else { 0x0f }
                })
                .collect();
            let z = idat(&rgb, w, h).unwrap();
            let mut back = Vec::new();
            flate2::read::ZlibDecoder::new(&z[..])
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back.len(), (w * 3 + 1) * h);
            for (y, row) in back.chunks(w * 3 + 1).enumerate() {
                assert_eq!(row[0], 1);
                let line = &rgb[y * w * 3..(y + 1) * w * 3];
                for x in 0..w * 3 {
                    let left = if x >= 3 { line[x - 3] } else { 0 };
                    assert_eq!(row[1 + x].wrapping_add(left), line[x], "{w}×{h} row {y}");
                }
            }
        }
    }
}
