#!/usr/bin/env python3
"""Reference logit lens for encoders with a masked-LM head, from transformers, for the encoder
lens tests (issue 24).

    .cache/venv-ref/bin/python tests/reference/make_mlm_lens.py

Independent of attnviz: every stage of the residual stream comes from transformers'
`output_hidden_states` (the embeddings, then each layer's output), and each is put through the
model's own masked-LM head module (transform dense + activation + LayerNorm + decoder and bias)
with a softmax in float64. The last stage equals the model's logits (checked here).

Models: tiny random *ForMaskedLM checkpoints (BERT and the ELECTRA generator are made here and
saved under tests/fixtures; ALBERT, RoBERTa and DistilBERT use the existing -mlm fixtures) and
real rxnmapper ALBERT (AlbertForMaskedLM, which ships `predictions.*`) from .cache/models.
Writes tests/reference/mlm_lens.json: per stage and position the TOP most probable token ids and
their probabilities.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import (
    AutoModelForMaskedLM,
    AutoTokenizer,
    BertConfig,
    BertForMaskedLM,
    ElectraConfig,
    ElectraForMaskedLM,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reflib import FIXTURES, REFERENCE, REPO, setup_determinism, versions, write_json  # noqa: E402

TOP = 10
TEXT = "the cat sat on the mat"


def make_bert(dest: Path) -> None:
    """A tiny random BertForMaskedLM with tiny-bert's config and vocabulary."""
    src = FIXTURES / "tiny-bert"
    cfg = BertConfig.from_pretrained(src)
    cfg.architectures = ["BertForMaskedLM"]
    model = BertForMaskedLM(cfg).eval()
    with torch.no_grad():  # a visible bias, so that a test that drops it fails
        model.cls.predictions.bias.normal_(0, 0.5)
    model.save_pretrained(dest, safe_serialization=True)
    AutoTokenizer.from_pretrained(src).save_pretrained(dest)


def make_electra(dest: Path) -> None:
    """A tiny random ElectraForMaskedLM (the generator) with tiny-electra's vocabulary."""
    src = FIXTURES / "tiny-electra"
    cfg = ElectraConfig.from_pretrained(src)
    cfg.architectures = ["ElectraForMaskedLM"]
    model = ElectraForMaskedLM(cfg).eval()
    with torch.no_grad():
        model.generator_lm_head.bias.normal_(0, 0.5)
    model.save_pretrained(dest, safe_serialization=True)
    AutoTokenizer.from_pretrained(src).save_pretrained(dest)


def head_of(model):
    """The model's own masked-LM head as one function of a hidden state."""
    kind = model.config.model_type
    if kind == "bert":
        return model.cls
    if kind == "roberta":
        return model.lm_head
    if kind == "albert":
        return model.predictions
    if kind == "distilbert":
        return lambda h: model.vocab_projector(
            model.vocab_layer_norm(model.activation(model.vocab_transform(h)))
        )
    if kind == "electra":
        return lambda h: model.generator_lm_head(model.generator_predictions(h))
    raise SystemExit(f"no masked-LM head known for {kind}")


@torch.no_grad()
def reference(name: str, folder: Path, text: str) -> dict:
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForMaskedLM.from_pretrained(
        folder, attn_implementation="eager", dtype=torch.float32
    ).eval()
    if model.config.model_type == "albert" and (folder / "vocab.txt").exists():
        # rxnmapper: reaction SMILES split by its regex (as make_real.py and attnviz do)
        from make_real import smiles_tokenize

        words = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
        case = smiles_tokenize({t: i for i, t in enumerate(words)}, text)
        assert not case["unknown"], case["unknown"]
        ids = torch.tensor([case["input_ids"]])
        enc = dict(input_ids=ids, token_type_ids=torch.zeros_like(ids), attention_mask=torch.ones_like(ids))
        token = words.__getitem__
    else:
        enc = tok(text, return_tensors="pt")
        token = tok.convert_ids_to_tokens
    out = model(**enc, output_hidden_states=True)
    head = head_of(model)
    stages = out.hidden_states
    top_ids, top_probs = [], []
    for s, h in enumerate(stages):
        logits = head(h)[0]
        if s == len(stages) - 1:
            assert torch.allclose(logits, out.logits[0], atol=1e-5), "last stage ≠ the model's logits"
        probs = torch.softmax(logits.double(), dim=-1)
        p, i = probs.topk(TOP, dim=-1)
        top_ids.append(i.tolist())
        top_probs.append(p.tolist())
    return dict(
        name=name,
        folder=str(folder.relative_to(REPO)),
        text=text,
        input_ids=enc["input_ids"][0].tolist(),
        stages=len(stages),
        top_ids=top_ids,
        top_probs=top_probs,
        top1_text=[[token(row[0]) for row in stage] for stage in top_ids],
    )


def main() -> None:
    setup_determinism(20261203)
    bert, electra = FIXTURES / "tiny-bert-mlm", FIXTURES / "tiny-electra-generator"
    if not bert.exists():
        make_bert(bert)
    if not electra.exists():
        make_electra(electra)
    models = [
        ("tiny-bert-mlm", bert, TEXT),
        ("tiny-roberta-mlm", FIXTURES / "tiny-roberta-mlm", TEXT),
        ("tiny-albert-mlm", FIXTURES / "tiny-albert-mlm", TEXT),
        ("tiny-distilbert-mlm", FIXTURES / "tiny-distilbert-mlm", TEXT),
        ("tiny-electra-generator", electra, TEXT),
    ]
    real = REPO / ".cache/models/rxnmapper-albert"
    if real.exists():
        models.append(("rxnmapper", real, "CCO.CC(=O)O>>CCOC(C)=O"))
    else:
        print(f"skipping rxnmapper: {real} is missing (scripts/fetch-rxnmapper.sh)")
    write_json(
        REFERENCE / "mlm_lens.json",
        dict(versions=versions(), top=TOP, models=[reference(*m) for m in models]),
    )


if __name__ == "__main__":
    main()
