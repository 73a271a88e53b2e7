//! One bounded reader for the small files a model folder holds (config.json,
//! generation_config.json, tokenizer_config.json, special_tokens_map.json, chat_template.jinja,
//! vocab.txt, tokenizer.json, …).
//!
//! Every read here is bounded twice: the file must be a regular file (a FIFO would block the
//! reader until killed and a character device such as `/dev/zero` never ends), and at most
//! `limit` bytes are read. The file is opened with `O_NONBLOCK`, so opening a FIFO returns at
//! once, and its type is checked on the open descriptor (`fstat`), so a link swapped in between
//! is not followed into a device. Symbolic links to regular files are fine: the Hugging Face
//! cache is made of them.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// Why a small file was not read. Each displays as one line.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// There is no such file (callers for whom the file is optional treat this as absent).
    #[error("no such file")]
    NotFound,
    /// The system refused to open or read it.
    #[error("{0}")]
    Io(#[source] std::io::Error),
    /// A folder, a FIFO, a device: only regular files are read.
    #[error("it is {0}, not a regular file; replace it with the file itself")]
    NotRegular(&'static str),
    /// Larger than the caller's limit.
    #[error("it is larger than {}; {what}", size_words(*.limit))]
    TooLarge {
        /// The limit in bytes.
        limit: u64,
        /// What such a file usually weighs (`a config.json is a few kilobytes`).
        what: String,
    },
    /// Text that is not UTF-8.
    #[error("it is not UTF-8 text (invalid byte at offset {0})")]
    NotUtf8(usize),
}

/// What a file is, for a message: `a FIFO`, `a character device`, …
fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Open `path` for reading if it is a regular file, without blocking on a FIFO.
pub fn open_regular(path: &Path) -> Result<File, ReadError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ReadError::NotFound,
            _ => ReadError::Io(e),
        })?;
    let meta = file.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular(kind_of(&meta)));
    }
    Ok(file)
}

/// The bytes of the regular file `path`, at most `limit` of them; `what` says what such a file
/// usually weighs, for the message (`a config.json is a few kilobytes`).
pub fn read_bytes(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, ReadError> {
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge {
            limit,
            what: what.to_string(),
        });
    }
    Ok(bytes)
}

/// [`read_bytes`] as UTF-8 text.
pub fn read_text(path: &Path, limit: u64, what: &str) -> Result<String, ReadError> {
    let bytes = read_bytes(path, limit, what)?;
    String::from_utf8(bytes).map_err(|e| ReadError::NotUtf8(e.utf8_error().valid_up_to()))
}

/// `16 MiB`, `512 KiB`, `100 bytes`.
fn size_words(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_regular_file_within_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        std::fs::write(&path, "{}").unwrap();
        assert_eq!(read_text(&path, 2, "x").unwrap(), "{}");
        let err = read_text(&path, 1, "a config is small").unwrap_err();
        assert_eq!(
            err.to_string(),
            "it is larger than 1 bytes; a config is small"
        );
        assert!(matches!(
            read_text(&dir.path().join("none"), 9, "x"),
            Err(ReadError::NotFound)
        ));
    }

    #[test]
    fn a_fifo_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("generation_config.json");
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path in our own temporary folder.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read_text(&path, 1 << 20, "x").unwrap_err().to_string();
        assert!(
            err.contains("a FIFO (named pipe), not a regular file"),
            "{err}"
        );
    }

    #[test]
    fn a_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_bytes(dir.path(), 10, "x").unwrap_err().to_string();
        assert!(err.contains("directory"), "{err}");
    }
}
