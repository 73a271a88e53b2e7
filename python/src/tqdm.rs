//! Python's progress reports: a [`Progress`] that shows library stages (a model download) with
//! tqdm when it is installed, and nothing when it is not. The library only reports.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use attnviz::progress::{Progress, Stage};

/// One tqdm bar at a time; `None` while no stage runs or when tqdm is missing.
#[derive(Default)]
pub struct Tqdm {
    bar: Mutex<Option<Py<PyAny>>>,
}

impl Tqdm {
    fn open(py: Python<'_>, stage: &Stage, total: Option<u64>) -> PyResult<Py<PyAny>> {
        let tqdm = py.import("tqdm.auto")?.getattr("tqdm")?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("total", total)?;
        match stage {
            Stage::Download { file } => {
                kwargs.set_item("desc", format!("downloading {file}"))?;
                kwargs.set_item("unit", "B")?;
                kwargs.set_item("unit_scale", true)?;
                kwargs.set_item("unit_divisor", 1024)?;
            }
            Stage::Corpus => kwargs.set_item("unit", "line")?,
            Stage::Generate => {
                kwargs.set_item("desc", "generating")?;
                kwargs.set_item("unit", "token")?;
                kwargs.set_item("leave", false)?;
            }
        }
        Ok(tqdm.call((), Some(&kwargs))?.unbind())
    }

    fn with_bar(&self, f: impl FnOnce(Python<'_>, &Bound<'_, PyAny>) -> PyResult<()>) {
        let Ok(slot) = self.bar.lock() else { return };
        if let Some(bar) = slot.as_ref() {
            Python::attach(|py| {
                // A failing bar must not fail the run: its error is dropped.
                let _ = f(py, bar.bind(py));
            });
        }
    }
}

impl Progress for Tqdm {
    fn start(&self, stage: &Stage, total: Option<u64>) {
        let bar = Python::attach(|py| Self::open(py, stage, total).ok());
        if let Ok(mut slot) = self.bar.lock() {
            *slot = bar;
        }
    }

    fn advance(&self, units: u64) {
        self.with_bar(|_, bar| bar.call_method1("update", (units,)).map(drop));
    }

    fn message(&self, line: &str) {
        self.with_bar(|_, bar| bar.call_method1("write", (line,)).map(drop));
    }

    fn finish(&self) {
        self.with_bar(|_, bar| bar.call_method0("close").map(drop));
        if let Ok(mut slot) = self.bar.lock() {
            *slot = None;
        }
    }
}
