"""attnviz: see what a Transformer's attention heads look at, inline in a notebook.

Three ways in:

- ``attnviz.run(text, model=...)`` runs a model (attnviz's own implementation of its attention,
  agreeing with Hugging Face transformers to about 1e-5) and returns a :class:`Report`.
- ``attnviz.head_view(attention, tokens)`` and ``attnviz.model_view(...)`` draw attention you
  already have (transformers' ``outputs.attentions``, numpy arrays), with bertviz's arguments:
  ``from attnviz import head_view`` is the whole migration.
- ``attnviz.render(path)`` reads an attnviz JSON export, an ``.npz`` or a ``.safetensors`` file.

A :class:`Report` shows itself inline (``_repr_html_``): the self-contained report, with its head,
model, matrix, neuron and statistics views, in an isolated iframe that needs no network. Every
computation happens in the attnviz Rust library; this package only converts arguments.
"""

from __future__ import annotations

import json as _json
import os
import warnings as _warnings
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from . import _inline
from . import _native

__all__ = [
    "Report",
    "Views",
    "run",
    "induction",
    "render",
    "head_view",
    "model_view",
    "from_arrays",
    "merge",
    "clear_cache",
    "AttnvizWarning",
]

__version__ = _native.version()

#: The model ``run`` uses when none is given: ``$ATTNVIZ_MODEL``, else this (as the CLI).
DEFAULT_MODEL = "bert-base-uncased"

_VIEWS = ("head", "model", "matrix", "neuron", "stats", "image", "lens", "heads", "router")


class AttnvizWarning(UserWarning):
    """Something about the attention worth knowing (rows that don't sum to 1)."""


def clear_cache() -> None:
    """Forget the models ``run`` keeps loaded (after changing a model folder on disk)."""
    _native.clear_cache()


class Report:
    """Attention of every layer and head for one input, and its views.

    Displaying it in a notebook shows the interactive report inline. ``attention`` is a
    read-only numpy array ``[layers, heads, queries, keys]`` over the report's own memory (no
    copy); ``attention[l, h, q, k]`` is how much query ``q`` attends to key ``k``.
    """

    def __init__(
        self,
        native: Any,
        *,
        view: str = "head",
        layer: Optional[int] = None,
        head: Optional[int] = None,
        words: bool = False,
        no_special: bool = False,
        settings: Sequence[tuple] = (),
        title: Optional[str] = None,
        height: Optional[int] = None,
        query: Optional[str] = None,
        _of_several: bool = False,
    ):
        if view not in _VIEWS:
            raise ValueError(f"view {view!r} is not one of {', '.join(_VIEWS)}")
        # One kind of several (Views) takes the selection clamped to its own layers and heads.
        layers, heads = (1 << 62, 1 << 62) if _of_several else native.shape[:2]
        _check_index("layer", layer, layers, "layers")
        _check_index("head", head, heads, "heads")
        self._native = native
        self._view = view
        self._layer = layer
        self._head = head
        self._words = words
        self._no_special = no_special
        self._settings = [(str(k), str(v)) for k, v in settings]
        self._title = title
        self._height = height
        self._query = query
        self._stats = None

    # -- the data --------------------------------------------------------------------------

    @property
    def attention(self) -> np.ndarray:
        """``[layers, heads, queries, keys]`` float32, read-only, without a copy."""
        return self._native.weights()

    #: What the model generated (decoded), when it generated (``run(..., generate=N)``).
    generated_text: Optional[str] = None
    #: A speech run's transcript (``run(audio=...)``), else None.
    transcript: Optional[str] = None
    #: A speech run's word timings: dicts with ``word``, ``start`` and ``end`` (seconds of the
    #: recording), ``tokens``, ``rows``, ``start_frame`` and ``end_frame``; else None.
    words: Optional[list] = None
    #: A speech run's JSON ``speech`` section (the recording, the window captured, the prompt,
    #: the alignment heads, the transcript and the word timings), else None.
    speech: Optional[dict] = None
    #: A summarised run's summaries (``run(..., summarise=True)``), else None: a dict of
    #: ``heads``, ``queries``, ``keys``, ``top_k``, ``pool`` (ints), ``distance_bins`` (each
    #: bin's lower edge), ``rows`` (the queries whose full rows were kept), ``layers`` (the
    #: model's numbers of the summarised layers), and numpy arrays over them, every layer
    #: stacked: ``top_keys`` int64 and ``top_weights`` float32 ``[layers, heads, queries, top_k]``
    #: (largest first; a query that sees fewer keys is padded with key -1, weight 0),
    #: ``sink``, ``entropy`` (nats) ``[layers, heads, queries]``, ``distance``
    #: ``[layers, heads, bins]``, ``pooled`` ``[layers, heads, query blocks, key blocks]`` (the
    #: weights summed over blocks of ``pool`` tokens), ``full_rows``
    #: ``[layers, heads, len(rows), keys]``, and ``learned_sink`` ``[layers, heads, queries]``
    #: (gpt-oss) or None. The JSON export's ``summary`` section holds the same
    #: (``docs/json.md``, "Summarised runs"); ``attention`` then has no layer.
    summary: Optional[dict] = None

    @property
    def router(self) -> Optional[dict]:
        """A mixture-of-experts model's router decisions (Qwen3-MoE, Mixtral, OLMoE, gpt-oss), or
        ``None`` for any other model. A dict of:

        - ``experts``, ``top_k`` (ints), ``renormalised`` (bool: the weights are the chosen
          experts' probabilities divided by their sum, rather than the probabilities);
        - ``tokens``: the tokens the decisions are for (token level, whatever the view);
        - ``layers``: the model's numbers of the routed layers (dense layers are absent);
        - ``chosen``: int32 ``[routed layers, tokens, top_k]``, each token's experts, most probable
          first;
        - ``weights``: float32 ``[routed layers, tokens, top_k]``, the weight each chosen expert's
          output was added with;
        - ``probs``: float32 ``[routed layers, tokens, experts]``, the router's probability of
          every expert;
        - ``load``: int64 ``[routed layers, experts]``, how many tokens chose each expert.

        The tokens routed to expert ``e`` in routed layer ``i``:
        ``np.nonzero((r["chosen"][i] == e).any(axis=1))[0]``. The JSON export's ``router``
        section holds the same (``docs/json.md``).
        """
        text = self._native.router_json
        if text is None:
            return None
        raw = _json.loads(text)
        n, k, e = len(raw["tokens"]), raw["top_k"], raw["experts"]
        layers = raw["layers"]
        chosen = np.array([l["chosen"] for l in layers], dtype=np.int32).reshape(len(layers), n, k)
        load = np.zeros((len(layers), e), dtype=np.int64)
        for i in range(len(layers)):
            load[i] = np.bincount(chosen[i].ravel(), minlength=e)
        return {
            "experts": e,
            "top_k": k,
            "renormalised": raw["renormalised"],
            "tokens": raw["tokens"],
            "layers": [l["layer"] for l in layers],
            "chosen": chosen,
            "weights": np.array([l["weights"] for l in layers], dtype=np.float32).reshape(len(layers), n, k),
            "probs": np.array([l["probs"] for l in layers], dtype=np.float32).reshape(len(layers), n, e),
            "load": load,
        }

    @property
    def mixing(self) -> Optional[dict]:
        """A hybrid model's token mixing (Qwen3-Next's gated delta layers), or ``None`` for a model
        whose every layer is attention. A dict of:

        - ``kind`` (``"gated delta"``), ``layers``: the model's numbers of those layers (none of
          them is among the attention's layers);
        - ``legend``: ``"token mixing (gated delta), not attention probabilities"``;
        - ``weights``: float32 ``[layers, heads, tokens, tokens]``, each layer's exact mixing
          matrices (the rule's output is ``out[t] = Σ_s weights[l, h, t, s] · v[s]``), or
          ``None`` where the run did not capture them (``layers=`` given). Rows need not sum to
          1 and entries may be negative: these are not attention probabilities;
        - ``tokens``: the tokens they are over (token level, whatever the view).

        The JSON export's ``non_softmax`` section holds the same (``docs/json.md``).
        """
        text = self._native.mixing_json
        if text is None:
            return None
        raw = _json.loads(text)
        m = raw.get("mixing")
        return {
            "kind": raw["kind"],
            "layers": raw["layers"],
            "legend": raw["legend"],
            "tokens": m["tokens"] if m else None,
            "weights": np.array([l["weights"] for l in m["layers"]], dtype=np.float32).reshape(
                len(m["layers"]), m["heads"], len(m["tokens"]), len(m["tokens"])
            )
            if m
            else None,
        }

    @property
    def sink_shares(self) -> Optional[np.ndarray]:
        """A model with learned attention sinks (gpt-oss): float32 ``[layers, heads, queries]``,
        the share of each row's softmax the head's sink took; each row of ``attention`` sums to
        1 less it. ``None`` for any other model."""
        flat = self._native.sink_shares
        if flat is None:
            return None
        layers, heads, queries, _ = self._native.shape
        return np.array(flat, dtype=np.float32).reshape(layers, heads, queries)

    @property
    def generated(self) -> list:
        """For each query token, whether the model generated it (``run(..., generate=N)``)
        rather than read it."""
        return self._native.generated

    @property
    def encoder_attention(self) -> Optional[np.ndarray]:
        """``attention`` when this is an encoder's self-attention, else None."""
        return self.attention if self.kind == "encoder" else None

    @property
    def decoder_attention(self) -> Optional[np.ndarray]:
        """``attention`` when this is a decoder's self-attention, else None."""
        return self.attention if self.kind == "decoder" else None

    @property
    def cross_attention(self) -> Optional[np.ndarray]:
        """``attention`` when this is cross-attention, else None."""
        return self.attention if self.kind == "cross" else None

    @property
    def image(self) -> Optional[dict]:
        """A vision model's picture (``run(image=...)``): ``grid`` ``[rows, cols]``, ``patch``,
        ``original`` and ``input`` ``[width, height]``, ``preprocessing``, ``cells`` (what each
        token is: class, distillation, register or the patch at row/col) and ``norms``
        (``[layers][tokens]``, each token's output norm), and for SigLIP ``pooling``: its
        attention-pooling head (``label``, ``query`` ``"probe"``, ``heads``, ``weights``
        ``[heads][tokens]``); ``None`` for text."""
        text = self._native.image_json
        return None if text is None else _json.loads(text)

    @property
    def pictures(self) -> list:
        """The pictures a vision-language model (LLaVA, SmolVLM, …) read with its prompt, in order: each a
        dict with ``first`` (the index of its first image token), ``count`` (its image tokens,
        ``first`` to ``first + count - 1``), ``grid`` ``[rows, cols]``, ``source`` (the file's
        name, or ``image``/``image1``, ``image2``, … for pixels in memory) and ``cells`` (what
        each of its tokens is); ``[]`` for other models. Idefics3 and SmolVLM split a picture
        into tiles plus its global view, each an entry of its own with ``tile``:
        ``{"picture": 1, "at": [row, col], "of": [rows, cols]}`` (no ``at`` for the global
        view)."""
        return _json.loads(self._native.pictures_json)

    @property
    def tokens(self) -> list:
        """The query tokens (every token, for self-attention)."""
        return self._native.tokens

    @property
    def key_tokens(self) -> list:
        """The key tokens (the encoder's for cross-attention; else the same as ``tokens``)."""
        return self._native.key_tokens

    @property
    def display_tokens(self) -> list:
        """The query tokens as a person reads them (``Ġquick`` → ``quick``, ``Ċ`` → ``↵``); every
        view shows these unless given ``raw_tokens=True``."""
        return self._native.display_tokens

    @property
    def roles(self) -> list:
        """Each token's role: start, end, pad, special, word or piece."""
        return self._native.roles

    @property
    def kind(self) -> str:
        """``self``, ``encoder``, ``decoder`` or ``cross``."""
        return self._native.kind

    @property
    def mask(self) -> str:
        """``bidirectional`` or ``causal``."""
        return self._native.mask

    @property
    def windows(self) -> list:
        """Each captured layer's sliding attention window (a query sees its own token and the
        ``window - 1`` before it; the weights outside it are exactly 0), or None for a layer
        without one: the JSON export's ``layer_masks``."""
        return self._native.windows

    @property
    def text(self) -> str:
        return self._native.text

    @property
    def pair(self) -> Optional[str]:
        return self._native.pair

    @property
    def sentence_b_start(self) -> Optional[int]:
        return self._native.sentence_b_start

    @property
    def model(self) -> str:
        """The model (hub id or folder), or the source of imported attention."""
        return self._native.model_id

    @property
    def shape(self) -> tuple:
        """``(layers, heads, queries, keys)``."""
        return self._native.shape

    @property
    def stats(self) -> dict:
        """Per-head statistics (docs/stats.md): each a ``[layers, heads]`` numpy array
        (``label`` holds strings), computed on the report's view (``words``/``no_special``)."""
        if self._stats is None:
            raw = _json.loads(self._native.stats(words=self._words, no_special=self._no_special))
            out = {}
            for name, value in raw.items():
                if name in ("reference", "thresholds"):
                    out[name] = value
                elif name == "label":
                    out[name] = np.array(value, dtype=str)
                else:
                    out[name] = np.array(value)
            self._stats = out
        return self._stats

    # -- the views -------------------------------------------------------------------------

    def html(self, view: Optional[str] = None, **options: Any) -> str:
        """The self-contained HTML report (a whole page) opened on ``view``."""
        opts = dict(
            view=view or self._view,
            layer=self._layer,
            head=self._head,
            words=self._words,
            no_special=self._no_special,
            title=self._title,
            settings=self._settings,
        )
        if self._query is not None:
            opts["query"] = self._query
        opts.update(options)
        return self._native.html(**opts)

    def save(self, path: Any, view: Optional[str] = None, **options: Any) -> Path:
        """Write the HTML report to ``path`` (written aside, then renamed into place)."""
        return _write_text(path, self.html(view, **options))

    def png(self, path: Any, figure: str = "head", *, dpi: Optional[float] = None, **options: Any) -> Path:
        """Write a PNG figure: ``figure`` is head, layer, mean, model or rollout (see
        ``attnviz --help``), or for a mixture-of-experts model router (tokens × experts at
        ``layer``, the chosen experts outlined, and the expert load per routed layer); options: layer, head (None: the mean), words, no_special,
        colormap, theme, scale, scale_factor (or ``dpi``, 48 to 384: ``scale_factor=dpi/96``),
        raw_tokens, expand_pictures (a vision-language model's pictures token by token rather
        than one band each), query (of a vision-language model: token ``N``'s attention to its
        pictures drawn over them, or ``"generated"``: each generated token's, one overlay
        each)."""
        if dpi is not None:
            if "scale_factor" in options:
                raise ValueError("give dpi= or scale_factor=, not both (dpi is scale_factor × 96)")
            if isinstance(dpi, bool) or not isinstance(dpi, (int, float, np.integer, np.floating)):
                raise TypeError(f"dpi must be a number of pixels per inch, not {dpi!r}")
            if not 48 <= dpi <= 384:
                raise ValueError(f"dpi={dpi} is not a pixel density from 48 to 384")
            options["scale_factor"] = float(dpi) / 96.0
        return self._image(path, "png", figure, options)

    def svg(self, path: Any, figure: str = "head", **options: Any) -> Path:
        """Write an SVG figure (the same options as :meth:`png`, without scale_factor)."""
        return self._image(path, "svg", figure, options)

    def _image(self, path: Any, fmt: str, figure: str, options: dict) -> Path:
        opts = dict(layer=self._layer, words=self._words, no_special=self._no_special)
        opts.update(options)
        if opts.get("query") is not None:
            opts["query"] = _query(opts["query"])
        path = Path(path)
        self._native.image(str(path), format=fmt, figure=figure, **opts)
        return path

    def json(self, path: Any = None, full_precision: bool = False, include: Iterable[str] = ()) -> Optional[str]:
        """The JSON export (docs/json.md): returned as a string, or written to ``path``."""
        text = self._native.json(
            full_precision=full_precision,
            words=self._words,
            no_special=self._no_special,
            include=list(include),
        )
        if path is None:
            return text
        _write_text(path, text)
        return None

    def terminal(self, layer: Optional[int] = None, head: Optional[int] = None, top: int = 3, width: int = 100, raw_tokens: bool = False, expand_pictures: bool = False) -> str:
        """The terminal view of one layer and head (``head=None``: the mean over heads);
        ``raw_tokens=True`` labels tokens as the vocabulary spells them (``Ġquick``);
        ``expand_pictures=True`` shows a vision-language model's pictures token by token rather
        than one band each."""
        return self._native.terminal(
            layer=self._layer if layer is None else layer,
            head=head,
            words=self._words,
            no_special=self._no_special,
            top=top,
            width=width,
            raw_tokens=raw_tokens,
            expand_pictures=expand_pictures,
        )

    def __str__(self) -> str:
        return self.terminal()

    def __repr__(self) -> str:
        l, h, q, k = self.shape
        size = f"{q} tokens" if self.kind != "cross" else f"{q} × {k} tokens"
        return f"<attnviz.Report {self.kind} attention of {self._native.model_name}: {l} layers × {h} heads · {size}>"

    @property
    def data(self) -> str:
        """The inline HTML (what IPython's ``HTML(...).data`` holds; bertviz's ``html_action='return'``)."""
        return self._repr_html_()

    def _repr_html_(self) -> str:
        height = self._height or _inline.default_height(max(self.shape[2], self.shape[3]))
        if self._view == "model":
            height = max(height, 640)
        title = self._title or f"attnviz: {self._view} view of {self._native.model_name}"
        return _inline.iframe(self.html(), height, title)


class Views:
    """Several kinds of attention of one run shown together (an encoder–decoder's encoder,
    decoder and cross-attention): one page with an Encoder / Decoder / Cross selector, opened on
    cross-attention when there is one. ``views["Cross"]`` is that kind's :class:`Report`."""

    def __init__(self, parts: Sequence[tuple], *, target: Optional[str] = None, **options: Any):
        #: ``(heading, Report or None, note or None)`` for each part.
        self.parts = list(parts)
        self._target = target
        self._options = options

    #: What the decoder generated (decoded), for an encoder–decoder run that generated.
    generated_text: Optional[str] = None
    #: A speech run's transcript (``run(audio=...)``), else None.
    transcript: Optional[str] = None
    #: A speech run's word timings: dicts with ``word``, ``start`` and ``end`` (seconds of the
    #: recording), ``tokens``, ``rows``, ``start_frame`` and ``end_frame``; else None.
    words: Optional[list] = None
    #: A speech run's JSON ``speech`` section (the recording, the window captured, the prompt,
    #: the alignment heads, the transcript and the word timings), else None.
    speech: Optional[dict] = None
    #: The length an encoder–decoder generated to by default (neither target nor generate).
    default_generation: Optional[int] = None

    def _kind(self, kind: str) -> Optional[Report]:
        for _, report, _ in self.parts:
            if report is not None and report.kind == kind:
                return report
        return None

    @property
    def encoder_attention(self) -> Optional[np.ndarray]:
        """The encoder's self-attention ``[layers, heads, source, source]``, read-only."""
        r = self._kind("encoder")
        return None if r is None else r.attention

    @property
    def decoder_attention(self) -> Optional[np.ndarray]:
        """The decoder's self-attention ``[layers, heads, target, target]``, read-only."""
        r = self._kind("decoder")
        return None if r is None else r.attention

    @property
    def cross_attention(self) -> Optional[np.ndarray]:
        """Cross-attention ``[layers, heads, target, source]``: decoder rows over encoder keys."""
        r = self._kind("cross")
        return None if r is None else r.attention

    @property
    def attention(self) -> np.ndarray:
        raise AttributeError(
            "an encoder–decoder run has three kinds of attention: use encoder_attention, "
            "decoder_attention or cross_attention"
        )

    @property
    def generated(self) -> list:
        """For each decoder token, whether the model generated it (all but the start token when
        the decoder generated; none when it was teacher-forced)."""
        r = self._kind("decoder")
        return [] if r is None else r.generated

    @property
    def target(self) -> Optional[str]:
        """The teacher-forced target, or None when the decoder generated."""
        return self._target

    def __getitem__(self, heading: str) -> Report:
        for h, report, _ in self.parts:
            if report is not None and h.lower() == heading.lower():
                return report
        raise KeyError(heading)

    def _reports(self) -> list:
        return [r for _, r, _ in self.parts if r is not None]

    def html(self, view: Optional[str] = None, **options: Any) -> str:
        """The self-contained HTML report holding every kind (a whole page), opened on
        cross-attention when there is one, else the first kind, and on ``view``."""
        reports = self._reports()
        kinds = [r.kind for r in reports]
        opts = dict(view=view or self._options.get("view", "head"))
        for k in ("layer", "head", "words", "no_special", "title", "settings"):
            if self._options.get(k) is not None:
                opts[k] = self._options[k]
        opts.update(options)
        open_at = kinds.index("cross") if "cross" in kinds else 0
        return _native.html_kinds([r._native for r in reports], open=open_at, target=self._target, **opts)

    @property
    def data(self) -> str:
        return self._repr_html_()

    def _repr_html_(self) -> str:
        reports = self._reports()
        out = ""
        if reports:
            rows = max(max(r.shape[2], r.shape[3]) for r in reports)
            height = _inline.default_height(rows)
            if self._options.get("view") == "model":
                height = max(height, 640)
            names = ", ".join(h for h, r, _ in self.parts if r is not None)
            out = _inline.iframe(self.html(), height, f"attnviz: {names} attention of {reports[0]._native.model_name}")
        for _, _, note in self.parts:
            if note:
                out += _inline.notice(note)
        return out

    def save(self, path: Any) -> Path:
        """Write the page holding every kind to ``path`` (written aside, then renamed)."""
        return _write_text(path, self.html())

    def __repr__(self) -> str:
        return f"<attnviz.Views {', '.join(h for h, _, _ in self.parts)}>"


def _check_index(name: str, value: Any, count: int, what: str) -> None:
    """``value`` is None or an index among ``count`` (layers, heads): a ValueError that says
    which exist, not a numpy IndexError or an OverflowError from deep inside."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer index, not {type(value).__name__} {value!r}")
    if not 0 <= int(value) < count:
        raise ValueError(f"{name} {int(value)} does not exist: there are {count} {what} (0 to {count - 1})")


def _write_text(path: Any, text: str) -> Path:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.attnviz-tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def merge(partials: Iterable[Any], out: Any = None) -> dict:
    """Merge the partial statistics of corpus shards, exactly as ``attnviz merge`` does.

    ``partials``: each shard's ``corpus_partial.json`` (a path), its output folder, or the
    dict ``json.load`` read from such a file, in any order: the merge is exact (integer sums),
    so every order gives the same result. Returns the corpus summary (what ``corpus_stats.json``
    holds) as a dict; with ``out``, also writes it there, byte for byte the file ``attnviz merge
    --out`` writes. Shards of different corpora, models or options, missing or duplicate shards
    and unfinished ones are refused with a ``ValueError`` naming the file; differences that do
    not stop the merge (thread counts) are warned about (``AttnvizWarning``).

    The reduce step of a job that runs shards with Ray, Dask or ``concurrent.futures``::

        with ProcessPoolExecutor() as pool:
            folders = list(pool.map(run_shard, range(1, 9)))
        stats = attnviz.merge(folders, out="corpus_stats.json")
    """
    if isinstance(partials, (str, bytes, os.PathLike, dict)):
        raise TypeError("merge takes a list of partials (paths, folders or dicts), not one")
    items: list = []
    for p in partials:
        if isinstance(p, dict):
            items.append(_json.dumps(p).encode())
        elif isinstance(p, (str, os.PathLike)):
            items.append(os.fspath(p))
        else:
            raise TypeError(
                f"each partial is a path, a shard's output folder or a dict read from a "
                f"corpus_partial.json, not {type(p).__name__}"
            )
    text, notes = _native.merge(items, None if out is None else os.fspath(out))
    for note in notes:
        _warn(note)
    return _json.loads(text)


def _warn(message: Optional[str]) -> None:
    if message:
        _warnings.warn(message, AttnvizWarning, stacklevel=3)


# -- running a model -------------------------------------------------------------------------


_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _max_memory(value: Any) -> Optional[int]:
    """``max_memory`` as bytes: an int, or a size as the CLI's ``--max-memory`` takes it
    (``"2G"``, ``"512M"``, ``"1.5GiB"``; k/M/G/T are powers of 1024)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"max_memory must be a number of bytes or a size such as '2G', not {value!r}")
    if isinstance(value, (int, np.integer)):
        if int(value) < 1:
            raise ValueError(f"max_memory must be at least 1 byte, not {int(value)}")
        return int(value)
    if not isinstance(value, str):
        raise TypeError(f"max_memory must be a number of bytes or a size such as '2G', not {type(value).__name__}")
    t = value.strip().lower()
    number = t.rstrip("kmgtib")
    unit = t[len(number):].strip()
    unit = unit[:-2] if unit.endswith("ib") else unit[:-1] if unit.endswith("b") else unit
    try:
        bytes_ = float(number) * _SIZE_UNITS[unit]
    except (ValueError, KeyError):
        raise ValueError(f"max_memory {value!r} is not a memory size; write e.g. '2G', '512M' or a number of bytes") from None
    if not 1 <= bytes_ < 2**63:
        raise ValueError(f"max_memory {value!r} is not a memory size from 1 byte to 8 EiB")
    return int(bytes_)


def _layer_list(value: Any) -> Optional[list]:
    """``layers`` as a sorted list: an int, a sequence of ints, or the CLI's ``"0,5,10-12"``."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"layers must be layer numbers, not {value!r}")
    if isinstance(value, (int, np.integer)):
        value = [value]
    elif isinstance(value, str):
        out = []
        for part in value.split(","):
            a, dash, b = part.partition("-")
            try:
                lo, hi = int(a), int(b) if dash else int(a)
            except ValueError:
                raise ValueError(f"layers {value!r}: `{part.strip()}` is not a layer number; give numbers and ranges from 0, e.g. '0,5,10-12'") from None
            if lo > hi:
                raise ValueError(f"layers {value!r}: the range {lo}-{hi} runs backwards; write {hi}-{lo}")
            out.extend(range(lo, hi + 1))
        value = out
    try:
        layers = list(value)
    except TypeError:
        raise TypeError(f"layers must be an int, a list of ints or a string such as '0,5,10-12', not {type(value).__name__}") from None
    for layer in layers:
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
            raise TypeError(f"layers must be layer numbers (ints), not {layer!r}")
        if layer < 0:
            raise ValueError(f"layers: {int(layer)} is not a layer number; layers are numbered from 0")
    if not layers:
        raise ValueError("layers is empty; give the layers to capture, or None for every layer")
    return sorted({int(layer) for layer in layers})


def _optional_str(name: str, value: Any) -> Optional[str]:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a string, not {type(value).__name__}")
    return value


def induction(model: str, revision: str = "main") -> Optional[dict]:
    """The head detector's induction scores of ``model`` (docs/stats.md, "Head detectors"):
    TransformerLens's induction pattern measured on a repeated random-token probe the library
    builds, one run. A dict with ``score`` (a ``[layers, heads]`` numpy array), ``input_ids``
    (the probe), ``period``, ``seed``, ``layers`` and ``reference``; ``None`` for models it does
    not apply to (encoder–decoders, vision models). The previous-token and duplicate-token scores
    are per input, in ``report.stats``."""
    for name, value in (("model", model), ("revision", revision)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, not {type(value).__name__}")
    raw = _native.induction(model, revision=revision)
    if raw is None:
        return None
    out = _json.loads(raw)
    out["score"] = np.array(out["score"], dtype=float)
    return out


# The most tokens per logit-lens cell (the library's `analysis::lens::MAX_TOP`).
_MAX_LENS_TOP = 100


def _summary_spec(summarise: Any, top_keys: Any, rows: Any) -> Optional[tuple]:
    """``run``'s summary settings: ``(top_keys, rows)`` for the native run, or None."""
    if not summarise:
        if rows is not None:
            raise ValueError("rows= names the queries whose full rows a summarised run keeps; give summarise=True as well")
        return None
    if isinstance(top_keys, bool) or not isinstance(top_keys, (int, np.integer)):
        raise TypeError(f"top_keys must be a number of keys per query (an int), not {top_keys!r}")
    if top_keys < 1:
        raise ValueError(f"top_keys={int(top_keys)} keeps nothing; give at least 1")
    kept = []
    for r in rows or ():
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 0:
            raise TypeError(f"rows must be token numbers (ints from 0), not {r!r}")
        kept.append(int(r))
    return (int(top_keys), kept)


def run(
    text: Optional[str] = None,
    model: Optional[str] = None,
    pair: Optional[str] = None,
    *,
    image: Any = None,
    target: Optional[str] = None,
    generate: Optional[int] = None,
    chat: bool = False,
    layers: Any = None,
    max_memory: Any = None,
    revision: str = "main",
    truncate: bool = False,
    neuron: bool = False,
    weighting: str = "raw",
    lens: Any = None,
    alti: bool = False,
    value_zeroing: bool = False,
    attribution: bool = False,
    target_token: Optional[str] = None,
    contrast: Any = None,
    ablate: Any = None,
    max_analysis_time: Any = None,
    words: bool = False,
    no_special: bool = False,
    view: Optional[str] = None,
    layer: Optional[int] = None,
    head: Optional[int] = None,
    kind: Optional[str] = None,
    query: Any = None,
    threads: Optional[int] = None,
    full_paths: bool = False,
    tower: bool = False,
    mmproj: Any = None,
    pan_and_scan: bool = False,
    audio: Any = None,
    language: Optional[str] = None,
    task: str = "transcribe",
    timestamps: bool = False,
    window: Optional[int] = None,
    summarise: bool = False,
    top_keys: int = 16,
    rows: Any = None,
    _images: Optional[list] = None,
):
    """Run ``text`` (and ``pair``) through ``model`` and capture every layer's and head's
    attention, as the CLI runs ``attnviz TEXT`` with the same options (one library run request).

    ``model`` is a Hugging Face repo id or a local folder (default: ``$ATTNVIZ_MODEL``, else
    bert-base-uncased); it is loaded once per process.

    - ``pair``: sentence B of a pair (encoders such as BERT).
    - ``target``: the output an encoder–decoder (BART, T5, Marian) is teacher-forced with;
      without it an encoder–decoder generates (``generate`` tokens, else the checkpoint's
      default length).
    - ``generate=N``: generate up to N tokens greedily (decoders and encoder–decoders) before
      capturing; ``chat=True`` wraps the text in a decoder's chat template first. Generated
      tokens are flagged in ``report.generated``.
    - ``layers``: capture only these layers (an int, a list, or ``"0,5,10-12"``).
    - ``max_memory``: the most the captured attention may take (bytes, or ``"2G"``).
    - ``truncate``: cut input longer than the model takes instead of raising ValueError.
    - ``neuron`` keeps the query/key vectors for the neuron view; ``words``/``no_special`` open
      the views on words and without the special tokens (the page can switch back); ``view``,
      ``layer`` and ``head`` choose what the report opens on. By default it opens as the CLI's
      report does: on the image view for a picture, the lens view with ``lens``, the heads view
      (layers × heads, ranked) with attribution or ablation, else the head view.
    - ``weighting``: what every view draws: ``"raw"`` attention, ``"value-weighted"``
      ‖α·f(x)‖ (Kobayashi et al. 2020) or ``"norm-aware"`` (with the residual and the norm
      after attention, Kobayashi et al. 2021), as shares of each row (encoders and decoders).
      With either of the last two, ``report.value_weighted`` and ``report.norm_aware`` hold the
      sizes themselves, arrays ``[layers, heads, queries, keys]`` (docs/analyses.md).
    - ``lens``: ``True`` (5 tokens per cell) or a number of tokens: the logit lens (decoders with a
      language-model head, encoders with a masked-LM head): ``report.lens`` is a dict with ``stages``
      (``"embeddings"``, ``"layer 0"``, …), ``positions`` (the input tokens), ``k``, ``top``
      (``[stage][position]`` → the k most probable tokens as ``{"id", "text", "prob"}``) and the
      arrays ``ids`` and ``probs`` ``[stages, positions, k]``; ``None`` without ``lens``.
    - ``alti=True``: ALTI (Ferrando et al. 2022), each input token's share in each token through
      the network (self-attention of encoders and decoders, every layer; docs/analyses.md):
      ``report.alti`` is a dict with ``layers`` (the model's numbers), ``aggregated`` (through
      each layer) and ``per_layer`` (each layer alone), float32 arrays ``[layers, n, n]`` whose
      rows are output tokens and columns input tokens; ``None`` without ``alti``.
    - ``value_zeroing=True``: value zeroing (Mohebbi et al. 2023), how far each token's output
      moves when an input token's value vector is zeroed, as shares of each row, per layer and
      rolled out through the layers (encoders and decoders; one extra pass per layer over n
      copies of the input, docs/analyses.md): ``report.value_zeroing`` is a dict laid out as
      ``report.alti``; ``None`` without ``value_zeroing``.
    - ``attribution=True``: each head's direct contribution to the target token's logit at the
      last position (decoders with a language-model head; docs/analyses.md):
      ``report.head_attribution`` is the JSON's ``head_attribution`` dict, its ``per_head`` a
      numpy array ``[layers, heads]``. ``target_token`` (one token of the vocabulary, as text,
      e.g. ``" Paris"``; default: the model's own prediction) or ``contrast=(A, B)`` (the logit
      difference A − B) imply it.
    - ``ablate``: ``True`` or ``"zero"`` (each head's output set to 0 in turn) or ``"mean"`` (its
      mean over the input): ``report.head_ablation`` is the JSON's ``head_ablation`` dict, its
      ``delta`` (the change in the target's log-probability) a numpy array ``[layers, heads]``.
      Both are ``None`` when not asked for.
    - ``max_analysis_time``: seconds that value zeroing and head ablation may each take (default
      600). Both re-run the model many times; the time is estimated from one pass before the
      re-runs start, and a longer analysis raises RuntimeError saying how long it would take.
    - ``image``: for a vision model (ViT, DeiT, DINOv2, CLIP's vision tower) in place of
      ``text`` (text with it raises ValueError, in the library's words, once the model is
      loaded), or for a vision-language model (LLaVA) with ``text`` as its prompt, whose
      ``<image>`` marks say where each picture goes (none: before the text); a list of pictures
      for several (a vision model takes one). Each picture is a path, a PIL image, or a numpy array (``[height, width]`` gray,
      ``[..., 2]`` gray and alpha, ``[..., 3]`` RGB or ``[..., 4]`` RGBA; uint8, or floats in
      [0, 1], made 8-bit as ``round(255·x)``). A picture in memory is never written to disk:
      its size (at most 16384 pixels a side and 64 megapixels), dtype and values are checked
      first, then the library reads it a row at a time where it lies (no copy of the whole
      array), giving what the CLI's ``--image`` gives for the PNG file of the same pixels.
      ``report.image`` then describes a vision model's picture (grid, special tokens, sizes,
      preprocessing) and the report opens on its image view; of a vision-language model,
      ``report.pictures`` lists where each picture's image tokens are.
    - ``mmproj``: with ``model`` a GGUF text model (``"model.gguf"``), llama.cpp's projector file
      (``"mmproj-model.gguf"``, a path) holding its vision tower and projector: the pair reads
      pictures (``image``) as the vision-language model (LLaVA, Gemma 3). A model of Ollama's or
      LM Studio's store uses the projector the store keeps beside it without it.
    - ``pan_and_scan`` (with ``image``, Gemma 3): each long picture given whole and then cut into
      2 to 4 crops along its longer side, each a run of image tokens of its own, as transformers'
      processor does with ``do_pan_and_scan=True``.
    - ``query`` (with ``image``): the patch the image view opens on, ``"ROW,COL"`` or
      ``(row, col)`` on the patch grid (from 0), or ``"pool"``: the attention-pooling head's
      probe (SigLIP); default: the class token. Of a vision-language model: a token's number
      ``N`` (as the views number them), whose attention to the pictures the image view opens
      on, or ``"generated"`` (with ``generate``): the generated tokens'.
    - ``tower=True`` (with ``image``): a vision-language model's vision tower alone over its
      one picture, a vision model's run (its views, ``report.image``), as the CLI's
      ``--tower``; the prompt is left out.
    - ``audio``: a recording (a path to a WAV, FLAC, MP3 or OGG file) for a speech model
      (Whisper, from transformers' folder or CTranslate2's), in place of ``text``: the model
      transcribes it (``generate`` tokens at most, else as many as the decoder holds) and the
      result holds its three attentions over the first 30-second window, as the CLI's
      ``--audio``. ``language`` (``"en"``, ``"english"``; default: detected by multilingual
      models), ``task`` (``"transcribe"`` or ``"translate"``) and ``timestamps=True`` (timestamp
      tokens) are its settings. A recording longer than 30 s is read in consecutive windows
      (docs/audio-input.md): ``window=N`` picks the window whose attention is captured (from 0;
      default the first). ``result.transcript`` is the recording's transcript, ``result.words``
      the word timings of every window (dicts with ``word``, ``start`` and ``end`` in seconds of
      the recording, ``window``, ``tokens``, ``start_frame``, ``end_frame``), ``result.speech``
      the JSON's whole ``speech`` section (which window was captured, its transcript, the
      prompt, the alignment heads); all ``None`` without ``audio``.
    - ``summarise``: keep each layer's summary instead of its attention, computed block by
      block so that no layer's queries × keys matrix is held (long inputs, as the CLI's
      ``--summarise``): ``top_keys`` keys per query (16), and the full rows of the queries
      ``rows`` names. ``result.summary`` holds them as numpy arrays (see
      :attr:`Report.summary`); ``result.attention`` has no layer. For encoders and decoders
      reading a text, without generation or the analyses that need the full attention.
    - ``kind``: of an encoder–decoder, the one kind to return as a :class:`Report`
      (``"encoder"``, ``"decoder"`` or ``"cross"``) instead of :class:`Views` of all three;
      other models have one kind, ``"self"``.
    - ``threads``: worker threads of this run's forward pass (default: the process's pool, one
      per CPU, or ``RAYON_NUM_THREADS``); at most 4 × the CPUs available, as on the CLI.

    - ``full_paths=True``: name a local model by its folder's (or GGUF file's) full path in
      what the report writes (``report.model``, the JSON, the page's About panel); by default
      by the folder's or file's name, so that a shared file says nothing of this machine's
      folders (a hub model is always named by its repo id).

    Every option of the CLI's run has its name here or on the result; docs/python-flags.md
    lists them, flag by flag.

    Returns a :class:`Report` for an encoder or a decoder (``report.attention``), and for an
    encoder–decoder :class:`Views` of its three kinds (``encoder_attention``,
    ``decoder_attention``, ``cross_attention``). Bad values raise ValueError or TypeError naming
    the keyword.
    """
    if image is not None:
        pictures = list(image) if isinstance(image, (list, tuple)) else [image]
        if not pictures:
            raise ValueError("image=[] holds no picture; give one, or leave image= out")
        if text is not None and not isinstance(text, str):
            raise TypeError(f"text must be a string, not {type(text).__name__}")
        if tower and text:
            raise ValueError(
                "tower=True runs a vision-language model's vision tower over the picture alone; "
                "leave the text out (or drop tower=True to run the prompt with the picture)"
            )
        # Each a path, or pixels in memory; a vision model's text is refused by the library,
        # which knows the model's kind.
        converted = [_picture(p) for p in pictures]
        return run(
            "" if text is None else text, model, pair, target=target, generate=generate,
            chat=chat, layers=layers, max_memory=max_memory, revision=revision, truncate=truncate,
            neuron=neuron, weighting=weighting, words=words, no_special=no_special,
            view="image" if view is None else view, layer=layer, head=head, lens=lens,
            alti=alti, value_zeroing=value_zeroing,
            _images=[pixels if path is None else path for path, pixels in converted],
            attribution=attribution, target_token=target_token, contrast=contrast, ablate=ablate,
            max_analysis_time=max_analysis_time, kind=kind, query=query, threads=threads,
            full_paths=full_paths, tower=tower, mmproj=mmproj, pan_and_scan=pan_and_scan,
        )
    if audio is not None:
        if not isinstance(audio, (str, os.PathLike)):
            raise TypeError(f"audio must be a path to a recording, not {type(audio).__name__}")
        audio = os.fspath(audio)
        if text is None:
            text = ""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, not {type(text).__name__}")
    if not isinstance(task, str):
        raise TypeError(f"task must be 'transcribe' or 'translate', not {task!r}")
    if task not in ("transcribe", "translate"):
        raise ValueError(f"task={task!r} is not one of 'transcribe', 'translate'")
    language = _optional_str("language", language)
    if not isinstance(timestamps, (bool, np.bool_)):
        raise TypeError(f"timestamps must be True or False, not {timestamps!r}")
    if window is not None:
        if isinstance(window, bool) or not isinstance(window, (int, np.integer)):
            raise TypeError(f"window must be a window's number (an int), not {window!r}")
        if window < 0:
            raise ValueError(f"window={int(window)}: windows are numbered from 0")
        window = int(window)
    if tower and _images is None:
        raise ValueError("tower=True runs a vision-language model's vision tower over a picture; give image= as well")
    if query is not None:
        if _images is None:
            raise ValueError("query= picks a patch of the picture; give image= as well")
        query = _query(query)
    if kind is not None and kind not in _KINDS:
        raise ValueError(f"kind={kind!r} is not one of {', '.join(map(repr, _KINDS))}")
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)):
            raise TypeError(f"threads must be a number of threads (an int), not {threads!r}")
        if threads < 1:
            raise ValueError(f"threads={int(threads)} runs nothing; give 1 or more")
        threads = int(threads)
    pair = _optional_str("pair", pair)
    target = _optional_str("target", target)
    if mmproj is not None:
        if not isinstance(mmproj, (str, os.PathLike)):
            raise TypeError(f"mmproj must be a path to the projector file, not {type(mmproj).__name__}")
        mmproj = os.fspath(mmproj)
    if generate is not None:
        if isinstance(generate, bool) or not isinstance(generate, (int, np.integer)):
            raise TypeError(f"generate must be a number of tokens (an int), not {generate!r}")
        if generate < 1:
            raise ValueError(f"generate={int(generate)} generates nothing; give the number of tokens to generate")
        generate = int(generate)
    for name, flag in (("chat", chat), ("truncate", truncate), ("neuron", neuron), ("alti", alti),
                       ("value_zeroing", value_zeroing), ("full_paths", full_paths),
                       ("summarise", summarise)):
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"{name} must be True or False, not {flag!r}")
    model = model or os.environ.get("ATTNVIZ_MODEL") or DEFAULT_MODEL
    if alti and layers is not None:
        raise ValueError(
            "alti=True multiplies the contributions of every layer, and layers= captures only "
            "some; drop layers="
        )
    if value_zeroing and layers is not None:
        raise ValueError(
            "value_zeroing=True rolls every layer's scores out through the network, and layers= "
            "captures only some; drop layers="
        )
    if not isinstance(weighting, str):
        raise TypeError(f"weighting must be a string, not {type(weighting).__name__}")
    if lens is True:
        lens = 5
    elif lens is False:
        lens = None
    if lens is not None:
        if not isinstance(lens, (int, np.integer)) or isinstance(lens, bool):
            raise TypeError(f"lens must be True or a number of tokens per cell (an int), not {lens!r}")
        if lens < 1:
            raise ValueError(f"lens={int(lens)} keeps no token per cell; give 1 or more (True: 5)")
        if lens > _MAX_LENS_TOP:
            raise ValueError(
                f"lens={int(lens)} keeps more tokens per cell than the logit lens writes (at most "
                f"{_MAX_LENS_TOP}); give lens={_MAX_LENS_TOP} or fewer"
            )
        lens = int(lens)
    if max_analysis_time is not None:
        if isinstance(max_analysis_time, bool) or not isinstance(
            max_analysis_time, (int, float, np.integer, np.floating)
        ):
            raise TypeError(f"max_analysis_time must be a number of seconds, not {max_analysis_time!r}")
        if not 0 <= max_analysis_time <= 1e9:
            raise ValueError(f"max_analysis_time must be from 0 to 1e9 seconds, not {max_analysis_time!r}")
        max_analysis_time = float(max_analysis_time)
    heads = _head_options(attribution, target_token, contrast, ablate)
    wants_heads = heads["attribution"] or heads["ablate"] is not None
    if view is None:
        view = "lens" if lens is not None else "heads" if wants_heads else "head"
    elif view == "lens" and lens is None:
        raise ValueError("view='lens' opens on the logit lens; give lens=True as well")
    elif view == "heads" and not wants_heads:
        raise ValueError("view='heads' opens on head attribution or ablation; give attribution=True or ablate=True as well")
    summary_spec = _summary_spec(summarise, top_keys, rows)
    (natives, target_text, generated_text, default_length, sizes, lens_json, alti_arrays,
     zeroing_arrays, heads_json, speech_json, summary) = _native.run(
        text,
        model,
        revision=revision,
        pair=pair,
        target=target,
        generate=generate,
        chat=bool(chat),
        layers=_layer_list(layers),
        max_memory=_max_memory(max_memory),
        truncate=bool(truncate),
        neuron=bool(neuron),
        weighting=weighting,
        images=_images,
        lens=lens,
        alti=bool(alti),
        value_zeroing=bool(value_zeroing),
        max_analysis_time=max_analysis_time,
        threads=threads,
        full_paths=bool(full_paths),
        tower=bool(tower),
        mmproj=mmproj,
        pan_and_scan=bool(pan_and_scan),
        audio=audio,
        language=language,
        task=task,
        timestamps=bool(timestamps),
        window=window,
        summarise=summary_spec,
        **heads,
    )
    speech = None if speech_json is None else _json.loads(speech_json)
    if kind is not None:
        chosen = [n for n in natives if n.kind == kind]
        if not chosen:
            raise ValueError(
                f"kind={kind!r}: {model} gave {', '.join(repr(n.kind) for n in natives)} attention"
            )
        natives = chosen
    # The model as the report names it: a local folder by its name (full_paths: its full path).
    settings = [("model", natives[0].model_id)]
    if weighting != "raw":
        settings.append(("weighting", weighting))
    if not Path(model).is_dir():
        settings.append(("revision", revision))
    if truncate:
        settings.append(("truncate", "yes"))
    options = dict(view=view, layer=layer, head=head, words=words, no_special=no_special, settings=settings)
    if len(natives) == 1:
        report = Report(natives[0], query=query, **options)
        report.generated_text = generated_text
        report.value_weighted = report.norm_aware = None
        if sizes is not None:
            vw, na, shape = sizes
            report.value_weighted = np.asarray(vw, dtype=np.float32).reshape(shape)
            report.norm_aware = np.asarray(na, dtype=np.float32).reshape(shape)
        report.lens = _lens(lens_json)
        report.alti = _layered_matrices(alti_arrays)
        report.value_zeroing = _layered_matrices(zeroing_arrays)
        report.head_attribution, report.head_ablation = _heads(heads_json)
        _set_speech(report, speech)
        report.summary = summary
        return report
    parts = [(n.kind.capitalize(), Report(n, **options, _of_several=True), None) for n in natives]
    views = Views(parts, target=target_text, **options)
    views.generated_text = generated_text
    views.default_generation = default_length
    _set_speech(views, speech)
    return views


def _set_speech(result: Any, speech: Optional[dict]) -> None:
    """A speech run's transcript, word timings and whole ``speech`` section on ``result``
    (``None`` each without a recording)."""
    result.speech = speech
    result.transcript = None if speech is None else speech["transcript"]
    result.words = None if speech is None else speech["words"]


#: The kinds of attention a run can have (``kind=``).
_KINDS = ("self", "encoder", "decoder", "cross")


def _query(value: Any) -> str:
    """``query=`` as the library reads it: ``"ROW,COL"``, ``"pool"``, a token's number or
    ``"generated"``."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"query={int(value)} is not a token's number (tokens count from 0)")
        return str(int(value))
    if (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value)
    ):
        return f"{int(value[0])},{int(value[1])}"
    raise TypeError(f'query must be "ROW,COL", (row, col), "pool", a token\'s number or "generated", not {value!r}')


def _layered_matrices(arrays):
    """ALTI's or value zeroing's arrays from the native run as ``{"layers", "aggregated",
    "per_layer"}`` (float32 ``[layers, n, n]``), or None when the run did not compute them."""
    if arrays is None:
        return None
    aggregated, per_layer, numbers, n = arrays
    shape = (len(numbers), n, n)
    return {
        "layers": list(numbers),
        "aggregated": np.asarray(aggregated, dtype=np.float32).reshape(shape),
        "per_layer": np.asarray(per_layer, dtype=np.float32).reshape(shape),
    }


def _picture(image: Any) -> tuple:
    """What ``run(image=...)`` hands the library: ``(path, None)`` for a file, ``(None, array)``
    for pixels in memory, which the library reads a row at a time where they lie. Nothing is
    written to disk, and a picture's size is checked before anything of it is converted."""
    if isinstance(image, (str, os.PathLike)):
        return os.fspath(image), None
    if hasattr(image, "mode") and hasattr(image, "size") and hasattr(image, "convert"):
        # A PIL image: its size first (PIL knows it without decoding), then its pixels as the
        # CLI reads them from the PNG PIL would write: palettes expanded (with their
        # transparency), 1-bit and 16-bit gray as 8-bit gray (16-bit clipped to 255), gray,
        # RGB and their alpha as they are, any other mode made RGB.
        width, height = image.size
        _native.check_image_size(width, height)
        mode = image.mode
        if mode == "P":
            image = image.convert("RGBA" if "transparency" in image.info else "RGB")
        elif mode == "1" or mode.startswith("I;16"):
            image = image.convert("L")
        elif mode not in ("L", "LA", "RGB", "RGBA"):
            image = image.convert("RGB")
        return None, np.asarray(image)
    if isinstance(image, np.ndarray):
        dtype = image.dtype
        if dtype.kind == "f" and (not dtype.isnative or dtype.itemsize > 8):
            # Floats the library does not read as they are (big-endian, extended precision):
            # converted, once their size is known to be within the bounds.
            if image.ndim in (2, 3):
                _native.check_image_size(image.shape[1], image.shape[0])
                image = image.astype(np.float64)
        return None, image
    raise TypeError(f"image must be a path, a PIL image or a numpy array, not {type(image).__name__}")


def _lens(text: Optional[str]) -> Optional[dict]:
    """The logit lens of a run (its JSON section, docs/json.md), with ``ids`` and ``probs`` as
    arrays ``[stages, positions, k]`` beside ``top``."""
    if text is None:
        return None
    import json

    lens = json.loads(text)
    lens["ids"] = np.asarray([[[t["id"] for t in cell] for cell in row] for row in lens["top"]], dtype=np.int64)
    lens["probs"] = np.asarray([[[t["prob"] for t in cell] for cell in row] for row in lens["top"]], dtype=np.float32)
    return lens


def _head_options(attribution: Any, target_token: Any, contrast: Any, ablate: Any) -> dict:
    """``run``'s head attribution and ablation keywords, checked, as the native run takes them
    (the CLI's --attribution, --target-token, --contrast A,B and --ablate)."""
    if not isinstance(attribution, (bool, np.bool_)):
        raise TypeError(f"attribution must be True or False, not {attribution!r}")
    target_token = _optional_str("target_token", target_token)
    if target_token == "":
        raise ValueError("target_token is empty; give one token of the vocabulary, e.g. ' Paris'")
    other = None
    if contrast is not None:
        if isinstance(contrast, str) or not isinstance(contrast, (tuple, list)) or len(contrast) != 2:
            raise TypeError(f"contrast must be two tokens (A, B), for the logit difference A − B; not {contrast!r}")
        a, other = contrast
        for name, token in (("contrast[0]", a), ("contrast[1]", other)):
            if not isinstance(token, str) or not token:
                raise TypeError(f"{name} must be a token of the vocabulary (a non-empty string), not {token!r}")
        if target_token is not None and target_token != a:
            raise ValueError(
                f"contrast={tuple(contrast)!r} takes {a!r} as the target, and target_token says {target_token!r}; drop one of them"
            )
        target_token = a
    if ablate is True:
        ablate = "zero"
    elif ablate is False:
        ablate = None
    if ablate is not None:
        if not isinstance(ablate, str):
            raise TypeError(f"ablate must be True, \"zero\" or \"mean\", not {ablate!r}")
        if ablate not in ("zero", "mean"):
            raise ValueError(f"ablate {ablate!r} is not one of: zero, mean (or True for zero)")
    wants = bool(attribution) or other is not None or (target_token is not None and ablate is None)
    return dict(attribution=wants, ablate=ablate, target_token=target_token, contrast=other)


def _heads(texts) -> tuple:
    """A run's ``head_attribution`` and ``head_ablation`` (their JSON sections, docs/json.md),
    with ``per_head`` and ``delta`` as numpy arrays ``[layers, heads]``."""
    import json

    attribution, ablation = (None if t is None else json.loads(t) for t in texts)
    if attribution is not None:
        attribution["per_head"] = np.asarray(attribution["per_head"], dtype=np.float32).reshape(
            attribution["layers"], attribution["heads"]
        )
    if ablation is not None:
        ablation["delta"] = np.asarray(ablation["delta"], dtype=np.float32).reshape(ablation["layers"], ablation["heads"])
    return attribution, ablation


def render(
    path: Any,
    tokens: Optional[Sequence[str]] = None,
    kind: Optional[str] = None,
    *,
    max_memory: Optional[int] = None,
    full_paths: bool = False,
    **options: Any,
):
    """Attention from a file: an attnviz JSON export (any format version), or an ``.npz`` /
    ``.safetensors`` file with ``attention`` and ``tokens`` (docs/render.md). A file of an
    encoder–decoder run gives :class:`Views` of every kind (one page with an Encoder / Decoder /
    Cross selector); ``kind`` picks one of them as a :class:`Report`. ``max_memory`` (bytes)
    bounds what reading the file may take, checked from its headers before anything is read
    (default: half of this machine's memory); a bigger file raises MemoryError. The report names
    the file (and a model the file does not name) by the file's name, or with
    ``full_paths=True`` by its full path. ``options`` are :class:`Report`'s."""
    if max_memory is not None and (isinstance(max_memory, bool) or not isinstance(max_memory, int) or max_memory < 0):
        raise ValueError(f"max_memory must be a number of bytes, not {max_memory!r}")
    if not isinstance(full_paths, (bool, np.bool_)):
        raise TypeError(f"full_paths must be True or False, not {full_paths!r}")
    natives, warns, fmt, source = _native.read(
        os.fspath(path), None if tokens is None else [str(t) for t in tokens], max_memory=max_memory,
        full_paths=bool(full_paths),
    )
    for w in warns:
        _warn(w)
    settings = [("source", source), ("format", fmt)]
    if kind is not None:
        chosen = [n for n in natives if n.kind == kind]
        if not chosen:
            raise ValueError(f"{path} holds no {kind} attention (it holds {', '.join(n.kind for n in natives)})")
    elif len(natives) > 1:
        # Every kind of an encoder–decoder file, in one page with a selector.
        opts = dict(options, settings=settings)
        parts = [(n.kind.capitalize(), Report(n, **opts, _of_several=True), None) for n in natives]
        return Views(parts, **opts)
    else:
        chosen = natives
    return Report(chosen[0], settings=settings, **options)


# -- attention you already have (bertviz's API) ----------------------------------------------


def _layers(attention: Any, name: str, include_layers: Optional[Sequence[int]], include_heads: Optional[Sequence[int]]) -> np.ndarray:
    """``[layers, heads, queries, keys]`` float32 from a tuple of per-layer tensors/arrays
    (transformers' ``outputs.attentions``, batch of 1) or one array."""
    if attention is None:
        raise ValueError(f"{name} is None")
    if isinstance(attention, (list, tuple)):
        if len(attention) == 0 or any(a is None for a in attention):
            raise ValueError(
                f"{name} is empty: transformers returns attention weights only with "
                "output_attentions=True and eager attention; load the model with "
                'attn_implementation="eager"'
            )
        layers = [_array(a) for a in attention]
        for i, a in enumerate(layers):
            if a.ndim == 4:
                if a.shape[0] != 1:
                    raise ValueError(
                        f"{name}[{i}] has a batch of {a.shape[0]} inputs ({list(a.shape)}); "
                        "give one (a batch of 1, or a[i:i+1])"
                    )
                layers[i] = a[0]
            elif a.ndim != 3:
                raise ValueError(
                    f"{name}[{i}] has {a.ndim} dimensions ({list(a.shape)}); each layer must be "
                    "(batch 1, heads, queries, keys): set output_attentions=True"
                )
        shapes = {a.shape for a in layers}
        if len(shapes) > 1:
            raise ValueError(f"{name}'s layers have different shapes: {sorted(shapes)}")
        _native.check_size(name, [len(layers), *[int(d) for d in layers[0].shape]])
        stacked = np.stack(layers)
    else:
        stacked = _array(attention)
        if stacked.ndim == 5 and stacked.shape[1] == 1:
            stacked = stacked[:, 0]
        if stacked.ndim != 4:
            raise ValueError(
                f"{name} has {stacked.ndim} dimensions ({list(stacked.shape)}); give a tuple of "
                "(1, heads, queries, keys) tensors, one per layer, or one [layers, heads, "
                "queries, keys] array"
            )
    shape = [int(d) for d in stacked.shape]
    if include_layers is not None:
        include_layers = list(include_layers)
        for i in include_layers:
            _check_index("include_layers", i, shape[0], "layers")
        shape[0] = len(include_layers)
    if include_heads is not None:
        include_heads = list(include_heads)
        for i in include_heads:
            _check_index("include_heads", i, shape[1], "heads")
        shape[1] = len(include_heads)
    # Before any copy: a broadcast view can stand for more than memory holds.
    _native.check_size(name, shape)
    if include_layers is not None:
        stacked = stacked[include_layers]
    if include_heads is not None:
        stacked = stacked[:, include_heads]
    return np.ascontiguousarray(stacked, dtype=np.float32)


def _array(a: Any) -> np.ndarray:
    # torch tensors (any dtype or device) without importing torch.
    if hasattr(a, "detach") and hasattr(a, "cpu"):
        a = a.detach().cpu()
        if hasattr(a, "float"):
            a = a.float()
        return a.numpy()
    return np.asarray(a)


def _token_list(name: str, tokens: Any) -> list:
    if isinstance(tokens, (str, bytes)):
        raise ValueError(f"{name} must be a list of strings, one per token, not one string")
    return [str(t) for t in tokens]


def _native_view(weights, tokens, *, kind="self", key_tokens=None, sentence_b_start=None, prettify=True, name="attention"):
    if tokens is None:
        raise ValueError(f"{name} needs its tokens")
    if sentence_b_start is not None:
        _check_index("sentence_b_start", sentence_b_start, weights.shape[2], "tokens")
        sentence_b_start = int(sentence_b_start)
    native, warning = _native.from_arrays(
        weights,
        _token_list("tokens", tokens),
        kind=kind,
        key_tokens=None if key_tokens is None else _token_list("encoder_tokens", key_tokens),
        sentence_b_start=sentence_b_start,
        name=name,
        prettify=prettify,
    )
    _warn(warning)
    return native


def from_arrays(
    attention: Any,
    tokens: Sequence[str],
    sentence_b_start: Optional[int] = None,
    *,
    prettify_tokens: bool = False,
    **options: Any,
) -> Report:
    """A :class:`Report` from attention you have: a tuple of per-layer ``(1, heads, n, n)``
    tensors or arrays, or one ``[layers, heads, n, n]`` array, and its tokens."""
    weights = _layers(attention, "attention", None, None)
    native = _native_view(weights, tokens, sentence_b_start=sentence_b_start, prettify=prettify_tokens)
    return Report(native, settings=[("source", "arrays")], **options)


def _show(result: Any, html_action: str) -> Any:
    if html_action == "return":
        return result
    if html_action != "view":
        raise ValueError(f"html_action {html_action!r} is not 'view' or 'return'")
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return result
    if get_ipython() is None:
        return result
    display(result)
    return None


def _bertviz_view(
    view: str,
    attention,
    tokens,
    sentence_b_start,
    prettify_tokens,
    layer,
    heads,
    encoder_attention,
    decoder_attention,
    cross_attention,
    encoder_tokens,
    decoder_tokens,
    include_layers,
    include_heads,
    html_action,
):
    settings = [("source", "arrays")]
    if include_layers is not None:
        include_layers = list(include_layers)
        settings.append(("layers shown", ", ".join(map(str, include_layers)) + f" (numbered 0–{len(include_layers) - 1} here)"))
        if layer is not None:
            if layer not in include_layers:
                raise ValueError(f"layer {layer} is not in include_layers: {include_layers}")
            layer = include_layers.index(layer)
    if include_heads is not None:
        include_heads = list(include_heads)
        settings.append(("heads shown", ", ".join(map(str, include_heads)) + f" (numbered 0–{len(include_heads) - 1} here)"))
    head = None
    if heads:
        heads = list(heads)
        if include_heads is not None and heads[0] not in include_heads:
            raise ValueError(f"heads[0] {heads[0]!r} is not in include_heads: {include_heads}")
        head = heads[0] if include_heads is None else include_heads.index(heads[0])
    opts = dict(view=view, layer=layer, head=head, settings=settings)

    if attention is not None:
        if any(x is not None for x in (encoder_attention, decoder_attention, cross_attention, encoder_tokens, decoder_tokens)):
            raise ValueError(
                "If you specify 'attention' you may not specify any encoder-decoder arguments. "
                "This argument is only for self-attention models."
            )
        if tokens is None:
            raise ValueError("'tokens' is required")
        weights = _layers(attention, "attention", include_layers, include_heads)
        native = _native_view(weights, tokens, sentence_b_start=sentence_b_start, prettify=prettify_tokens)
        return _show(Report(native, **opts), html_action)

    if encoder_attention is None and decoder_attention is None and cross_attention is None:
        raise ValueError("You must specify at least one attention argument.")
    parts = []
    for heading, arr, kind, toks, name in (
        ("Encoder", encoder_attention, "encoder", encoder_tokens, "encoder_attention"),
        ("Decoder", decoder_attention, "decoder", decoder_tokens, "decoder_attention"),
    ):
        if arr is None:
            continue
        if toks is None:
            raise ValueError(f"'{name.split('_')[0]}_tokens' required if '{name}' is not None")
        weights = _layers(arr, name, include_layers, include_heads)
        native = _native_view(weights, toks, kind=kind, prettify=prettify_tokens, name=name)
        parts.append((heading, Report(native, **opts, _of_several=True), None))
    if cross_attention is not None:
        if encoder_tokens is None or decoder_tokens is None:
            raise ValueError("'encoder_tokens' and 'decoder_tokens' are required if 'cross_attention' is not None")
        weights = _layers(cross_attention, "cross_attention", include_layers, include_heads)
        native = _native_view(
            weights, decoder_tokens, kind="cross", key_tokens=encoder_tokens, prettify=prettify_tokens, name="cross_attention"
        )
        parts.append(("Cross", Report(native, **opts, _of_several=True), None))
    return _show(Views(parts, **opts), html_action)


def head_view(
    attention=None,
    tokens=None,
    sentence_b_start=None,
    prettify_tokens=True,
    layer=None,
    heads=None,
    encoder_attention=None,
    decoder_attention=None,
    cross_attention=None,
    encoder_tokens=None,
    decoder_tokens=None,
    include_layers=None,
    html_action="view",
):
    """bertviz's ``head_view``, drawn by attnviz: the same arguments, and the whole attnviz
    report (head, model, matrix and statistics views) opened on the head view, inline and
    offline. ``attention`` is transformers' ``outputs.attentions`` (a tuple of ``(1, heads, n,
    n)`` torch tensors or numpy arrays) or one ``[layers, heads, n, n]`` array. ``heads``: the
    first is the head the matrix view opens on (the head view shows every head, with toggles).
    ``html_action='view'`` displays it in a notebook (and returns it elsewhere); ``'return'``
    returns it (``.data`` is the HTML, ``.save(path)`` writes it)."""
    return _bertviz_view(
        "head", attention, tokens, sentence_b_start, prettify_tokens, layer, heads,
        encoder_attention, decoder_attention, cross_attention, encoder_tokens, decoder_tokens,
        include_layers, None, html_action,
    )


def model_view(
    attention=None,
    tokens=None,
    sentence_b_start=None,
    prettify_tokens=True,
    display_mode="dark",
    encoder_attention=None,
    decoder_attention=None,
    cross_attention=None,
    encoder_tokens=None,
    decoder_tokens=None,
    include_layers=None,
    include_heads=None,
    html_action="view",
):
    """bertviz's ``model_view``, drawn by attnviz (every layer × head as thumbnails; see
    :func:`head_view`). ``display_mode`` is accepted for compatibility: the report follows the
    system's light or dark theme and has its own switch."""
    if display_mode not in ("dark", "light"):
        raise ValueError(f"display_mode {display_mode!r} is not 'dark' or 'light'")
    return _bertviz_view(
        "model", attention, tokens, sentence_b_start, prettify_tokens, None, None,
        encoder_attention, decoder_attention, cross_attention, encoder_tokens, decoder_tokens,
        include_layers, include_heads, html_action,
    )
