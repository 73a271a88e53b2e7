"""Tiny tokenizers for the tiny model families, trained on a small built-in corpus.

Each builder writes the files its family really ships (vocab.json + merges.txt, a SentencePiece
model, vocab.txt, tokenizer.json) with the family's special tokens at the family's ids, then lets
transformers load them through the family's tokenizer class and save what it saves
(tokenizer.json, tokenizer_config.json). Training is deterministic (one thread, fixed corpus).
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
from pathlib import Path

import sentencepiece as spm
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from tokenizers.implementations import ByteLevelBPETokenizer
from transformers import AutoTokenizer

from reflib import write_json

CORPUS = """\
The quick brown fox jumps over the lazy dog.
Where did the cat sit? The cat sat on the mat.
Unbelievably, the runners kept playing in the rain until the very end of the game.
Attention lets every word in a sentence look at every other word.
A transformer layer mixes information between tokens and then transforms each token on its own.
The history of the printing press is often told as the story of a single inventor.
Books became cheaper, and scholars could compare identical copies of the same text.
She sells sea shells by the sea shore, and the shells she sells are surely sea shells.
In 2024 the museum opened at 9:30 and closed at 17:00; tickets cost 12.50 euros.
Café, naïve, façade, résumé and Zürich keep their accents in many languages.
The weather today is sunny with a light breeze from the west.
Can you translate this sentence into German, please?
My friend reads a book in the garden every morning.
The children are playing football in the park after school.
We will meet at the station tomorrow evening.
Der schnelle braune Fuchs springt über den faulen Hund.
Wo hat die Katze gesessen? Die Katze saß auf der Matte.
Das Wetter ist heute sonnig mit einer leichten Brise aus dem Westen.
Können Sie diesen Satz bitte ins Deutsche übersetzen?
Mein Freund liest jeden Morgen ein Buch im Garten.
Die Kinder spielen nach der Schule Fußball im Park.
Wir treffen uns morgen Abend am Bahnhof.
Le renard brun rapide saute par-dessus le chien paresseux.
Où était assis le chat ? Le chat était assis sur le tapis.
Il fait beau aujourd'hui, avec une légère brise de l'ouest.
Mon ami lit un livre dans le jardin chaque matin.
Señor Muñoz visitó São Paulo y Málaga en el año 1999.
Tokyo, Kyoto and Osaka are cities in Japan; 東京 means eastern capital.
Numbers like 3.14159, 42 and 1,000,000 appear in text too.
"Quotes", (parentheses), [brackets] and {braces} are punctuation marks.
It's a long way to the top if you want to rock and roll.
The model was trained on text from many sources, including books and articles.
Question: what does the head attend to? Answer: mostly the previous token.
""".splitlines()

ENGLISH = [line for i, line in enumerate(CORPUS) if i < 15 or i >= 27]
GERMAN = CORPUS[15:22]

# Llama 3's pre-tokenizer pattern (also SmolLM2's in spirit): contractions, letters, 1-3 digits,
# punctuation runs, newlines, spaces.
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------


def byte_level_bpe(vocab_size: int, front: list[str], back: list[str]) -> tuple[dict, list[str]]:
    """GPT-2-style byte-level BPE: `front` special tokens get the first ids, `back` the last."""
    bpe = ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator(
        CORPUS, vocab_size=vocab_size, min_frequency=2, special_tokens=front, show_progress=False
    )
    model = json.loads(bpe.to_str())["model"]
    vocab = dict(sorted(model["vocab"].items(), key=lambda kv: kv[1]))
    for token in back:
        vocab[token] = len(vocab)
    merges = [" ".join(m) if isinstance(m, list) else m for m in model["merges"]]
    return vocab, merges


# A small normalisation rule set (fullwidth ASCII letters, the ellipsis, no-break and ideographic
# spaces, the fi ligature), compiled by SentencePiece into its "precompiled charsmap": the same
# Precompiled normaliser path as the real nmt_nfkc models, in 4 kB instead of 240 kB.
NORMALISATION_RULES = "".join(
    [f"{0xFF21 + i:X}\t{0x41 + i:X}\n" for i in range(26)]
    + [f"{0xFF41 + i:X}\t{0x61 + i:X}\n" for i in range(26)]
    + ["2026\t2E 2E 2E\n", "A0\t20\n", "3000\t20\n", "FB01\t66 69\n"]
)


def sentencepiece_model(lines: list[str], vocab_size: int, **kwargs) -> bytes:
    out = io.BytesIO()
    with tempfile.TemporaryDirectory() as tmp:
        rules = Path(tmp) / "rules.tsv"
        rules.write_text(NORMALISATION_RULES, encoding="utf-8")
        if "normalization_rule_name" not in kwargs:
            kwargs["normalization_rule_tsv"] = str(rules)
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=out,
            vocab_size=vocab_size,
            hard_vocab_limit=False,
            num_threads=1,
            minloglevel=2,
            **kwargs,
        )
    # The normaliser spec inside the model records the rules file's temporary path: name it
    # plainly, so that re-runs write identical bytes.
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(out.getvalue())
    if model.normalizer_spec.normalization_rule_tsv:
        model.normalizer_spec.normalization_rule_tsv = "rules.tsv"
    return model.SerializeToString()


def wordpiece_vocab(specials: list[str], n_words: int = 140, n_suffixes: int = 60) -> list[str]:
    """A WordPiece vocabulary picked deterministically (the tokenizers library's WordPiece trainer
    breaks ties differently from run to run): the special tokens, every character of the
    normalised corpus alone and as a ##continuation, the most frequent words and the most frequent
    2-4 character word endings as ##pieces (ties broken alphabetically)."""
    from collections import Counter

    from tokenizers import normalizers

    norm = normalizers.BertNormalizer(lowercase=True, strip_accents=True, clean_text=True)
    pre = pre_tokenizers.BertPreTokenizer()
    words = Counter(
        w for line in CORPUS for w, _ in pre.pre_tokenize_str(norm.normalize_str(line))
    )
    chars = sorted({c for w in words for c in w})
    suffixes = Counter()
    for w, count in words.items():
        for k in (2, 3, 4):
            if len(w) > k:
                suffixes["##" + w[-k:]] += count
    by_count = lambda counter: [t for t, _ in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))]
    vocab = list(specials) + chars + ["##" + c for c in chars]
    vocab += [w for w in by_count(words) if len(w) > 1][:n_words]
    vocab += by_count(suffixes)[:n_suffixes]
    assert len(set(vocab)) == len(vocab)
    return vocab


def write_merges(path: Path, merges: list[str]) -> None:
    path.write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------------------------
# Through transformers
# --------------------------------------------------------------------------------------------


def finish(folder: Path, raw: dict[str, bytes | str], config: dict, added_special: list[str] = ()):
    """Load the raw files through transformers (the family's tokenizer class, named in
    tokenizer_config.json), save what transformers saves into `folder`, keep the raw files beside
    it, write special_tokens_map.json, and check that the saved folder tokenizes as the raw files
    do. Returns the tokenizer loaded back from `folder`."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, content in raw.items():
            if isinstance(content, bytes):
                (tmp / name).write_bytes(content)
            else:
                (tmp / name).write_text(content, encoding="utf-8")
        write_json(tmp / "tokenizer_config.json", config)
        tok = AutoTokenizer.from_pretrained(tmp)
        if added_special:
            tok.add_special_tokens({"additional_special_tokens": list(added_special)})
        folder.mkdir(parents=True, exist_ok=True)
        for stale in ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", *raw]:
            (folder / stale).unlink(missing_ok=True)
        tok.save_pretrained(folder)
        for name in raw:  # the family's own files, exactly as trained
            shutil.copyfile(tmp / name, folder / name)
        # transformers 5 leaves some settings out of the tokenizer_config.json it saves (Llama's
        # add_bos_token, for one); without them the raw files alone tokenize differently. Keep
        # every setting the family's own config has.
        saved = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        missing = {k: v for k, v in config.items() if k not in saved}
        if missing:
            write_json(folder / "tokenizer_config.json", dict(sorted({**saved, **missing}.items())))
        special = {
            k: v for k, v in sorted(tok.special_tokens_map.items()) if v is not None and v != []
        }
        write_json(folder / "special_tokens_map.json", special)
        back = AutoTokenizer.from_pretrained(folder)
        # The same folder without tokenizer.json: transformers converts the raw files again.
        no_json = tmp / "no_json"
        no_json.mkdir()
        for path in folder.iterdir():
            if path.name != "tokenizer.json":
                shutil.copyfile(path, no_json / path.name)
        from_raw = back if "tokenizer.json" in raw else AutoTokenizer.from_pretrained(no_json)
        for line in CORPUS + ["Café naïve ＡＩ… ﬁne  東京 😀 <mask> x"]:
            want = tok(line)["input_ids"]
            assert want == back(line)["input_ids"] == from_raw(line)["input_ids"], (folder, line)
        return back


def roberta_like(folder: Path, tokenizer_class: str, max_len: int):
    """RoBERTa/BART: <s>=0 <pad>=1 </s>=2 <unk>=3 ... <mask>=last (as roberta-base)."""
    vocab, merges = byte_level_bpe(360, ["<s>", "<pad>", "</s>", "<unk>"], ["<mask>"])
    raw = {
        "vocab.json": json.dumps(vocab, ensure_ascii=False),
        "merges.txt": "#version: 0.2\n" + "\n".join(merges) + "\n",
    }
    config = dict(
        tokenizer_class=tokenizer_class,
        model_max_length=max_len,
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
        add_prefix_space=False,
        trim_offsets=True,
        errors="replace",
    )
    return finish(folder, raw, config)


def gpt2(folder: Path, max_len: int):
    """GPT-2: no special token but <|endoftext|> (bos = eos = unk), at the last id; no BOS added."""
    vocab, merges = byte_level_bpe(360, [], ["<|endoftext|>"])
    raw = {
        "vocab.json": json.dumps(vocab, ensure_ascii=False),
        "merges.txt": "#version: 0.2\n" + "\n".join(merges) + "\n",
    }
    config = dict(
        tokenizer_class="GPT2Tokenizer",
        model_max_length=max_len,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        add_prefix_space=False,
        errors="replace",
    )
    return finish(folder, raw, config)


def qwen2(folder: Path, max_len: int):
    """Qwen2: byte-level BPE with Qwen's own pre-tokenizer; <|endoftext|> (eos, pad),
    <|im_start|>, <|im_end|> after the merges' vocabulary; no BOS; a ChatML chat template."""
    vocab, merges = byte_level_bpe(360, [], ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    raw = {
        "vocab.json": json.dumps(vocab, ensure_ascii=False),
        "merges.txt": "#version: 0.2\n" + "\n".join(merges) + "\n",
    }
    config = dict(
        tokenizer_class="Qwen2Tokenizer",
        model_max_length=max_len,
        bos_token=None,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        errors="replace",
        chat_template=CHATML_TEMPLATE,
    )
    return finish(folder, raw, config, added_special=["<|im_start|>", "<|im_end|>"])


def llama2_sentencepiece(folder: Path, max_len: int, chat_template: str | None = None):
    """Llama 2 / TinyLlama / Mistral v0.1: a SentencePiece BPE tokenizer.model with byte fallback,
    <unk>=0 <s>=1 </s>=2; the tokenizer adds <s> (BOS) and no </s>. `chat_template`, when given,
    goes into tokenizer_config.json (Gemma's)."""
    model = sentencepiece_model(
        CORPUS,
        400,
        model_type="bpe",
        byte_fallback=True,
        split_digits=True,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        normalization_rule_name="identity",
        add_dummy_prefix=True,
        remove_extra_whitespaces=False,
        allow_whitespace_only_pieces=True,
    )
    config = dict(
        tokenizer_class="LlamaTokenizer",
        model_max_length=max_len,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token=None,
        add_bos_token=True,
        add_eos_token=False,
        legacy=False,
    )
    if chat_template is not None:
        config["chat_template"] = chat_template
    return finish(folder, {"tokenizer.model": model}, config)


def llama3_tokenizer_json(folder: Path, max_len: int):
    """Llama 3 style: tokenizer.json only (byte-level BPE behind a regex Split pre-tokenizer), with
    <|begin_of_text|> added in front by a TemplateProcessing post-processor, and the special tokens
    after the merges' vocabulary; class PreTrainedTokenizerFast."""
    bos, eos = "<|begin_of_text|>", "<|end_of_text|>"
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=360,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS, trainer=trainer)
    tok.add_special_tokens([bos, eos])
    bos_id = tok.token_to_id(bos)
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"{bos}:0 $A:0",
                pair=f"{bos}:0 $A:0 {bos}:1 $B:1",
                special_tokens=[(bos, bos_id)],
            ),
        ]
    )
    config = dict(
        tokenizer_class="PreTrainedTokenizerFast",
        model_max_length=max_len,
        bos_token=bos,
        eos_token=eos,
        clean_up_tokenization_spaces=True,
        model_input_names=["input_ids", "attention_mask"],
    )
    return finish(folder, {"tokenizer.json": tok.to_str(pretty=True)}, config)


def wordpiece(folder: Path, tokenizer_class: str, max_len: int):
    """BERT-style WordPiece vocab.txt with the real layout's shape: [PAD]=0, some [unused], then
    [UNK] [CLS] [SEP] [MASK] (at 5-8 here, 100-103 in bert-base)."""
    specials = ["[PAD]"] + [f"[unused{i}]" for i in range(4)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = wordpiece_vocab(specials)
    config = dict(
        tokenizer_class=tokenizer_class,
        model_max_length=max_len,
        do_lower_case=True,
        strip_accents=None,
        tokenize_chinese_chars=True,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
    )
    return finish(folder, {"vocab.txt": "\n".join(vocab) + "\n"}, config)


def fairseq_sentencepiece() -> bytes:
    """XLM-R/mBART's sentencepiece.bpe.model (a unigram model despite the name): <unk>=0 <s>=1
    </s>=2 inside the model; the tokenizer remaps to <s>=0 <pad>=1 </s>=2 <unk>=3 and shifts every
    other piece by one (fairseq's offset)."""
    return sentencepiece_model(CORPUS, 260, model_type="unigram", unk_id=0, bos_id=1, eos_id=2, pad_id=-1)


def xlm_roberta(folder: Path, max_len: int):
    config = dict(
        tokenizer_class="XLMRobertaTokenizer",
        model_max_length=max_len,
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
    )
    return finish(folder, {"sentencepiece.bpe.model": fairseq_sentencepiece()}, config)


def mbart(folder: Path, max_len: int):
    config = dict(
        tokenizer_class="MBartTokenizer",
        model_max_length=max_len,
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
        src_lang="en_XX",
        tgt_lang="de_DE",
    )
    return finish(folder, {"sentencepiece.bpe.model": fairseq_sentencepiece()}, config)


def albert(folder: Path, max_len: int):
    """ALBERT's spiece.model: <pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4, trained on lower-cased
    text; the tokenizer lower-cases and strips accents."""
    model = sentencepiece_model(
        [line.lower() for line in CORPUS],
        260,
        model_type="unigram",
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
    )
    config = dict(
        tokenizer_class="AlbertTokenizer",
        model_max_length=max_len,
        do_lower_case=True,
        keep_accents=False,
        remove_space=True,
        bos_token="[CLS]",
        eos_token="[SEP]",
        unk_token="<unk>",
        sep_token="[SEP]",
        pad_token="<pad>",
        cls_token="[CLS]",
        mask_token="[MASK]",
    )
    return finish(folder, {"spiece.model": model}, config)


def t5(folder: Path, max_len: int, extra_ids: int = 8):
    """T5's spiece.model: <pad>=0 </s>=1 <unk>=2; the tokenizer appends </s> and puts
    <extra_id_0..N-1> at the end of the vocabulary (extra_id_0 last)."""
    model = sentencepiece_model(
        CORPUS, 260, model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1
    )
    config = dict(
        tokenizer_class="T5Tokenizer",
        model_max_length=max_len,
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        extra_ids=extra_ids,
        additional_special_tokens=[f"<extra_id_{i}>" for i in range(extra_ids)],
    )
    return finish(folder, {"spiece.model": model}, config)


def marian(folder: Path, max_len: int):
    """Marian (opus-mt): source.spm (English) and target.spm (German) SentencePiece models and one
    shared vocab.json: </s>=0 <unk>=1, the pieces of both models, <pad>=last (the decoder start).
    transformers' MarianTokenizer is a Python (sentencepiece) tokenizer: no tokenizer.json."""
    source = sentencepiece_model(ENGLISH, 200, model_type="unigram")
    target = sentencepiece_model(GERMAN, 150, model_type="unigram")
    vocab = {"</s>": 0, "<unk>": 1}
    for model in (source, target):
        sp = spm.SentencePieceProcessor(model_proto=model)
        for i in range(sp.get_piece_size()):
            piece = sp.id_to_piece(i)
            if not (sp.is_control(i) or sp.is_unknown(i)) and piece not in vocab:
                vocab[piece] = len(vocab)
    vocab["<pad>"] = len(vocab)
    config = dict(
        tokenizer_class="MarianTokenizer",
        model_max_length=max_len,
        source_lang="en",
        target_lang="de",
        unk_token="<unk>",
        eos_token="</s>",
        pad_token="<pad>",
        separate_vocabs=False,
    )
    raw = {
        "source.spm": source,
        "target.spm": target,
        "vocab.json": json.dumps(vocab, ensure_ascii=False, indent=2),
    }
    return finish(folder, raw, config)
