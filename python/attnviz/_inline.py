"""Showing a self-contained report inline in a notebook.

Each report is the whole page attnviz writes with ``--html`` (no network, its own
Content-Security-Policy), put into an ``<iframe srcdoc=...>`` with ``sandbox="allow-scripts"``:
the page runs in an isolated, opaque origin, so several reports in one notebook cannot see each
other, the notebook's page, or its styles. Nothing outside the iframe needs JavaScript.

Behind the iframe sits a short note. A notebook front end that shows the iframe covers it (the
page paints its own background); one that drops the iframe from an untrusted notebook's output
(Jupyter sanitises untrusted HTML) leaves the note visible, and it says what to do.
"""

from __future__ import annotations

import html as _html

#: What an untrusted notebook shows instead of the view.
UNTRUSTED_NOTE = (
    "attnviz: this view did not load. If the notebook is not trusted, its HTML outputs are "
    "not shown: trust it (the Trust Notebook command: File menu in Jupyter Notebook, command "
    "palette in JupyterLab; or <code>jupyter trust NOTEBOOK.ipynb</code>; VS Code: trust the "
    "workspace) and reopen it, or run the cell again. The view needs no network access."
)


def default_height(rows: int) -> int:
    """A height (CSS pixels) that shows the head view of ``rows`` tokens without scrolling
    (about 22 pixels a token below 300 pixels of controls), from 420 to 900."""
    return max(420, min(900, 330 + 22 * rows))


def iframe(page: str, height: int, title: str) -> str:
    """``page`` (a whole HTML document) as an isolated, resizable inline frame."""
    srcdoc = _html.escape(page, quote=True)
    label = _html.escape(title, quote=True)
    return (
        f'<div class="attnviz-inline" style="position:relative;height:{int(height)}px;'
        'resize:vertical;overflow:hidden;min-height:120px;max-width:100%">'
        f'<div style="padding:12px 16px;font:14px/1.4 sans-serif;color:#666">{UNTRUSTED_NOTE}</div>'
        f'<iframe title="{label}" sandbox="allow-scripts allow-downloads" srcdoc="{srcdoc}" '
        'style="position:absolute;top:0;left:0;width:100%;height:100%;border:0" '
        'referrerpolicy="no-referrer"></iframe>'
        "</div>"
    )


def section(heading: str, body: str) -> str:
    """A heading above one part of a multi-part output (encoder, decoder, cross)."""
    return (
        f'<div style="font:600 14px sans-serif;margin:10px 0 4px">{_html.escape(heading)}</div>'
        + body
    )


def notice(text: str) -> str:
    """A line of text in the output (what could not be drawn, and why)."""
    return f'<div style="font:14px/1.4 sans-serif;color:#8a5a00;margin:6px 0">{_html.escape(text)}</div>'
