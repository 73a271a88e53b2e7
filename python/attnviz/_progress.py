"""Progress of long library operations (a generation), reported through tqdm when it is
installed and silently otherwise. The Rust side calls ``start``, ``advance`` and ``finish``."""

from __future__ import annotations

from typing import Any, Optional

_bar: Any = None


def start(what: str, total: Optional[int]) -> None:
    global _bar
    finish()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return
    _bar = tqdm(total=total, desc=what, unit="token", leave=False)


def advance(units: int) -> None:
    if _bar is not None:
        _bar.update(units)


def finish() -> None:
    global _bar
    if _bar is not None:
        _bar.close()
        _bar = None
