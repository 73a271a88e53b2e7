#!/usr/bin/env python3
"""Write the reference outputs that attnviz's fidelity tests compare against.

The independent implementation is Hugging Face transformers (BertModel, eager attention,
float32, output_attentions=True) and its tokenizer. Run from anywhere:

    python3 tests/reference/make_reference.py            # tiny random BERT + all-MiniLM-L6-v2
    python3 tests/reference/make_reference.py --tiny-only

It writes (paths relative to the repository root):

  tests/fixtures/tiny-bert/          a tiny random BERT: model.safetensors (HF key names, no prefix),
                                     config.json in transformers-4.x style, vocab.txt,
                                     tokenizer_config.json (no tokenizer.json: the vocab.txt path)
  tests/fixtures/tiny-bert-legacy/   the same weights as pytorch_model.bin (torch zip format) with
                                     the `bert.` prefix, LayerNorm gamma/beta, cls.* heads and an
                                     int64 position_ids buffer; config.json in transformers-5.x style
  tests/fixtures/tiny-bert-pickle/   the same as tiny-bert-legacy, saved in torch's pre-1.6 pickle format
  tests/reference/tiny-bert.{json,safetensors}   references for the tiny model
  tests/reference/minilm.{json,safetensors}      references for all-MiniLM-L6-v2

Each JSON manifest lists the cases (text, pair, max_len, truncate, HF's tokens/ids/type ids/
special-token mask/word ids) and names the tensors in the .safetensors file beside it:
`<case>.attentions` [layers, heads, n, n] and `<case>.hidden` [n, hidden], both float32.

The tiny model's weights are drawn with numpy's PCG64 from a fixed seed, so they do not depend on
torch's random number generator. all-MiniLM-L6-v2 is read from $ATTNVIZ_MINILM_DIR, else
<repo>/.cache/models/all-MiniLM-L6-v2 (scripts/fetch-minilm.sh puts it there; this script runs
it when the folder is missing).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np
import safetensors
import safetensors.numpy
import tokenizers
import torch
import transformers
from transformers import AutoTokenizer, BertModel

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
REFERENCE = REPO / "tests" / "reference"

SEED = 20261129

# --------------------------------------------------------------------------------------------
# The tiny random BERT
# --------------------------------------------------------------------------------------------

TINY_CONFIG = dict(
    hidden_size=32,
    num_hidden_layers=3,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
    type_vocab_size=2,
    hidden_act="gelu",
    layer_norm_eps=1e-12,
)

# Special tokens first, at ids that differ from bert-base's (100-103), so nothing can hard-code them.
TINY_VOCAB = (
    ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    + list(".,?!'")
    + """the quick brown fox jump over lazy dog where did cat sit sat on mat un run play kept in zu
    a and is was it very long sentence that goes beyond maximum length of model so must be cut this
    second one also keeps going with more words here caf naive""".split()
    + "##s ##believ ##ably ##ner ##ing ##rich ##ed ##ly ##e".split()
)

TINY_CASES = [
    dict(name="single", text="The quick brown fox jumps over the lazy dog."),
    dict(name="pair", text="Where did the cat sit?", pair="The cat sat on the mat."),
    # ##pieces, an unknown word ([UNK]), upper case and accents (lower-cased and stripped).
    dict(name="pieces", text="Unbelievably, the runners kept playing in Zürich! Xylophone café naïve."),
    dict(
        name="truncated",
        text=" ".join(
            ["This is a very long sentence that goes beyond the maximum length of the model,"] * 4
            + ["so it must be cut."]
        ),
        truncate=True,
    ),
    dict(
        name="pair_truncated",
        text="This sentence is long and it keeps going with more words here, " * 3,
        pair="The second one is also long, and it goes on and on with more words. " * 3,
        truncate=True,
    ),
]


def tiny_state_dict(vocab_size: int) -> "OrderedDict[str, np.ndarray]":
    """Random weights for BertModel with HF key names (no prefix).

    Linear weights are larger than BERT's 0.02 initialisation so attention is far from uniform;
    LayerNorm weights ~ 1 + 0.1·N(0,1) and biases ~ 0.05·N(0,1), so a loader that drops them fails.
    """
    rng = np.random.default_rng(SEED)
    c = TINY_CONFIG
    h, inter = c["hidden_size"], c["intermediate_size"]

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def layer_norm(prefix):
        sd[f"{prefix}.weight"] = (1.0 + normal((h,), 0.1)).astype(np.float32)
        sd[f"{prefix}.bias"] = normal((h,), 0.05)

    def linear(prefix, n_out, n_in, std):
        sd[f"{prefix}.weight"] = normal((n_out, n_in), std)
        sd[f"{prefix}.bias"] = normal((n_out,), 0.1)

    sd: OrderedDict[str, np.ndarray] = OrderedDict()
    sd["embeddings.word_embeddings.weight"] = normal((vocab_size, h), 0.5)
    sd["embeddings.position_embeddings.weight"] = normal((c["max_position_embeddings"], h), 0.5)
    sd["embeddings.token_type_embeddings.weight"] = normal((c["type_vocab_size"], h), 0.5)
    layer_norm("embeddings.LayerNorm")
    for i in range(c["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        for proj in ("query", "key", "value"):
            linear(f"{p}.attention.self.{proj}", h, h, 0.3)
        linear(f"{p}.attention.output.dense", h, h, 0.2)
        layer_norm(f"{p}.attention.output.LayerNorm")
        linear(f"{p}.intermediate.dense", inter, h, 0.2)
        linear(f"{p}.output.dense", h, inter, 0.15)
        layer_norm(f"{p}.output.LayerNorm")
    linear("pooler.dense", h, h, 0.2)
    return sd


def tiny_config_json(vocab_size: int, style: str) -> dict:
    """config.json as transformers 4.x (`torch_dtype`, `gradient_checkpointing`) or 5.x (`dtype`,
    null fields) writes it."""
    base = dict(
        attention_probs_dropout_prob=0.1,
        hidden_dropout_prob=0.1,
        initializer_range=0.02,
        model_type="bert",
        pad_token_id=0,
        position_embedding_type="absolute",
        use_cache=True,
        vocab_size=vocab_size,
        **TINY_CONFIG,
    )
    if style == "4.x":
        base.update(
            architectures=["BertModel"],
            gradient_checkpointing=False,
            torch_dtype="float32",
            transformers_version="4.8.2",
        )
    else:
        base.update(
            architectures=["BertForPreTraining"],
            add_cross_attention=False,
            bos_token_id=None,
            classifier_dropout=None,
            dtype="float32",
            eos_token_id=None,
            is_decoder=False,
            tie_word_embeddings=True,
            transformers_version=transformers.__version__,
        )
    return dict(sorted(base.items()))


def legacy_state_dict(sd: "OrderedDict[str, np.ndarray]") -> "OrderedDict[str, torch.Tensor]":
    """The same weights as an old BertForPreTraining checkpoint: `bert.` prefix, LayerNorm
    gamma/beta, an int64 position_ids buffer and the pre-training heads (cls.*)."""
    rng = np.random.default_rng(SEED + 1)
    h = TINY_CONFIG["hidden_size"]
    out: OrderedDict[str, torch.Tensor] = OrderedDict()
    for key, value in sd.items():
        if ".LayerNorm." in key:
            key = key.replace(".LayerNorm.weight", ".LayerNorm.gamma").replace(
                ".LayerNorm.bias", ".LayerNorm.beta"
            )
        out["bert." + key] = torch.from_numpy(value.copy())
    out["bert.embeddings.position_ids"] = torch.arange(
        TINY_CONFIG["max_position_embeddings"], dtype=torch.int64
    ).unsqueeze(0)
    word = out["bert.embeddings.word_embeddings.weight"]
    rand = lambda *shape: torch.from_numpy((rng.standard_normal(shape) * 0.1).astype(np.float32))
    out["cls.predictions.bias"] = rand(word.shape[0])
    out["cls.predictions.transform.dense.weight"] = rand(h, h)
    out["cls.predictions.transform.dense.bias"] = rand(h)
    out["cls.predictions.transform.LayerNorm.gamma"] = 1.0 + rand(h)
    out["cls.predictions.transform.LayerNorm.beta"] = rand(h)
    out["cls.predictions.decoder.weight"] = word  # tied, sharing storage as old checkpoints did
    out["cls.seq_relationship.weight"] = rand(2, h)
    out["cls.seq_relationship.bias"] = rand(2)
    return out


def write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_tiny_fixtures() -> None:
    vocab_size = len(TINY_VOCAB)
    assert len(set(TINY_VOCAB)) == vocab_size, "duplicate vocabulary entry"
    sd = tiny_state_dict(vocab_size)
    tok_config = dict(
        do_lower_case=True,
        tokenizer_class="BertTokenizer",
        model_max_length=TINY_CONFIG["max_position_embeddings"],
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
    )

    def common(folder: Path, style: str, weights: str):
        folder.mkdir(parents=True, exist_ok=True)
        for stale in ("model.safetensors", "pytorch_model.bin", "tokenizer.json"):
            if stale != weights:
                (folder / stale).unlink(missing_ok=True)
        (folder / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
        write_json(folder / "tokenizer_config.json", tok_config)
        write_json(folder / "config.json", tiny_config_json(vocab_size, style))
        return folder / weights

    path = common(FIXTURES / "tiny-bert", "4.x", "model.safetensors")
    safetensors.numpy.save_file(dict(sd), path, metadata={"format": "pt"})

    legacy = legacy_state_dict(sd)
    path = common(FIXTURES / "tiny-bert-legacy", "5.x", "pytorch_model.bin")
    torch.save(legacy, path)

    # The pre-1.6 format names storages by memory address, so rewriting it changes its bytes even
    # when no tensor changed: keep an existing file whose tensors are all equal.
    path = common(FIXTURES / "tiny-bert-pickle", "5.x", "pytorch_model.bin")
    if not (path.is_file() and same_tensors(torch.load(path, weights_only=True), legacy)):
        torch.save(legacy, path, _use_new_zipfile_serialization=False)


def same_tensors(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and torch.equal(a[k], b[k]) for k in a
    )


# --------------------------------------------------------------------------------------------
# all-MiniLM-L6-v2
# --------------------------------------------------------------------------------------------

PARAGRAPH = (
    "The history of the printing press is often told as the story of a single inventor, but the "
    "machine that Johannes Gutenberg assembled in Mainz around 1440 combined several older ideas. "
    "Screw presses had long been used to squeeze grapes and olives, paper had travelled from China "
    "through the Islamic world to Europe, and metalworkers already knew how to cast small objects "
    "in moulds. Gutenberg's contribution was to make these parts work together: an alloy of lead, "
    "tin and antimony that melted at a low temperature and cooled quickly, a hand mould that could "
    "produce thousands of identical letters, and an oil-based ink that clung to metal type. Within "
    "fifty years, presses were running in more than two hundred European towns, and perhaps twenty "
    "million volumes had been printed. Books became cheaper, scholars could compare identical copies "
    "of the same text, and errors could be corrected in later editions instead of multiplying with "
    "every hand-made copy. Historians still argue about how quickly reading spread among ordinary "
    "people, yet few doubt that the new technology changed how knowledge was stored, shared and "
    "questioned across the continent."
)

MINILM_CASES = [
    dict(name="fox", text="The quick brown fox jumps over the lazy dog."),
    dict(
        name="pair",
        text="A man is playing a guitar on the street.",
        pair="Someone performs music outdoors for the people walking by.",
    ),
    dict(name="accents", text="Café naïve façade, Zürich résumé."),
    dict(name="cjk_emoji", text="東京は日本の首都です 🗼 and 北京 is big."),
    dict(name="paragraph", text=PARAGRAPH),
]

# Tokenizer-only checks (no forward pass, so no large tensors): truncation at the model's limit.
MINILM_TOKENIZE_ONLY = [
    dict(name="paragraph_x3_truncated", text=" ".join([PARAGRAPH] * 3), truncate=True),
    dict(
        name="pair_truncated",
        text=" ".join([PARAGRAPH] * 3),
        pair="A much shorter second sentence that should survive truncation.",
        truncate=True,
    ),
]


def minilm_dir() -> Path:
    env = os.environ.get("ATTNVIZ_MINILM_DIR")
    folder = Path(env) if env else REPO / ".cache" / "models" / "all-MiniLM-L6-v2"
    if not (folder / "model.safetensors").is_file():
        print(f"{folder} has no model; running scripts/fetch-minilm.sh", file=sys.stderr)
        out = subprocess.run(
            [str(REPO / "scripts" / "fetch-minilm.sh")], check=True, capture_output=True, text=True
        )
        folder = Path(out.stdout.strip().splitlines()[-1])
    return folder


# --------------------------------------------------------------------------------------------
# Running HF and writing references
# --------------------------------------------------------------------------------------------


def encode(tokenizer, case: dict, max_len: int) -> dict:
    """HF's tokenization of one case, plus the untruncated length when it truncates."""
    args = (case["text"],) + ((case["pair"],) if case.get("pair") is not None else ())
    truncate = case.get("truncate", False)
    enc = tokenizer(
        *args,
        truncation="longest_first" if truncate else False,
        max_length=max_len if truncate else None,
        padding=False,
        return_special_tokens_mask=True,
    )
    full = tokenizer(*args, truncation=False, padding=False)
    n_full = len(full["input_ids"])
    ids = enc["input_ids"]
    if truncate:
        assert n_full > max_len and len(ids) == max_len, (case["name"], n_full, len(ids))
    else:
        assert len(ids) <= max_len, f"{case['name']}: {len(ids)} tokens exceed {max_len}"
    return dict(
        name=case["name"],
        text=case["text"],
        pair=case.get("pair"),
        max_len=max_len,
        truncate=truncate,
        untruncated_len=n_full,
        tokens=tokenizer.convert_ids_to_tokens(ids),
        input_ids=ids,
        token_type_ids=enc["token_type_ids"],
        special_tokens_mask=enc["special_tokens_mask"],
        word_ids=enc.word_ids(),
    )


@torch.no_grad()
def run(model: BertModel, ids: list[int], type_ids: list[int]):
    """Attentions [layers, heads, n, n], last hidden state [n, hidden], and each head's query and
    key vectors [layers, heads, n, head_dim] (the outputs of the query/key projections, before
    any 1/sqrt(d) scaling), caught with forward hooks."""
    cfg = model.config
    heads, head_dim = cfg.num_attention_heads, cfg.hidden_size // cfg.num_attention_heads
    caught: dict[str, list[torch.Tensor]] = {"query": [], "key": []}

    def hook(name):
        def store(_module, _inputs, output):
            n = output.shape[1]
            caught[name].append(output[0].view(n, heads, head_dim).transpose(0, 1))

        return store

    handles = [
        getattr(layer.attention.self, name).register_forward_hook(hook(name))
        for layer in model.encoder.layer
        for name in ("query", "key")
    ]
    try:
        out = model(
            input_ids=torch.tensor([ids]),
            token_type_ids=torch.tensor([type_ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            output_attentions=True,
            return_dict=True,
        )
    finally:
        for handle in handles:
            handle.remove()
    return dict(
        attentions=torch.stack([a[0] for a in out.attentions]),
        hidden=out.last_hidden_state[0],
        query=torch.stack(caught["query"]),
        key=torch.stack(caught["key"]),
    )


def load_model(folder: Path, dtype=torch.float32) -> BertModel:
    model, info = BertModel.from_pretrained(
        folder,
        attn_implementation="eager",
        dtype=dtype,
        add_pooling_layer=False,
        output_loading_info=True,
    )
    # A missing tensor would be randomly initialised and silently poison the reference.
    assert not info["missing_keys"] and not info["mismatched_keys"], (folder, info)
    return model.eval()


def max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max())


def make_references(
    label: str,
    folder: Path,
    cases: list[dict],
    tokenize_only: list[dict],
    same_weights: list[Path] = (),
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = load_model(folder)
    model64 = load_model(folder, torch.float64)
    others = [(p, load_model(p)) for p in same_weights]
    cfg = model.config
    max_len = cfg.max_position_embeddings

    tensors: dict[str, np.ndarray] = {}
    manifest_cases = []
    for case in cases:
        entry = encode(tokenizer, case, max_len)
        ref = run(model, entry["input_ids"], entry["token_type_ids"])
        ref64 = run(model64, entry["input_ids"], entry["token_type_ids"])
        for other_dir, other in others:
            got = run(other, entry["input_ids"], entry["token_type_ids"])
            # The other copies hold the very same float32 weights: HF must agree with itself exactly.
            assert all(max_abs(got[k], ref[k]) == 0 for k in ref), f"{other_dir} differs"
        n = len(entry["input_ids"])
        assert ref["attentions"].shape == (cfg.num_hidden_layers, cfg.num_attention_heads, n, n)
        key = entry["name"]
        # Query/key vectors only for short inputs, to keep the committed files small.
        stored = ["attentions", "hidden"] + (["query", "key"] if n <= 64 else [])
        entry["n"] = n
        for what in ("attentions", "hidden", "query", "key"):
            if what in stored:
                tensors[f"{key}.{what}"] = ref[what].numpy().astype(np.float32)
                entry[what] = dict(tensor=f"{key}.{what}", shape=list(ref[what].shape))
            else:
                entry[what] = None
        # How far HF's own float32 result is from its float64 result: the noise floor of the
        # reference itself, for judging the tests' tolerances.
        entry["f32_vs_f64_max_abs"] = {what: max_abs(ref[what], ref64[what]) for what in ref}
        manifest_cases.append(entry)
        print(
            f"{label}/{key}: n={n} f32-vs-f64 max |d|: "
            + " ".join(f"{k} {v:.2e}" for k, v in entry["f32_vs_f64_max_abs"].items()),
            file=sys.stderr,
        )

    manifest = dict(
        generator="tests/reference/make_reference.py",
        model=label,
        config=dict(
            layers=cfg.num_hidden_layers,
            heads=cfg.num_attention_heads,
            hidden_size=cfg.hidden_size,
            head_dim=cfg.hidden_size // cfg.num_attention_heads,
            max_position_embeddings=max_len,
        ),
        how="HF BertModel.from_pretrained(attn_implementation='eager', dtype=float32), eval(), "
        "output_attentions=True, no padding; tokens from AutoTokenizer with truncation "
        "'longest_first' where truncate is true",
        versions=dict(
            python=sys.version.split()[0],
            torch=torch.__version__,
            transformers=transformers.__version__,
            tokenizers=tokenizers.__version__,
            safetensors=safetensors.__version__,
            numpy=np.__version__,
        ),
        tensors=f"{label}.safetensors",
        cases=manifest_cases,
        tokenize_only=[encode(tokenizer, case, max_len) for case in tokenize_only],
    )
    safetensors.numpy.save_file(tensors, REFERENCE / f"{label}.safetensors")
    write_json(REFERENCE / f"{label}.json", manifest)
    size = (REFERENCE / f"{label}.safetensors").stat().st_size
    print(f"wrote tests/reference/{label}.json and .safetensors ({size / 1e6:.1f} MB)", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny-only", action="store_true", help="skip all-MiniLM-L6-v2")
    args = parser.parse_args()

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    REFERENCE.mkdir(parents=True, exist_ok=True)

    write_tiny_fixtures()
    make_references(
        "tiny-bert",
        FIXTURES / "tiny-bert",
        TINY_CASES,
        [],
        same_weights=[FIXTURES / "tiny-bert-legacy", FIXTURES / "tiny-bert-pickle"],
    )
    if not args.tiny_only:
        make_references("minilm", minilm_dir(), MINILM_CASES, MINILM_TOKENIZE_ONLY)


if __name__ == "__main__":
    main()
