"""Rendering of previews for people: coloured terminal bars and a self-contained HTML page.

Both renderers read plain preview data (the JSON shape documented in
`ctxpolicy.render.view`), never engine objects, so they import nothing heavy.
"""

from ctxpolicy.render.html import render_preview_html
from ctxpolicy.render.terminal import (
    color_enabled,
    format_layer_bars,
    format_preview_layers,
    format_stacked_bar,
)
from ctxpolicy.render.view import PreviewView, build_view

__all__ = [
    "PreviewView",
    "build_view",
    "color_enabled",
    "format_layer_bars",
    "format_preview_layers",
    "format_stacked_bar",
    "render_preview_html",
]
