//! A summarised run's summaries (`run(summarise=True)`) as numpy arrays: one dict the package
//! hands to Python as `Report.summary` (`python/attnviz/__init__.py` documents its keys). The
//! arrays are the library's own vectors, moved into numpy without a copy where their type
//! allows; each holds every summarised layer, stacked.

use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use attnviz::attention::summary::{AttentionSummary, LayerSummary};

/// `s` as a dict of ints, lists and arrays (see the module's documentation).
pub fn summary_dict(py: Python<'_>, s: &AttentionSummary) -> PyResult<Py<PyAny>> {
    let d = PyDict::new(py);
    let (l, h, q, k) = (s.layers.len(), s.heads, s.queries, s.keys);
    let (pq, pk) = (s.pooled_queries(), s.pooled_keys());
    d.set_item("heads", h)?;
    d.set_item("queries", q)?;
    d.set_item("keys", k)?;
    d.set_item("top_k", s.top_k)?;
    d.set_item("pool", s.pool)?;
    d.set_item("distance_bins", s.distance_bins.clone())?;
    d.set_item("rows", s.rows.clone())?;
    d.set_item(
        "layers",
        s.layers.iter().map(|x| x.layer).collect::<Vec<_>>(),
    )?;
    let floats = |get: fn(&LayerSummary) -> &[f32], shape: Vec<usize>| -> PyResult<Py<PyAny>> {
        let v: Vec<f32> = s
            .layers
            .iter()
            .flat_map(|x| get(x).iter().copied())
            .collect();
        Ok(PyArray1::from_vec(py, v)
            .reshape(shape)?
            .into_any()
            .unbind())
    };
    // Padding (a query that sees fewer keys than top_k) is key -1, weight 0.
    let keys: Vec<i64> = s
        .layers
        .iter()
        .flat_map(|x| x.top.iter())
        .map(|t| if t.key == u32::MAX { -1 } else { t.key as i64 })
        .collect();
    let weights: Vec<f32> = s
        .layers
        .iter()
        .flat_map(|x| x.top.iter())
        .map(|t| t.weight)
        .collect();
    let top_shape = vec![l, h, q, s.top_k];
    d.set_item(
        "top_keys",
        PyArray1::from_vec(py, keys).reshape(top_shape.clone())?,
    )?;
    d.set_item(
        "top_weights",
        PyArray1::from_vec(py, weights).reshape(top_shape)?,
    )?;
    d.set_item("sink", floats(|x| &x.sink, vec![l, h, q])?)?;
    d.set_item("entropy", floats(|x| &x.entropy, vec![l, h, q])?)?;
    d.set_item(
        "distance",
        floats(|x| &x.distance, vec![l, h, s.distance_bins.len()])?,
    )?;
    d.set_item("pooled", floats(|x| &x.pooled, vec![l, h, pq, pk])?)?;
    d.set_item(
        "full_rows",
        floats(|x| &x.rows, vec![l, h, s.rows.len(), k])?,
    )?;
    if s.learned_sink {
        d.set_item("learned_sink", floats(|x| &x.learned_sink, vec![l, h, q])?)?;
    } else {
        d.set_item("learned_sink", py.None())?;
    }
    Ok(d.into_any().unbind())
}
