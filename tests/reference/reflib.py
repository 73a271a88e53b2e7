"""Shared pieces of the reference scripts (make_families.py, make_real.py).

Nothing here decides a reference value: it runs Hugging Face transformers, catches what its eager
attention saw, and writes manifests and tensors.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import safetensors
import safetensors.numpy
import tokenizers
import torch
import transformers

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
REFERENCE = REPO / "tests" / "reference"


def versions() -> dict:
    """The versions that wrote a file, recorded in every manifest."""
    out = dict(
        python=sys.version.split()[0],
        torch=torch.__version__,
        transformers=transformers.__version__,
        tokenizers=tokenizers.__version__,
        safetensors=safetensors.__version__,
        numpy=np.__version__,
    )
    from importlib.metadata import PackageNotFoundError, version

    for name in ("sentencepiece", "gguf", "protobuf"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def setup_determinism(seed: int) -> None:
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)


def write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0


def rel(path: Path) -> str:
    return str(path.resolve().relative_to(REPO))


# --------------------------------------------------------------------------------------------
# Catching what eager attention saw
# --------------------------------------------------------------------------------------------

# The attention modules' names tell their kind. Encoder-only and decoder-only models have one kind.
CROSS = re.compile(r"(encoder_attn|EncDecAttention|crossattention)")


class AttentionCatcher:
    """Wraps each modeling module's `eager_attention_forward` (transformers 5 calls it through
    `ALL_ATTENTION_FUNCTIONS.get_interface(..., eager_attention_forward)`, a global looked up at
    call time) to record, per call: the module's name, the query and key it received (after any
    rotary embedding, before any scaling, key before GQA's repeat_kv), the scaling it applied and
    the probabilities it returned."""

    def __init__(self, model: torch.nn.Module):
        self.names = {id(m): n for n, m in model.named_modules()}
        self.calls: list[dict] = []
        self._patched: list[tuple] = []
        modules = {type(m).__module__ for m in model.modules()}
        for name in sorted(modules):
            module = sys.modules[name]
            original = getattr(module, "eager_attention_forward", None)
            if original is not None:
                self._patched.append((module, original))

    @contextlib.contextmanager
    def catching(self):
        self.calls = []
        for module, original in self._patched:
            module.eager_attention_forward = self._wrap(original)
        try:
            yield self
        finally:
            for module, original in self._patched:
                module.eager_attention_forward = original

    def _wrap(self, original):
        signature = inspect.signature(original)

        def wrapper(module, query, key, value, attention_mask, *args, **kwargs):
            out = original(module, query, key, value, attention_mask, *args, **kwargs)
            # Gemma 2's takes `dropout` before `scaling`: read it by name.
            bound = signature.bind(module, query, key, value, attention_mask, *args, **kwargs)
            scaling = bound.arguments.get("scaling")
            self.calls.append(
                dict(
                    name=self.names.get(id(module), "?"),
                    query=query.detach().clone(),
                    key=key.detach().clone(),
                    scaling=scaling,
                    weights=out[1].detach().clone() if out[1] is not None else None,
                )
            )
            return out

        return wrapper

    def by_kind(self, encoder_decoder: bool) -> dict[str, list[dict]]:
        """Calls grouped as 'self' (encoder-only/decoder-only), or 'encoder', 'decoder', 'cross',
        each in call order (= layer order; ALBERT calls its shared layer once per layer)."""
        out: dict[str, list[dict]] = defaultdict(list)
        for call in self.calls:
            if not encoder_decoder:
                kind = "self"
            elif CROSS.search(call["name"]):
                kind = "cross"
            elif call["name"].split(".")[0:2] in (["model", "decoder"],) or call["name"].startswith(
                "decoder."
            ):
                kind = "decoder"
            else:
                kind = "encoder"
            out[kind].append(call)
        return out


def stack_heads(calls: list[dict], what: str, batch: int = 0) -> torch.Tensor:
    """[layers, heads, n, d] from the caught calls of one kind."""
    return torch.stack([c[what][batch] for c in calls])


# --------------------------------------------------------------------------------------------
# Tensors file + manifest
# --------------------------------------------------------------------------------------------


class TensorStore:
    """Collects float32/int tensors for one `.safetensors` file and describes each in the manifest."""

    def __init__(self):
        self.tensors: dict[str, np.ndarray] = {}

    def put(self, key: str, value, dtype=np.float32) -> dict:
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().numpy()
        array = np.ascontiguousarray(np.asarray(value).astype(dtype))
        assert key not in self.tensors, f"duplicate tensor {key}"
        self.tensors[key] = array
        return dict(tensor=key, shape=list(array.shape), dtype=str(array.dtype))

    def save(self, path: Path) -> int:
        safetensors.numpy.save_file(self.tensors, path)
        return path.stat().st_size
