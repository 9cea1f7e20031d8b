"""Turning LangChain messages into memory item fields (kind and importance).

A message's id is `ctxpolicy.recall.ingest.message_key` (one definition for recall and
memory), re-exported here.

See docs/design.md, 'Memory tiers and scopes', and docs/memory.md, 'Edits'."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxpolicy.recall.ingest import message_key

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from ctxpolicy.memory.items import ItemKind


def analysis_text(content: str, metadata: Mapping[str, Any] | None) -> str:
    """The part of an item's text that importance and subjects look at: a tool result's
    text without its ``name -> `` prefix (which would read as a statement)."""
    tool = (metadata or {}).get("tool")
    if isinstance(tool, str) and content.startswith(f"{tool} -> "):
        return content[len(tool) + 4 :]
    return content


def describe_message(message: BaseMessage) -> tuple[str, ItemKind, dict[str, Any]]:
    """``(content, kind, metadata)`` for a message.

    A human message is a ``user`` item (0.9); a tool message is ``tool_failure`` (0.8)
    when its ``status`` is ``"error"``, else ``tool_success`` (0.7); an AI message is an
    ``agent`` item whose text lists its tool calls; anything else is a ``note``. Metadata:
    ``role``, ``message_id``, and for a tool result ``tool_call_id``, ``status``, ``tool``.

    Raises:
        TypeError: ``message`` is not a ``BaseMessage``.
    """
    if not isinstance(message, BaseMessage):
        raise TypeError(f"message must be a BaseMessage, got {type(message).__name__}")
    text = str(message.text)
    metadata: dict[str, Any] = {"role": message.type}
    if message.id:
        metadata["message_id"] = message.id
    if isinstance(message, HumanMessage):
        return text, "user", metadata
    if isinstance(message, ToolMessage):
        return _describe_tool_result(message, text, metadata)
    if isinstance(message, AIMessage):
        return _agent_text(message, text), "agent", metadata
    return text, "note", metadata


def _describe_tool_result(
    message: ToolMessage, text: str, metadata: dict[str, Any]
) -> tuple[str, ItemKind, dict[str, Any]]:
    """``(content, kind, metadata)`` for a tool result; adds its fields to ``metadata``."""
    metadata["tool_call_id"] = message.tool_call_id
    name = message.name or "tool"
    kind: ItemKind = "tool_failure" if message.status == "error" else "tool_success"
    metadata["status"] = message.status
    metadata["tool"] = name
    return f"{name} -> {text}", kind, metadata


def _agent_text(message: AIMessage, text: str) -> str:
    """An AI message's text followed by ``calls name({args}), ...`` for its tool calls."""
    calls = [
        f"{call['name']}({json.dumps(call['args'], sort_keys=True, ensure_ascii=False)})"
        for call in message.tool_calls
    ]
    parts = [text] if text else []
    if calls:
        parts.append("calls " + ", ".join(calls))
    return " ".join(parts)


__all__ = ["analysis_text", "describe_message", "message_key"]
