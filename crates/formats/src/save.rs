//! Saving a capture to a `.safetensors` file layer by layer (`docs/save.md`): one tensor per
//! captured layer and kind, `<kind>.layer.<n>.attention` `[heads, queries, keys]` in F32 or F16,
//! and in the header's `__metadata__` (JSON strings) everything the renderers need: per kind the
//! fields of a version-2 JSON body without its attention (tokens as people read them, roles,
//! words, generated flags, the layers' masks and windows, the model), the kinds, the format and
//! its version.
//!
//! [`LayerWriter`] is a [`LayerSink`]: a streamed run hands it each layer as the forward pass
//! finishes it, so the capture never has to fit in memory; an attention already in memory (an
//! encoder–decoder's, or a run that also draws) is written through the same path
//! ([`LayerWriter::write_attention`]). The data goes to a temporary file beside the target
//! ([`crate::output::AtomicFile`], registered for Ctrl-C cleanup) after room reserved for the
//! header; [`LayerWriter::finish`] writes the header (moving the data up if it outgrew its room)
//! and renames the file into place, so an interrupted or failed run leaves no file.

use std::io;
use std::path::Path;

use serde_json::{json, Map, Value};

use crate::attention::{Attention, AttentionKind};
use crate::model::{CapturedLayer, LayerSink};
use crate::output::{AtomicFile, OutputError};

pub use crate::doc::saved::{FORMAT, FORMAT_VERSION};
/// The largest header a reader accepts (the `safetensors` package's own limit is 100 MB).
pub const MAX_HEADER: u64 = 100_000_000;

/// The number type of the saved weights.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SaveDtype {
    /// 32-bit floats: the weights exactly as computed.
    #[default]
    F32,
    /// 16-bit floats: half the size, within 2⁻¹¹ relative (about 5e-4) of each weight.
    F16,
}

impl SaveDtype {
    /// The safetensors name (`F32`, `F16`).
    pub fn as_str(self) -> &'static str {
        match self {
            SaveDtype::F32 => "F32",
            SaveDtype::F16 => "F16",
        }
    }

    /// Bytes per weight.
    pub fn size(self) -> usize {
        match self {
            SaveDtype::F32 => 4,
            SaveDtype::F16 => 2,
        }
    }
}

/// The tensor of `kind`'s layer `layer` (the model's number): `self.layer.3.attention`,
/// `decoder.layer.0.attention`.
pub fn tensor_name(kind: AttentionKind, layer: usize) -> String {
    format!("{}.layer.{layer}.attention", kind.as_str())
}

/// One layer written.
#[derive(Clone, Debug)]
struct Entry {
    kind: AttentionKind,
    layer: usize,
    window: Option<usize>,
    shape: [usize; 3],
    begin: u64,
    end: u64,
}

/// A saved capture being written; see the module docs.
pub struct LayerWriter {
    file: AtomicFile,
    dtype: SaveDtype,
    /// The kind the next streamed layers belong to.
    kind: AttentionKind,
    /// Bytes reserved for the header, after its 8-byte length; `None` until the first layer.
    reserve: Option<u64>,
    /// Data bytes written.
    written: u64,
    entries: Vec<Entry>,
    scratch: Vec<u8>,
}

/// Weights converted and written per call.
const CHUNK: usize = 1 << 18;

impl LayerWriter {
    /// Start writing a capture to `path` (a regular file, replaced atomically once finished).
    pub fn create(path: &Path, dtype: SaveDtype) -> Result<Self, OutputError> {
        Ok(LayerWriter {
            file: AtomicFile::create(path)?,
            dtype,
            kind: AttentionKind::SelfAttention,
            reserve: None,
            written: 0,
            entries: Vec::new(),
            scratch: Vec::new(),
        })
    }

    /// The destination, as given.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The kind of the layers streamed from now on (self-attention until told otherwise).
    pub fn set_kind(&mut self, kind: AttentionKind) {
        self.kind = kind;
    }

    /// Write every layer of `att`, an attention already in memory.
    pub fn write_attention(&mut self, att: &Attention) -> io::Result<()> {
        self.set_kind(att.kind);
        for l in 0..att.layers() {
            self.layer(CapturedLayer {
                layer: att.layer_number(l),
                window: att.window(l),
                heads: att.heads(),
                queries: att.n_queries(),
                keys: att.n_keys(),
                probs: att.layer(l),
            })?;
        }
        Ok(())
    }

    /// Write the header for `kinds` (the run's values, whose units and settings label the
    /// layers written: a streamed run's hold no layers of their own) and `document` (fields of
    /// the whole run: an encoder–decoder's target and generated text), and rename the file into
    /// place.
    pub fn finish(mut self, kinds: &[&Attention], document: Value) -> Result<(), OutputError> {
        let path = self.file.path().to_path_buf();
        let err = |e| OutputError {
            path: path.clone(),
            source: e,
        };
        let header = self.header(kinds, document).map_err(err)?;
        let reserve = self.reserve.unwrap_or(0);
        let room = padded_room(header.len() as u64, reserve);
        if room > reserve {
            // The header outgrew its room: move the data up, last bytes first.
            self.shift_data(reserve, room).map_err(err)?;
        }
        let mut bytes = Vec::with_capacity(8 + room as usize);
        bytes.extend_from_slice(&room.to_le_bytes());
        bytes.extend_from_slice(&header);
        bytes.resize(8 + room as usize, b' ');
        let file = self.file.file().map_err(err)?;
        write_all_at(file, &bytes, 0).map_err(err)?;
        self.file.commit()
    }

    fn header(&self, kinds: &[&Attention], document: Value) -> io::Result<Vec<u8>> {
        let mut tensors = Map::new();
        let mut meta = Map::new();
        let s = |v: &Value| v.to_string();
        meta.insert("format".into(), FORMAT.into());
        meta.insert("format_version".into(), FORMAT_VERSION.to_string().into());
        meta.insert("numbering".into(), "0-based".into());
        meta.insert("dtype".into(), self.dtype.as_str().into());
        let names: Vec<&str> = kinds.iter().map(|a| a.kind.as_str()).collect();
        meta.insert("kinds".into(), s(&json!(names)).into());
        meta.insert("document".into(), s(&document).into());
        for att in kinds {
            let entries: Vec<&Entry> = self.entries.iter().filter(|e| e.kind == att.kind).collect();
            if entries.is_empty() {
                return Err(io::Error::other(format!(
                    "no layer of the {} attention was saved",
                    att.kind.as_str()
                )));
            }
            let mut body = match serde_json::to_value(crate::json::body_meta(att))? {
                Value::Object(map) => map,
                _ => return Err(io::Error::other("a body serialises as an object")),
            };
            let numbers: Vec<usize> = entries.iter().map(|e| e.layer).collect();
            let masks: Vec<Value> = entries
                .iter()
                .map(|e| json!(crate::doc::LayerMaskDoc::new(e.layer, att.mask, e.window)))
                .collect();
            body.insert("layer_numbers".into(), json!(numbers));
            body.insert("layer_masks".into(), Value::Array(masks));
            if let Some(model) = body.get_mut("model").and_then(Value::as_object_mut) {
                model.insert("layers".into(), json!(entries.len()));
            }
            // The tokens as people read them, for whoever opens the file without attnviz.
            if att.kind == kinds.last().map_or(att.kind, |p| p.kind) {
                meta.insert("tokens".into(), s(&body["display"]).into());
            }
            meta.insert(att.kind.as_str().into(), s(&Value::Object(body)).into());
            for e in entries {
                tensors.insert(
                    tensor_name(e.kind, e.layer),
                    json!({
                        "dtype": self.dtype.as_str(),
                        "shape": e.shape,
                        "data_offsets": [e.begin, e.end],
                    }),
                );
            }
        }
        if tensors.len() != self.entries.len() {
            return Err(io::Error::other(
                "layers were saved for a kind the run does not describe",
            ));
        }
        let mut header = Map::new();
        header.insert("__metadata__".into(), Value::Object(meta));
        header.extend(tensors);
        let bytes = serde_json::to_vec(&Value::Object(header)).map_err(io::Error::from)?;
        if bytes.len() as u64 > MAX_HEADER {
            return Err(io::Error::other(format!(
                "the header would take {} bytes, more than the {MAX_HEADER} a safetensors \
                 header may; save a shorter input",
                bytes.len()
            )));
        }
        Ok(bytes)
    }

    /// Move the data from `8 + from` to `8 + to` (`to > from`), from its end backwards.
    fn shift_data(&mut self, from: u64, to: u64) -> io::Result<()> {
        let file = self.file.file()?;
        let mut buf = vec![0u8; 1 << 20];
        let mut end = self.written;
        while end > 0 {
            let start = end.saturating_sub(buf.len() as u64);
            let chunk = &mut buf[..(end - start) as usize];
            read_exact_at(file, chunk, 8 + from + start)?;
            write_all_at(file, chunk, 8 + to + start)?;
            end = start;
        }
        Ok(())
    }
}

impl LayerSink for LayerWriter {
    fn layer(&mut self, layer: CapturedLayer<'_>) -> io::Result<()> {
        // Write errors name the file: the run reports them as they are.
        self.write_layer(layer).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot write {}: {e}", self.file.path().display()),
            )
        })
    }
}

impl LayerWriter {
    fn write_layer(&mut self, layer: CapturedLayer<'_>) -> io::Result<()> {
        let CapturedLayer {
            heads,
            queries,
            keys,
            probs,
            ..
        } = layer;
        if probs.len() != heads * queries * keys {
            return Err(io::Error::other(format!(
                "layer {} holds {} weights, not {heads} × {queries} × {keys}",
                layer.layer,
                probs.len()
            )));
        }
        // Room for the header, decided once the first layer says how long the input is: far
        // more than its per-token fields take (a few hundred bytes a token), so that moving the
        // data in `finish` is the exception.
        let reserve = *self
            .reserve
            .get_or_insert_with(|| padded_room(0, 64 * 1024 + 2048 * queries.max(keys) as u64));
        let begin = self.written;
        let file = self.file.file()?;
        let size = self.dtype.size();
        for chunk in probs.chunks(CHUNK) {
            self.scratch.clear();
            match self.dtype {
                SaveDtype::F32 => {
                    for w in chunk {
                        self.scratch.extend_from_slice(&w.to_le_bytes());
                    }
                }
                SaveDtype::F16 => {
                    for w in chunk {
                        self.scratch
                            .extend_from_slice(&half::f16::from_f32(*w).to_le_bytes());
                    }
                }
            }
            write_all_at(file, &self.scratch, 8 + reserve + self.written)?;
            self.written += (chunk.len() * size) as u64;
        }
        self.entries.push(Entry {
            kind: self.kind,
            layer: layer.layer,
            window: layer.window,
            shape: [heads, queries, keys],
            begin,
            end: self.written,
        });
        Ok(())
    }
}

/// The header room for a header of `len` bytes, at least `reserve`: the data then starts at a
/// multiple of 64 bytes, which keeps every tensor aligned for its readers.
fn padded_room(len: u64, reserve: u64) -> u64 {
    (8 + len.max(reserve)).next_multiple_of(64) - 8
}

#[cfg(unix)]
fn write_all_at(file: &std::fs::File, buf: &[u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
}

#[cfg(unix)]
fn read_exact_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(not(unix))]
fn write_all_at(mut file: &std::fs::File, buf: &[u8], offset: u64) -> io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    file.seek(SeekFrom::Start(offset))?;
    file.write_all(buf)
}

#[cfg(not(unix))]
fn read_exact_at(mut file: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buf)
}
