//! The test scripts themselves (issue 40, requirement 1): when a step of `scripts/test.sh` or
//! `python/tests/run.sh` fails, the last line says which step failed and which did not run
//! (`scripts/steps.sh`), and every step the scripts announce is one they declared.

use std::process::Command;

use crate::support::cli::repo;

#[test]
fn a_failed_step_is_named_with_the_steps_that_did_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("three-steps.sh");
    std::fs::write(
        &script,
        format!(
            "set -euo pipefail\nsource '{}'\nsteps \"fetch\" \"build, then test\" \"report\"\n\
             at_exit 'echo cleaned >&2'\nstep \"fetch\"\ntrue\nstep \"build, then test\"\n\
             (exit 7)\nstep \"report\"\necho reported\n",
            repo().join("scripts/steps.sh").display()
        ),
    )
    .unwrap();
    let out = Command::new("bash").arg(&script).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "the step's own status: {err}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("reported"),
        "{err}"
    );
    let lines: Vec<&str> = err.lines().collect();
    assert!(lines.contains(&"cleaned"), "{err}");
    assert!(
        lines.last().unwrap().ends_with(
            "step 2 of 3, \"build, then test\", failed (exit status 7); not run: \"report\""
        ),
        "{err}"
    );
}

#[test]
fn every_step_the_test_scripts_announce_is_one_they_declared() {
    for file in ["scripts/test.sh", "python/tests/run.sh"] {
        let text = std::fs::read_to_string(repo().join(file)).unwrap();
        assert!(text.contains("source scripts/steps.sh"), "{file}");
        let announced: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("step \""))
            .filter_map(|l| l.strip_suffix('"'))
            .collect();
        assert!(announced.len() >= 4, "{file}: {announced:?}");
        for name in announced {
            // Once where `steps` declares it, once where `step` announces it.
            let quoted = format!("\"{name}\"");
            assert!(
                text.matches(&quoted).count() >= 2,
                "{file}: step {quoted} is announced but not declared"
            );
        }
    }
}
