#!/usr/bin/env python3
"""A tiny random Whisper checkpoint (`WhisperForConditionalGeneration`, `model_type` `whisper`)
with its tokenizer, feature extractor and generation config, and Hugging Face transformers'
reference outputs for it (eager attention, float32).

    /path/to/venv/bin/python tests/reference/make_whisper.py

It writes tests/fixtures/tiny-whisper/ (config.json, generation_config.json, model.safetensors,
preprocessor_config.json as transformers saves them; a byte-level BPE tokenizer with Whisper's
special tokens: <|endoftext|>, <|startoftranscript|>, three languages, <|translate|>,
<|transcribe|>, <|startoflm|>, <|startofprev|>, <|nospeech|>, <|notimestamps|> and the 1501
timestamps <|0.00|> … <|30.00|>) and tests/reference/tiny-whisper.{json,safetensors}.

The model is Whisper's shape at a small size: d_model 64, 2 encoder and 2 decoder layers, 4
heads, 80 mel bins, and `max_source_positions` 150, so that its window is 3 s (300 mel frames,
150 encoder frames of 20 ms; `chunk_length` 3 in preprocessor_config.json): the encoder's
self-attention stays small enough to commit. Everything else (the two convolutions, the
sinusoidal positions, pre-LayerNorm layers, q/v biases without a k bias, learned decoder
positions, the head tied to the decoder's token embeddings) is Whisper's.

The input is the log-mel spectrogram WhisperFeatureExtractor computes from a synthetic 2.2 s
signal (tone bursts with a chirp and silences, padded to the window), recorded with the
references so that the Rust tests feed exactly these features. Recorded:

- `forward`: a teacher-forced decoder input (the prompt
  `<|startoftranscript|><|en|><|transcribe|><|notimestamps|>` and a few text tokens): every layer
  and head of the encoder self-attention [layers, heads, 150, 150], the decoder self-attention
  and the cross-attention [layers, heads, tokens, 150], both stacks' last hidden states and the
  last position's logits;
- `generations`: WhisperForConditionalGeneration.generate (greedy, language `en`, task
  transcribe, without and with timestamps; suppress_tokens and begin_suppress_tokens from the
  generation config), the ids it returns (prompt included) and, for each, a teacher-forced pass
  over the whole sequence with all three kinds of attention;
- `word_timings`: openai-whisper's `find_alignment` (whisper/timing.py) re-implemented with
  numpy on transformers' cross-attention of the generation without timestamps: the alignment
  heads' attention over the frames, z-scored along the tokens, median-filtered (width 7, reflect
  padding) along the frames, averaged over heads, DTW on the negative matrix (openai's `dtw_cpu`
  and `backtrace`), words split as `split_tokens_on_spaces` does, times = frame × 0.02 s, then
  the punctuation merged into the words beside it as `add_word_timestamps` does with its default
  `prepend_punctuations` and `append_punctuations` (`merge_punctuations`; the words emptied by a
  merge dropped, as it drops them; its later clamps of long words at sentence and segment
  boundaries are not applied, nor are they in attnviz). Once
  with the generation config's `alignment_heads`, once with openai's default (every head of the
  second half of the decoder layers). `merge_cases`: `merge_punctuations` on made-up word lists
  (quotes, brackets, CJK marks, a leading mark, a word ending in a space), words and rows before
  and after.

Weights are drawn as make_families.py draws them (numpy PCG64 from a fixed seed; the
convolutions N(0, 1.1²/fan_in)), so a re-run with the same versions rewrites every file byte for
byte. The script checks itself: the saved folder loads back with no missing or unexpected key and
computes what the model built in memory computes; generate() with and without its KV cache picks
the same tokens; `output_attentions` of the teacher-forced pass agrees with what generate()
returned per step.
"""

from __future__ import annotations

import json
import math
import shutil
import string
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn
from transformers import (
    AutoTokenizer,
    GenerationConfig,
    WhisperConfig,
    WhisperFeatureExtractor,
    WhisperForConditionalGeneration,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tiny_tokenizers as tt  # noqa: E402
from make_families import Gains, QK_NAMES, is_norm  # noqa: E402
from reflib import (  # noqa: E402
    FIXTURES,
    REFERENCE,
    TensorStore,
    max_abs,
    rel,
    setup_determinism,
    versions,
    write_json,
)

SEED = 6
NAME = "tiny-whisper"
SAMPLE_RATE = 16000
CHUNK_SECONDS = 3
SOURCE_POSITIONS = 150  # encoder frames: CHUNK_SECONDS / 0.02
LANGUAGES = ["en", "de", "fr"]
GEN_TOKENS = 12
ALIGNMENT_HEADS = [[1, 0], [1, 2]]
MEDFILT_WIDTH = 7
TIMESTAMP_SCALE = 0.25
EMBED_GAIN = 0.1  # below make_families' 0.5: the cross-attention then changes what is written
TOKENS_PER_SECOND = 50  # encoder frames per second (openai-whisper's TOKENS_PER_SECOND)


# --------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------


def specials() -> list[str]:
    """Whisper's special tokens after <|endoftext|>, in its order (tokenizer.json's added tokens
    of the real checkpoints, with three languages instead of 99)."""
    front = ["<|startoftranscript|>", *[f"<|{code}|>" for code in LANGUAGES]]
    front += ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>"]
    front += ["<|notimestamps|>"]
    return front + [f"<|{i * 0.02:.2f}|>" for i in range(1501)]


def tokenizer(folder: Path):
    """GPT-2-style byte-level BPE (as Whisper's), <|endoftext|> at the last BPE id, then the
    special tokens, loaded and saved through WhisperTokenizer."""
    vocab, merges = tt.byte_level_bpe(300, [], ["<|endoftext|>"])
    raw = {
        "vocab.json": json.dumps(vocab, ensure_ascii=False),
        "merges.txt": "#version: 0.2\n" + "\n".join(merges) + "\n",
    }
    config = dict(
        tokenizer_class="WhisperTokenizer",
        model_max_length=64,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        add_prefix_space=False,
        errors="replace",
    )
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, content in raw.items():
            (tmp / name).write_text(content, encoding="utf-8")
        write_json(tmp / "tokenizer_config.json", config)
        tok = AutoTokenizer.from_pretrained(tmp)
        tok.add_special_tokens({"additional_special_tokens": specials()})
        for stale in folder.glob("*.json"):
            if stale.name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                              "vocab.json", "added_tokens.json"):
                stale.unlink()
        tok.save_pretrained(folder)
        for name, content in raw.items():  # the family's own files, exactly as trained
            (folder / name).write_text(content, encoding="utf-8")
    back = AutoTokenizer.from_pretrained(folder)
    # The tokenizer in memory computed its prefix before the special tokens were added: the
    # folder is the one that counts.
    ids = back("The cat")["input_ids"]
    want = back.convert_tokens_to_ids(["<|startoftranscript|>", "<|notimestamps|>"])
    assert ids[:2] == want and ids[-1] == back.convert_tokens_to_ids("<|endoftext|>"), ids
    for line in tt.CORPUS:
        plain = tok(line, add_special_tokens=False)["input_ids"]
        assert plain == back(line, add_special_tokens=False)["input_ids"], line
    return back


# --------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------


@torch.no_grad()
def randomise(model: nn.Module, seed: int, gains: Gains) -> None:
    """make_families.randomise's rules, with Whisper's Conv1d weights N(0, gains.other²/fan_in)
    (fan_in = in_channels · kernel). The encoder's sinusoidal positions are frozen and keep
    transformers' values."""
    rng = np.random.default_rng(seed)

    def normal(shape, std):
        return torch.from_numpy((rng.standard_normal(tuple(shape)) * std).astype(np.float32))

    for name, param in model.named_parameters():
        module_name, _, leaf = name.rpartition(".")
        module = model.get_submodule(module_name)
        if not param.requires_grad:
            continue
        if is_norm(module):
            value = 1.0 + normal(param.shape, 0.1) if leaf == "weight" else normal(param.shape, 0.05)
        elif leaf == "bias" or param.dim() == 1:
            value = normal(param.shape, 0.1)
        elif isinstance(module, nn.Embedding):
            value = normal(param.shape, gains.embed)
        elif isinstance(module, nn.Conv1d):
            value = normal(param.shape, gains.other / math.sqrt(param[0].numel()))
        elif param.dim() == 2:
            gain = gains.qk if module_name.rsplit(".", 1)[-1] in QK_NAMES else gains.other
            value = normal(param.shape, gain / math.sqrt(param.shape[1]))
        else:
            raise ValueError(f"no rule for {name} {tuple(param.shape)}")
        param.copy_(value)


def build(tok, folder: Path) -> WhisperForConditionalGeneration:
    ids = tok.convert_tokens_to_ids
    eot = ids("<|endoftext|>")
    space = ids("Ġ")
    cfg = WhisperConfig(
        vocab_size=len(tok),
        num_mel_bins=80,
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_source_positions=SOURCE_POSITIONS,
        max_target_positions=64,
        activation_function="gelu",
        scale_embedding=False,
        pad_token_id=eot,
        bos_token_id=eot,
        eos_token_id=eot,
        decoder_start_token_id=ids("<|startoftranscript|>"),
        attn_implementation="eager",
    )
    model = WhisperForConditionalGeneration(cfg).eval()
    randomise(model, SEED, Gains(embed=EMBED_GAIN))
    with torch.no_grad():
        # The 1501 timestamps are most of this small vocabulary: drawn as the others, a random
        # model writes nothing else. Smaller embeddings (the head is tied) leave text a chance.
        model.model.decoder.embed_tokens.weight[ids("<|0.00|>"):] *= TIMESTAMP_SCALE
    model.generation_config = GenerationConfig(
        decoder_start_token_id=cfg.decoder_start_token_id,
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=eot,
        max_length=64,
        is_multilingual=True,
        lang_to_id={f"<|{c}|>": ids(f"<|{c}|>") for c in LANGUAGES},
        task_to_id={"transcribe": ids("<|transcribe|>"), "translate": ids("<|translate|>")},
        no_timestamps_token_id=ids("<|notimestamps|>"),
        prev_sot_token_id=ids("<|startofprev|>"),
        # As the real checkpoints: a few punctuation and special tokens never generated, the
        # space and <|endoftext|> never first.
        suppress_tokens=sorted(
            {ids(t) for t in ["\"", "#", "(", ")", "<|startoftranscript|>", "<|startofprev|>",
                              "<|startoflm|>", "<|translate|>", "<|transcribe|>", "<|nospeech|>"]}
        ),
        begin_suppress_tokens=[space, eot],
        alignment_heads=ALIGNMENT_HEADS,
        max_initial_timestamp_index=50,
    )
    for stale in ["model.safetensors", "config.json", "generation_config.json"]:
        (folder / stale).unlink(missing_ok=True)
    model.save_pretrained(folder)
    features = WhisperFeatureExtractor(
        feature_size=80, sampling_rate=SAMPLE_RATE, hop_length=160, chunk_length=CHUNK_SECONDS, n_fft=400
    )
    features.save_pretrained(folder)
    return model


def signal() -> np.ndarray:
    """2.2 s: a 440 Hz burst, silence, a chirp 300→2000 Hz, silence, a two-tone burst."""
    t = np.arange(int(2.2 * SAMPLE_RATE)) / SAMPLE_RATE
    x = np.zeros_like(t)
    burst = (t >= 0.1) & (t < 0.5)
    x[burst] = 0.5 * np.sin(2 * np.pi * 440 * t[burst])
    chirp = (t >= 0.8) & (t < 1.4)
    tc = t[chirp] - 0.8
    x[chirp] = 0.4 * np.sin(2 * np.pi * (300 * tc + 0.5 * (1700 / 0.6) * tc**2))
    two = (t >= 1.7) & (t < 2.1)
    x[two] = 0.3 * np.sin(2 * np.pi * 660 * t[two]) + 0.2 * np.sin(2 * np.pi * 1320 * t[two])
    return x.astype(np.float32)


# --------------------------------------------------------------------------------------------
# openai-whisper's find_alignment, with numpy
# --------------------------------------------------------------------------------------------


def median_filter(x: np.ndarray, width: int) -> np.ndarray:
    """openai-whisper's median_filter: along the last axis, reflect padding, the middle value of
    each window."""
    pad = width // 2
    if x.shape[-1] <= pad:
        return x
    padded = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(pad, pad)], mode="reflect")
    windows = np.lib.stride_tricks.sliding_window_view(padded, width, axis=-1)
    return np.sort(windows, axis=-1)[..., pad]


def dtw(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """openai-whisper's dtw_cpu and backtrace: costs kept in float32, ties to the left move."""
    n, m = x.shape
    cost = np.ones((n + 1, m + 1), dtype=np.float32) * np.inf
    trace = -np.ones((n + 1, m + 1), dtype=np.float32)
    cost[0, 0] = 0
    for j in range(1, m + 1):
        for i in range(1, n + 1):
            c0, c1, c2 = cost[i - 1, j - 1], cost[i - 1, j], cost[i, j - 1]
            if c0 < c1 and c0 < c2:
                c, t = c0, 0
            elif c1 < c0 and c1 < c2:
                c, t = c1, 1
            else:
                c, t = c2, 2
            cost[i, j] = x[i - 1, j - 1] + c
            trace[i, j] = t
    i, j = trace.shape[0] - 1, trace.shape[1] - 1
    trace[0, :] = 2
    trace[:, 0] = 1
    path = []
    while i > 0 or j > 0:
        path.append((i - 1, j - 1))
        if trace[i, j] == 0:
            i -= 1
            j -= 1
        elif trace[i, j] == 1:
            i -= 1
        elif trace[i, j] == 2:
            j -= 1
        else:
            raise ValueError("unexpected trace")
    path = np.array(path)[::-1, :].T
    return path[0], path[1]


def split_to_word_tokens(tok, tokens: list[int], eot: int) -> tuple[list[str], list[list[int]]]:
    """openai-whisper's Tokenizer.split_tokens_on_spaces (over split_tokens_on_unicode)."""
    decode = lambda ids: tok.decode(ids, skip_special_tokens=False)  # noqa: E731
    full = decode(tokens)
    subwords, subword_tokens, current, offset = [], [], [], 0
    for token in tokens:
        current.append(token)
        decoded = decode(current)
        if "\ufffd" not in decoded or full[offset + decoded.index("\ufffd")] == "\ufffd":
            subwords.append(decoded)
            subword_tokens.append(current)
            current = []
            offset += len(decoded)
    words, word_tokens = [], []
    for subword, ids in zip(subwords, subword_tokens):
        special = ids[0] >= eot
        with_space = subword.startswith(" ")
        punctuation = subword.strip() in string.punctuation
        if special or with_space or punctuation or not words:
            words.append(subword)
            word_tokens.append(list(ids))
        else:
            words[-1] += subword
            word_tokens[-1].extend(ids)
    return words, word_tokens


PREPEND_PUNCTUATIONS = "\"'\u201c\u00bf([{-"
APPEND_PUNCTUATIONS = "\"'.\u3002,\uff0c!\uff01?\uff1f:\uff1a\u201d)]}\u3001"


def merge_punctuations(words: list[dict], prepended: str, appended: str) -> list[dict]:
    """openai-whisper's merge_punctuations on dicts with word, tokens (and rows, start_frame,
    end_frame): a word starting with a space whose stripped text is in `prepended` (a substring
    test, as Python's `in`) joins the next word kept, scanning backwards; then a word in
    `appended` joins the word before it unless that ends with a space. The joined word keeps the
    times of the word it joins; the emptied words are dropped, as add_word_timestamps skips them."""
    words = [dict(w) for w in words]

    def rows(a, b):
        if "rows" in a and "rows" in b:
            return [min(a["rows"][0], b["rows"][0]), max(a["rows"][1], b["rows"][1])]
        return None

    i, j = len(words) - 2, len(words) - 1
    while i >= 0:
        previous, following = words[i], words[j]
        if previous["word"].startswith(" ") and previous["word"].strip() in prepended:
            r = rows(previous, following)
            following["word"] = previous["word"] + following["word"]
            following["tokens"] = previous["tokens"] + following["tokens"]
            if r is not None:
                following["rows"] = r
            previous["word"], previous["tokens"] = "", []
        else:
            j = i
        i -= 1
    i, j = 0, 1
    while j < len(words):
        previous, following = words[i], words[j]
        if not previous["word"].endswith(" ") and following["word"] in appended:
            if following["word"]:
                r = rows(previous, following)
                if r is not None:
                    previous["rows"] = r
            previous["word"] = previous["word"] + following["word"]
            previous["tokens"] = previous["tokens"] + following["tokens"]
            following["word"], following["tokens"] = "", []
        else:
            i = j
        j += 1
    return [w for w in words if w["word"]]


def merge_cases() -> list[dict]:
    """Made-up word lists for merge_punctuations: each word a token, rows one per token."""
    lists = [
        [" Ever", " tried", ",", " ever", " failed", "."],
        [" He", " said", " \"", "hello", "\"", " (", "quietly", ")", "."],
        [" \u201c", "Yes", "\u201d", "\u3002", " \u00bf", "Que", "?", "!"],
        [" (", " [", "a", "]", ")", " b", " ,", " c", ":", " -", "d"],
        ["x ", ".", " y", "'.", " z", ".'", "w", "...", " '", "s"],
        [" -", "- ", "-"],
        [".", ",", " a"],
    ]
    cases = []
    for words in lists:
        before = [dict(word=w, tokens=[k], rows=[k, k + 1], start_frame=2 * k, end_frame=2 * k + 2)
                  for k, w in enumerate(words)]
        cases.append(dict(before=before, after=merge_punctuations(before, PREPEND_PUNCTUATIONS,
                                                                  APPEND_PUNCTUATIONS)))
    return cases


def find_alignment(tok, cross: torch.Tensor, heads: list[list[int]], prompt_len: int, text: list[int],
                   eot: int, frames: int) -> dict:
    """Word timings from `cross` [layers, heads, tokens, source] (the teacher-forced pass over
    prompt + text + <|endoftext|>; `prompt_len` counts the prompt without <|notimestamps|>, as
    openai's sot_sequence), over the first `frames` encoder frames."""
    weights = torch.stack([cross[l, h] for l, h in heads])[:, :, :frames].float()
    std, mean = torch.std_mean(weights, dim=-2, keepdim=True, unbiased=False)
    weights = (weights - mean) / std
    weights = torch.from_numpy(median_filter(weights.numpy(), MEDFILT_WIDTH))
    matrix = weights.mean(dim=0)
    matrix = matrix[prompt_len:-1]
    text_indices, time_indices = dtw(-matrix.double().numpy())
    words, word_tokens = split_to_word_tokens(tok, text + [eot], eot)
    boundaries = np.pad(np.cumsum([len(t) for t in word_tokens[:-1]]), (1, 0))
    jumps = np.pad(np.diff(text_indices), (1, 0), constant_values=1).astype(bool)
    jump_frames = time_indices[jumps]
    out = []
    for w, word in enumerate(words[:-1]):
        start, end = int(jump_frames[boundaries[w]]), int(jump_frames[boundaries[w + 1]])
        out.append(dict(word=word, tokens=word_tokens[w], start_frame=start, end_frame=end,
                        start=start / TOKENS_PER_SECOND, end=end / TOKENS_PER_SECOND))
    merged = merge_punctuations(out, PREPEND_PUNCTUATIONS, APPEND_PUNCTUATIONS)
    return dict(heads=heads, rows=int(matrix.shape[0]), frames=frames, words=merged,
                unmerged_words=[w["word"] for w in out],
                path_tokens=text_indices.tolist(), path_frames=time_indices.tolist())


# --------------------------------------------------------------------------------------------
# References
# --------------------------------------------------------------------------------------------


@torch.no_grad()
def forward(model, features: torch.Tensor, decoder_ids: list[int]) -> dict:
    out = model(
        input_features=features,
        decoder_input_ids=torch.tensor([decoder_ids]),
        output_attentions=True,
        output_hidden_states=True,
    )
    stack = lambda layers: torch.stack([a[0] for a in layers])  # noqa: E731
    return {
        "encoder.attentions": stack(out.encoder_attentions),
        "decoder.attentions": stack(out.decoder_attentions),
        "cross.attentions": stack(out.cross_attentions),
        "encoder.hidden": out.encoder_last_hidden_state[0],
        "decoder.hidden": out.decoder_hidden_states[-1][0],
        "logits": out.logits[0, -1],
    }


def put(store: TensorStore, key: str, ref: dict) -> dict:
    return {what: store.put(f"{key}.{what}", value) for what, value in ref.items()}


@torch.no_grad()
def generate(model, features, timestamps: bool, use_cache: bool = True) -> list[int]:
    out = model.generate(
        input_features=features,
        language="en",
        task="transcribe",
        return_timestamps=timestamps,
        max_new_tokens=GEN_TOKENS,
        do_sample=False,
        num_beams=1,
        use_cache=use_cache,
    )
    seq = out[0].tolist()
    return seq


def main() -> None:
    setup_determinism(SEED)
    folder = FIXTURES / NAME
    folder.mkdir(parents=True, exist_ok=True)
    tok = tokenizer(folder)
    built = build(tok, folder)
    model = WhisperForConditionalGeneration.from_pretrained(folder, attn_implementation="eager").eval()
    loaded_keys = set(model.state_dict())
    assert loaded_keys == set(built.state_dict()), "the saved folder loads other keys"
    extractor = WhisperFeatureExtractor.from_pretrained(folder)
    assert extractor.nb_max_frames == 2 * SOURCE_POSITIONS
    audio = signal()
    features = extractor(audio, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
    assert features.shape == (1, 80, 2 * SOURCE_POSITIONS), features.shape
    ids = tok.convert_tokens_to_ids
    eot = ids("<|endoftext|>")
    prompt = [ids(t) for t in ["<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>"]]

    store = TensorStore()
    store.put("features", features[0])
    text_ids = tok.encode(" The cat sat on the mat.", add_special_tokens=False)
    teacher = prompt + text_ids
    ref = forward(model, features, teacher)
    again = forward(built, features, teacher)
    assert all(max_abs(ref[k], again[k]) == 0 for k in ref), "saved ≠ built"
    cases = [dict(name="teacher", decoder_input_ids=teacher,
                  decoder_tokens=tok.convert_ids_to_tokens(teacher), tensors=put(store, "teacher", ref))]

    generations = []
    for timestamps in (False, True):
        new = generate(model, features, timestamps)
        assert new == generate(model, features, timestamps, use_cache=False), "cache changes tokens"
        name = "timestamps" if timestamps else "plain"
        # generate() returns the new tokens alone; the prompt is <|startoftranscript|><|en|>
        # <|transcribe|>, and <|notimestamps|> without timestamps.
        prompt_len = 3 if timestamps else 4
        seq = prompt[:prompt_len] + new
        gen_ref = forward(model, features, seq)
        assert max_abs(gen_ref["encoder.attentions"], ref["encoder.attentions"]) == 0
        generations.append(dict(
            name=name,
            timestamps=timestamps,
            prompt_len=prompt_len,
            generated_ids=seq,
            decoder_tokens=tok.convert_ids_to_tokens(seq),
            text=tok.decode(seq[prompt_len:], skip_special_tokens=True),
            text_with_timestamps=tok.decode(seq[prompt_len:], skip_special_tokens=False),
            stopped_at_eos=seq[-1] == eot,
            # The encoder's attention is the teacher-forced case's: it does not read the decoder.
            tensors=put(store, name, {k: v for k, v in gen_ref.items() if not k.startswith("encoder.")}),
        ))

    # Word timings on the generation without timestamps: openai's tokens are the prompt, the
    # text tokens and <|endoftext|>.
    plain = generations[0]["generated_ids"]
    text = [t for t in plain[4:] if t < eot]
    seq = prompt + text + [eot]
    align_ref = forward(model, features, seq)
    cross = align_ref["cross.attentions"]
    frames = SOURCE_POSITIONS
    timings = [
        dict(name="alignment_heads", **find_alignment(tok, cross, ALIGNMENT_HEADS, 3, text, eot, frames)),
        dict(name="default_heads",
             **find_alignment(tok, cross, [[1, h] for h in range(4)], 3, text, eot, frames)),
    ]
    # The frames the audio covers (2.2 s → 110 encoder frames), as openai cuts them.
    timings.append(dict(name="audio_frames",
                        **find_alignment(tok, cross, ALIGNMENT_HEADS, 3, text, eot, 110)))
    word_timings = dict(decoder_input_ids=seq, text_ids=text, cases=timings, merge_cases=merge_cases(),
                        tensors=put(store, "alignment", {"cross.attentions": cross}))

    tensors = REFERENCE / f"{NAME}.safetensors"
    size = store.save(tensors)
    cfg = model.config
    manifest = dict(
        script=rel(Path(__file__)),
        versions=versions(),
        fixture=rel(folder),
        tensors=tensors.name,
        tensors_bytes=size,
        config=dict(d_model=cfg.d_model, encoder_layers=cfg.encoder_layers, decoder_layers=cfg.decoder_layers,
                    heads=cfg.encoder_attention_heads, num_mel_bins=cfg.num_mel_bins,
                    max_source_positions=cfg.max_source_positions, vocab_size=cfg.vocab_size),
        signal="2.2 s at 16 kHz: 440 Hz 0.1–0.5 s, chirp 300→2000 Hz 0.8–1.4 s, 660+1320 Hz 1.7–2.1 s",
        features=dict(tensor="features", shape=list(features.shape[1:])),
        prompt=prompt,
        eot=eot,
        cases=cases,
        generations=generations,
        word_timings=word_timings,
    )
    write_json(REFERENCE / f"{NAME}.json", manifest)
    for g in generations:
        print(g["name"], g["generated_ids"], repr(g["text_with_timestamps"]))
    for t in timings:
        print(t["name"], [(w["word"], w["start_frame"], w["end_frame"]) for w in t["words"]])
    print(f"wrote {rel(folder)} and {rel(tensors)} ({size} bytes)")


def real(model_dir: Path, audio: Path) -> None:
    """`--real MODEL_DIR AUDIO`: a real Whisper in transformers' layout (the CTranslate2 files
    converted by the audio front-end's ct2_to_transformers.py) on a real recording: the ids
    WhisperForConditionalGeneration.generate writes (greedy, the checkpoint's generation
    config), and openai-whisper's word alignment (the numpy copy above) on transformers'
    cross-attention, over the frames the recording covers. Writes
    tests/reference/<model>-<audio>.json (no tensors)."""
    import soundfile as sf

    setup_determinism(SEED)
    model = WhisperForConditionalGeneration.from_pretrained(model_dir, attn_implementation="eager").eval()
    extractor = WhisperFeatureExtractor.from_pretrained(model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir)
    samples, rate = sf.read(audio, dtype="float32")
    if samples.ndim > 1:
        samples = samples.mean(axis=1)
    assert rate == SAMPLE_RATE, rate
    features = extractor(samples, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
    gc = model.generation_config
    with torch.no_grad():
        new = model.generate(input_features=features, do_sample=False, num_beams=1)[0].tolist()
    eot = gc.eos_token_id if isinstance(gc.eos_token_id, int) else gc.eos_token_id[0]
    # The prompt generate() used: the language it detected and the task on multilingual models.
    prompt = [gc.decoder_start_token_id]
    if getattr(gc, "is_multilingual", False):
        language = int(model.detect_language(input_features=features, generation_config=gc)[0])
        prompt += [language, gc.task_to_id["transcribe"]]
    prompt.append(gc.no_timestamps_token_id)
    text = [t for t in new if t < eot]
    seq = prompt + text + [eot]
    ref = forward(model, features, seq)
    frames = round(len(samples) / SAMPLE_RATE / 0.02)
    heads = [list(h) for h in gc.alignment_heads]
    timing = find_alignment(tok, ref["cross.attentions"], heads, len(prompt) - 1, text, eot, frames)
    name = f"{model_dir.name}-{audio.stem}"
    # A sample of the attention, small enough to commit: the decoder's self-attention, the
    # alignment heads' cross-attention, and every 250th frame's row of the encoder's first and
    # last layers.
    store = TensorStore()
    enc = ref["encoder.attentions"]
    last = enc.shape[0] - 1
    rows = list(range(0, enc.shape[2], 250))
    store.put("decoder.attentions", ref["decoder.attentions"])
    store.put("cross.alignment_heads", torch.stack([ref["cross.attentions"][l, h] for l, h in heads]))
    store.put("encoder.first_last_rows", torch.stack([enc[0][:, rows], enc[last][:, rows]]))
    tensors = REFERENCE / f"{name}.safetensors"
    store.save(tensors)
    write_json(REFERENCE / f"{name}.json", dict(
        tensors=tensors.name,
        encoder_rows=rows,
        alignment_heads=heads,
        script=rel(Path(__file__)) + " --real",
        versions=versions(),
        model=model_dir.name,
        audio=audio.name,
        seconds=len(samples) / SAMPLE_RATE,
        generated_ids=new,
        prompt=prompt,
        sequence=seq,
        transcript=tok.decode(text, skip_special_tokens=True).strip(),
        word_timings=timing,
    ))
    print(tok.decode(text), [(w["word"], w["start_frame"], w["end_frame"]) for w in timing["words"]])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--real"]:
        real(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        main()
