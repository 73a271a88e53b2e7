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
