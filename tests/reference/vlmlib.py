"""What the vision-language reference scripts (make_llava.py, make_gemma3_vlm.py,
make_paligemma.py) share: reading a saved folder back, greedy generation settings, the summary of
a vision tower's config, the hooks that catch what a model's parts receive and return, and one
number for how peaked attention is."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForImageTextToText, GenerationConfig


def weight_keys(folder: Path) -> list[str]:
    """The tensor names of folder/model.safetensors, sorted."""
    from safetensors import safe_open

    with safe_open(folder / "model.safetensors", "np") as f:
        return sorted(f.keys())


def load(folder: Path, cls, dtype=torch.float32):
    """The saved folder through AutoModelForImageTextToText (eager attention), checked to load
    with no missing, unexpected or mismatched key, as `cls`."""
    model, info = AutoModelForImageTextToText.from_pretrained(
        folder, attn_implementation="eager", dtype=dtype, output_loading_info=True
    )
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    assert type(model) is cls, type(model)
    return model.eval()


def generation_config(model, use_cache: bool, max_new_tokens: int) -> GenerationConfig:
    """Greedy decoding of `max_new_tokens`, stopping at the text model's EOS."""
    text = model.config.text_config
    return GenerationConfig(
        use_cache=use_cache,
        max_new_tokens=max_new_tokens,
        do_sample=False,
        num_beams=1,
        eos_token_id=text.eos_token_id,
        pad_token_id=text.eos_token_id,
        bos_token_id=text.bos_token_id,
    )


@torch.no_grad()
def same_as_built(built, loaded, **inputs) -> None:
    """The saved checkpoint, loaded back, computes exactly what the model built in memory
    computes on `inputs`: the same logits and the same attention at every layer."""
    a = built(**inputs, output_attentions=True)
    b = loaded(**inputs, output_attentions=True)
    assert torch.equal(a.logits, b.logits), "the saved checkpoint computes something else"
    for x, y in zip(a.attentions, b.attentions, strict=True):
        assert torch.equal(x, y), "the saved checkpoint's attention differs"


def vision_summary(vision, *extra: str) -> dict:
    """The vision tower's config fields the references record (and `extra` ones)."""
    fields = (
        "model_type",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "image_size",
        "patch_size",
        "hidden_act",
        "layer_norm_eps",
    ) + extra
    return {k: getattr(vision, k) for k in fields}


def spread(attn: torch.Tensor) -> float:
    """Mean over rows of the largest weight per row (causal rows included)."""
    return round(float(attn.max(-1).values.mean()), 3)


class Hooks:
    """Catches, for each forward pass, what `module`s return (`store`) and the language model's
    keyword inputs (`inputs_embeds`, and `position_ids` where asked)."""

    def __init__(self, language_model, positions: bool = False):
        self.seen: dict[str, list] = {}
        self.positions = positions
        language_model.register_forward_hook(self.store("lm_out"))
        language_model.register_forward_pre_hook(self._store_inputs, with_kwargs=True)

    def store(self, what):
        def hook(_m, _i, output):
            out = output[0] if isinstance(output, tuple) else output
            out = out.last_hidden_state if hasattr(out, "last_hidden_state") else out
            self.seen.setdefault(what, []).append(out.detach().clone())

        return hook

    def _store_inputs(self, _m, _args, kwargs):
        self.seen.setdefault("inputs_embeds", []).append(kwargs["inputs_embeds"].detach().clone())
        if self.positions:
            self.seen.setdefault("position_ids", []).append(kwargs["position_ids"].detach().clone())
