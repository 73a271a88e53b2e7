"""Type stubs of attnviz's Rust extension module (python/src/lib.rs).

The public API is ``attnviz`` itself (annotated in ``__init__.py``); this module is what it
calls. Checked against the built module by ``python -m mypy.stubtest attnviz._native``
(python/tests/test_typing.py).
"""

from os import PathLike
from typing import Any, Optional, Sequence, Tuple, Union, final

import numpy as np
import numpy.typing as npt

_Path = Union[str, PathLike[str]]
_AltiArrays = Tuple[list[float], list[float], list[int], int]

# A pyo3 class: it cannot be subclassed.
@final
class Attention:
    """Captured attention, with everything that labels it; the views are its methods."""

    @property
    def shape(self) -> Tuple[int, int, int, int]: ...
    def weights(self) -> npt.NDArray[np.float32]: ...
    @property
    def kind(self) -> str: ...
    @property
    def mask(self) -> str: ...
    @property
    def windows(self) -> list[Optional[int]]: ...
    @property
    def level(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def pair(self) -> Optional[str]: ...
    @property
    def tokens(self) -> list[str]: ...
    @property
    def image_json(self) -> Optional[str]: ...
    @property
    def pictures_json(self) -> str: ...
    @property
    def key_tokens(self) -> list[str]: ...
    @property
    def display_tokens(self) -> list[str]: ...
    @property
    def key_display_tokens(self) -> list[str]: ...
    @property
    def roles(self) -> list[str]: ...
    @property
    def key_roles(self) -> list[str]: ...
    @property
    def generated(self) -> list[bool]: ...
    @property
    def sentence_b_start(self) -> Optional[int]: ...
    @property
    def router_json(self) -> Optional[str]: ...
    @property
    def sink_shares(self) -> Optional[list[float]]: ...
    @property
    def model_id(self) -> str: ...
    @property
    def model_name(self) -> str: ...
    @property
    def family(self) -> str: ...
    def stats(self, words: bool = False, no_special: bool = False) -> str: ...
    def html(
        self,
        view: str = "head",
        layer: Optional[int] = None,
        head: Optional[int] = None,
        words: bool = False,
        no_special: bool = False,
        precision: str = "auto",
        title: Optional[str] = None,
        settings: Sequence[Tuple[str, str]] = ...,
        raw_tokens: bool = False,
        query: Optional[str] = None,
    ) -> str: ...
    def image(
        self,
        path: _Path,
        format: str = "png",
        figure: str = "head",
        layer: Optional[int] = None,
        head: Optional[int] = None,
        words: bool = False,
        no_special: bool = False,
        colormap: str = "viridis",
        theme: str = "light",
        scale: str = "auto",
        scale_factor: float = 1.0,
        raw_tokens: bool = False,
        expand_pictures: bool = False,
        query: Optional[str] = None,
    ) -> None: ...
    def json(
        self,
        full_precision: bool = False,
        words: bool = False,
        no_special: bool = False,
        include: Sequence[str] = ...,
    ) -> str: ...
    def terminal(
        self,
        layer: Optional[int] = None,
        head: Optional[int] = None,
        words: bool = False,
        no_special: bool = False,
        top: int = 3,
        width: int = 100,
        color: bool = False,
        raw_tokens: bool = False,
        expand_pictures: bool = False,
    ) -> str: ...

def run(
    text: str,
    model: str,
    revision: str = "main",
    pair: Optional[str] = None,
    target: Optional[str] = None,
    generate: Optional[int] = None,
    chat: bool = False,
    layers: Optional[Sequence[int]] = None,
    max_memory: Optional[int] = None,
    truncate: bool = False,
    neuron: bool = False,
    weighting: str = "raw",
    images: Optional[Sequence[Any]] = None,
    lens: Optional[int] = None,
    alti: bool = False,
    value_zeroing: bool = False,
    attribution: bool = False,
    ablate: Optional[str] = None,
    target_token: Optional[str] = None,
    contrast: Optional[str] = None,
    max_analysis_time: Optional[float] = None,
    threads: Optional[int] = None,
    full_paths: bool = False,
    tower: bool = False,
    mmproj: Optional[str] = None,
    pan_and_scan: bool = False,
    audio: Optional[str] = None,
    language: Optional[str] = None,
    task: str = "transcribe",
    timestamps: bool = False,
    window: Optional[int] = None,
    summarise: Optional[Tuple[int, list[int]]] = None,
) -> Tuple[
    list[Attention],
    Optional[str],
    Optional[str],
    Optional[int],
    Any,
    Optional[str],
    Optional[_AltiArrays],
    Optional[_AltiArrays],
    Tuple[Optional[str], Optional[str]],
    Optional[str],
    Optional[dict[str, Any]],
]: ...
def induction(model: str, revision: str = "main") -> Optional[str]: ...
def from_arrays(
    weights: npt.NDArray[np.float32],
    tokens: Sequence[str],
    kind: str = "self",
    key_tokens: Optional[Sequence[str]] = None,
    sentence_b_start: Optional[int] = None,
    roles: Optional[Sequence[str]] = None,
    key_roles: Optional[Sequence[str]] = None,
    source: str = "arrays",
    text: Optional[str] = None,
    pair: Optional[str] = None,
    name: str = "attention",
    prettify: bool = False,
) -> Tuple[Attention, Optional[str]]: ...
def check_image_size(width: int, height: int) -> None: ...
def read(
    path: _Path,
    tokens: Optional[Sequence[str]] = None,
    max_memory: Optional[int] = None,
    full_paths: bool = False,
) -> Tuple[list[Attention], list[str], str, str]: ...
def html_kinds(
    kinds: Sequence[Attention],
    open: int = 0,
    target: Optional[str] = None,
    view: str = "head",
    layer: Optional[int] = None,
    head: Optional[int] = None,
    words: bool = False,
    no_special: bool = False,
    precision: str = "auto",
    title: Optional[str] = None,
    settings: Sequence[Tuple[str, str]] = ...,
    raw_tokens: bool = False,
) -> str: ...
def merge(
    partials: Sequence[Union[str, PathLike[str], bytes]],
    out: Optional[_Path] = None,
) -> Tuple[str, list[str]]: ...
def clear_cache() -> None: ...
def check_size(name: str, shape: Sequence[int]) -> None: ...
def version() -> str: ...
