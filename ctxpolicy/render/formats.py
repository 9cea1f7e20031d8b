"""The preview renderers, chosen by name: ``text``, ``json`` and ``html``.

Every renderer takes a `Preview` (the typed result of one composed call) and returns
one string; ``color`` asks for ANSI colour where the format has any (only ``text``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Protocol

from ctxpolicy.render.data import render_json
from ctxpolicy.render.html import render_html
from ctxpolicy.render.text import render_text
from ctxpolicy.render.view import Preview

__all__ = ["FORMATS", "RENDERERS", "PreviewFormat", "Renderer", "get_renderer", "render_preview"]

PreviewFormat = Literal["text", "json", "html"]


class Renderer(Protocol):
    """Turns a preview into text."""

    def __call__(self, preview: Preview, *, color: bool = False) -> str: ...


RENDERERS: Mapping[str, Renderer] = {
    "text": render_text,
    "json": render_json,
    "html": render_html,
}

#: The names ``--format`` accepts, in the order ``--help`` lists them.
FORMATS: tuple[str, ...] = tuple(RENDERERS)


def get_renderer(name: str) -> Renderer:
    """The renderer called ``name``.

    Raises:
        ValueError: no renderer has that name.
    """
    try:
        return RENDERERS[name]
    except KeyError:
        known = ", ".join(RENDERERS)
        raise ValueError(f"unknown format {name!r}; choose one of {known}") from None


def render_preview(preview: Preview, *, fmt: str, color: bool = False) -> str:
    """Render ``preview`` in format ``fmt`` (see `RENDERERS`)."""
    return get_renderer(fmt)(preview, color=color)
