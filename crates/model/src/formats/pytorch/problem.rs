//! Why a `pytorch_model.bin` cannot be read, as facts: what the reader found (a storage key, a
//! size, a tensor's layout), each shown in the sentence the reader has always written.

use super::Format;
use crate::formats::pickle::PickleError;

/// Why a `.bin` file cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("{problem}")]
pub struct BinError {
    /// The format, when it was recognised.
    pub format: Option<Format>,
    /// What is wrong.
    pub problem: BinProblem,
}

impl BinError {
    /// Whether the file is damaged or malicious (out-of-bounds numbers, a broken or oversized
    /// pickle), as opposed to valid but using something this reader does not support. Only
    /// the latter is worth converting with torch (`torch.load` runs a malicious pickle's code).
    /// A file whose format was not recognised is neither.
    pub fn damaged(&self) -> bool {
        self.format.is_some() && !self.problem.unsupported()
    }
}

/// What is wrong with a `.bin` file (one line; it displays after the file's name).
#[derive(Debug, thiserror::Error)]
pub enum BinProblem {
    /// The file could not be opened or read.
    #[error("{0}")]
    Io(#[source] std::io::Error),
    /// Under 4 bytes: no format to recognise.
    #[error("not a PyTorch checkpoint (shorter than 4 bytes)")]
    TooShort,
    /// It starts as neither format does.
    #[error("not a PyTorch checkpoint (neither a zip archive nor a pickle)")]
    NotTorch,
    /// A pickle of the file that our bounded unpickler refused.
    #[error(transparent)]
    Pickle(#[from] PickleError),
    /// The zip crate cannot read the archive (its own error: the external cause).
    #[error("not a readable zip archive ({0})")]
    Zip(#[source] zip::result::ZipError),
    /// A zip archive without the state dict's pickle.
    #[error("a zip archive without data.pkl (not a torch.save file)")]
    NoDataPkl,
    /// A storage entry that is compressed.
    #[error("storage {key} is compressed, which torch.save never does")]
    Compressed {
        /// The storage key.
        key: String,
    },
    /// A storage entry whose data offset the zip reader cannot give.
    #[error("storage {key} has no data offset")]
    NoDataOffset {
        /// The storage key.
        key: String,
    },
    /// A zip storage entry that ends past the end of the file.
    #[error("storage {key} claims {size} bytes, past the end of the file")]
    BytesPastEnd {
        /// The storage key.
        key: String,
        /// The bytes the entry claims.
        size: u64,
    },
    /// Written on a big-endian machine.
    #[error("it was written on a big-endian machine")]
    BigEndian,
    /// A legacy file that does not start with torch's magic number.
    #[error("it does not start with torch's magic number")]
    NoMagic,
    /// A legacy file whose protocol version is not 1001.
    #[error("unknown legacy protocol version")]
    UnknownProtocol,
    /// A legacy file without the list of storage keys after its state dict.
    #[error("the storage key list is missing")]
    NoKeyList,
    /// A legacy storage key that is not a string.
    #[error("a storage key is not a string")]
    KeyNotString,
    /// A legacy storage that no tensor names.
    #[error("storage {key} belongs to no tensor")]
    OrphanStorage {
        /// The storage key.
        key: String,
    },
    /// A legacy file that ends before one of its storages.
    #[error("the file ends before storage {key}")]
    EndsBefore {
        /// The storage key.
        key: String,
    },
    /// A legacy storage whose element count runs past the end of the file.
    #[error("storage {key} claims {count} elements, past the end of the file")]
    ElementsPastEnd {
        /// The storage key.
        key: String,
        /// The element count the file gives.
        count: u64,
    },
    /// The pickle holds something other than a state dict.
    #[error("it holds {kind} where a state dict belongs")]
    NotAStateDict {
        /// What it holds instead (`a list`, `None`).
        kind: &'static str,
    },
    /// One tensor's record cannot be used.
    #[error("tensor {name}: {problem}")]
    Tensor {
        /// The tensor's name in the state dict.
        name: String,
        /// What is wrong with it.
        problem: RecordProblem,
    },
}

impl BinProblem {
    /// Whether the file is valid but uses something this reader does not support.
    pub fn unsupported(&self) -> bool {
        match self {
            BinProblem::Pickle(e) => matches!(e, PickleError::Unsupported { .. }),
            BinProblem::Compressed { .. }
            | BinProblem::BigEndian
            | BinProblem::NoMagic
            | BinProblem::UnknownProtocol => true,
            BinProblem::Tensor { problem, .. } => problem.unsupported(),
            _ => false,
        }
    }
}

/// What is wrong with one tensor's record in a state dict (displays after `tensor NAME: `).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordProblem {
    /// Its storage is not among the file's storages.
    #[error("its storage {storage} is not in the file")]
    StorageMissing {
        /// The storage key.
        storage: String,
    },
    /// Its storage holds fewer bytes than its persistent id says it has elements.
    #[error("its storage {storage} should hold {numel} elements but has {bytes} bytes")]
    StorageTooSmall {
        /// The storage key.
        storage: String,
        /// Elements in the storage, as its persistent id says.
        numel: u64,
        /// Bytes the file holds for it.
        bytes: u64,
    },
    /// Its shape holds more bytes than the whole file.
    #[error("shape {shape:?} holds more data than the whole file ({file_len} bytes)")]
    LargerThanFile {
        /// Its shape.
        shape: Box<[usize]>,
        /// The file's size in bytes.
        file_len: u64,
    },
    /// Its view reaches past the end of its storage.
    #[error("size {shape:?}, stride {stride:?} and offset {offset} reach past the end of its storage of {numel} elements")]
    PastStorage {
        /// Its shape.
        shape: Box<[usize]>,
        /// Its stride.
        stride: Box<[usize]>,
        /// Its offset into the storage, in elements.
        offset: usize,
        /// Elements in the storage.
        numel: u64,
    },
    /// Two records describe its storage differently (type or size).
    #[error("storage {storage} is described in two ways")]
    StorageTwoWays {
        /// The storage key.
        storage: String,
    },
    /// `_rebuild_parameter` without arguments.
    #[error("a parameter without data")]
    ParameterWithoutData,
    /// `_rebuild_from_type_v2` whose arguments are not `(func, type, args, state)`.
    #[error("_rebuild_from_type_v2 with unexpected arguments")]
    FromTypeArguments,
    /// More wrappers around the tensor than a checkpoint has.
    #[error("tensor wrappers nested too deep")]
    NestedTooDeep,
    /// `_rebuild_tensor` with fewer than four arguments.
    #[error("_rebuild_tensor with {count} arguments")]
    RebuildArguments {
        /// How many it has.
        count: usize,
    },
    /// Its storage is not a persistent id.
    #[error("its storage is not a persistent id")]
    StorageNotPersistentId,
    /// Its storage's persistent id has too few elements.
    #[error("its storage id is not ('storage', type, key, location, size)")]
    StorageIdShape,
    /// Its storage's persistent id does not start with `'storage'`.
    #[error("its storage id does not start with 'storage'")]
    StorageIdTag,
    /// A storage class this reader does not know.
    #[error("storage type '{class}' is not supported")]
    StorageType {
        /// The class name (`QInt8Storage`), empty when it is no global name.
        class: String,
    },
    /// Its storage key is not a string.
    #[error("its storage key is not a string")]
    StorageKey,
    /// Its storage size is not a count.
    #[error("its storage size is not a count")]
    StorageSize,
    /// A legacy storage view (a sixth persistent-id element that is not `None`).
    #[error("legacy storage views are not supported")]
    StorageView,
    /// Its offset, size or stride holds something other than non-negative integers.
    #[error("its offset, size or stride is not made of counts")]
    NotCounts,
    /// Its size and stride have different lengths.
    #[error("size {shape:?} and stride {stride:?} differ in length")]
    StrideLength {
        /// Its size.
        shape: Box<[usize]>,
        /// Its stride.
        stride: Box<[usize]>,
    },
}

impl RecordProblem {
    /// Whether the record is valid but uses something this reader does not support.
    pub fn unsupported(&self) -> bool {
        matches!(
            self,
            RecordProblem::StorageType { .. } | RecordProblem::StorageView
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each problem shows the sentence the reader wrote before it was typed (the old format
    /// string is quoted above each).
    #[test]
    fn problems_read_as_the_sentences_they_replace() {
        let key = || "3".to_string();
        let cases: Vec<(BinProblem, &str)> = vec![
            // "not a PyTorch checkpoint (shorter than 4 bytes)"
            (
                BinProblem::TooShort,
                "not a PyTorch checkpoint (shorter than 4 bytes)",
            ),
            // "not a PyTorch checkpoint (neither a zip archive nor a pickle)"
            (
                BinProblem::NotTorch,
                "not a PyTorch checkpoint (neither a zip archive nor a pickle)",
            ),
            // e.to_string()
            (
                BinProblem::Io(std::io::Error::other("disk on fire")),
                "disk on fire",
            ),
            // e.to_string() of a pickle::PickleError
            (
                BinProblem::Pickle(PickleError::Truncated { at: 7 }),
                "its pickle is cut short (at byte 7)",
            ),
            // format!("not a readable zip archive ({e})")
            (
                BinProblem::Zip(zip::result::ZipError::FileNotFound),
                "not a readable zip archive (specified file not found in archive)",
            ),
            // "a zip archive without data.pkl (not a torch.save file)"
            (
                BinProblem::NoDataPkl,
                "a zip archive without data.pkl (not a torch.save file)",
            ),
            // format!("storage {key} is compressed, which torch.save never does")
            (
                BinProblem::Compressed { key: key() },
                "storage 3 is compressed, which torch.save never does",
            ),
            // format!("storage {key} has no data offset")
            (
                BinProblem::NoDataOffset { key: key() },
                "storage 3 has no data offset",
            ),
            // format!("storage {key} claims {size} bytes, past the end of the file")
            (
                BinProblem::BytesPastEnd {
                    key: key(),
                    size: 4096,
                },
                "storage 3 claims 4096 bytes, past the end of the file",
            ),
            // "it was written on a big-endian machine"
            (
                BinProblem::BigEndian,
                "it was written on a big-endian machine",
            ),
            // "it does not start with torch's magic number"
            (
                BinProblem::NoMagic,
                "it does not start with torch's magic number",
            ),
            // "unknown legacy protocol version"
            (
                BinProblem::UnknownProtocol,
                "unknown legacy protocol version",
            ),
            // "the storage key list is missing"
            (BinProblem::NoKeyList, "the storage key list is missing"),
            // "a storage key is not a string"
            (BinProblem::KeyNotString, "a storage key is not a string"),
            // format!("storage {key} belongs to no tensor")
            (
                BinProblem::OrphanStorage { key: key() },
                "storage 3 belongs to no tensor",
            ),
            // format!("the file ends before storage {key}")
            (
                BinProblem::EndsBefore { key: key() },
                "the file ends before storage 3",
            ),
            // format!("storage {key} claims {count} elements, past the end of the file")
            (
                BinProblem::ElementsPastEnd {
                    key: key(),
                    count: 1 << 40,
                },
                "storage 3 claims 1099511627776 elements, past the end of the file",
            ),
            // format!("it holds {} where a state dict belongs", state.kind())
            (
                BinProblem::NotAStateDict { kind: "a list" },
                "it holds a list where a state dict belongs",
            ),
        ];
        for (problem, old) in cases {
            assert_eq!(problem.to_string(), old, "{problem:?}");
        }
    }

    #[test]
    fn record_problems_read_as_the_sentences_they_replace() {
        let storage = || "0".to_string();
        let cases: Vec<(RecordProblem, &str)> = vec![
            // format!("its storage {} is not in the file", r.storage)
            (
                RecordProblem::StorageMissing { storage: storage() },
                "its storage 0 is not in the file",
            ),
            // format!("its storage {} should hold {} elements but has {} bytes",
            //         r.storage, r.numel, region.len)
            (
                RecordProblem::StorageTooSmall {
                    storage: storage(),
                    numel: 1_000_000_000,
                    bytes: 3072,
                },
                "its storage 0 should hold 1000000000 elements but has 3072 bytes",
            ),
            // format!("shape {:?} holds more data than the whole file ({file_len} bytes)",
            //         r.shape)
            (
                RecordProblem::LargerThanFile {
                    shape: vec![1_000_000, 1_000_000].into(),
                    file_len: 900,
                },
                "shape [1000000, 1000000] holds more data than the whole file (900 bytes)",
            ),
            // format!("size {:?}, stride {:?} and offset {} reach past the end of its storage
            //          of {} elements", r.shape, r.stride, r.offset, r.numel)
            (
                RecordProblem::PastStorage {
                    shape: vec![2, 2].into(),
                    stride: vec![1, 1].into(),
                    offset: 0,
                    numel: 1,
                },
                "size [2, 2], stride [1, 1] and offset 0 reach past the end of its storage of 1 elements",
            ),
            // format!("storage {storage} is described in two ways")
            (
                RecordProblem::StorageTwoWays { storage: storage() },
                "storage 0 is described in two ways",
            ),
            // "a parameter without data"
            (
                RecordProblem::ParameterWithoutData,
                "a parameter without data",
            ),
            // "_rebuild_from_type_v2 with unexpected arguments"
            (
                RecordProblem::FromTypeArguments,
                "_rebuild_from_type_v2 with unexpected arguments",
            ),
            // "tensor wrappers nested too deep"
            (
                RecordProblem::NestedTooDeep,
                "tensor wrappers nested too deep",
            ),
            // format!("_rebuild_tensor with {} arguments", args.len())
            (
                RecordProblem::RebuildArguments { count: 2 },
                "_rebuild_tensor with 2 arguments",
            ),
            // "its storage is not a persistent id"
            (
                RecordProblem::StorageNotPersistentId,
                "its storage is not a persistent id",
            ),
            // "its storage id is not ('storage', type, key, location, size)"
            (
                RecordProblem::StorageIdShape,
                "its storage id is not ('storage', type, key, location, size)",
            ),
            // "its storage id does not start with 'storage'"
            (
                RecordProblem::StorageIdTag,
                "its storage id does not start with 'storage'",
            ),
            // format!("storage type '{class}' is not supported")
            (
                RecordProblem::StorageType {
                    class: "QInt8Storage".into(),
                },
                "storage type 'QInt8Storage' is not supported",
            ),
            // "its storage key is not a string"
            (
                RecordProblem::StorageKey,
                "its storage key is not a string",
            ),
            // "its storage size is not a count"
            (
                RecordProblem::StorageSize,
                "its storage size is not a count",
            ),
            // "legacy storage views are not supported"
            (
                RecordProblem::StorageView,
                "legacy storage views are not supported",
            ),
            // "its offset, size or stride is not made of counts"
            (
                RecordProblem::NotCounts,
                "its offset, size or stride is not made of counts",
            ),
            // format!("size {shape:?} and stride {stride:?} differ in length")
            (
                RecordProblem::StrideLength {
                    shape: vec![2, 3].into(),
                    stride: vec![3].into(),
                },
                "size [2, 3] and stride [3] differ in length",
            ),
        ];
        for (problem, old) in cases {
            assert_eq!(problem.to_string(), old, "{problem:?}");
        }
        // format!("tensor {name}: {what}")
        let tensor = BinProblem::Tensor {
            name: "embeddings.word_embeddings.weight".into(),
            problem: RecordProblem::NotCounts,
        };
        assert_eq!(
            tensor.to_string(),
            "tensor embeddings.word_embeddings.weight: its offset, size or stride is not made of counts"
        );
    }

    #[test]
    fn only_what_the_reader_lacks_is_unsupported() {
        let zip = |problem| BinError {
            format: Some(Format::Zip),
            problem,
        };
        assert!(!zip(BinProblem::BigEndian).damaged());
        assert!(!zip(BinProblem::Pickle(PickleError::Unsupported {
            op: 0x93,
            at: 2
        }))
        .damaged());
        assert!(!zip(BinProblem::Tensor {
            name: "w".into(),
            problem: RecordProblem::StorageView,
        })
        .damaged());
        assert!(zip(BinProblem::Pickle(PickleError::Truncated { at: 2 })).damaged());
        assert!(zip(BinProblem::Tensor {
            name: "w".into(),
            problem: RecordProblem::NotCounts,
        })
        .damaged());
        // A file of no known format is neither damaged nor unsupported.
        let unknown = BinError {
            format: None,
            problem: BinProblem::NotTorch,
        };
        assert!(!unknown.damaged());
    }

    // ------------------------------------------------------------ through the reader

    use crate::formats::pytorch::testing::{one_tensor_pickle, write_zip_bin};
    use crate::formats::pytorch::TorchFile;

    fn open(bytes_or_zip: impl FnOnce(&std::path::Path)) -> BinError {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pytorch_model.bin");
        bytes_or_zip(&path);
        TorchFile::open(&path).expect_err("a broken file")
    }

    #[test]
    fn the_reader_says_what_it_found() {
        // A file of neither format.
        let e = open(|p| std::fs::write(p, b"hello world").unwrap());
        assert!(
            matches!(
                e,
                BinError {
                    format: None,
                    problem: BinProblem::NotTorch
                }
            ),
            "{e:?}"
        );
        assert!(!e.damaged());

        // A zip archive that is no torch.save file.
        let e = open(|p| {
            let mut zip = zip::ZipWriter::new(std::fs::File::create(p).unwrap());
            zip.start_file("notes.txt", zip::write::SimpleFileOptions::default())
                .unwrap();
            zip.finish().unwrap();
        });
        assert!(
            matches!(
                e,
                BinError {
                    format: Some(Format::Zip),
                    problem: BinProblem::NoDataPkl
                }
            ),
            "{e:?}"
        );

        // The file the broken ones below are made from reads.
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("pytorch_model.bin");
        write_zip_bin(&good, &one_tensor_pickle(4, &[2, 2], &[2, 1]), &[0; 16]);
        let file = TorchFile::open(&good).unwrap();
        assert_eq!(file.shapes().collect::<Vec<_>>(), [("w", &[2, 2][..])]);

        // A tensor of shape [2, 2] whose stride has one element.
        let e = open(|p| write_zip_bin(p, &one_tensor_pickle(4, &[2, 2], &[2]), &[0; 16]));
        match &e.problem {
            BinProblem::Tensor {
                name,
                problem: RecordProblem::StrideLength { shape, stride },
            } => {
                assert_eq!(name, "w");
                assert_eq!((&shape[..], &stride[..]), (&[2, 2][..], &[2][..]));
            }
            other => panic!("{other:?}"),
        }
        assert!(e.damaged());

        // A storage of 4 elements with the bytes of one.
        let e = open(|p| write_zip_bin(p, &one_tensor_pickle(4, &[2, 2], &[2, 1]), &[0; 4]));
        assert!(
            matches!(
                &e.problem,
                BinProblem::Tensor {
                    problem: RecordProblem::StorageTooSmall {
                        numel: 4,
                        bytes: 4,
                        ..
                    },
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "tensor w: its storage 0 should hold 4 elements but has 4 bytes"
        );
    }
}
