"""A self-contained HTML page of a preview: messages, stacked token bar, why per layer.

`render_html` fills the Jinja2 template ``templates/preview.html.j2`` (shipped inside
the package) with the rows of a `Preview` and returns one HTML document with inline CSS
and nothing else: no scripts, no fonts, no images, no links to fetch. A
Content-Security-Policy ``default-src 'none'`` meta tag makes a browser refuse any
external asset should one ever slip in, so the page opens the same offline, from a CI
artifact or an e-mail.

The environment autoescapes every value: message contents come from users, tools and
retrievers, and stay text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from jinja2 import Environment, PackageLoader, StrictUndefined

from ctxpolicy.render.view import LayerView, Preview, PreviewView, build_view

__all__ = ["layer_hue", "render_html", "render_preview_html"]

#: The colour of a layer that has no segment of its own (excluded, or no tokens).
DEFAULT_COLOR = "#aab2bd"


def _thousands(value: int) -> str:
    return f"{value:,}"


_ENVIRONMENT = Environment(
    loader=PackageLoader("ctxpolicy.render", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    keep_trailing_newline=True,
)
_ENVIRONMENT.filters["thousands"] = _thousands


@dataclass(frozen=True, slots=True)
class _Segment:
    """One layer's share of the stacked budget bar."""

    name: str
    tokens: int
    width: float
    title: str
    color: str


@dataclass(frozen=True, slots=True)
class _Budget:
    segments: tuple[_Segment, ...]
    free: float
    label: str


@dataclass(frozen=True, slots=True)
class _Row:
    """One layer row of the table: the layer, its colour, how full its cap is (%)."""

    layer: LayerView
    color: str
    fill: float


def layer_hue(index: int) -> int:
    """A hue (0-359) for the ``index``-th coloured layer, well spread (golden angle)."""
    return (210 + index * 137) % 360


def _pct(part: int, whole: int) -> float:
    return 0.0 if whole <= 0 else 100.0 * part / whole


def _colors(view: PreviewView) -> dict[str, str]:
    return {layer.name: f"hsl({layer_hue(i)} 62% 52%)" for i, layer in enumerate(view.included)}


def _budget(view: PreviewView, colors: Mapping[str, str]) -> _Budget:
    shown = [layer for layer in view.included if layer.tokens > 0]
    whole = max(view.available_tokens, sum(layer.tokens for layer in shown), 1)
    segments = tuple(
        _Segment(
            name=layer.name,
            tokens=layer.tokens,
            width=_pct(layer.tokens, whole),
            title=f"{layer.name}: {layer.tokens:,} tokens ({_pct(layer.tokens, whole):.1f}%)",
            color=colors[layer.name],
        )
        for layer in shown
    )
    share = _pct(view.total_tokens, view.available_tokens)
    label = f"{view.total_tokens:,} of {view.available_tokens:,} available tokens ({share:.1f}%)"
    free = max(0.0, 100.0 - sum(segment.width for segment in segments))
    return _Budget(segments=segments, free=free, label=label)


def _row(layer: LayerView, colors: Mapping[str, str]) -> _Row:
    cap = layer.cap
    fill = min(100.0, _pct(layer.tokens, cap)) if cap else 0.0
    return _Row(layer=layer, color=colors.get(layer.name, DEFAULT_COLOR), fill=fill)


def render_preview_html(view: PreviewView, *, title: str | None = None) -> str:
    """Render the rows of a preview as one self-contained HTML document.

    Args:
        view: The rows (`ctxpolicy.render.view.build_view`).
        title: Page title; defaults to ``ctxpolicy preview: POLICY / PROCESS``.

    Returns:
        The complete HTML text (UTF-8; write it with ``encoding="utf-8"``).
    """
    colors = _colors(view)
    policy = view.policy or view.source or "policy"
    return _ENVIRONMENT.get_template("preview.html.j2").render(
        title=title or f"ctxpolicy preview: {policy} / {view.process}",
        view=view,
        budget=_budget(view, colors),
        rows=[_row(layer, colors) for layer in view.layers],
        colors=colors,
        default_color=DEFAULT_COLOR,
    )


def render_html(preview: Preview, *, color: bool = False) -> str:
    """The HTML preview of a composed call (``color`` is ignored: the page has its own)."""
    del color
    return render_preview_html(build_view(preview))
