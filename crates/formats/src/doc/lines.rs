//! Writing a document's metadata the way every attnviz document lays it out: one top-level
//! field per line at an indent, each value compact, so that a streamed array can follow.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter};

/// Compact JSON, except that the fields of the outermost object go one per line at `indent`
/// with `": "` after their names, and its braces are left out (the caller writes them).
struct Lines<'a> {
    indent: &'a [u8],
    depth: usize,
    /// Whether the first field needs no comma before it.
    first: bool,
}

impl Formatter for Lines<'_> {
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        if self.depth == 1 {
            Ok(())
        } else {
            CompactFormatter.begin_object(w)
        }
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth -= 1;
        if self.depth == 0 {
            Ok(())
        } else {
            CompactFormatter.end_object(w)
        }
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if self.depth > 1 {
            return CompactFormatter.begin_object_key(w, first);
        }
        w.write_all(if first && self.first { b"\n" } else { b",\n" })?;
        w.write_all(self.indent)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(if self.depth == 1 { b": " } else { b":" })
    }
}

/// Write `value`'s fields (a struct or map) one per line at `indent`, each preceded by a comma
/// and a newline, except the first when `first` (it gets the newline only).
pub fn write_fields<T: Serialize + ?Sized>(
    value: &T,
    w: &mut dyn Write,
    indent: &str,
    first: bool,
) -> io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(
        w,
        Lines {
            indent: indent.as_bytes(),
            depth: 0,
            first,
        },
    );
    // io::Error::from, not other(): a broken pipe must stay a broken pipe for the caller.
    value.serialize(&mut ser).map_err(io::Error::from)
}

/// A whole document laid out as corpus mode writes its files: one top-level field per line at
/// two spaces; the fields of the top-level objects named in `nested` one per line at four; every
/// other value compact (a `[layer][head]` grid on one line), so that an error can name the field
/// from its line.
struct Document<'a> {
    nested: &'a [&'a str],
    depth: usize,
    /// The top-level field being written, while its name is.
    key: Option<String>,
    /// Whether the top-level field being written is one of `nested`.
    open: bool,
}

impl Document<'_> {
    fn breaks(&self) -> bool {
        self.depth == 1 || (self.depth == 2 && self.open)
    }
}

impl Formatter for Document<'_> {
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        w.write_all(b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        let out: &[u8] = match self.depth {
            1 => b"\n}",
            2 if self.open => b"\n  }",
            _ => b"}",
        };
        self.depth -= 1;
        w.write_all(out)
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if !self.breaks() {
            return CompactFormatter.begin_object_key(w, first);
        }
        if self.depth == 1 {
            self.key = Some(String::new());
        }
        w.write_all(if first { b"\n" } else { b",\n" })?;
        w.write_all(if self.depth == 1 { b"  " } else { b"    " })
    }

    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        if let Some(key) = &mut self.key {
            key.push_str(fragment);
        }
        w.write_all(fragment.as_bytes())
    }

    fn end_object_key<W: ?Sized + Write>(&mut self, _: &mut W) -> io::Result<()> {
        if self.depth == 1 {
            let key = self.key.take().unwrap_or_default();
            self.open = self.nested.contains(&key.as_str());
        }
        Ok(())
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(if self.breaks() { b": " } else { b":" })
    }
}

/// Write `value` (a struct or map) as a whole document, `{`, one field per line, `}` and a
/// newline; the fields of the top-level objects named in `nested` one per line too.
pub fn write_document<T: Serialize + ?Sized>(
    value: &T,
    nested: &[&str],
    w: &mut dyn Write,
) -> io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(
        &mut *w,
        Document {
            nested,
            depth: 0,
            key: None,
            open: false,
        },
    );
    value.serialize(&mut ser).map_err(io::Error::from)?;
    w.write_all(b"\n")
}
