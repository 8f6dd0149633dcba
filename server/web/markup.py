"""Inline Markdown (server/core/inline_markdown.py) as a page shows it: safe HTML."""

from __future__ import annotations

from markupsafe import Markup, escape

from server.core.inline_markdown import spans


def to_html(text: str | None) -> Markup:
    """The Jinja filter `inline_markdown`: safe HTML, every character not Markdown escaped."""
    html = Markup("")
    for styles, piece in spans(text or ""):
        html += (
            Markup("").join(Markup(f"<{s}>") for s in styles)
            + escape(piece)
            + Markup("").join(Markup(f"</{s}>") for s in reversed(styles))
        )
    return html
