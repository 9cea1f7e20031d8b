"""What the renderers read: one composed call (`Preview`) and its rows (`PreviewView`).

A `Preview` holds the typed results of a call: the `ComposeResult` (messages and
`ComposeReport`), the `LayerPlan` it ran under, and where it came from (policy name,
file, window). Every renderer (`ctxpolicy.render.formats`) takes one. `build_view`
derives from it the rows people look at: one `LayerView` per layer of the policy order
(cuts and recalled units described in words) and one `MessageView` per composed message,
attributed to the layer that produced it. No renderer parses JSON: the JSON output
(`ctxpolicy.render.data`) is itself built from the typed values' ``to_dict()``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctxpolicy.report import skip_note

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from ctxpolicy.engine import ComposeResult
    from ctxpolicy.plan import LayerPlan
    from ctxpolicy.policy import Policy
    from ctxpolicy.recall.select import RecalledUnit
    from ctxpolicy.report import LayerReport

__all__ = ["LayerView", "MessageView", "Preview", "PreviewView", "build_view"]


@dataclass(frozen=True, slots=True)
class Preview:
    """One composed call to render, and where it came from.

    Attributes:
        result: The composed messages, the report and what to persist.
        plan: The plan of the call's process.
        policy: The policy's name.
        source: The policy (or manifest) file, as the user named it.
        context_window: The model's window in tokens.
        output_reserve: The share of the window kept for the answer.
    """

    result: ComposeResult
    plan: LayerPlan
    policy: str
    source: str
    context_window: int
    output_reserve: float

    @classmethod
    def of(cls, result: ComposeResult, plan: LayerPlan, *, policy: Policy, source: str) -> Preview:
        """The preview of ``result`` composed under ``policy`` (read from ``source``)."""
        return cls(
            result=result,
            plan=plan,
            policy=policy.name,
            source=source,
            context_window=policy.model.context_window,
            output_reserve=policy.budget.output_reserve,
        )

    @property
    def message_layers(self) -> tuple[str, ...]:
        """The layer of each composed message, in order (from the layers' message counts)."""
        return tuple(
            layer.name for layer in self.result.report.layers for _ in range(layer.messages)
        )


@dataclass(frozen=True, slots=True)
class LayerView:
    """One layer row of a preview.

    ``cap`` is the cap the layer finally had (after redistribution), ``base_cap`` the cap
    its budget ratio gives it; ``merged_into`` the layer whose SystemMessage carries its
    text, when it has no message of its own.
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
    merged_into: str | None = None

    @property
    def ratio_cap(self) -> int | None:
        """The cap its ratio gives the layer, when the cap it got differs (else None)."""
        if self.base_cap is not None and self.base_cap != self.cap:
            return self.base_cap
        return None

    @property
    def share_cap(self) -> int | None:
        """The cap its ratio gives the layer (``base_cap``), else its final cap."""
        return self.base_cap if self.base_cap is not None else self.cap

    @property
    def raised_cap(self) -> int | None:
        """The final cap when redistribution raised it above the ratio's cap, else None."""
        share = self.share_cap
        if self.included and self.cap is not None and share is not None and self.cap > share:
            return self.cap
        return None


@dataclass(frozen=True, slots=True)
class MessageView:
    """One composed message, as text."""

    role: str
    content: str
    layer: str | None
    name: str | None = None
    tool_calls: tuple[str, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class PreviewView:
    """A whole preview, as rows."""

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


def content_text(content: Any) -> str:
    """A message's content as text: content blocks joined by newlines."""
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


def describe_tool_call(call: Mapping[str, Any]) -> str:
    """``name({"arg": 1}) [id]``."""
    args = json.dumps(call.get("args", {}), ensure_ascii=False, default=str)
    ident = f" [{call['id']}]" if call.get("id") else ""
    return f"{call.get('name', '?')}({args}){ident}"


def describe_recalled(unit: RecalledUnit) -> str:
    """One recalled unit as a line: ``#412 tool get_logs L58 (session, score 7.21, 18 tok)``."""
    return f"{unit.label} ({unit.source}, score {unit.score:.2f}, {unit.tokens} tok)"


def _layer(layer: LayerReport) -> LayerView:
    return LayerView(
        name=layer.name,
        kind=layer.kind,
        included=layer.included,
        reason=layer.reason,
        tokens=layer.tokens,
        cap=layer.cap,
        messages=layer.messages,
        cuts=tuple(cut.describe() for cut in layer.cuts),
        # the skip is shown once, as the layer's error
        notes=tuple(n for n in layer.notes if layer.error is None or n != skip_note(layer.error)),
        error=layer.error,
        base_cap=layer.base_cap,
        recalled=tuple(describe_recalled(unit) for unit in layer.recalled),
        merged_into=layer.merged_into,
    )


def _message(message: BaseMessage, layer: str) -> MessageView:
    calls = getattr(message, "tool_calls", None) or ()
    return MessageView(
        role=message.type,
        content=content_text(message.content),
        layer=layer,
        name=message.name or None,
        tool_calls=tuple(describe_tool_call(call) for call in calls),
        tool_call_id=getattr(message, "tool_call_id", None) or None,
    )


def build_view(preview: Preview) -> PreviewView:
    """The rows of ``preview``: every layer of the policy order, every composed message."""
    report = preview.result.report
    owners = preview.message_layers
    return PreviewView(
        policy=preview.policy or None,
        source=preview.source or None,
        process=report.process,
        query_path=report.query_path,
        tokenizer=report.tokenizer,
        available_tokens=report.available_tokens,
        total_tokens=report.total_tokens,
        layers=tuple(_layer(layer) for layer in report.layers),
        messages=tuple(
            _message(message, layer)
            for message, layer in zip(preview.result.messages, owners, strict=True)
        ),
        warnings=report.call_warnings,
    )
