"""Turning LangChain messages into memory item fields (kind and importance per seed 004)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from ctxpolicy.memory.items import ItemKind


def describe_message(message: BaseMessage) -> tuple[str, ItemKind, dict[str, Any]]:
    """``(content, kind, metadata)`` for a message.

    A human message is a ``user`` item (0.9); a tool message is ``tool_failure`` (0.8)
    when its ``status`` is ``"error"``, else ``tool_success`` (0.7); an AI message is an
    ``agent`` item whose text lists its tool calls; anything else is a ``note``.

    Raises:
        TypeError: ``message`` is not a ``BaseMessage``.
    """
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

    if not isinstance(message, BaseMessage):
        raise TypeError(f"message must be a BaseMessage, got {type(message).__name__}")
    text = str(message.text)
    metadata: dict[str, Any] = {"role": message.type}
    if message.id:
        metadata["message_id"] = message.id
    if isinstance(message, HumanMessage):
        return text, "user", metadata
    if isinstance(message, ToolMessage):
        metadata["tool_call_id"] = message.tool_call_id
        name = message.name or "tool"
        kind: ItemKind = "tool_failure" if message.status == "error" else "tool_success"
        metadata["status"] = message.status
        return f"{name} -> {text}", kind, metadata
    if isinstance(message, AIMessage):
        calls = [
            f"{call['name']}({json.dumps(call['args'], sort_keys=True, ensure_ascii=False)})"
            for call in message.tool_calls
        ]
        parts = [text] if text else []
        if calls:
            parts.append("calls " + ", ".join(calls))
        return " ".join(parts), "agent", metadata
    return text, "note", metadata
