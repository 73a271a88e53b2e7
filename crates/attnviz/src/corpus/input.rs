//! Opening a corpus: a file or standard input, gzip- or zstd-compressed or not, holding plain
//! text (one sentence or tab-separated pair per line) or JSON Lines. Both the compression and
//! the format are told from the content (magic bytes, the first line), never from the file name.
//!
//! Decompression streams: memory stays bounded whatever the compressed file expands to (gzip's
//! window is 32 KiB; zstd's is capped at [`ZSTD_WINDOW_LOG_MAX`]), and lines are cut to the
//! reader's limit after decompression exactly as for a plain file.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::path::Path;

/// Largest zstd window accepted: 2²⁷ bytes (128 MiB), libzstd's own default limit. Files made
/// with `zstd --long=31` need more and are refused with a message rather than decoded.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 27;

/// Bytes of a JSON Lines record read per byte of text the model may take: room for JSON escapes
/// (`\u00e9` is 6 bytes for 2) and for the other fields a dataset carries.
pub const JSONL_BYTES_PER_TEXT_BYTE: usize = 8;

/// How the corpus is compressed, as told by its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Not compressed.
    None,
    /// gzip (`1f 8b`), one or more members (`pigz`, `bgzip` and concatenated files too).
    Gzip,
    /// Zstandard (`28 b5 2f fd`), one or more frames.
    Zstd,
}

impl Compression {
    /// The name written into the summary.
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }

    /// Tell the compression from the first bytes of a stream.
    pub fn sniff(head: &[u8]) -> Compression {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }
}

/// What each line of the corpus holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum InputFormat {
    /// Tell from the content: JSON Lines when the first line that is not blank is a JSON object,
    /// else plain text.
    #[default]
    Auto,
    /// One sentence, or two separated by a tab, per line.
    Text,
    /// One JSON object per line: `text`, optional `pair`, optional `id` (names the output files).
    Jsonl,
}

crate::choice!(InputFormat {
    Auto => ("auto", "Tell from the content: JSON Lines if the first non-blank line is a JSON object, else text"),
    Text => ("text", "One sentence, or two separated by a tab, per line"),
    Jsonl => ("jsonl", "JSON Lines: {\"text\": …, \"pair\": …, \"id\": …} per line; id names the output files"),
});

impl InputFormat {
    /// The name written into the summary.
    pub fn as_str(self) -> &'static str {
        crate::choice::Choice::name(self)
    }
}

impl fmt::Display for InputFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An opened corpus: its decompressed lines and what was detected.
pub struct Opened {
    /// The decompressed content.
    pub reader: Box<dyn BufRead + Send>,
    /// The compression found.
    pub compression: Compression,
    /// The format found (never [`InputFormat::Auto`]).
    pub format: InputFormat,
}

impl fmt::Debug for Opened {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opened")
            .field("compression", &self.compression)
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

/// Open `path` (`-` for standard input) for reading.
pub fn open_path(path: &Path) -> io::Result<Box<dyn Read + Send>> {
    if path.as_os_str() == "-" {
        Ok(Box::new(io::stdin()))
    } else {
        Ok(Box::new(File::open(path)?))
    }
}

/// The image files directly in folder `dir` (`.png`, `.jpg`, `.jpeg`, `.webp`, any case;
/// regular files, not links), one name per line in byte order of their names: a vision
/// model's corpus. Names that are not UTF-8 or hold a line break are left out, as no line
/// could name them. An error when there is none.
pub fn image_listing(dir: &Path) -> io::Result<String> {
    const EXTENSIONS: [&str; 4] = ["png", "jpg", "jpeg", "webp"];
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if !entry.file_type()?.is_file() {
            continue;
        }
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let image = Path::new(&name)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| EXTENSIONS.iter().any(|x| x.eq_ignore_ascii_case(e)));
        if image && !name.contains(['\n', '\r']) && name.trim() == name {
            names.push(name);
        }
    }
    if names.is_empty() {
        return Err(io::Error::other(
            "the folder holds no image (.png, .jpg, .jpeg or .webp files)",
        ));
    }
    names.sort();
    Ok(names.join("\n") + "\n")
}

/// Detect the compression of `raw`, put a decoder in front of it, and detect the format of what
/// comes out (unless `format` says it). `line_limit` bounds how much of the first line is read
/// to tell the format.
pub fn open(
    raw: Box<dyn Read + Send>,
    format: InputFormat,
    line_limit: usize,
) -> io::Result<Opened> {
    let mut raw = raw;
    let head = read_head(&mut raw, 4)?;
    let compression = Compression::sniff(&head);
    let raw = BufReader::with_capacity(1 << 16, Cursor::new(head).chain(raw));
    let decoded: Box<dyn Read + Send> = match compression {
        Compression::None => Box::new(raw),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(raw)),
        Compression::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::with_buffer(raw)?;
            decoder.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
            Box::new(ZstdErrors(decoder))
        }
    };
    let mut reader = BufReader::with_capacity(1 << 16, decoded);
    let (format, prefix) = match format {
        InputFormat::Auto => {
            let prefix = read_first_content_line(&mut reader, line_limit)?;
            (detect_format(&prefix), prefix)
        }
        known => (known, Vec::new()),
    };
    let reader: Box<dyn BufRead + Send> = if prefix.is_empty() {
        Box::new(reader)
    } else {
        Box::new(Cursor::new(prefix).chain(reader))
    };
    Ok(Opened {
        reader,
        compression,
        format,
    })
}

/// libzstd's errors say what went wrong in its own terms; name the fix for the one a user can
/// meet with a valid file.
struct ZstdErrors<R: Read>(R);

impl<R: Read> Read for ZstdErrors<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf).map_err(|e| {
            let text = e.to_string();
            if text.contains("Frame requires too much memory") {
                io::Error::new(
                    e.kind(),
                    format!(
                        "{text}: the zstd window is over {} MiB (made with `zstd --long`?); \
                         recompress without --long, or decompress it into a pipe: \
                         `zstd -dc --long=31 FILE | attnviz --input - …`",
                        (1u64 << ZSTD_WINDOW_LOG_MAX) >> 20
                    ),
                )
            } else {
                io::Error::new(e.kind(), format!("zstd: {text}"))
            }
        })
    }
}

/// Read the first `n` bytes of `raw` (fewer if it is shorter).
fn read_head(raw: &mut dyn Read, n: usize) -> io::Result<Vec<u8>> {
    let mut head = vec![0; n];
    let mut got = 0;
    while got < n {
        match raw.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    head.truncate(got);
    Ok(head)
}

/// Read up to the end of the first line that is not blank (or `limit` bytes, or the end of the
/// input), returning every byte read so it can be given back.
fn read_first_content_line<R: BufRead>(reader: &mut R, limit: usize) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let start = out.len();
        let cap = limit.saturating_sub(start);
        let n = read_line_capped(reader, &mut out, cap)?;
        if n == 0 || out.len() >= limit {
            return Ok(out);
        }
        if !out[start..].iter().all(u8::is_ascii_whitespace) {
            return Ok(out);
        }
    }
}

/// Append one line (through its `\n`) to `out`, at most `cap` bytes; the bytes appended.
fn read_line_capped<R: BufRead>(
    reader: &mut R,
    out: &mut Vec<u8>,
    cap: usize,
) -> io::Result<usize> {
    let mut n = 0;
    while n < cap {
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            break;
        }
        let room = cap - n;
        let end = buf
            .iter()
            .take(room)
            .position(|&b| b == b'\n')
            .map_or(buf.len().min(room), |i| i + 1);
        out.extend_from_slice(&buf[..end]);
        let newline = buf[end - 1] == b'\n';
        reader.consume(end);
        n += end;
        if newline {
            break;
        }
    }
    Ok(n)
}

/// JSON Lines when the first line that is not blank is a JSON object, else text.
pub fn detect_format(first: &[u8]) -> InputFormat {
    let line = first
        .split(|&b| b == b'\n')
        .find(|l| !l.iter().all(u8::is_ascii_whitespace))
        .unwrap_or_default();
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let trimmed = line.trim_ascii();
    if trimmed.first() == Some(&b'{')
        && serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(trimmed).is_ok()
    {
        InputFormat::Jsonl
    } else {
        InputFormat::Text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn read_all(opened: Opened) -> Vec<u8> {
        let mut out = Vec::new();
        let mut r = opened.reader;
        r.read_to_end(&mut out).unwrap();
        out
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn compression_and_format_come_from_the_content() {
        let text = b"The cat sat.\nA dog.\tIt ran.\n".to_vec();
        let jsonl =
            b"\n  \n{\"text\": \"The cat sat.\", \"id\": \"a\"}\n{\"text\": \"x\"}\n".to_vec();
        let zstd = |d: &[u8]| zstd::stream::encode_all(d, 3).unwrap();
        for (data, want_format) in [(&text, InputFormat::Text), (&jsonl, InputFormat::Jsonl)] {
            for (bytes, want_comp) in [
                (data.clone(), Compression::None),
                (gzip(data), Compression::Gzip),
                (zstd(data), Compression::Zstd),
            ] {
                let opened = open(Box::new(Cursor::new(bytes)), InputFormat::Auto, 1000).unwrap();
                assert_eq!(opened.compression, want_comp);
                assert_eq!(opened.format, want_format);
                // Every byte comes back, the ones read to detect the format included.
                assert_eq!(&read_all(opened), data);
            }
        }
        // Told, not detected.
        let opened = open(
            Box::new(Cursor::new(jsonl.clone())),
            InputFormat::Text,
            1000,
        )
        .unwrap();
        assert_eq!(opened.format, InputFormat::Text);
        assert_eq!(read_all(opened), jsonl);
    }

    #[test]
    fn text_that_starts_with_a_brace_is_text() {
        assert_eq!(
            detect_format(b"{not json} said the poet\n"),
            InputFormat::Text
        );
        assert_eq!(detect_format(b"[\"an array\"]\n"), InputFormat::Text);
        assert_eq!(detect_format(b""), InputFormat::Text);
        assert_eq!(
            detect_format(b"\xEF\xBB\xBF{\"text\":\"a\"}"),
            InputFormat::Jsonl
        );
    }

    #[test]
    fn concatenated_gzip_members_are_all_read() {
        let mut both = gzip(b"first\n");
        both.extend(gzip(b"second\n"));
        let opened = open(Box::new(Cursor::new(both)), InputFormat::Auto, 100).unwrap();
        assert_eq!(read_all(opened), b"first\nsecond\n");
    }

    #[test]
    fn tiny_and_empty_inputs_open() {
        for data in [&b""[..], b"a", b"\x1f", b"ab\n"] {
            let opened =
                open(Box::new(Cursor::new(data.to_vec())), InputFormat::Auto, 100).unwrap();
            assert_eq!(opened.compression, Compression::None);
            assert_eq!(read_all(opened), data);
        }
    }

    #[test]
    fn the_format_probe_reads_at_most_the_limit() {
        // A first line far longer than the limit: detection stops at the limit, and the whole
        // input still comes back.
        let mut data = vec![b'{'; 10_000];
        data.extend_from_slice(b"\nnext\n");
        let opened = open(Box::new(Cursor::new(data.clone())), InputFormat::Auto, 100).unwrap();
        assert_eq!(opened.format, InputFormat::Text);
        assert_eq!(read_all(opened), data);
    }

    #[test]
    fn a_corrupt_gzip_stream_is_a_read_error() {
        let mut bytes = gzip(&b"the cat sat on the mat\n".repeat(100));
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        bytes[mid + 1] ^= 0xff;
        let opened = open(Box::new(Cursor::new(bytes)), InputFormat::Text, 100).unwrap();
        let mut r = opened.reader;
        let mut out = Vec::new();
        assert!(r.read_to_end(&mut out).is_err());
    }
}
