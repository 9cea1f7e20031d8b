"""The preview data the renderers read, normalized from plain JSON-like data.

Renderers take the JSON shape of a preview (what ``ctxpolicy preview --format json``
prints) so they stay independent of the engine and easy to test::

    {
      "policy": "datapillar",                 # optional: policy name
      "source": "policies/base.yaml",         # optional: policy file
      "process": "react",
      "query_path": "checkpoint",             # optional
      "tokenizer": "cl100k_base",             # optional
      "available_tokens": 115200,
      "total_tokens": 1830,                   # optional: summed from layers if absent
      "layers": [                             # every layer of the policy order, in order
        {"name": "knowledge__context", "kind": "block", "included": true,
         "reason": "shared layer; ...", "tokens": 420, "cap": 420, "base_cap": 11520,
         "messages": 1, "demand": 420, "source": "collector",
         "cuts": [{"action": "truncated", "tokens": 80, "messages": 0, "cap": 400,
                   "rule": "truncate_tail"}],
         "error": null, "notes": []}
      ],
      "messages": [                           # the composed input, in order
        {"type": "system", "content": "...", "layer": "knowledge__context", "tokens": 420}
      ],
      "warnings": ["..."]                     # optional
    }

This is ``ComposeReport.to_dict()`` plus ``messages`` (and optionally ``policy`` and
``source``). The output of ``ctxpolicy preview --format json`` is accepted as it is:
``{"plan": {...}, "report": {...}, "messages": [{"layer": ..., "type": ...,
"data": {"content": ...}}]}`` (langchain-core's ``message_to_dict`` form) is unfolded
into the shape above. Lenient on purpose: messages may say ``role`` instead of
``type``; content may be a string or a list of content blocks; a message without
``layer`` is attributed to layers by their ``messages`` counts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["LayerView", "MessageView", "PreviewView", "build_view"]

_ROLE_ALIASES = {"user": "human", "assistant": "ai", "developer": "system"}


@dataclass(frozen=True, slots=True)
class LayerView:
    """One layer row of a preview.

    ``cap`` is the cap the layer finally had (after redistribution), ``base_cap`` the cap
    its budget ratio gives it.
    """

    name: str
    kind: str
    included: bool
    reason: str
    tokens: int
    cap: int | None
    messages: int
    cuts: tuple[str, ...]
    notes: tuple[str, ...]
    error: str | None
    base_cap: int | None = None
    recalled: tuple[str, ...] = ()

    @property
    def share_cap(self) -> int | None:
        """The cap its ratio gives the layer (``base_cap``), else its final cap."""
        return self.base_cap if self.base_cap is not None else self.cap


@dataclass(frozen=True, slots=True)
class MessageView:
    """One composed message."""

    role: str
    content: str
    layer: str | None
    tokens: int | None
    name: str | None = None
    tool_calls: tuple[str, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class PreviewView:
    """A whole preview, normalized."""

    policy: str | None
    source: str | None
    process: str
    query_path: str | None
    tokenizer: str | None
    available_tokens: int
    total_tokens: int
    layers: tuple[LayerView, ...]
    messages: tuple[MessageView, ...]
    warnings: tuple[str, ...]

    @property
    def included(self) -> tuple[LayerView, ...]:
        """The layers this call includes, in order."""
        return tuple(layer for layer in self.layers if layer.included)


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int | float):
        return int(value)
    return default


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for block in content:
            if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, str):
                parts.append(block)
            else:
                parts.append(json.dumps(block, ensure_ascii=False, default=str))
        return "\n".join(parts)
    return "" if content is None else str(content)


def _tool_calls(raw: Any) -> tuple[str, ...]:
    calls = []
    for call in raw if isinstance(raw, list) else ():
        if isinstance(call, Mapping):
            args = json.dumps(call.get("args", {}), ensure_ascii=False, default=str)
            ident = f" [{call['id']}]" if call.get("id") else ""
            calls.append(f"{call.get('name', '?')}({args}){ident}")
    return tuple(calls)


def _describe_cut(cut: Any) -> str:
    if not isinstance(cut, Mapping):
        return str(cut)
    action = str(cut.get("action", "cut"))
    count = _int(cut.get("messages"))
    what = f"{count} message(s), " if count else ""
    cap = cut.get("cap")
    fit = f" to fit cap {cap}" if cap is not None else ""
    rule = cut.get("rule")
    return f"{action} {what}{_int(cut.get('tokens'))} tokens{fit}" + (f" ({rule})" if rule else "")


def _layer(row: Mapping[str, Any]) -> LayerView:
    cap = row.get("cap")
    base_cap = row.get("base_cap")
    return LayerView(
        name=str(row.get("name", "?")),
        kind=str(row.get("kind", "")),
        included=bool(row.get("included", True)),
        reason=str(row.get("reason", "")),
        tokens=_int(row.get("tokens")),
        cap=None if cap is None else _int(cap),
        messages=_int(row.get("messages")),
        cuts=tuple(_describe_cut(c) for c in row.get("cuts") or ()),
        notes=tuple(str(n) for n in row.get("notes") or ()),
        error=None if row.get("error") is None else str(row.get("error")),
        base_cap=None if base_cap is None else _int(base_cap),
        recalled=tuple(_describe_recalled(u) for u in row.get("recalled") or ()),
    )


def _describe_recalled(unit: Any) -> str:
    """One recalled unit as a line: ``#412 tool get_logs L58 (session, score 7.21, 18 tok)``."""
    if not isinstance(unit, Mapping):
        return str(unit)
    score = unit.get("score")
    score_text = f"score {score:.2f}" if isinstance(score, int | float) else "score ?"
    return (
        f"{unit.get('label', '?')} ({unit.get('source', '?')}, {score_text}, "
        f"{_int(unit.get('tokens'))} tok)"
    )


def _owners(layers: Sequence[LayerView], count: int) -> list[str | None]:
    """Attribute ``count`` messages to layers by the layers' message counts."""
    owners: list[str | None] = []
    for layer in layers:
        if layer.included:
            owners += [layer.name] * layer.messages
    return owners if len(owners) == count else [None] * count


def _unfold(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """Flatten the ``{"plan", "report", "messages"}`` form of ``preview --format json``."""
    report = data.get("report")
    if not isinstance(report, Mapping):
        return data
    plan = data.get("plan") if isinstance(data.get("plan"), Mapping) else {}
    flat: dict[str, Any] = {**report}
    if isinstance(plan, Mapping) and plan.get("policy"):
        flat.setdefault("policy", plan["policy"])
    flat.update({k: v for k, v in data.items() if k not in ("report", "plan")})
    return flat


def build_view(data: Mapping[str, Any]) -> PreviewView:
    """Normalize preview data (see the module docstring for the shape).

    Raises:
        TypeError: ``data`` is not a mapping or its ``layers``/``messages`` are not lists.
    """
    if not isinstance(data, Mapping):
        raise TypeError(f"preview data must be a mapping, got {type(data).__name__}")
    data = _unfold(data)
    raw_layers = data.get("layers") or []
    raw_messages = data.get("messages") or []
    if not isinstance(raw_layers, list) or not isinstance(raw_messages, list):
        raise TypeError("preview data: 'layers' and 'messages' must be lists")
    layers = tuple(_layer(row) for row in raw_layers if isinstance(row, Mapping))
    owners = _owners(layers, len(raw_messages))
    messages = []
    for owner, raw in zip(owners, raw_messages, strict=True):
        row = raw if isinstance(raw, Mapping) else {"content": raw}
        if "content" not in row and isinstance(row.get("data"), Mapping):
            row = {**row["data"], **{k: v for k, v in row.items() if k != "data"}}
        role = str(row.get("type") or row.get("role") or "message")
        tokens = row.get("tokens")
        messages.append(
            MessageView(
                role=_ROLE_ALIASES.get(role, role),
                content=_text(row.get("content")),
                layer=str(row["layer"]) if row.get("layer") else owner,
                tokens=None if tokens is None else _int(tokens),
                name=None if not row.get("name") else str(row["name"]),
                tool_calls=_tool_calls(row.get("tool_calls")),
                tool_call_id=None if not row.get("tool_call_id") else str(row["tool_call_id"]),
            )
        )
    total = data.get("total_tokens")
    return PreviewView(
        policy=None if data.get("policy") is None else str(data.get("policy")),
        source=None if data.get("source") is None else str(data.get("source")),
        process=str(data.get("process", "")),
        query_path=None if data.get("query_path") is None else str(data.get("query_path")),
        tokenizer=None if data.get("tokenizer") is None else str(data.get("tokenizer")),
        available_tokens=_int(data.get("available_tokens")),
        total_tokens=(
            _int(total) if total is not None else sum(x.tokens for x in layers if x.included)
        ),
        layers=layers,
        messages=tuple(messages),
        warnings=tuple(str(w) for w in data.get("warnings") or ()),
    )
