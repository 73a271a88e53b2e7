#!/usr/bin/env python3
"""Direct logit attribution and the logit lens from TransformerLens, for tests/suite/lens.rs
and tests/suite/lens_attribution.rs: a second implementation beside make_lens.py's PyTorch
hooks.

    # a venv with tests/reference/requirements.txt, kept apart because TransformerLens pulls
    # its own versions in:
    python3 -m venv .cache/venv-torch && .cache/venv-torch/bin/pip install -r tests/reference/requirements.txt
    .cache/venv-torch/bin/pip install transformer-lens   # 4.x (TransformerBridge)
    .cache/venv-torch/bin/python tests/reference/make_transformer_lens.py

TransformerLens 4 wraps the transformers model (`TransformerBridge.boot_transformers`) and, in
its compatibility mode, processes the weights as HookedTransformer did: the final norm's weight
folded into the unembedding, writing weights and the unembedding centred. Value biases are not
folded into the output bias (`fold_value_biases=False`): folding moves each head's b_V·W_O out of
the head, so GPT-2's per-head attributions would not be each head's own. Centring the
unembedding shifts every token's logit by the same amount, so the attribution is compared as
a logit difference (the model's top token minus its second), which that shift leaves alone.

- attribution: `cache.stack_head_results(layer=-1, pos_slice=-1, apply_ln=True)` (each head's
  output at the last position through the final norm frozen at the real residual) dotted with
  `tokens_to_residual_directions(top) − tokens_to_residual_directions(second)`;
- lens: `cache.accumulated_resid(apply_ln=False)` (the embeddings, then each layer's output),
  each stage through the bridge's own final norm (recomputed per stage, as the logit lens does)
  and unembedding, softmax in float64, the TOP most probable tokens.

Models: the tiny GPT-2 (LayerNorm, biases, tied head) and Llama (grouped-query attention, RoPE)
fixtures. Writes tests/reference/transformer_lens.json.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reflib import FIXTURES, REFERENCE, REPO, setup_determinism, versions, write_json  # noqa: E402

TOP = 10
MODELS = [
    ("tiny-gpt2", FIXTURES / "tiny-gpt2", "the cat sat on the mat"),
    ("tiny-llama", FIXTURES / "tiny-llama", "the cat sat on the mat"),
]


@torch.no_grad()
def reference(name: str, folder: Path, text: str) -> tuple[dict, dict]:
    from transformer_lens.model_bridge import TransformerBridge

    tok = AutoTokenizer.from_pretrained(folder)
    hf = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()
    bridge = TransformerBridge.boot_transformers(str(folder), hf_model=hf, tokenizer=tok)
    bridge.enable_compatibility_mode(disable_warnings=True, fold_value_biases=False)
    ids = tok(text, return_tensors="pt")["input_ids"]
    logits, cache = bridge.run_with_cache(ids)
    last = logits[0, -1]
    order = torch.argsort(last, descending=True)
    target, contrast = int(order[0]), int(order[1])
    heads = cache.stack_head_results(layer=-1, pos_slice=-1, apply_ln=True)[:, 0, :]
    direction = bridge.tokens_to_residual_directions(target) - bridge.tokens_to_residual_directions(contrast)
    per_head_diff = (heads.double() @ direction.double()).reshape(bridge.cfg.n_layers, bridge.cfg.n_heads)

    stages = cache.accumulated_resid(apply_ln=False)[:, 0]  # [stages, positions, d_model]
    top_ids, top_probs = [], []
    for s in range(stages.shape[0]):
        lens_logits = bridge.unembed(bridge.ln_final(stages[s][None]))[0]
        if s == stages.shape[0] - 1:
            assert torch.allclose(lens_logits, logits[0], atol=1e-5), "last stage ≠ the model's logits"
        probs = torch.softmax(lens_logits.double(), dim=-1)
        p, i = probs.topk(TOP, dim=-1)
        top_ids.append(i.tolist())
        top_probs.append(p.tolist())
    lens = dict(
        name=name,
        folder=str(folder.relative_to(REPO)),
        text=text,
        input_ids=ids[0].tolist(),
        stages=stages.shape[0],
        top_ids=top_ids,
        top_probs=top_probs,
    )
    attribution = dict(
        name=name,
        text=text,
        input_ids=ids[0].tolist(),
        target=target,
        contrast=contrast,
        per_head_diff=per_head_diff.tolist(),
    )
    return lens, attribution


def main() -> None:
    from importlib.metadata import version

    setup_determinism(20261205)
    made = [reference(*m) for m in MODELS]
    write_json(
        REFERENCE / "transformer_lens.json",
        dict(
            versions={**versions(), "transformer_lens": version("transformer-lens")},
            made_by="tests/reference/make_transformer_lens.py",
            method="TransformerLens TransformerBridge in compatibility mode (fold_ln, centred writing "
            "weights and unembedding; value biases not folded); attribution: stack_head_results at the "
            "last position with the final norm frozen, onto the top token's direction minus the second's; "
            "lens: accumulated_resid through ln_final recomputed per stage and the unembedding, softmax "
            "in float64",
            top=TOP,
            cases=[m[0] for m in made],
            attributions=[m[1] for m in made],
        ),
    )
    for lens, a in made:
        print(lens["name"], "stages", lens["stages"], "target", a["target"], "contrast", a["contrast"])


if __name__ == "__main__":
    main()
