"""Write a page like an executed notebook's output: attnviz's inline views (head_view,
model_view, an encoder–decoder's Views, and a report with a hostile title and settings) over
tokens that carry markup, quotes, script end tags and bidirectional controls (issue 20,
requirement 19). python/tests/hostile_page.mjs opens it in headless Chromium and checks that
every view draws and that nothing in the tokens ran as markup or script.

    python hostile_page.py OUT.html

Each marker below, if it ever ran, sets a data attribute on the document it ran in
(`data-pwned`); the browser check looks for it in the outer page and in every frame.
"""

from __future__ import annotations

import sys

import numpy as np

import attnviz

#: Tokens a hostile or merely unlucky tokenizer can produce.
TOKENS = [
    "[CLS]",
    "</script><script>document.documentElement.dataset.pwned='script'</script>",
    "<img src=x onerror=\"document.documentElement.dataset.pwned='img'\">",
    "\" onmouseover=\"document.documentElement.dataset.pwned='attr'\" x=\"",
    "'single' &amp; &lt;b&gt;",
    "\u202eevil\u202c",
    "\u2066iso\u2069 \u200fmark",
    "<!--",
    "\u2028line\u2029",
    "</iframe><img src=x onerror=\"document.body.dataset.pwned='srcdoc'\">",
    "[SEP]",
]

#: A title and settings that try to leave their elements.
TITLE = "</title><script>document.documentElement.dataset.pwned='title'</script>"
SETTINGS = [("<b onclick=x>", "</td></tr><img src=x onerror=\"document.documentElement.dataset.pwned='setting'\">")]


def attention(n: int, layers: int = 2, heads: int = 3, causal: bool = False) -> np.ndarray:
    rng = np.random.default_rng(20)
    a = rng.random((layers, heads, n, n)).astype(np.float32) + 0.05
    if causal:
        a = np.tril(a)
    return a / a.sum(-1, keepdims=True)


def cross(nq: int, nk: int) -> np.ndarray:
    rng = np.random.default_rng(21)
    a = rng.random((2, 3, nq, nk)).astype(np.float32) + 0.05
    return a / a.sum(-1, keepdims=True)


def outputs() -> list:
    """``(name, inline HTML)`` of every view the page shows."""
    n = len(TOKENS)
    att = attention(n)
    raw = dict(prettify_tokens=False, html_action="return")
    enc, dec = TOKENS, TOKENS[:6]
    views = attnviz.head_view(
        encoder_attention=attention(len(enc)),
        decoder_attention=attention(len(dec), causal=True),
        cross_attention=cross(len(dec), len(enc)),
        encoder_tokens=enc,
        decoder_tokens=dec,
        **raw,
    )
    report = attnviz.from_arrays(att, TOKENS, title=TITLE, view="matrix")
    report._settings = list(SETTINGS)
    return [
        ("head_view", attnviz.head_view(att, TOKENS, sentence_b_start=6, **raw).data),
        ("model_view", attnviz.model_view(att, TOKENS, **raw).data),
        ("encoder_decoder", views.data),
        ("report", report.data),
    ]


def page() -> str:
    parts = "\n".join(f'<section id="{name}"><h2>{name}</h2>{html}</section>' for name, html in outputs())
    return (
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>attnviz hostile tokens</title>"
        f"</head><body>{parts}</body></html>"
    )


if __name__ == "__main__":
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        f.write(page())
