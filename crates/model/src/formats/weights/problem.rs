//! Why a weight file cannot be read ([`super::WeightsError::Read`]), as facts: the error of the
//! library that read it (candle, the system, our `.bin` reader) and the tensor it was reading.

use crate::formats::candle_message;
use crate::formats::pytorch::{BinError, TensorReadError};
use crate::kernels::quant::QuantError;

/// Why a weight file cannot be read (displays after `cannot read weights FILE: `).
#[derive(Debug, thiserror::Error)]
pub enum ReadProblem {
    /// candle cannot map or read the safetensors files: its own error (the external cause),
    /// shown as its first line.
    #[error("{}", candle_message(.0))]
    Candle(#[source] Box<candle_core::Error>),
    /// The system cannot read a file: its own error (the external cause).
    #[error("{0}")]
    Io(#[source] std::io::Error),
    /// Our reader of `pytorch_model.bin` refused the file (boxed: the facts it holds would
    /// make every `Result` carrying a [`super::WeightsError`] larger).
    #[error(transparent)]
    Bin(Box<BinError>),
    /// One tensor cannot be read.
    #[error("tensor {name}: {problem}")]
    Tensor {
        /// The tensor's full stored name.
        name: String,
        /// Why.
        problem: TensorProblem,
    },
}

/// Why one tensor of a weight file cannot be read (displays after `tensor NAME: `).
#[derive(Debug, thiserror::Error)]
pub enum TensorProblem {
    /// candle cannot load or convert it: its own error (the external cause), first line.
    #[error("{}", candle_message(.0))]
    Candle(#[source] Box<candle_core::Error>),
    /// Our `.bin` reader cannot read it.
    #[error(transparent)]
    Bin(#[from] TensorReadError),
    /// The `.bin` file does not hold it after all.
    #[error("not found")]
    NotFound,
    /// Its 16-bit bytes do not make the matrix its shape says.
    #[error(transparent)]
    Stored(Box<QuantError>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::pytorch::{BinProblem, Format};
    use crate::formats::weights::WeightsError;
    use std::path::PathBuf;

    fn read(problem: ReadProblem) -> String {
        WeightsError::Read {
            path: PathBuf::from("m/model.safetensors"),
            problem,
        }
        .to_string()
    }

    /// Each problem shows the sentence `WeightsError::Read` carried before it was typed (the
    /// old code is quoted above each).
    #[test]
    fn problems_read_as_the_sentences_they_replace() {
        let candle = || Box::new(candle_core::Error::Msg("header too large".into()));
        // reason: candle_message(&e)
        assert_eq!(
            read(ReadProblem::Candle(candle())),
            "cannot read weights m/model.safetensors: header too large"
        );
        // reason: e.to_string() (std::fs::metadata)
        assert_eq!(
            read(ReadProblem::Io(std::io::Error::other("permission denied"))),
            "cannot read weights m/model.safetensors: permission denied"
        );
        // reason: e.reason (the .bin reader's)
        let bin = BinError {
            format: Some(Format::Zip),
            problem: BinProblem::NoDataPkl,
        };
        assert_eq!(
            read(ReadProblem::Bin(Box::new(bin))),
            "cannot read weights m/model.safetensors: a zip archive without data.pkl (not a \
             torch.save file)"
        );
        let tensor = |problem| ReadProblem::Tensor {
            name: "bert.pooler.dense.weight".into(),
            problem,
        };
        // reason: format!("tensor {full}: {reason}") with reason = candle_message(&e)
        assert_eq!(
            read(tensor(TensorProblem::Candle(candle()))),
            "cannot read weights m/model.safetensors: tensor bert.pooler.dense.weight: header \
             too large"
        );
        // … with reason = e.to_string() of the .bin reader's TensorReadError
        assert_eq!(
            read(tensor(TensorProblem::Bin(TensorReadError::Unsupported(
                "torch.bool"
            )))),
            "cannot read weights m/model.safetensors: tensor bert.pooler.dense.weight: type \
             torch.bool is not supported"
        );
        // … with reason = "not found"
        assert_eq!(
            read(tensor(TensorProblem::NotFound)),
            "cannot read weights m/model.safetensors: tensor bert.pooler.dense.weight: not found"
        );
        // format!("tensor {full}: {e}") with e a QuantError
        let e = QuantError::TooLarge {
            outputs: 2,
            inputs: 3,
        };
        let expected = format!(
            "cannot read weights m/model.safetensors: tensor bert.pooler.dense.weight: {e}"
        );
        assert_eq!(read(tensor(TensorProblem::Stored(Box::new(e)))), expected);
    }

    #[test]
    fn a_legacy_pickle_reads_as_before() {
        // format!("{} is a legacy (pre-1.6) PyTorch pickle attnviz cannot read ({reason}); …")
        // with reason = e.reason
        let e = WeightsError::LegacyPickle {
            path: PathBuf::from("m/pytorch_model.bin"),
            problem: Box::new(BinProblem::NoMagic),
        };
        assert_eq!(
            e.to_string(),
            "m/pytorch_model.bin is a legacy (pre-1.6) PyTorch pickle attnviz cannot read (it \
             does not start with torch's magic number); convert it with: python -c \"import \
             torch; torch.save(torch.load('m/pytorch_model.bin'), 'm/pytorch_model.bin')\""
        );
    }

    // ------------------------------------------------------------ through the reader

    use crate::formats::pytorch::testing::{one_tensor_pickle, write_zip_bin};
    use crate::formats::pytorch::RecordProblem;
    use crate::formats::weights::{Anchor, Checkpoint};

    const ANCHOR: Anchor = Anchor {
        tensor: "w",
        family: "Test",
        prefix: "test",
    };

    /// The error of opening a checkpoint of one file, `name`, holding `bytes`.
    fn open(name: &str, bytes: &[u8]) -> WeightsError {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        match Checkpoint::open(&[path], &ANCHOR) {
            Ok(_) => panic!("{name} opened"),
            Err(e) => e,
        }
    }

    #[test]
    fn the_reader_says_what_it_found() {
        // A pickle stream that is no torch file: the legacy format, which attnviz cannot read.
        let e = open("pytorch_model.bin", b"\x80\x02K\x01.");
        assert!(
            matches!(
                &e,
                WeightsError::LegacyPickle { problem, .. } if matches!(**problem, BinProblem::NoMagic)
            ),
            "{e:?}"
        );

        // A safetensors file whose header length runs past its end: candle's error.
        let mut bytes = 1000u64.to_le_bytes().to_vec();
        bytes.extend(b"{}");
        let e = open("model.safetensors", &bytes);
        assert!(
            matches!(
                e,
                WeightsError::Read {
                    problem: ReadProblem::Candle(_),
                    ..
                }
            ),
            "{e:?}"
        );

        // A .bin whose storage is shorter than its tensor: the .bin reader's facts.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pytorch_model.bin");
        write_zip_bin(&path, &one_tensor_pickle(4, &[2, 2], &[2, 1]), &[0; 4]);
        let e = Checkpoint::open(std::slice::from_ref(&path), &ANCHOR).err();
        assert!(
            matches!(
                &e,
                Some(WeightsError::Read {
                    problem: ReadProblem::Bin(bin),
                    ..
                }) if matches!(
                    **bin,
                    BinError {
                        format: Some(Format::Zip),
                        problem: BinProblem::Tensor {
                            problem: RecordProblem::StorageTooSmall { numel: 4, .. },
                            ..
                        },
                    }
                )
            ),
            "{e:?}"
        );
        // The same file with its storage whole opens.
        write_zip_bin(&path, &one_tensor_pickle(4, &[2, 2], &[2, 1]), &[0; 16]);
        let checkpoint = Checkpoint::open(&[path], &ANCHOR).unwrap();
        assert_eq!(checkpoint.shape_of("w").unwrap().1, [2, 2]);
    }
}
