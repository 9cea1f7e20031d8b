"""Units the size of a fact: how messages are split before they are indexed.

A message is split into *units*: a short message is one unit; a longer one is split
into paragraphs, a multi-line text (a log dump, a table) into its lines, a JSON
payload into its records. A line buried in a 100-line tool output is therefore its own
unit and can be found and shown alone. Each unit keeps where it came from (message id,
position in the session, role, tool name, line span) and a little surrounding context
(the message's first line, e.g. the command or header of a tool output) that is
indexed with it but not shown.

See docs/recall.md, "Units".
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

#: A message whose text is at most this many characters and lines stays one unit.
SHORT_MESSAGE_CHARS = 480
SHORT_MESSAGE_LINES = 3
#: Longest unit text in characters; longer lines are cut at whitespace into pieces.
MAX_UNIT_CHARS = 600
#: Longest context kept with a unit (characters).
MAX_CONTEXT_CHARS = 160

_ROLES: Mapping[str, str] = {"human": "user", "ai": "assistant", "tool": "tool"}
_PARAGRAPH = re.compile(r"\n\s*\n")


@dataclass(frozen=True, slots=True)
class Unit:
    """One searchable piece of a message.

    Attributes:
        message_id: The id of the message it comes from.
        position: The message's index in the session (0 = first message).
        part: The unit's index within its message.
        role: ``user``, ``assistant``, ``tool`` or ``system`` (or a memory tier).
        tool: The tool's name for a tool result or a tool call, else None.
        start_line: First line of the span in the message text (1-based).
        end_line: Last line of the span (inclusive).
        text: The unit's text (what a prompt shows).
        context: Surrounding text indexed with the unit but not shown.
    """

    message_id: str
    position: int
    part: int
    role: str
    tool: str | None
    start_line: int
    end_line: int
    text: str
    context: str = ""

    @property
    def key(self) -> str:
        """A stable id of the unit: ``<message id>#<part>``."""
        return f"{self.message_id}#{self.part}"

    def label(self) -> str:
        """Where the unit came from, e.g. ``#412 tool search_logs L57``."""
        parts = [f"#{self.position}", self.role] if self.position >= 0 else [self.role]
        if self.tool:
            parts.append(self.tool)
        if self.end_line > self.start_line:
            parts.append(f"L{self.start_line}-{self.end_line}")
        elif self.start_line > 1 or self.end_line > 1:
            parts.append(f"L{self.start_line}")
        return " ".join(parts)


def message_text(message: BaseMessage) -> str:
    """The text of a message (string content, or the text blocks of a content list)."""
    content = message.content
    if isinstance(content, str):
        return content
    return str(message.text)


def _chunks(text: str, limit: int = MAX_UNIT_CHARS) -> Iterator[str]:
    """``text`` in pieces of at most ``limit`` characters, cut at whitespace."""
    while len(text) > limit:
        cut = text.rfind(" ", limit // 2, limit)
        if cut <= 0:
            cut = limit
        yield text[:cut].rstrip()
        text = text[cut:].lstrip()
    if text:
        yield text


def _json_records(text: str) -> list[str] | None:
    """The records of a JSON payload (list items or top-level entries), or None."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        data = json.loads(stripped)
    except ValueError:
        return None
    items: list[Any]
    if isinstance(data, list):
        items = data
    elif isinstance(data, dict):
        lists = [v for v in data.values() if isinstance(v, list) and v]
        if len(lists) == 1 and len(data) <= 4:
            items = lists[0]
        else:
            items = [{k: v} for k, v in data.items()]
    else:
        return None
    return [json.dumps(item, ensure_ascii=False, separators=(", ", ": ")) for item in items]


def _spans(text: str, limit: int) -> Iterator[tuple[int, int, str]]:
    """``(start_line, end_line, text)`` pieces of a long text: paragraphs, else lines."""
    lines = text.split("\n")
    multi_line_paragraph = any(p.count("\n") >= 2 for p in _PARAGRAPH.split(text.strip("\n")))
    if not multi_line_paragraph:
        # prose: paragraphs (each a short block of at most two lines)
        start = 0
        for number, line in enumerate([*lines, ""], start=1):
            if line.strip():
                if not start:
                    start = number
                continue
            if start:
                block = "\n".join(lines[start - 1 : number - 1]).strip()
                for piece in _chunks(block, limit):
                    yield start, number - 1, piece
                start = 0
        return
    for number, line in enumerate(lines, start=1):
        if line.strip():
            for piece in _chunks(line.strip(), limit):
                yield number, number, piece


@dataclass(frozen=True, slots=True)
class UnitSize:
    """How large units are.

    Attributes:
        short_chars: A text of at most this many characters (and fewer than
            `SHORT_MESSAGE_LINES` lines) stays one unit.
        max_chars: Longest unit; longer lines are cut at whitespace.
    """

    short_chars: int = SHORT_MESSAGE_CHARS
    max_chars: int = MAX_UNIT_CHARS


def split_text(
    text: str,
    *,
    message_id: str,
    position: int,
    role: str,
    tool: str | None = None,
    first_part: int = 0,
    size: UnitSize = UnitSize(),  # frozen, so one shared default is safe
) -> list[Unit]:
    """Split one text into units (see the module docstring for the rules)."""
    text = text.strip("\n")
    if not text.strip():
        return []

    def unit(part: int, start: int, end: int, body: str, context: str = "") -> Unit:
        return Unit(message_id, position, first_part + part, role, tool, start, end, body, context)

    if len(text) <= size.short_chars and text.count("\n") < SHORT_MESSAGE_LINES:
        return [unit(0, 1, text.count("\n") + 1, text.strip())]
    records = _json_records(text)
    if records is not None and len(records) > 1:
        head = text.strip()[:MAX_CONTEXT_CHARS].split("\n", 1)[0] if tool is None else ""
        out: list[Unit] = []
        for record in records:
            for piece in _chunks(record, size.max_chars):
                out.append(unit(len(out), 1, 1, piece, head))
        return out
    first_line = next((ln.strip() for ln in text.split("\n") if ln.strip()), "")
    context = first_line[:MAX_CONTEXT_CHARS]
    out = []
    for start, end, body in _spans(text, size.max_chars):
        out.append(unit(len(out), start, end, body, "" if body.startswith(context) else context))
    return out


def split_message(
    message: BaseMessage,
    *,
    message_id: str,
    position: int,
    tool_names: Mapping[str, str] | None = None,
    size: UnitSize = UnitSize(),  # frozen, so one shared default is safe
) -> list[Unit]:
    """Split one chat message into units.

    Args:
        message: The message.
        message_id: Its id (``message.id``, or a stable substitute).
        position: Its index in the session.
        tool_names: Tool names by tool call id, to name the tool of a ToolMessage that
            carries no ``name``.

    Returns:
        The units, in text order: the text's units, then one unit per tool call of an
        AI message (``name(args)``).
    """
    role = _ROLES.get(message.type, message.type)
    tool: str | None = None
    if message.type == "tool":
        call_id = getattr(message, "tool_call_id", None)
        tool = message.name or (tool_names or {}).get(call_id or "")
    units = split_text(
        message_text(message),
        message_id=message_id,
        position=position,
        role=role,
        tool=tool,
        size=size,
    )
    for call in getattr(message, "tool_calls", None) or ():
        args = json.dumps(call.get("args", {}), ensure_ascii=False, sort_keys=True)
        body = f"{call.get('name')}({args})"
        for piece in _chunks(body, size.max_chars):
            units.append(
                Unit(message_id, position, len(units), role, str(call.get("name")), 0, 0, piece)
            )
    return units


__all__ = [
    "MAX_UNIT_CHARS",
    "SHORT_MESSAGE_CHARS",
    "Unit",
    "UnitSize",
    "message_text",
    "split_message",
    "split_text",
]
