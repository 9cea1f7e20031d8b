"""Stable message ids: why a re-run node never duplicates a message.

``add_messages`` replaces a message whose id is already in the history. So every
message ctxpolicy writes gets a deterministic id when it has none: a hash of the
message (type, name, content, tool calls, tool call id) chained to the id of the
message it follows. Re-running a node on the same restored state produces the same
ids, and the reducer replaces instead of appending. Chaining (rather than using the
position) keeps ids unique after a history was compacted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import HumanMessage

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage, HumanMessage

ID_PREFIX = "cp-"
_ROOT_ANCHOR = "ctxpolicy:root"


def _fingerprint(message: BaseMessage) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": message.type,
        "name": message.name,
        "content": message.content,
    }
    tool_calls = getattr(message, "tool_calls", None)
    if tool_calls:
        data["tool_calls"] = [
            {"name": c.get("name"), "args": c.get("args"), "id": c.get("id")} for c in tool_calls
        ]
    tool_call_id = getattr(message, "tool_call_id", None)
    if tool_call_id:
        data["tool_call_id"] = tool_call_id
    return data


def stable_message_id(message: BaseMessage, *, anchor: str | None) -> str:
    """The deterministic id of ``message`` written right after the message ``anchor``.

    Args:
        message: The message to name.
        anchor: Id of the message it follows in the history (None at the start).
    """
    payload = json.dumps(
        [anchor or _ROOT_ANCHOR, _fingerprint(message)],
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )
    return ID_PREFIX + hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def with_stable_ids(
    messages: Sequence[BaseMessage], *, anchor: str | None, force: bool = False
) -> list[BaseMessage]:
    """Copies of ``messages`` where each message lacking an id gets a chained stable id.

    Args:
        messages: Messages in history order.
        anchor: Id of the message before the first one (None for an empty history).
        force: Also replace ids that are already set (used for model replies, whose
            ids are random per run and carry no meaning).
    """
    out: list[BaseMessage] = []
    previous = anchor
    for message in messages:
        named = message
        if force or not message.id:
            named = message.model_copy(update={"id": stable_message_id(message, anchor=previous)})
        out.append(named)
        previous = named.id
    return out


def user_turn(text: str, *, turn_id: str) -> dict[str, list[HumanMessage]]:
    """The graph input for one user turn, with a HumanMessage id derived from ``turn_id``.

    Submitting the same turn twice (a client retry, a resubmission after a crash)
    replaces the message instead of adding it again::

        graph.invoke(user_turn("hello", turn_id=request_id), config)

    Args:
        text: The user's message.
        turn_id: A key unique per turn within the thread (a request id, a counter).

    Raises:
        ValueError: ``turn_id`` is empty.
    """
    if not turn_id:
        raise ValueError("turn_id must be a non-empty string")
    digest = hashlib.sha256(turn_id.encode("utf-8")).hexdigest()[:32]
    return {"messages": [HumanMessage(content=text, id=f"{ID_PREFIX}turn-{digest}")]}


__all__ = ["ID_PREFIX", "stable_message_id", "user_turn", "with_stable_ids"]
