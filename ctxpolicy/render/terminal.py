"""Terminal output: ANSI colour helpers and per-layer token bars.

Colour is used only when the stream is a terminal, ``TERM`` is not ``dumb`` and
``NO_COLOR`` is not set (https://no-color.org); ``FORCE_COLOR`` forces it on (CI logs
that render ANSI). Without colour every bar is plain text that reads on its own: block
characters for the per-layer bars, and one distinct symbol per layer (with a legend)
for the stacked bar.

The functions take the rows of a preview (`ctxpolicy.render.view.build_view`) and return
strings: printing is the caller's job.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Protocol

from ctxpolicy.render.view import LayerView, PreviewView

__all__ = [
    "allocate_cells",
    "color_enabled",
    "format_layer_bars",
    "format_preview_layers",
    "format_stacked_bar",
    "layer_color",
    "paint",
]

RESET = "\x1b[0m"
_STYLES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}
#: 256-colour palette for layers, distinct on dark and light backgrounds.
_PALETTE = (33, 208, 35, 170, 178, 39, 161, 71, 99, 166, 37, 134)
#: Plain-text symbols for the stacked bar, one per layer.
_SYMBOLS = "#=*+%@&$~^"
_FREE_PLAIN = "."


class _Stream(Protocol):
    def isatty(self) -> bool: ...


def color_enabled(
    stream: _Stream | None = None, *, environ: Mapping[str, str] | None = None
) -> bool:
    """Whether to emit ANSI colour on ``stream``.

    Args:
        stream: The output stream (``sys.stdout`` when None).
        environ: The environment (``os.environ`` when None).
    """
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR", ""):
        return False
    if env.get("FORCE_COLOR", ""):
        return True
    if env.get("TERM") == "dumb":
        return False
    target = sys.stdout if stream is None else stream
    try:
        return bool(target.isatty())
    except (AttributeError, ValueError):
        return False


def paint(text: str, *styles: str, enabled: bool) -> str:
    """Wrap ``text`` in ANSI styles (``bold``, ``dim``, ``red``, ...) when ``enabled``."""
    if not enabled or not styles or not text:
        return text
    codes = ";".join(_STYLES[s] for s in styles)
    return f"\x1b[{codes}m{text}{RESET}"


def layer_color(index: int) -> int:
    """The 256-colour code of the ``index``-th layer."""
    return _PALETTE[index % len(_PALETTE)]


def _fg(text: str, code: int, *, enabled: bool) -> str:
    return f"\x1b[38;5;{code}m{text}{RESET}" if enabled and text else text


def allocate_cells(values: Sequence[int], *, total: int, width: int) -> list[int]:
    """Split ``width`` cells in proportion ``value / total`` (largest remainder).

    The cells used never exceed ``width`` (values summing above ``total`` are scaled to
    the full width), and every positive value gets at least one cell while free cells
    remain, so a small layer stays visible.
    """
    if width <= 0 or not values:
        return [0] * len(values)
    denominator = max(total, sum(values), 1)
    exact = [max(v, 0) * width / denominator for v in values]
    cells = _largest_remainder(exact, budget=min(width, round(sum(exact))))
    _keep_visible(cells, values, width=width)
    return cells


def _largest_remainder(exact: Sequence[float], *, budget: int) -> list[int]:
    """Whole cells for ``exact`` shares: floors, then one more for the largest remainders."""
    cells = [int(x) for x in exact]
    order = sorted(range(len(exact)), key=lambda i: exact[i] - cells[i], reverse=True)
    for i in order[: max(0, budget - sum(cells))]:
        cells[i] += 1
    return cells


def _keep_visible(cells: list[int], values: Sequence[int], *, width: int) -> None:
    """Give every positive value at least one cell while free cells remain."""
    for i, value in enumerate(values):
        if value > 0 and cells[i] == 0 and sum(cells) < width:
            cells[i] = 1


def format_stacked_bar(view: PreviewView, *, width: int = 60, color: bool = False) -> list[str]:
    """One bar of the whole window: a segment per included layer, then the free share.

    Returns the bar line and a legend line (symbols or colours per layer).
    """
    included = [layer for layer in view.included if layer.tokens > 0]
    cells = allocate_cells(
        [layer.tokens for layer in included], total=view.available_tokens, width=width
    )
    parts: list[str] = []
    legend: list[str] = []
    for index, (layer, count) in enumerate(zip(included, cells, strict=True)):
        if color:
            parts.append(_fg("█" * count, layer_color(index), enabled=True))
            legend.append(f"{_fg('█', layer_color(index), enabled=True)} {layer.name}")
        else:
            symbol = _SYMBOLS[index % len(_SYMBOLS)]
            parts.append(symbol * count)
            legend.append(f"{symbol} {layer.name}")
    free = width - sum(cells)
    parts.append(paint("░" * free, "dim", enabled=True) if color else _FREE_PLAIN * free)
    used = view.total_tokens
    share = 100 * used / view.available_tokens if view.available_tokens else 0.0
    bar = f"[{''.join(parts)}] {used:,} / {view.available_tokens:,} tokens ({share:.1f}%)"
    return [bar, "  ".join(legend) + f"  {'░' if color else _FREE_PLAIN} free"]


def _layer_line(
    layer: LayerView, *, index: int, available: int, name_width: int, width: int, color: bool
) -> str:
    name = layer.name.ljust(name_width)
    if not layer.included:
        text = f"  {name}  {'-' * width}  excluded: {layer.reason}"
        return paint(text, "dim", enabled=color)
    cap = layer.cap or available  # the cap the layer got (after redistribution)
    filled = allocate_cells([layer.tokens], total=max(cap, 1), width=width)[0]
    if color:
        bar = _fg("█" * filled, layer_color(index), enabled=True) + paint(
            "░" * (width - filled), "dim", enabled=True
        )
    else:
        bar = "#" * filled + "." * (width - filled)
    share = 100 * layer.tokens / available if available else 0.0
    cap_text = f"{layer.cap:,}" if layer.cap is not None else "-"
    line = f"  {name}  {bar}  {layer.tokens:>7,} / {cap_text:>7} tok  {share:5.1f}%"
    extras = list(layer.cuts)
    if layer.ratio_cap is not None:
        extras.append(f"ratio cap {layer.ratio_cap:,}")
    if layer.error:
        extras.append(f"error: {layer.error}")
    if extras:
        line += "  " + paint("; ".join(extras), "yellow", enabled=color)
    return line


def format_layer_bars(view: PreviewView, *, width: int = 24, color: bool = False) -> list[str]:
    """One line per layer of the policy order: tokens against its cap, share of window.

    Included layers show a bar of ``tokens / cap``, the tokens, the cap, the share of the
    available window and any cut; excluded layers show why they are out.
    """
    name_width = max((len(layer.name) for layer in view.layers), default=0)
    lines: list[str] = []
    index = 0
    for layer in view.layers:
        lines.append(
            _layer_line(
                layer,
                index=index,
                available=view.available_tokens,
                name_width=name_width,
                width=width,
                color=color,
            )
        )
        if layer.included and layer.recalled:
            pad = " " * (name_width + 4)
            lines.append(
                paint(f"{pad}recalled {len(layer.recalled)} unit(s):", "dim", enabled=color)
            )
            lines.extend(paint(f"{pad}  {unit}", "dim", enabled=color) for unit in layer.recalled)
        if layer.included and layer.tokens > 0:
            index += 1
    return lines


def format_preview_layers(view: PreviewView, *, color: bool = False, width: int = 60) -> str:
    """The layer section of a text preview: stacked bar, legend, then one line per layer."""
    head = paint(
        f"process {view.process}: {len(view.included)} of {len(view.layers)} layers",
        "bold",
        enabled=color,
    )
    lines = [head, *format_stacked_bar(view, width=width, color=color)]
    lines += format_layer_bars(view, color=color)
    lines += [paint(f"warning: {w}", "yellow", enabled=color) for w in view.warnings]
    return "\n".join(lines)
