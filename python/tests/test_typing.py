"""The package's types: ``py.typed`` ships in the wheel, the extension's stubs match the built
module (mypy's stubtest), and a program using the public API checks under ``mypy --strict``."""

import importlib.resources
import subprocess
import sys
import textwrap

import mypy  # noqa: F401  (python/tests/run.sh installs it)


def test_the_wheel_marks_itself_typed():
    root = importlib.resources.files("attnviz")
    assert (root / "py.typed").is_file()
    assert (root / "_native.pyi").is_file()


def test_the_stubs_match_the_extension_module():
    out = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "attnviz._native", "--ignore-missing-stub"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_program_using_the_api_checks_strictly(tmp_path):
    program = tmp_path / "uses_attnviz.py"
    program.write_text(
        textwrap.dedent(
            """
            import numpy as np
            import attnviz

            def first_token(path: str) -> str:
                report = attnviz.render(path)
                return str(report.attention.shape)

            def from_numpy() -> None:
                w = np.full((1, 1, 2, 2), 0.5, dtype=np.float32)
                attnviz.from_arrays(w, ["a", "b"])
            """
        )
    )
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", str(program)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
