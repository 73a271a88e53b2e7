//! Crafted `model.bin` files: one well-formed of every type, and each malformation.

use super::*;

/// Writes a `model.bin` as `model_spec.py` does (version ≥ 4 layout unless `version` < 4).
struct Writer {
    version: u32,
    out: Vec<u8>,
}

impl Writer {
    fn new(version: u32, variables: u32) -> Writer {
        let mut w = Writer {
            version,
            out: Vec::new(),
        };
        w.out.extend_from_slice(&version.to_le_bytes());
        if version >= 2 {
            w.string("TestSpec");
            w.out.extend_from_slice(&7u32.to_le_bytes());
        }
        w.out.extend_from_slice(&variables.to_le_bytes());
        w
    }

    fn string(&mut self, s: &str) {
        self.out
            .extend_from_slice(&(s.len() as u16 + 1).to_le_bytes());
        self.out.extend_from_slice(s.as_bytes());
        self.out.push(0);
    }

    fn variable(&mut self, name: &str, shape: &[u32], dtype: u8, data: &[u8]) {
        self.string(name);
        self.out.push(shape.len() as u8);
        for d in shape {
            self.out.extend_from_slice(&d.to_le_bytes());
        }
        if self.version >= 4 {
            self.out.push(dtype);
            self.out
                .extend_from_slice(&(data.len() as u32).to_le_bytes());
        } else {
            let size = [4u8, 1, 2][dtype as usize];
            self.out.push(size);
            self.out
                .extend_from_slice(&(data.len() as u32 / u32::from(size)).to_le_bytes());
        }
        self.out.extend_from_slice(data);
    }

    fn aliases(&mut self, pairs: &[(&str, &str)]) {
        self.out
            .extend_from_slice(&(pairs.len() as u32).to_le_bytes());
        for (a, t) in pairs {
            self.string(a);
            self.string(t);
        }
    }
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn good() -> Vec<u8> {
    let mut w = Writer::new(6, 8);
    w.variable("a/f32", &[2, 2], 0, &f32s(&[1.0, -2.0, 3.5, 0.25]));
    w.variable("a/f16", &[3], 4, &[0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38]); // 1, -2, 0.5
    w.variable("a/bf16", &[2], 5, &[0x80, 0x3f, 0x40, 0xc0]); // 1, -3
    w.variable("a/i32", &[2], 3, &[5, 0, 0, 0, 0xfb, 0xff, 0xff, 0xff]); // 5, -5
                                                                         // int8 weight [2, 3] with a per-row scale: row 0 × 1/127·… CTranslate2's r_scale.
    w.variable("b/weight", &[2, 3], 1, &[127, 0x81, 0, 10, 20, 0xf6]); // 127 -127 0 / 10 20 -10
    w.variable("b/weight_scale", &[2], 0, &f32s(&[127.0, 10.0]));
    w.variable("b/num_heads", &[], 2, &6i16.to_le_bytes());
    w.variable("b/pre_norm", &[], 1, &[1]);
    w.aliases(&[("c/weight", "b/weight")]);
    w.out
}

fn open(bytes: Vec<u8>) -> Result<Ct2Model, Ct2Error> {
    Ct2Model::from_bytes(bytes, Path::new("model.bin"))
}

fn problem(bytes: Vec<u8>) -> Ct2Problem {
    match open(bytes) {
        Err(Ct2Error::Corrupt { problem, .. }) => problem,
        other => panic!("expected a corrupt file, got {other:?}"),
    }
}

#[test]
fn reads_every_type_and_dequantises_int8_per_row() {
    let m = open(good()).unwrap();
    assert_eq!(
        (m.binary_version, m.spec.as_str(), m.revision),
        (6, "TestSpec", 7)
    );
    assert_eq!(m.variables().len(), 8);
    assert_eq!(
        m.tensor("a/f32").unwrap().values,
        vec![1.0, -2.0, 3.5, 0.25]
    );
    assert_eq!(m.tensor("a/f16").unwrap().values, vec![1.0, -2.0, 0.5]);
    assert_eq!(m.tensor("a/bf16").unwrap().values, vec![1.0, -3.0]);
    assert_eq!(m.tensor("a/i32").unwrap().values, vec![5.0, -5.0]);
    let w = m.tensor("b/weight").unwrap();
    assert_eq!(w.shape, vec![2, 3]);
    let r0 = 1.0f32 / 127.0;
    assert_eq!(w.values, vec![127.0 * r0, -127.0 * r0, 0.0, 1.0, 2.0, -1.0]);
    // The alias reaches the variable and its scale.
    assert_eq!(m.tensor("c/weight").unwrap(), w);
    assert_eq!(m.scalar_int("b/num_heads"), Some(6));
    assert_eq!(m.scalar_int("b/pre_norm"), Some(1));
    assert_eq!(m.scalar_int("a/f32"), None);
}

#[test]
fn old_versions_use_item_sizes_and_have_no_aliases() {
    let mut w = Writer::new(1, 1);
    w.variable("x", &[2], 0, &f32s(&[1.0, 2.0]));
    let m = open(w.out).unwrap();
    assert_eq!((m.binary_version, m.spec.as_str(), m.revision), (1, "", 1));
    assert_eq!(m.tensor("x").unwrap().values, vec![1.0, 2.0]);
    let mut w = Writer::new(2, 1);
    w.variable("q", &[2], 2, &[0xe8, 0x03, 0x18, 0xfc]); // int16 1000, -1000
    let m = open(w.out).unwrap();
    // No saved scale: CTranslate2's global int16 scale, 1000.
    assert_eq!(m.tensor("q").unwrap().values, vec![1.0, -1.0]);
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let bytes = good();
    for cut in 0..bytes.len() {
        match open(bytes[..cut].to_vec()) {
            Err(Ct2Error::Corrupt { problem, .. }) => {
                assert!(!problem.to_string().contains('\n'));
            }
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
}

#[test]
fn versions_outside_the_known_range_are_refused() {
    for v in [0u32, 7, u32::MAX] {
        let mut bytes = good();
        bytes[..4].copy_from_slice(&v.to_le_bytes());
        assert_eq!(problem(bytes), Ct2Problem::Version(v));
    }
}

#[test]
fn huge_counts_are_refused_before_allocating() {
    // The variable count sits after the version (4), the spec string (2 + 9) and revision (4).
    let mut bytes = good();
    bytes[19..23].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(problem(bytes), Ct2Problem::Truncated { need, .. } if need > 1 << 32));
    // A dimension of 2^32 - 1 with its true payload size claimed: the file is too short.
    let mut w = Writer::new(6, 1);
    w.string("big");
    w.out.push(2);
    w.out.extend_from_slice(&u32::MAX.to_le_bytes());
    w.out.extend_from_slice(&4u32.to_le_bytes());
    w.out.push(0);
    w.out.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(problem(w.out), Ct2Problem::PayloadSize { .. }));
    // A product that overflows u64.
    let mut w = Writer::new(6, 1);
    w.string("over");
    w.out.push(3);
    for _ in 0..3 {
        w.out.extend_from_slice(&u32::MAX.to_le_bytes());
    }
    w.out.push(0);
    w.out.extend_from_slice(&0u32.to_le_bytes());
    assert!(matches!(problem(w.out), Ct2Problem::ShapeOverflow { .. }));
}

#[test]
fn each_malformation_has_its_problem() {
    let mut w = Writer::new(6, 1);
    w.string("x");
    w.out.push(9);
    w.out.extend_from_slice(&[0; 64]);
    assert!(matches!(problem(w.out), Ct2Problem::Rank { rank: 9, .. }));

    let mut w = Writer::new(6, 1);
    w.variable("x", &[1], 6, &[0; 4]);
    assert!(matches!(problem(w.out), Ct2Problem::Dtype { id: 6, .. }));

    let mut w = Writer::new(6, 1);
    w.variable("x", &[3], 0, &[0; 8]);
    w.aliases(&[]);
    assert!(matches!(
        problem(w.out),
        Ct2Problem::PayloadSize {
            bytes: 8,
            expected: 12,
            ..
        }
    ));

    let mut w = Writer::new(6, 2);
    w.variable("x", &[1], 0, &[0; 4]);
    w.variable("x", &[1], 0, &[0; 4]);
    w.aliases(&[]);
    assert_eq!(problem(w.out), Ct2Problem::Duplicate("x".into()));

    let mut w = Writer::new(6, 1);
    w.variable("x", &[1], 0, &[0; 4]);
    w.aliases(&[("y", "nowhere")]);
    assert!(matches!(problem(w.out), Ct2Problem::AliasTarget { .. }));

    let mut w = Writer::new(6, 1);
    w.variable("x", &[1], 0, &[0; 4]);
    w.aliases(&[("x", "x")]);
    assert_eq!(problem(w.out), Ct2Problem::Duplicate("x".into()));

    let mut bytes = good();
    bytes.extend_from_slice(b"junk");
    assert_eq!(problem(bytes), Ct2Problem::Trailing(4));

    // Strings: length 0, no NUL, not UTF-8.
    let mut bytes = 6u32.to_le_bytes().to_vec();
    bytes.extend_from_slice(&0u16.to_le_bytes());
    assert!(matches!(
        problem(bytes),
        Ct2Problem::BadString {
            problem: "has length 0",
            ..
        }
    ));
    let mut bytes = 6u32.to_le_bytes().to_vec();
    bytes.extend_from_slice(&2u16.to_le_bytes());
    bytes.extend_from_slice(b"ab");
    assert!(matches!(
        problem(bytes),
        Ct2Problem::BadString {
            problem: "does not end with a NUL byte",
            ..
        }
    ));
    let mut bytes = 6u32.to_le_bytes().to_vec();
    bytes.extend_from_slice(&3u16.to_le_bytes());
    bytes.extend_from_slice(&[0xff, 0xfe, 0]);
    assert!(matches!(
        problem(bytes),
        Ct2Problem::BadString {
            problem: "is not UTF-8",
            ..
        }
    ));
}

#[test]
fn bad_scales_are_typed_errors() {
    let mut w = Writer::new(6, 1);
    w.variable("w", &[2, 2], 1, &[1, 2, 3, 4]);
    w.aliases(&[]);
    let m = open(w.out).unwrap();
    let e = m.tensor("w").unwrap_err();
    assert!(matches!(e, Ct2Error::Scale { .. }), "{e}");
    assert!(e.to_string().contains("w_scale is missing"), "{e}");

    let mut w = Writer::new(6, 2);
    w.variable("w", &[2, 2], 1, &[1, 2, 3, 4]);
    w.variable("w_scale", &[3], 0, &f32s(&[1.0, 2.0, 3.0]));
    w.aliases(&[]);
    let m = open(w.out).unwrap();
    assert!(matches!(m.tensor("w"), Err(Ct2Error::Scale { .. })));

    let m = open(good()).unwrap();
    assert!(matches!(m.tensor("nothing"), Err(Ct2Error::Missing { .. })));
}

#[test]
fn vocabulary_json_then_txt() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(read_vocabulary(dir.path()).unwrap(), None);
    assert_eq!(read_config(dir.path()).unwrap(), None);
    std::fs::write(dir.path().join("vocabulary.txt"), "a\nb c\n\n").unwrap();
    assert_eq!(
        read_vocabulary(dir.path()).unwrap(),
        Some(vec!["a".to_string(), "b c".into(), "".into()])
    );
    std::fs::write(dir.path().join("vocabulary.json"), r#"["x", "y"]"#).unwrap();
    assert_eq!(
        read_vocabulary(dir.path()).unwrap(),
        Some(vec!["x".to_string(), "y".into()])
    );
    std::fs::write(dir.path().join("vocabulary.json"), r#"{"x": 1}"#).unwrap();
    assert!(matches!(
        read_vocabulary(dir.path()),
        Err(Ct2Error::BadFile { .. })
    ));
    std::fs::write(dir.path().join("config.json"), "[1]").unwrap();
    assert!(matches!(
        read_config(dir.path()),
        Err(Ct2Error::BadFile { .. })
    ));
}

#[test]
fn fused_rows_split_into_equal_blocks_and_attributes_are_checked() {
    let m = open(good()).unwrap();
    // b/weight dequantised is [[1, -1, 0], [1, 2, -1]]; its second block of two is row 1,
    // through the alias too.
    let part = m.slice(&Ct2Slice::rows("c/weight", 1, 2)).unwrap();
    assert_eq!(part.shape, [1, 3]);
    assert_eq!(part.values, [1.0, 2.0, -1.0]);
    assert_eq!(
        m.slice(&Ct2Slice::whole("a/f16")).unwrap().values,
        [1.0, -2.0, 0.5]
    );
    assert_eq!(m.slice_shape(&Ct2Slice::rows("a/f16", 2, 3)).unwrap(), [1]);
    for bad in [
        Ct2Slice::rows("a/f16", 0, 2),
        Ct2Slice::rows("a/f16", 3, 3),
        Ct2Slice::rows("b/num_heads", 0, 2),
    ] {
        let e = m.slice(&bad).unwrap_err();
        assert!(matches!(e, Ct2Error::Split { .. }), "{bad:?}: {e}");
        assert!(!e.to_string().contains('\n'));
    }
    assert!(matches!(
        m.slice(&Ct2Slice::whole("nothing")),
        Err(Ct2Error::Missing { .. })
    ));
    assert_eq!(m.attribute("b/num_heads", &[6], None, "six").unwrap(), 6);
    assert_eq!(m.attribute("b/absent", &[0], Some(0), "zero").unwrap(), 0);
    let e = m
        .attribute("b/pre_norm", &[0], None, "Whisper's is 0")
        .unwrap_err()
        .to_string();
    assert!(e.contains("b/pre_norm is 1 where Whisper's is 0"), "{e}");
    let e = m
        .attribute("b/absent", &[0], None, "needed")
        .unwrap_err()
        .to_string();
    assert!(e.contains("b/absent is missing where needed"), "{e}");
    let e = m
        .attribute("a/f32", &[0], None, "a scalar")
        .unwrap_err()
        .to_string();
    assert!(e.contains("not an integer scalar"), "{e}");
    assert!(is_model_bin(&[PathBuf::from("m/model.bin")]));
    assert!(!is_model_bin(&[PathBuf::from("m/pytorch_model.bin")]));
}
