//! `run(image=array)`: a numpy array handed to the library as pixels in memory
//! ([`attnviz::pixels::PixelRows`]), checked before any work and read a row at a time.
//!
//! The checks cost nothing that grows with the array before its size is known to be within
//! the library's caps: its shape and dtype first (a broadcast view of 10¹⁰ pixels is refused
//! as it stands, never copied), then one pass over the values of a float array (finite, within
//! [0, 1]) that allocates nothing. The rows are then converted to 8-bit RGB only as the model's
//! resize takes them (float `x` becomes `round(255·x)`, ties to even, computed in the array's
//! own precision, as `np.round(a * 255).astype(np.uint8)` computes it), so no copy of the
//! whole picture is ever made: a view with strides (a slice, a transposed or broadcast array)
//! is read where it lies.

use half::f16;
use numpy::ndarray::{ArrayViewD, Axis};
use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

use attnviz::pixels::{check_array_size, to_rgb, PixelRows, RowError};

use crate::value_error;

/// The element types read without a conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    U8,
    F16,
    F32,
    F64,
}

/// A checked numpy image array.
pub struct ArrayRows {
    array: Py<PyAny>,
    kind: Kind,
    width: usize,
    height: usize,
    channels: usize,
}

/// Check `array` (its shape, dtype and, for floats, every value) and wrap it; nothing is
/// copied.
pub fn image_array(array: &Bound<'_, PyAny>) -> PyResult<ArrayRows> {
    let untyped = array.cast::<PyUntypedArray>().map_err(|_| {
        value_error(format!(
            "image must be a path, a PIL image or a numpy array, not {}",
            array
                .get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string())
        ))
    })?;
    let shape = untyped.shape().to_vec();
    let (height, width, channels) = match shape[..] {
        [h, w] => (h, w, 1),
        [h, w, c] if (1..=4).contains(&c) => (h, w, c),
        _ => {
            return Err(value_error(format!(
                "image array must be [height, width] gray, [height, width, 2] gray and alpha, \
                 [height, width, 3] RGB or [height, width, 4] RGBA, not shape {shape:?}"
            )))
        }
    };
    check_array_size(width, height).map_err(value_error)?;
    let dtype = untyped.dtype();
    let kind = if array.cast::<PyArrayDyn<u8>>().is_ok() {
        Kind::U8
    } else if array.cast::<PyArrayDyn<f32>>().is_ok() {
        Kind::F32
    } else if array.cast::<PyArrayDyn<f64>>().is_ok() {
        Kind::F64
    } else if array.cast::<PyArrayDyn<f16>>().is_ok() {
        Kind::F16
    } else {
        return Err(value_error(format!(
            "image array must be uint8, or float (float16, float32 or float64) in [0, 1], not \
             {dtype}"
        )));
    };
    let rows = ArrayRows {
        array: array.clone().unbind(),
        kind,
        width,
        height,
        channels,
    };
    let outside = match kind {
        Kind::U8 => None,
        Kind::F16 => first_outside(array, |v: f16| v.to_f64()),
        Kind::F32 => first_outside(array, |v: f32| v as f64),
        Kind::F64 => first_outside(array, |v: f64| v),
    };
    if let Some(v) = outside {
        return Err(value_error(format!(
            "a float image array must hold values in [0, 1] (or give uint8 0–255); it holds {v}"
        )));
    }
    Ok(rows)
}

/// The first value of a float array that is not finite or not within [0, 1].
fn first_outside<T: numpy::Element + Copy>(
    array: &Bound<'_, PyAny>,
    wide: impl Fn(T) -> f64,
) -> Option<f64> {
    let array = array.cast::<PyArrayDyn<T>>().ok()?;
    let readonly = array.readonly();
    let view = readonly.as_array();
    view.iter()
        .map(|&v| wide(v))
        .find(|v| !(0.0..=1.0).contains(v))
}

/// Row `y` of `view` (`[height, width]` or `[height, width, channels]`) as 8-bit samples.
fn samples<T: Copy>(view: ArrayViewD<'_, T>, y: usize, byte: impl Fn(T) -> u8, out: &mut Vec<u8>) {
    out.clear();
    out.extend(view.index_axis(Axis(0), y).iter().map(|&v| byte(v)));
}

impl PixelRows for ArrayRows {
    fn size(&self) -> (usize, usize) {
        (self.width, self.height)
    }

    fn color(&self) -> String {
        let base = ["l", "la", "rgb", "rgba"][self.channels - 1];
        match self.kind {
            Kind::U8 => format!("{base}8"),
            Kind::F16 => format!("{base}-float16"),
            Kind::F32 => format!("{base}-float32"),
            Kind::F64 => format!("{base}-float64"),
        }
    }

    fn row(&self, y: usize, out: &mut Vec<u8>) -> Result<(), RowError> {
        self.row_in_words(y, out).map_err(RowError::from)
    }
}

impl ArrayRows {
    /// [`PixelRows::row`], its error in words.
    fn row_in_words(&self, y: usize, out: &mut Vec<u8>) -> Result<(), String> {
        Python::attach(|py| {
            let array = self.array.bind(py);
            let mut row = Vec::with_capacity(self.width * self.channels);
            fn view<'py, T: numpy::Element>(
                array: &Bound<'py, PyAny>,
            ) -> Result<numpy::PyReadonlyArrayDyn<'py, T>, String> {
                let typed = array
                    .cast::<PyArrayDyn<T>>()
                    .map_err(|_| "the image array changed while it was read".to_string())?;
                typed
                    .try_readonly()
                    .map_err(|e| format!("the image array cannot be read: {e}"))
            }
            match self.kind {
                Kind::U8 => samples(view::<u8>(array)?.as_array(), y, |v| v, &mut row),
                Kind::F16 => samples(
                    view::<f16>(array)?.as_array(),
                    y,
                    // numpy multiplies halves in single precision and rounds to half.
                    |v| f16::from_f32(v.to_f32() * 255.0).to_f32().round_ties_even() as u8,
                    &mut row,
                ),
                Kind::F32 => samples(
                    view::<f32>(array)?.as_array(),
                    y,
                    |v| (v * 255.0).round_ties_even() as u8,
                    &mut row,
                ),
                Kind::F64 => samples(
                    view::<f64>(array)?.as_array(),
                    y,
                    |v| (v * 255.0).round_ties_even() as u8,
                    &mut row,
                ),
            }
            if row.len() != self.width * self.channels {
                return Err("the image array changed shape while it was read".into());
            }
            to_rgb(&row, self.channels, out);
            Ok(())
        })
    }
}
