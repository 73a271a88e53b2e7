//! Pictures made to hold the decoder (issue 40, requirement 2): a progressive JPEG of many
//! cheap scans is refused once it passes the scan count or the work bound (never after
//! decoding it), a PNG whose colour profile is a decompression bomb is refused as PIL refuses
//! it, and a decode stops once its cancel flag is set. Through the library, the CLI and corpus
//! mode here; the server's upload in `serve.rs`, Python's in `python/tests/test_vision.py`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use attnviz::cancel::Cancel;
use attnviz::pixels::jpeg::{BLOCK_COST, MAX_JPEG_PASSES, MAX_JPEG_SCANS};
use attnviz::pixels::{
    decode_source, ImageProcessor, ImageSource, PixelRows, PixelsError, SharedPixels,
};

use crate::support::cli::{assert_clean_failure, fixture, run_corpus, stderr};
use crate::support::pictures::{png_with_profile, progressive_jpeg, Scans};

fn bytes(name: &str, bytes: Vec<u8>) -> ImageSource {
    ImageSource::Bytes {
        name: name.into(),
        bytes: Arc::from(bytes),
    }
}

fn refused(source: &ImageSource) -> String {
    match decode_source(source) {
        Err(e @ (PixelsError::TooMuchWork { .. } | PixelsError::Chunk { .. })) => e.to_string(),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("decoded"),
    }
}

#[test]
fn a_jpeg_of_more_scans_than_the_bound_is_refused() {
    // An 8 × 8 picture: every scan is cheap, so only the count can stop it. The DC scan is
    // the first; `MAX_JPEG_SCANS - 1` more make exactly the bound.
    let most = (MAX_JPEG_SCANS - 1) as usize;
    let at_the_bound = progressive_jpeg(8, 8, 1, Scans::EmptyAc(most));
    let rgb = decode_source(&bytes("ok.jpg", at_the_bound)).expect("within the bound");
    assert_eq!((rgb.width, rgb.height), (8, 8));
    let over = progressive_jpeg(8, 8, 1, Scans::EmptyAc(most + 1));
    let e = refused(&bytes("many-scans.jpg", over));
    assert!(
        e.starts_with("many-scans.jpg is a progressive JPEG of more than 500 scans"),
        "{e}"
    );
}

#[test]
fn scans_that_would_take_more_than_the_work_bound_are_refused_before_they_run() {
    // 512 × 512 gray: 4,096 blocks. The work bound is 16 baseline decodes (64 coefficients and
    // the block's own cost each); a refinement scan over band 1–63 costs 63 + 8 per block.
    let blocks = 4096;
    let budget = MAX_JPEG_PASSES * blocks * (64 + BLOCK_COST);
    let dc = blocks * (1 + BLOCK_COST);
    let band = blocks * (63 + BLOCK_COST);
    // The first AC scan and n refinements: the most that fit, then one more.
    let fit = (budget - dc) / band - 1;
    assert_eq!(fit, 15, "the arithmetic below is the documented model's");
    decode_source(&bytes(
        "ok.jpg",
        progressive_jpeg(512, 512, 1, Scans::Refine(fit as usize)),
    ))
    .expect("within the bound");
    let e = refused(&bytes(
        "refine.jpg",
        progressive_jpeg(512, 512, 1, Scans::Refine(fit as usize + 1)),
    ));
    // The DC scan is 1, the AC scan 2: scan 18 is the one that would have gone over.
    assert!(
        e.contains("more than 16 times the work of decoding its pixels once (scan 18 went over"),
        "{e}"
    );
    // Interleaved DC scans over three components, counted with all three.
    let e = refused(&bytes(
        "dc.jpg",
        progressive_jpeg(512, 512, 3, Scans::InterleavedDc(200)),
    ));
    assert!(e.contains("times the work"), "{e}");
}

#[test]
fn the_issues_picture_is_refused_after_a_few_of_its_scans() {
    // 8192 × 8192 and 5,000 empty scans (50 KB): 37 s of libjpeg before, when PIL decodes it.
    let file = progressive_jpeg(8192, 8192, 1, Scans::EmptyAc(5000));
    assert!(file.len() < 60_000, "{} bytes", file.len());
    let e = refused(&bytes("scans.jpg", file));
    // The DC scan costs 1 + 8 per block, each empty AC scan 63 + 8: 16 of them fit in 16
    // baseline decodes (64 + 8), the 17th (scan 18) would go over.
    assert!(e.contains("(scan 18 went over"), "{e}");
}

#[test]
fn a_profile_that_inflates_past_pils_bound_is_refused_and_a_real_one_is_read() {
    let e = refused(&bytes("profile.png", png_with_profile((1 << 20) + 1)));
    assert!(
        e.starts_with("profile.png has a colour profile (iCCP) chunk that inflates past 1 MiB"),
        "{e}"
    );
    let ok = decode_source(&bytes("ok.png", png_with_profile(3144))).expect("a profile's size");
    assert_eq!(
        ok.data,
        vec![200u8; 4 * 4 * 3],
        "the profile changes no pixel"
    );
}

/// Rows that set the decode's cancel flag as the first row is read.
struct CancelAtFirstRow {
    cancel: Cancel,
    read: AtomicUsize,
}

impl PixelRows for CancelAtFirstRow {
    fn size(&self) -> (usize, usize) {
        (64, 64)
    }
    fn color(&self) -> String {
        "rgb8".into()
    }
    fn row(&self, _y: usize, out: &mut Vec<u8>) -> Result<(), attnviz::pixels::RowError> {
        self.cancel.cancel();
        self.read.fetch_add(1, Ordering::SeqCst);
        out.clear();
        out.resize(64 * 3, 0);
        Ok(())
    }
}

#[test]
fn a_cancelled_read_stops_at_the_next_row_or_scan() {
    let processor = ImageProcessor::parse(r#"{"size": {"height": 8, "width": 8}}"#).unwrap();
    let cancel = Cancel::new();
    let rows = Arc::new(CancelAtFirstRow {
        cancel: cancel.clone(),
        read: AtomicUsize::new(0),
    });
    let source = ImageSource::Pixels {
        name: "image".into(),
        pixels: SharedPixels(rows.clone()),
    };
    let e = processor.prepare_until(&source, &cancel).unwrap_err();
    assert!(matches!(e, PixelsError::Cancelled { .. }), "{e}");
    assert_eq!(
        rows.read.load(Ordering::SeqCst),
        1,
        "one row, then it stopped"
    );
    // A flag set before: nothing is read (a JPEG's first scan header is where it is checked).
    let jpeg = bytes("p.jpg", progressive_jpeg(64, 64, 1, Scans::EmptyAc(3)));
    assert!(processor.prepare_until(&jpeg, &Cancel::new()).is_ok());
    let e = processor.prepare_until(&jpeg, &cancel).unwrap_err();
    assert!(matches!(e, PixelsError::Cancelled { .. }), "{e}");
}

#[test]
fn the_cli_and_corpus_mode_refuse_them_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let deit = fixture("tiny-deit");
    let scans = dir.path().join("scans.jpg");
    std::fs::write(&scans, progressive_jpeg(8, 8, 1, Scans::EmptyAc(600))).unwrap();
    let profile = dir.path().join("profile.png");
    std::fs::write(&profile, png_with_profile(2 << 20)).unwrap();
    for (file, words) in [(&scans, "more than 500 scans"), (&profile, "iCCP")] {
        let out = crate::support::cli::run(&[
            "-m",
            deit.to_str().unwrap(),
            "--image",
            file.to_str().unwrap(),
            "--json",
            "-",
            "-q",
        ]);
        assert_clean_failure(&out, words);
    }
    // A corpus of pictures: each is a bad line, the good picture runs.
    let pictures = dir.path().join("pictures");
    std::fs::create_dir(&pictures).unwrap();
    std::fs::copy(&scans, pictures.join("a-scans.jpg")).unwrap();
    std::fs::copy(&profile, pictures.join("b-profile.png")).unwrap();
    std::fs::copy(fixture("images/wide45x37.png"), pictures.join("c-good.png")).unwrap();
    let out_dir = dir.path().join("out");
    let out = run_corpus(&deit, &pictures, &out_dir, &["-q"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("more than 500 scans") && err.contains("iCCP"),
        "each bad picture is named: {err}"
    );
    let stats: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("corpus_stats.json")).unwrap()).unwrap();
    assert_eq!(stats["sentences"], 1, "{stats}");
    assert_eq!(stats["bad_lines"]["by_kind"]["bad-image"], 2, "{stats}");
}
