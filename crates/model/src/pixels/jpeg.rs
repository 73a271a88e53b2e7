//! JPEG through libjpeg-turbo (the `mozjpeg` crate's decoder, libjpeg-turbo's own), the
//! decoder PIL uses, so the pixels are PIL's exactly; with the work a file may ask for bounded.
//!
//! **Why a bound on scans.** A progressive JPEG is a list of scans, each of which revisits the
//! coefficients of every block of the components it covers, and nothing in the format limits
//! how many there are: libjpeg decodes an empty scan over an 8192 × 8192 picture in about
//! 15 ms, so a 50 KB file of 5,000 of them holds the decoder for over a minute, and a refinement
//! scan, which checks each of a block's 63 coefficients, costs 8 times that. The pixel caps
//! cannot see it: the picture is within them. So, as libjpeg-turbo's own tools do with their
//! scan limit, we count; and since a few hundred scans over the largest picture are still far
//! too slow, we also count what each scan costs:
//!
//! - at most [`MAX_JPEG_SCANS`] scans (the limit libjpeg-turbo's `tjbench -limitscans` sets;
//!   a progressive photo has about 10);
//! - the scans' work at most [`MAX_JPEG_PASSES`] times a baseline decode's, the work of a scan
//!   being, for each block it covers, the coefficients of its band (all 64 for a sequential
//!   file) plus [`BLOCK_COST`] for the block itself (what libjpeg spends on a block even when
//!   its band is empty, measured: about 8 coefficients' time). libjpeg's default progression
//!   takes 2.6 to 3.3 times a baseline decode's work, a script of one scan per coefficient about
//!   8; a crafted file is stopped before the scan that would go over, at most a few seconds
//!   into the largest picture.
//!
//! Both are counted from libjpeg's own trace messages, which it hands to the error manager's
//! `emit_message` as it reads each frame and scan header (`JTRC_SOF*`, `JTRC_SOS*`), before
//! any of the scan's data is decoded; the same hook stops the decode when its [`Cancel`] flag
//! is set. A stop unwinds out of libjpeg, as its errors do (the `mozjpeg` crate's C is built
//! to unwind).
//!
//! CMYK and YCCK files are decoded by libjpeg to CMYK and made RGB as PIL does: Adobe's
//! inverted polarity assumed (PIL's `CMYK;I`), then libImaging's `cmyk2rgb`.

use std::any::Any;
use std::cell::RefCell;
use std::path::Path;

use super::read::{corrupt, open, Corruption, Rows};
use super::{check_size, ImageSource, PixelsError};
use crate::cancel::Cancel;

/// The most scans a JPEG may have.
pub const MAX_JPEG_SCANS: u64 = 500;

/// Why a progressive JPEG would take too much work (displays after the file's name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TooMuchWork {
    /// More than [`MAX_JPEG_SCANS`] scans.
    #[error("is a progressive JPEG of more than {MAX_JPEG_SCANS} scans, which attnviz does not decode (a photo has about 10; each scan is another pass over the picture)")]
    Scans,
    /// Scans over [`MAX_JPEG_PASSES`] times a baseline decode's work.
    #[error("is a progressive JPEG whose scans would take more than {MAX_JPEG_PASSES} times the work of decoding its pixels once (scan {scan} went over; a progressive photo takes about 3)")]
    Passes {
        /// The scan that went over.
        scan: u64,
    },
}
/// The most work a JPEG's scans may take, in baseline decodes of the same picture.
pub const MAX_JPEG_PASSES: u64 = 16;
/// What a block costs a scan beyond the coefficients of its band, in coefficients.
pub const BLOCK_COST: u64 = 8;
/// Work any picture may take whatever its size (a few milliseconds): a picture of up to about
/// 100 × 100 pixels is bounded by the scan count alone.
const MIN_JPEG_WORK: u64 = 1 << 22;

/// Why libjpeg was stopped, carried out of it by unwinding (libjpeg's errors cannot return).
enum Stop {
    /// libjpeg's own error, or a file cut short.
    Corrupt(Corruption),
    /// More than [`MAX_JPEG_SCANS`] scans.
    Scans,
    /// The scans' work past the budget: the scan that would have gone over.
    Work { scan: u64 },
    /// The [`Cancel`] flag was set.
    Cancelled,
}

/// What the trace messages told so far, and the flag to watch: the state of the decode
/// running on this thread (libjpeg's callbacks get no pointer of ours, and one decode runs on
/// one thread from start to end).
struct Budget {
    cancel: Cancel,
    progressive: bool,
    width: u64,
    height: u64,
    /// Each component's id and sampling factors, as the frame header gave them.
    components: Vec<(i32, u64, u64)>,
    /// The component ids of the scan header being read.
    scan: Vec<i32>,
    scans: u64,
    work: u64,
}

thread_local! {
    static BUDGET: RefCell<Option<Budget>> = const { RefCell::new(None) };
}

/// The decode's [`Budget`] on this thread, taken away when dropped (also when unwinding).
struct Watch;

impl Watch {
    fn start(cancel: &Cancel) -> Watch {
        BUDGET.with(|b| {
            *b.borrow_mut() = Some(Budget {
                cancel: cancel.clone(),
                progressive: false,
                width: 0,
                height: 0,
                components: Vec::new(),
                scan: Vec::new(),
                scans: 0,
                work: 0,
            })
        });
        Watch
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        BUDGET.with(|b| b.borrow_mut().take());
    }
}

impl Budget {
    /// The largest sampling factors (libjpeg refuses factors outside 1–4 after the first scan
    /// header; clamped here so that the arithmetic holds until then).
    fn max_factors(&self) -> (u64, u64) {
        self.components
            .iter()
            .fold((1, 1), |(h, v), &(_, ch, cv)| (h.max(ch), v.max(cv)))
    }

    /// The blocks of a component with sampling factors `h × v` (libjpeg's `width_in_blocks ×
    /// height_in_blocks`).
    fn blocks(&self, h: u64, v: u64) -> u64 {
        let (hmax, vmax) = self.max_factors();
        (self.width * h).div_ceil(hmax * 8) * (self.height * v).div_ceil(vmax * 8)
    }

    /// The work of decoding every coefficient of the picture once, as a baseline file does.
    fn baseline_work(&self) -> u64 {
        self.components
            .iter()
            .map(|&(_, h, v)| self.blocks(h, v) * (64 + BLOCK_COST))
            .sum()
    }

    /// The budget of all the scans together.
    fn limit(&self) -> u64 {
        (MAX_JPEG_PASSES * self.baseline_work()).max(MIN_JPEG_WORK)
    }

    /// A scan header has been read (band `ss..=se`): count it, or stop.
    fn scan_read(&mut self, ss: i64, se: i64) -> Result<(), Stop> {
        if self.cancel.is_cancelled() {
            return Err(Stop::Cancelled);
        }
        self.scans += 1;
        if self.scans > MAX_JPEG_SCANS {
            return Err(Stop::Scans);
        }
        let band = if self.progressive && (0..=se).contains(&ss) && se <= 63 {
            (se - ss + 1) as u64
        } else {
            64
        };
        let factors: Vec<(u64, u64)> = self
            .scan
            .iter()
            .filter_map(|id| self.components.iter().find(|c| c.0 == *id))
            .map(|&(_, h, v)| (h, v))
            .collect();
        let blocks = if let [(h, v)] = factors[..] {
            self.blocks(h, v)
        } else {
            // Interleaved: every MCU of the picture, each holding h × v blocks of each
            // component.
            let (hmax, vmax) = self.max_factors();
            let mcus = self.width.div_ceil(hmax * 8) * self.height.div_ceil(vmax * 8);
            mcus * factors.iter().map(|(h, v)| h * v).sum::<u64>()
        };
        self.work = self
            .work
            .saturating_add(blocks.saturating_mul(band + BLOCK_COST));
        if self.work > self.limit() {
            return Err(Stop::Work { scan: self.scans });
        }
        Ok(())
    }
}

/// What a trace message means for the budget of the decode on this thread.
fn traced(code: i32, p: [i32; 8]) -> Result<(), Stop> {
    BUDGET.with(|b| {
        let mut b = b.borrow_mut();
        let Some(b) = b.as_mut() else { return Ok(()) };
        let factor = |f: i32| f.clamp(1, 4) as u64;
        match code {
            mozjpeg_sys::JTRC_SOF => {
                // The marker (SOF2, 6, 10 and 14 are progressive), width, height, components.
                b.progressive = matches!(p[0], 0xc2 | 0xc6 | 0xca | 0xce);
                b.width = p[1].max(0) as u64;
                b.height = p[2].max(0) as u64;
                b.components.clear();
            }
            mozjpeg_sys::JTRC_SOF_COMPONENT => {
                b.components.push((p[0], factor(p[1]), factor(p[2])));
            }
            mozjpeg_sys::JTRC_SOS => b.scan.clear(),
            mozjpeg_sys::JTRC_SOS_COMPONENT => b.scan.push(p[0]),
            mozjpeg_sys::JTRC_SOS_PARAMS => b.scan_read(p[0] as i64, p[1] as i64)?,
            _ => {}
        }
        Ok(())
    })
}

fn stop(why: Stop) -> ! {
    std::panic::resume_unwind(Box::new(why))
}

unsafe extern "C-unwind" fn jpeg_error_exit(cinfo: &mut mozjpeg_sys::jpeg_common_struct) {
    stop(Stop::Corrupt(Corruption::Libjpeg {
        cause: jpeg_message(cinfo),
    }));
}

/// Every message libjpeg emits: the scan headers are counted ([`traced`]); warnings pass, as
/// PIL lets them pass, except a file that ends before its image does: PIL refuses it ("image
/// file is truncated"), and libjpeg would fill the rest with grey.
unsafe extern "C-unwind" fn jpeg_emit_message(
    cinfo: &mut mozjpeg_sys::jpeg_common_struct,
    level: std::os::raw::c_int,
) {
    // SAFETY: libjpeg calls this with the `cinfo` whose `err` points to our error manager,
    // alive for the decoder's lifetime; `msg_parm` holds the message's integer parameters.
    let (code, params) = unsafe {
        let err = &mut *cinfo.err;
        (err.msg_code, *err.msg_parm.i())
    };
    if level < 0 && code == mozjpeg_sys::JWRN_JPEG_EOF as std::os::raw::c_int {
        stop(Stop::Corrupt(Corruption::Truncated));
    }
    if let Err(why) = traced(code, params) {
        stop(why);
    }
}

/// libjpeg's text for the current message of `cinfo`.
fn jpeg_message(cinfo: &mut mozjpeg_sys::jpeg_common_struct) -> String {
    let mut buffer = [0u8; 80];
    // SAFETY: `err` points to our error manager (see `jpeg_emit_message`); `format_message` is
    // libjpeg's own (set by `jpeg_std_error`), which writes at most JMSG_LENGTH_MAX (80) bytes,
    // NUL included, into the buffer it is given. The binding declares the buffer `&[u8; 80]`
    // though libjpeg writes it, so it is passed as a pointer to our mutable array.
    unsafe {
        if let Some(format) = (*cinfo.err).format_message {
            let format: unsafe extern "C-unwind" fn(
                &mut mozjpeg_sys::jpeg_common_struct,
                *mut [u8; 80],
            ) = std::mem::transmute(format);
            format(cinfo, &mut buffer);
        }
    }
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).into_owned()
}

fn jpeg_error_manager() -> mozjpeg_sys::jpeg_error_mgr {
    // SAFETY: `jpeg_error_mgr` is a plain C struct for which all zeroes is a valid value (null
    // function pointers are `None`); `jpeg_std_error` then fills every field.
    let mut err: mozjpeg_sys::jpeg_error_mgr = unsafe { std::mem::zeroed() };
    // SAFETY: `err` is a valid, exclusively borrowed error manager.
    unsafe { mozjpeg_sys::jpeg_std_error(&mut err) };
    err.error_exit = Some(jpeg_error_exit);
    err.emit_message = Some(jpeg_emit_message);
    err
}

/// Decode a JPEG row by row into `rows`, within the scan and work bounds, until `cancel` is
/// set.
pub(super) fn decode(
    source: &ImageSource,
    path: &Path,
    rows: &mut dyn Rows,
    cancel: &Cancel,
) -> Result<(), PixelsError> {
    let file = open(source, path)?;
    let _watch = Watch::start(cancel);
    let cancelled = || PixelsError::Cancelled {
        path: path.to_path_buf(),
    };
    let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(
        || -> Result<(), PixelsError> {
            let d = mozjpeg::Decompress::with_err(jpeg_error_manager())
                .from_reader(file)
                .map_err(|e| corrupt(path, Corruption::Jpeg(e)))?;
            let (w, h) = d.size();
            check_size(path, w as u64, h as u64)?;
            let (color, cmyk) = match d.color_space() {
                mozjpeg::ColorSpace::JCS_GRAYSCALE => ("l8", false),
                mozjpeg::ColorSpace::JCS_CMYK | mozjpeg::ColorSpace::JCS_YCCK => ("cmyk8", true),
                _ => ("rgb8", false),
            };
            let mut image = if cmyk {
                d.to_colorspace(mozjpeg::ColorSpace::JCS_CMYK)
            } else {
                d.rgb()
            }
            .map_err(|e| corrupt(path, Corruption::Jpeg(e)))?;
            rows.begin(w, h, color);
            let mut row = vec![0u8; w * if cmyk { 4 } else { 3 }];
            let mut rgb = Vec::with_capacity(w * 3);
            for _ in 0..h {
                if cancel.is_cancelled() {
                    return Err(cancelled());
                }
                image
                    .read_scanlines_into(&mut row)
                    .map_err(|e| corrupt(path, Corruption::Jpeg(e)))?;
                if cmyk {
                    cmyk_to_rgb(&row, &mut rgb);
                    rows.row(&rgb);
                } else {
                    rows.row(&row);
                }
            }
            image
                .finish()
                .map_err(|e| corrupt(path, Corruption::Jpeg(e)))?;
            Ok(())
        },
    ));
    match decoded {
        Ok(result) => result,
        Err(payload) => Err(match stopped(payload) {
            Stop::Corrupt(problem) => corrupt(path, problem),
            Stop::Cancelled => cancelled(),
            Stop::Scans => PixelsError::TooMuchWork {
                path: path.to_path_buf(),
                work: TooMuchWork::Scans,
            },
            Stop::Work { scan } => PixelsError::TooMuchWork {
                path: path.to_path_buf(),
                work: TooMuchWork::Passes { scan },
            },
        }),
    }
}

/// Why libjpeg stopped; any other panic goes on unwinding.
fn stopped(payload: Box<dyn Any + Send>) -> Stop {
    match payload.downcast::<Stop>() {
        Ok(stop) => *stop,
        // The `mozjpeg` crate's own error manager's messages (not ours, but kept in case).
        Err(payload) => match payload.downcast::<String>() {
            Ok(s) if s.starts_with("libjpeg") => Stop::Corrupt(Corruption::Libjpeg { cause: *s }),
            Ok(s) => std::panic::resume_unwind(s),
            Err(other) => std::panic::resume_unwind(other),
        },
    }
}

/// A row of libjpeg's CMYK samples as RGB, as PIL makes it: PIL reads a CMYK JPEG as
/// `CMYK;I` (each sample inverted: Adobe's polarity, which PIL always assumes), and
/// libImaging's `cmyk2rgb` gives each channel `nk − nk·x/255` with `nk = 255 − k`, the division
/// rounded as its `MULDIV255`.
fn cmyk_to_rgb(row: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend(row.chunks_exact(4).flat_map(|p| {
        let nk = p[3] as i32; // 255 − (255 − k): k itself, inverted back.
        let channel = |sample: u8| {
            let x = 255 - sample as i32;
            let tmp = x * nk + 128;
            (nk - (((tmp >> 8) + tmp) >> 8)).clamp(0, 255) as u8
        };
        [channel(p[0]), channel(p[1]), channel(p[2])]
    }));
}
