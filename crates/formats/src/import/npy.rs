//! `.npz` files: a zip of `.npy` arrays (numpy's `np.savez`, or `np.savez_compressed`).
//!
//! A small reader of the `.npy` format (version 1 to 3: magic, header length, a Python dict
//! literal with `descr`, `fortran_order` and `shape`, then the raw data) rather than a crate: the
//! maintained crates for it bring their own, older zip (npyz: zip 0.6; ndarray-npy: ndarray),
//! while the zip already in the tree (for `pytorch_model.bin`) reads the archive, and bounding
//! memory needs the shape before any data is read, which a small reader gives directly. Only
//! what attention files need: little- or big-endian floats and integers, bool, and numpy's
//! fixed-width unicode strings (`<U7`); object arrays (pickles) are refused.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use super::budget::Declared;
use super::store::{Assembled, Plan, Store, Value};
use super::{check, CheckError, ImportError};

/// An `.npz` archive, or an array in it, that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum NpzError {
    /// Not a zip archive.
    #[error("{file} is not a readable .npz (zip) file: {source}")]
    Zip {
        /// The file.
        file: String,
        /// The zip reader's error.
        source: zip::result::ZipError,
    },
    /// An entry of the archive that cannot be opened.
    #[error("{file}: cannot read {entry}: {source}")]
    Entry {
        /// The file.
        file: String,
        /// The entry (`attention.npy`).
        entry: String,
        /// The zip reader's error.
        source: zip::result::ZipError,
    },
    /// An array that cannot be read.
    #[error("{what}: {problem}")]
    Array {
        /// The file and the array (`t.npz: attention`).
        what: String,
        /// What is wrong with it.
        problem: NpyError,
    },
}

/// What is wrong with one `.npy` array (displays after its name).
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// Shorter than the magic and version.
    #[error("too short to be a .npy array")]
    TooShort,
    /// No `\x93NUMPY` magic.
    #[error("not a .npy array (no NUMPY magic)")]
    NoMagic,
    /// The header stops early.
    #[error("truncated header")]
    TruncatedHeader,
    /// A format version other than 1 to 3.
    #[error(".npy format version {0} is not known (1 to 3 are)")]
    Version(u8),
    /// A header longer than any numpy writes.
    #[error("a {0}-byte header is not a real .npy header")]
    LongHeader(usize),
    /// More weights than attnviz draws.
    #[error(transparent)]
    Size(CheckError),
    /// An element count that overflows.
    #[error("too many elements")]
    TooManyElements,
    /// More data promised than the entry stores.
    #[error("its header promises {count} elements of {item} bytes, more than the {declared} bytes stored")]
    Promise {
        /// Elements.
        count: usize,
        /// Bytes each.
        item: usize,
        /// Bytes the entry stores.
        declared: u64,
    },
    /// The data cannot be read.
    #[error("cannot read the data: {0}")]
    Read(#[source] std::io::Error),
    /// The data stops early.
    #[error("the data stops after {got} of {total} bytes")]
    DataStops {
        /// Bytes read.
        got: usize,
        /// Bytes promised.
        total: usize,
    },
    /// A string element holding a code that is no character.
    #[error("string {index} holds {code:#x}, which is not a character")]
    NotAChar {
        /// The string.
        index: usize,
        /// The code.
        code: u32,
    },
    /// The elements cannot be allocated.
    #[error("cannot allocate {bytes} bytes for its {count} elements")]
    Alloc {
        /// Bytes needed.
        bytes: usize,
        /// Elements.
        count: usize,
    },
    /// A header without a key.
    #[error("its header has no '{0}'")]
    NoKey(&'static str),
    /// A header key without a value.
    #[error("its header's '{0}' has no value")]
    NoValue(&'static str),
    /// A structured array.
    #[error("it is a structured or object array (a descr that is not a string); save plain numbers and strings (np.array(tokens, dtype=str))")]
    Structured,
    /// A byte order or width attnviz does not read.
    #[error("dtype {0} is not one attnviz reads")]
    Dtype(String),
    /// An object array (pickles).
    #[error("it is an object array, which only pickle can read; save strings as np.array(tokens, dtype=str)")]
    Object,
    /// An element type attnviz does not read.
    #[error("dtype {0} is not one attnviz reads (floats, integers, bool, unicode strings)")]
    DtypeKind(String),
    /// `fortran_order` neither True nor False.
    #[error("its header's 'fortran_order' is neither True nor False")]
    Fortran,
    /// A shape that is not a tuple.
    #[error("its header's 'shape' is not a tuple")]
    ShapeNotTuple,
    /// A dimension that is not a size.
    #[error("its shape has a dimension `{0}` that is not a size")]
    Dimension(String),
}

/// The most bytes a `.npy` header may have (numpy writes under 200).
const MAX_HEADER: usize = 1 << 16;

/// Read the attention arrays of the `.npz` at `path`, as `plan` says.
pub fn read_npz(path: &Path, shown: &str, plan: &Plan) -> Result<Assembled, ImportError> {
    let file = File::open(path).map_err(|source| ImportError::Io {
        path: shown.to_string(),
        source,
    })?;
    let archive = zip::ZipArchive::new(BufReader::new(file)).map_err(|source| NpzError::Zip {
        file: shown.to_string(),
        source,
    })?;
    let mut store = NpzStore {
        archive,
        shown: shown.to_string(),
    };
    super::store::assemble(&mut store, shown, plan)
}

struct NpzStore {
    archive: zip::ZipArchive<BufReader<File>>,
    shown: String,
}

impl NpzStore {
    /// Open `name.npy` and read its header (nothing of the data): what `then` gets.
    fn with_entry<T>(
        &mut self,
        name: &str,
        then: impl FnOnce(&mut dyn Read, Header, usize, &str) -> Result<T, ImportError>,
    ) -> Result<Option<T>, ImportError> {
        let entry = format!("{name}.npy");
        let shown = &self.shown;
        let mut file = match self.archive.by_name(&entry) {
            Ok(f) => f,
            Err(zip::result::ZipError::FileNotFound) => return Ok(None),
            Err(source) => {
                return Err(NpzError::Entry {
                    file: shown.clone(),
                    entry,
                    source,
                }
                .into())
            }
        };
        let declared = file.size();
        let what = format!("{shown}: {name}");
        let (header, count) = read_header(&mut file, declared, &what, name)?;
        then(&mut file, header, count, &what).map(Some)
    }
}

impl Store for NpzStore {
    fn declared(&mut self, name: &str) -> Result<Option<Declared>, ImportError> {
        self.with_entry(name, |_, header, count, _| Ok(header.declared(count)))
    }

    fn get(&mut self, name: &str) -> Result<Option<Value>, ImportError> {
        self.with_entry(name, |r, header, count, what| {
            read_data(r, &header, count).map_err(|problem| array_err(what, problem))
        })
    }
}

/// The error for the array `what` (`t.npz: attention`).
fn array_err(what: &str, problem: NpyError) -> ImportError {
    NpzError::Array {
        what: what.to_string(),
        problem,
    }
    .into()
}

/// The element type of an array, from its `descr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dtype {
    /// Float of this many bytes.
    Float(usize),
    /// Signed integer of this many bytes.
    Int(usize),
    /// Unsigned integer of this many bytes.
    Uint(usize),
    /// numpy bool (one byte).
    Bool,
    /// Fixed-width UCS-4 string of this many characters.
    Unicode(usize),
}

impl Dtype {
    fn item_size(self) -> usize {
        match self {
            Dtype::Float(b) | Dtype::Int(b) | Dtype::Uint(b) => b,
            Dtype::Bool => 1,
            Dtype::Unicode(n) => 4 * n,
        }
    }

    /// The most bytes one element takes once decoded: an f32, an i64, or a `String` of up to
    /// 4 bytes a character.
    fn decoded_size(self) -> u64 {
        match self {
            Dtype::Float(_) => 4,
            Dtype::Int(_) | Dtype::Uint(_) | Dtype::Bool => 8,
            Dtype::Unicode(n) => 24 + 4 * n as u64,
        }
    }
}

#[derive(Debug, PartialEq)]
struct Header {
    dtype: Dtype,
    big_endian: bool,
    fortran_order: bool,
    shape: Vec<usize>,
}

impl Header {
    fn declared(&self, count: usize) -> Declared {
        Declared {
            shape: self.shape.clone(),
            decoded: (count as u64).saturating_mul(self.dtype.decoded_size()),
            // Decoded as it streams in, a chunk at a time.
            transient: (count as u64)
                .saturating_mul(self.dtype.item_size() as u64)
                .min(CHUNK as u64),
        }
    }
}

/// Bytes read and decoded at a time.
const CHUNK: usize = 1 << 20;

/// Read a `.npy` header from `r`, an entry of `declared` bytes (once inflated); `what` names
/// it in messages. The header's shape is checked against [`super::MAX_WEIGHTS`], and the data
/// it promises against the entry's size, before anything is read beyond it. Returns the header
/// and the element count.
fn read_header(
    r: &mut dyn Read,
    declared: u64,
    what: &str,
    name: &str,
) -> Result<(Header, usize), ImportError> {
    let bad = |problem: NpyError| array_err(what, problem);
    let mut pre = [0u8; 8];
    r.read_exact(&mut pre)
        .map_err(|_| bad(NpyError::TooShort))?;
    if &pre[..6] != b"\x93NUMPY" {
        return Err(bad(NpyError::NoMagic));
    }
    let header_len = match pre[6] {
        1 => {
            let mut b = [0u8; 2];
            r.read_exact(&mut b)
                .map_err(|_| bad(NpyError::TruncatedHeader))?;
            u16::from_le_bytes(b) as usize
        }
        2 | 3 => {
            let mut b = [0u8; 4];
            r.read_exact(&mut b)
                .map_err(|_| bad(NpyError::TruncatedHeader))?;
            u32::from_le_bytes(b) as usize
        }
        v => return Err(bad(NpyError::Version(v))),
    };
    if header_len > MAX_HEADER {
        return Err(bad(NpyError::LongHeader(header_len)));
    }
    let mut text = vec![0u8; header_len];
    r.read_exact(&mut text)
        .map_err(|_| bad(NpyError::TruncatedHeader))?;
    // Version 1 and 2 headers are latin-1 (ASCII in practice), version 3 UTF-8.
    let text = String::from_utf8_lossy(&text);
    let header = parse_header(&text).map_err(&bad)?;
    let count = header
        .shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&c| c <= super::MAX_WEIGHTS)
        .ok_or_else(|| match check::size(name, &header.shape) {
            Err(ImportError::Check(e)) => bad(NpyError::Size(e)),
            _ => bad(NpyError::TooManyElements),
        })?;
    count
        .checked_mul(header.dtype.item_size())
        .filter(|&b| b as u64 <= declared)
        .ok_or_else(|| {
            bad(NpyError::Promise {
                count,
                item: header.dtype.item_size(),
                declared,
            })
        })?;
    Ok((header, count))
}

/// Read one `.npy` array of `declared` bytes from `r` whole (header and data).
#[cfg(test)]
fn read_npy(mut r: impl Read, declared: u64, what: &str, name: &str) -> Result<Value, ImportError> {
    let (header, count) = read_header(&mut r, declared, what, name)?;
    read_data(&mut r, &header, count).map_err(|problem| array_err(what, problem))
}

/// Where each element read in storage order goes in C order: itself, or for a Fortran-order
/// array (first axis fastest) the next index of an odometer over the shape.
struct Order {
    fortran: bool,
    shape: Vec<usize>,
    /// C-order stride of each axis.
    strides: Vec<usize>,
    index: Vec<usize>,
    at: usize,
    next: usize,
}

impl Order {
    fn new(shape: &[usize], fortran: bool) -> Order {
        let mut strides = vec![1usize; shape.len()];
        for d in (0..shape.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * shape[d + 1];
        }
        Order {
            fortran: fortran && shape.len() > 1,
            shape: shape.to_vec(),
            strides,
            index: vec![0; shape.len()],
            at: 0,
            next: 0,
        }
    }

    /// The C-order position of the next element of the storage.
    fn next(&mut self) -> usize {
        if !self.fortran {
            self.next += 1;
            return self.next - 1;
        }
        let here = self.at;
        for d in 0..self.shape.len() {
            self.index[d] += 1;
            self.at += self.strides[d];
            if self.index[d] < self.shape[d] {
                break;
            }
            self.at -= self.strides[d] * self.shape[d];
            self.index[d] = 0;
        }
        here
    }
}

/// What [`read_data`] calls for every element: its bytes and its position in C order.
type Visit<'a> = dyn FnMut(&[u8], usize) -> Result<(), NpyError> + 'a;

/// The `count` elements after the header, read and decoded a chunk at a time (never the whole
/// data at once), put in C order.
fn read_data(r: &mut dyn Read, h: &Header, count: usize) -> Result<Value, NpyError> {
    let size = h.dtype.item_size();
    let per_chunk = (CHUNK / size.max(1)).max(1);
    let mut buf = vec![0u8; per_chunk.min(count.max(1)) * size];
    let total = count * size;
    let mut order = Order::new(&h.shape, h.fortran_order);
    let big_endian = h.big_endian;
    // `visit(item, position)` for every element, in storage order.
    let mut each = |visit: &mut Visit<'_>| {
        let mut done = 0usize;
        while done < count {
            let n = per_chunk.min(count - done);
            let chunk = &mut buf[..n * size];
            let got = read_full(r, chunk).map_err(NpyError::Read)?;
            if got < chunk.len() {
                return Err(NpyError::DataStops {
                    got: done * size + got,
                    total,
                });
            }
            for item in chunk.chunks_exact(size) {
                visit(item, order.next())?;
            }
            done += n;
        }
        Ok(())
    };
    let le = |item: &[u8], out: &mut [u8]| {
        out.copy_from_slice(item);
        if big_endian {
            out.reverse();
        }
    };
    let shape = h.shape.clone();
    Ok(match h.dtype {
        Dtype::Float(n) => {
            let mut values = zeroed::<f32>(count)?;
            each(&mut |item, at| {
                values[at] = match n {
                    2 => {
                        let mut b = [0u8; 2];
                        le(item, &mut b);
                        half::f16::from_le_bytes(b).to_f32()
                    }
                    4 => {
                        let mut b = [0u8; 4];
                        le(item, &mut b);
                        f32::from_le_bytes(b)
                    }
                    _ => {
                        let mut b = [0u8; 8];
                        le(item, &mut b);
                        f64::from_le_bytes(b) as f32
                    }
                };
                Ok(())
            })?;
            Value::Floats {
                shape,
                values,
                half: n == 2,
            }
        }
        Dtype::Int(_) | Dtype::Uint(_) | Dtype::Bool => {
            let signed = matches!(h.dtype, Dtype::Int(_));
            let mut values = zeroed::<i64>(count)?;
            each(&mut |item, at| {
                let mut b = [0u8; 8];
                le(item, &mut b[..size]);
                if signed && b[size - 1] & 0x80 != 0 {
                    b[size..].fill(0xff);
                }
                values[at] = i64::from_le_bytes(b);
                Ok(())
            })?;
            Value::Ints { shape, values }
        }
        Dtype::Unicode(_) => {
            let mut values = vec![String::new(); count];
            let mut i = 0usize;
            each(&mut |item, at| {
                let mut s = String::new();
                for c in item.chunks_exact(4) {
                    let mut b = [0u8; 4];
                    le(c, &mut b);
                    let code = u32::from_le_bytes(b);
                    if code == 0 {
                        break;
                    }
                    s.push(char::from_u32(code).ok_or(NpyError::NotAChar { index: i, code })?);
                }
                values[at] = s;
                i += 1;
                Ok(())
            })?;
            Value::Strings { shape, values }
        }
    })
}

/// `count` zeros, or a message when they cannot be allocated.
fn zeroed<T: Clone + Default>(count: usize) -> Result<Vec<T>, NpyError> {
    let mut v = Vec::new();
    v.try_reserve_exact(count).map_err(|_| NpyError::Alloc {
        bytes: count.saturating_mul(std::mem::size_of::<T>()),
        count,
    })?;
    v.resize(count, T::default());
    Ok(v)
}

/// Read into `buf` until it is full or the data ends; how many bytes were read.
fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Parse the header dict: `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`.
fn parse_header(text: &str) -> Result<Header, NpyError> {
    let field = |key: &'static str| -> Result<&str, NpyError> {
        let at = text.find(&format!("'{key}'")).ok_or(NpyError::NoKey(key))?;
        let rest = &text[at + key.len() + 2..];
        let rest = rest.trim_start();
        let rest = rest.strip_prefix(':').ok_or(NpyError::NoValue(key))?;
        Ok(rest.trim_start())
    };
    let descr = field("descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|d| d.split('\'').next())
        .ok_or(NpyError::Structured)?;
    let (order, code) = descr.split_at(descr.len().min(1));
    let big_endian = order == ">";
    if !matches!(order, "<" | ">" | "|" | "=") {
        return Err(NpyError::Dtype(descr.to_string()));
    }
    if code.starts_with('O') {
        return Err(NpyError::Object);
    }
    let (kind, width) = code.split_at(code.len().min(1));
    let width: usize = width
        .parse()
        .map_err(|_| NpyError::Dtype(descr.to_string()))?;
    let dtype = match (kind, width) {
        ("f", 2 | 4 | 8) => Dtype::Float(width),
        ("i", 1 | 2 | 4 | 8) => Dtype::Int(width),
        ("u", 1 | 2 | 4 | 8) => Dtype::Uint(width),
        ("b", 1) => Dtype::Bool,
        ("U", 1..=65536) => Dtype::Unicode(width),
        _ => return Err(NpyError::DtypeKind(descr.to_string())),
    };
    let fortran = field("fortran_order")?;
    let fortran_order = if fortran.starts_with("True") {
        true
    } else if fortran.starts_with("False") {
        false
    } else {
        return Err(NpyError::Fortran);
    };
    let shape = field("shape")?;
    let inner = shape
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or(NpyError::ShapeNotTuple)?;
    let shape = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|d| {
            d.trim_end_matches('L')
                .parse::<usize>()
                .map_err(|_| NpyError::Dimension(d.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Header {
        dtype,
        big_endian,
        fortran_order,
        shape,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
        let mut h = format!(
            "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
            if fortran { "True" } else { "False" }
        );
        while (10 + h.len() + 1) % 64 != 0 {
            h.push(' ');
        }
        h.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(h.len() as u16).to_le_bytes());
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out
    }

    fn read(bytes: &[u8]) -> Result<Value, ImportError> {
        read_npy(bytes, bytes.len() as u64, "t.npz: a", "a")
    }

    #[test]
    fn floats_ints_and_strings() {
        let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        match read(&npy("<f4", false, "(2, 3)", &data)).unwrap() {
            Value::Floats {
                shape,
                values,
                half,
            } => {
                assert_eq!(shape, [2, 3]);
                assert_eq!(values, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
                assert!(!half);
            }
            v => panic!("{v:?}"),
        }
        // Fortran order: the same logical array stored column-major.
        let f: Vec<u8> = [1.0f64, 4.0, 2.0, 5.0, 3.0, 6.0]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        match read(&npy(">f8", true, "(2, 3)", &f)).unwrap() {
            Value::Floats { values, .. } => assert_eq!(values, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            v => panic!("{v:?}"),
        }
        let ints: Vec<u8> = [-1i16, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
        match read(&npy("<i2", false, "(2,)", &ints)).unwrap() {
            Value::Ints { values, .. } => assert_eq!(values, [-1, 7]),
            v => panic!("{v:?}"),
        }
        let mut s = Vec::new();
        for word in ["[CLS]", "é"] {
            let mut chars: Vec<u32> = word.chars().map(|c| c as u32).collect();
            chars.resize(5, 0);
            s.extend(chars.iter().flat_map(|c| c.to_le_bytes()));
        }
        match read(&npy("<U5", false, "(2,)", &s)).unwrap() {
            Value::Strings { values, .. } => assert_eq!(values, ["[CLS]", "é"]),
            v => panic!("{v:?}"),
        }
        match read(&npy("<i8", false, "()", &5i64.to_le_bytes())).unwrap() {
            Value::Ints { shape, values } => assert_eq!((shape.len(), values), (0, vec![5])),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn bad_arrays_get_one_line() {
        let e = read(&npy("|O", false, "(2,)", &[0; 16]))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.npz: a: it is an object array"), "{e}");
        // A header that promises more than is stored is refused before allocating.
        let e = read(&npy("<f4", false, "(1000, 1000)", &[0; 16]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than the"), "{e}");
        let e = read(&npy("<f4", false, "(100000, 100000, 100)", &[0; 16]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than attnviz draws"), "{e}");
        let e = read(&npy("<c8", false, "(2,)", &[0; 16]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not one attnviz reads"), "{e}");
        let e = read(b"\x93NUMPY\x01").unwrap_err().to_string();
        assert!(e.contains("too short"), "{e}");
    }
}
