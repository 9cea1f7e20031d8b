"""Turning LangChain messages into memory item fields (kind and importance).

See docs/design.md, 'Memory tiers and scopes'."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from ctxpolicy.memory.items import ItemKind


def message_key(message: BaseMessage) -> str:
    """The id a memory records ``message`` under: its ``id``, else a digest of its type,
    text, tool calls and tool call id (so an id-less message with the same content is
    recorded once)."""
    if message.id:
        return str(message.id)
    call_id = str(getattr(message, "tool_call_id", "") or "")
    calls = json.dumps(
        [[c.get("name"), c.get("args"), c.get("id")] for c in getattr(message, "tool_calls", [])],
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )
    digest = hashlib.blake2b(
        f"{message.type}\x00{call_id}\x00{calls}\x00{message.text}".encode(), digest_size=12
    ).hexdigest()
    return f"~{digest}"


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
        metadata["tool"] = name
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
