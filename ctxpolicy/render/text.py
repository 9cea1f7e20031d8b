"""The text preview: a header, the composed messages, a per-layer table, the window bar.

Per layer: tokens, cap, its share of the window as a bar (``█`` used, ``░`` the rest of
its cap) and why it is in or out, with its cuts, a skipped collector's error and the
units a recall layer shows. Then the layers to persist, the warnings and the stacked bar
of the whole window (`ctxpolicy.render.terminal.format_stacked_bar`), coloured when asked.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ctxpolicy.render.terminal import format_stacked_bar
from ctxpolicy.render.view import LayerView, Preview, PreviewView, build_view

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from ctxpolicy.report import LayerReport

__all__ = ["render_text"]

BAR_WIDTH = 20
PREVIEW_CHARS = 72
NAME_WIDTH = 22


def _one_line(text: str, width: int = PREVIEW_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _content(message: BaseMessage) -> str:
    content = message.content
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    calls = getattr(message, "tool_calls", None) or ()
    if calls:
        names = ", ".join(str(c.get("name")) for c in calls)
        text = f"{text} [tool calls: {names}]".strip()
    return text


def _bar(tokens: int, cap: int | None, window: int) -> str:
    """``█`` for the tokens used, ``░`` for the rest of the layer's cap, as shares of the window."""
    if window <= 0:
        return " " * BAR_WIDTH
    used = round(BAR_WIDTH * tokens / window)
    used = 1 if tokens and not used else used
    room = round(BAR_WIDTH * (cap or 0) / window)
    room = max(room, used)
    return ("█" * used + "░" * (room - used)).ljust(BAR_WIDTH)


def _header(preview: Preview) -> list[str]:
    plan, report = preview.plan, preview.result.report
    available = report.available_tokens
    share = 100 * report.total_tokens / available if available else 0
    switch = str(plan.enable_share_context).lower()
    return [
        (
            f"policy {preview.policy} · process {plan.process} · query path {plan.query_path} · "
            f"tokenizer {plan.tokenizer} · enable_share_context {switch}"
        ),
        (
            f"window {preview.context_window} tokens, output reserve "
            f"{preview.output_reserve:g} → available {available}; "
            f"used {report.total_tokens} ({share:.1f}%)"
        ),
    ]


def _message_lines(preview: Preview) -> list[str]:
    pairs = zip(preview.result.messages, preview.message_layers, strict=True)
    lines = [
        f"  {index:>3} {message.type:<6} {owner:<{NAME_WIDTH}} {_one_line(_content(message))}"
        for index, (message, owner) in enumerate(pairs)
    ]
    return lines or ["  (none)"]


def _why(layer: LayerView) -> str:
    extra = list(layer.cuts)
    if layer.ratio_cap is not None:
        extra.append(f"ratio cap {layer.ratio_cap}")
    if layer.error:
        extra.append(f"collector skipped: {layer.error}")
    elif layer.merged_into is not None:
        extra.append(f"sent in the system message of {layer.merged_into}")
    elif not layer.messages and layer.kind == "block":
        extra.append("empty this call")
    return f"{layer.reason} — {'; '.join(extra)}" if extra else layer.reason


def _layer_lines(layer: LayerReport, row: LayerView, *, window: int) -> list[str]:
    """The row of ``layer`` (``row`` its view: what the previews show alike), then the
    units it recalled, each with its text."""
    if not row.included:
        blank = f"{'-':>7} {'-':>7}  {'':<{BAR_WIDTH}}"
        return [f"  {row.name:<{NAME_WIDTH}} {blank}  excluded: {row.reason}"]
    bar = _bar(row.tokens, row.cap, window)
    numbers = f"{row.tokens:>7} {row.cap or 0:>7}"
    lines = [f"  {row.name:<{NAME_WIDTH}} {numbers}  {bar}  {_why(row)}"]
    lines.extend(
        f"  {'':<{NAME_WIDTH}} recalled {u.label} ({u.source}, score {u.score:.2f}, "
        f"{u.tokens} tok): {_one_line(u.text)}"
        for u in layer.recalled
    )
    return lines


def _table(preview: Preview, view: PreviewView) -> list[str]:
    lines = [
        f"  {'layer':<{NAME_WIDTH}} {'tokens':>7} {'cap':>7}  {'share of window':<{BAR_WIDTH}}  why"
    ]
    rows = zip(preview.result.report.layers, view.layers, strict=True)
    for layer, row in rows:
        lines += _layer_lines(layer, row, window=preview.context_window)
    return lines


def _footer(preview: Preview, view: PreviewView) -> list[str]:
    lines: list[str] = []
    if preview.result.persist:
        lines += ["", "persist: " + ", ".join(sorted(preview.result.persist))]
    if view.warnings:
        lines += ["", "warnings:"] + [f"  - {w}" for w in view.warnings]
    return lines


def render_text(preview: Preview, *, color: bool = False) -> str:
    """The human-readable preview; ``color`` paints the stacked window bar."""
    view = build_view(preview)
    lines = [*_header(preview), "", "messages:", *_message_lines(preview), ""]
    lines += _table(preview, view)
    lines += _footer(preview, view)
    lines += ["", *format_stacked_bar(view, color=color)]
    return "\n".join(lines)
