//! Head attribution and ablation for the package: the `ablate=` mode, and the run's
//! `head_attribution` / `head_ablation` sections as the JSON the package reads
//! (`docs/json.md`).

use pyo3::PyResult;

use attnviz::request::{AblationMode, Run};

/// `ablate=`'s mode: `"zero"` or `"mean"`.
pub fn ablation_mode(name: &str) -> PyResult<AblationMode> {
    match name {
        "zero" => Ok(AblationMode::Zero),
        "mean" => Ok(AblationMode::Mean),
        other => Err(crate::value_error(format!(
            "ablate `{other}` is not one of: zero, mean (or True for zero)"
        ))),
    }
}

/// The run's attribution and ablation, each as its JSON section (a string), when asked for.
pub fn sections(run: &Run) -> (Option<String>, Option<String>) {
    (
        run.measured
            .head_attribution
            .as_ref()
            .map(|a| serde_json::to_string(a).expect("the attribution serialises to JSON")),
        run.measured
            .head_ablation
            .as_ref()
            .map(|a| serde_json::to_string(a).expect("the ablation serialises to JSON")),
    )
}
