#!/usr/bin/env python3
"""A tiny Gemma 3 *multimodal* checkpoint (`Gemma3ForConditionalGeneration`, `model_type`
`gemma3`: config.json nests the text model's config under `text_config`, and the weights carry the
text tower under a prefix beside a SigLIP vision tower and the projector), whose text tower is
exactly tests/fixtures/tiny-gemma3's.

    python3 tests/reference/make_gemma3_multimodal.py

It writes tests/fixtures/tiny-gemma3-mm/ (config.json and model.safetensors as transformers saves
them, the tokenizer files of tiny-gemma3) and tests/reference/tiny-gemma3-mm.json. Run
make_families.py gemma3 first. The references are tiny-gemma3's: the script loads the saved
checkpoint back with transformers (eager) and checks, for every case and generation prompt of
tests/reference/tiny-gemma3.json, that the multimodal class's text-only forward pass gives the same
attention at every layer and head, the same last hidden state and the same logits as
Gemma3ForCausalLM on tiny-gemma3 (max |Δ| recorded in the JSON; the script fails above 1e-6), so
attnviz's run of tiny-gemma3-mm is compared with tiny-gemma3's references by the Rust suite.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    Gemma3Config,
    Gemma3ForConditionalGeneration,
    SiglipVisionConfig,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reflib import FIXTURES, REFERENCE, max_abs, rel, setup_determinism, versions, write_json  # noqa: E402

SOURCE = FIXTURES / "tiny-gemma3"
TARGET = FIXTURES / "tiny-gemma3-mm"
TOKENIZER_FILES = [
    "tokenizer.json",
    "tokenizer.model",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "generation_config.json",
]
TOL = 1e-6


@torch.no_grad()
def main() -> None:
    setup_determinism(20261202)
    text = AutoModelForCausalLM.from_pretrained(SOURCE, attn_implementation="eager", dtype=torch.float32).eval()
    vision = SiglipVisionConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=28,
        patch_size=14,
    )
    text_config = text.config.to_dict()
    text_config.pop("_name_or_path", None)  # the path of this machine's copy
    config = Gemma3Config(
        text_config=text_config,
        vision_config=vision.to_dict(),
        mm_tokens_per_image=4,
    )
    config._attn_implementation = "eager"
    mm = Gemma3ForConditionalGeneration(config).eval()
    mm.model.language_model.load_state_dict(text.model.state_dict(), strict=True)
    mm.lm_head.weight = mm.model.language_model.embed_tokens.weight
    mm.config.architectures = ["Gemma3ForConditionalGeneration"]
    if TARGET.exists():
        shutil.rmtree(TARGET)
    mm.save_pretrained(TARGET)
    for name in TOKENIZER_FILES:
        if (SOURCE / name).exists():
            shutil.copy(SOURCE / name, TARGET / name)

    loaded, info = AutoModelForImageTextToText.from_pretrained(
        TARGET, attn_implementation="eager", dtype=torch.float32, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["mismatched_keys"], info
    loaded.eval()
    reference = json.loads((REFERENCE / "tiny-gemma3.json").read_text())
    sequences = [(c["name"], c["input_ids"]) for c in reference["cases"]]
    sequences += [(g["name"], g["sequence"]) for g in reference["generations"]]
    checks = []
    for name, ids in sequences:
        kwargs = dict(
            input_ids=torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            output_attentions=True,
            output_hidden_states=True,
            return_dict=True,
        )
        a, b = text(**kwargs), loaded(**kwargs)
        diff = dict(
            case=name,
            tokens=len(ids),
            attention_max_abs=max(max_abs(x, y) for x, y in zip(a.attentions, b.attentions, strict=True)),
            last_hidden_max_abs=max_abs(a.hidden_states[-1], b.hidden_states[-1]),
            logits_max_abs=max_abs(a.logits, b.logits),
        )
        assert max(v for k, v in diff.items() if k.endswith("max_abs")) <= TOL, diff
        checks.append(diff)
    keys = sorted(json.loads((TARGET / "model.safetensors.index.json").read_text())["weight_map"]) if (
        TARGET / "model.safetensors.index.json"
    ).exists() else None
    if keys is None:
        from safetensors import safe_open

        with safe_open(TARGET / "model.safetensors", "pt") as f:
            keys = sorted(f.keys())
    write_json(
        REFERENCE / "tiny-gemma3-mm.json",
        dict(
            generator="tests/reference/make_gemma3_multimodal.py",
            fixture=rel(TARGET),
            model_type=loaded.config.model_type,
            architectures=loaded.config.architectures,
            text_tower_of=rel(SOURCE),
            references="tests/reference/tiny-gemma3.json",
            keys=keys,
            same_as_text_model=checks,
            versions=versions(),
        ),
    )
    print(f"tiny-gemma3-mm: {len(checks)} sequences, text tower identical within {TOL}", file=sys.stderr)


if __name__ == "__main__":
    main()
