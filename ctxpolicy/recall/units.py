"""Units the size of a fact: how messages are split before they are indexed.

A message is split into *units*: prose into sentences, a multi-line text (a log dump,
a table) into its lines, a JSON payload into its records. A line buried in a 100-line
tool output, or the one sentence that states a fact in a chatty message, is therefore
its own unit and can be found and shown alone. Each unit keeps where it came from
(message id, position in the session, role, tool name, line span) and a little
surrounding context (the sentence before it, or the first line of a dump: the command
or header) that is indexed with it but not shown.

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

#: A sentence shorter than this many characters is joined with the next one.
MIN_UNIT_CHARS = 40
#: Longest unit text in characters; longer lines are cut at whitespace into pieces.
MAX_UNIT_CHARS = 600
#: A prose message up to this many characters is one unit: a turn, read whole.
TURN_CHARS = 600
#: Longest context kept with a unit (characters).
MAX_CONTEXT_CHARS = 160

_ROLES: Mapping[str, str] = {"human": "user", "ai": "assistant", "tool": "tool"}
_PARAGRAPH = re.compile(r"\n\s*\n")
#: Times and dates: metadata of a log line, not the value a statement gives.
_TIMESTAMP = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?(?:\.\d+)?Z?)?\b"
    r"|\b\d{1,2}:\d{2}(?::\d{2})?(?:\.\d+)?\b"
)
#: A connector, then (within two words) a value: a token with a digit or with one of
#: ``_ . / : # @`` inside, or a capitalised name.
_STATEMENT = re.compile(
    r"(?:\b(?:is|are|was|were|now|to|on|as|at|equals)\b|=|->|=>|:)\s*"
    r"(?:[\w'-]+\s+){0,2}?[\"'`(\[]?"
    r"(?:[\w-]*\d[\w./:#@-]*|[\w-]+[_./:#@][\w./:#@-]+|#[\w-]+|[A-Z][a-z]+)",
)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z0-9\"'(\[#@`])")


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
        statement: Whether the text states a value (`states_value`; set by the index).
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
    statement: bool = False

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


def states_value(text: str) -> bool:
    """Whether ``text`` reads as a statement of a value (``X is eu-west-3``, ``port = 6432``,
    ``-> INC-48213``, ``"value": "7f3a9c"``, ``owner is Ingrid Solberg``).

    A unit that states a value ranks above one that only mentions its subject (a question
    about it, "config unchanged"): the index multiplies its bm25 score by
    ``STATEMENT_BOOST`` (see docs/recall.md, "Index"). Times and dates do not count.
    """
    return bool(_STATEMENT.search(_TIMESTAMP.sub(" ", text)))


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
    items = _records_of(data)
    if items is None:
        return None
    return [json.dumps(item, ensure_ascii=False, separators=(", ", ": ")) for item in items]


def _records_of(data: Any) -> list[Any] | None:
    """A list's items; an object's one non-empty list (when it has at most 4 keys), else
    its entries one by one; None for a scalar."""
    if isinstance(data, list):
        return data
    if not isinstance(data, dict):
        return None
    lists = [v for v in data.values() if isinstance(v, list) and v]
    if len(lists) == 1 and len(data) <= 4:
        return list(lists[0])
    return [{k: v} for k, v in data.items()]


def _sentences(block: str, min_chars: int) -> list[str]:
    """The sentences of a prose block; ones shorter than ``min_chars`` join the next."""
    out: list[str] = []
    pending = ""
    for raw in _SENTENCE_END.split(block):
        sentence = raw.strip()
        if not sentence:
            continue
        pending = f"{pending} {sentence}" if pending else sentence
        if len(pending) >= min_chars:
            out.append(pending)
            pending = ""
    if pending:
        if out and len(pending) < min_chars:
            out[-1] = f"{out[-1]} {pending}"
        else:
            out.append(pending)
    return out


def _dump_spans(lines: list[str], size: UnitSize) -> Iterator[tuple[int, int, str, str]]:
    """A log dump or a table: every line a unit, the first line as context."""
    head = next((ln.strip() for ln in lines if ln.strip()), "")[:MAX_CONTEXT_CHARS]
    for number, line in enumerate(lines, start=1):
        if line.strip():
            for piece in _chunks(line.strip(), size.max_chars):
                yield number, number, piece, "" if piece.startswith(head) else head


def _paragraphs(lines: list[str]) -> Iterator[tuple[int, int, str]]:
    """``(start_line, end_line, text)`` of the blank-line separated paragraphs."""
    start = 0
    for number, line in enumerate([*lines, ""], start=1):
        if line.strip():
            if not start:
                start = number
            continue
        if start:
            yield start, number - 1, " ".join(ln.strip() for ln in lines[start - 1 : number - 1])
            start = 0


def _spans(text: str, size: UnitSize) -> Iterator[tuple[int, int, str, str]]:
    """``(start_line, end_line, text, context)`` pieces: sentences of prose, else lines."""
    lines = text.split("\n")
    if any(p.count("\n") >= 2 for p in _PARAGRAPH.split(text.strip("\n"))):
        yield from _dump_spans(lines, size)
        return
    # long prose: paragraphs of at most two lines, split into sentences; the message's
    # first line (a speaker, a date) and the sentence before are the context
    head = lines[0].strip()[:80]
    previous = ""
    for start, end, block in _paragraphs(lines):
        for sentence in _sentences(block, size.min_chars):
            for piece in _chunks(sentence, size.max_chars):
                context = previous[-MAX_CONTEXT_CHARS:]
                if start > 1 or previous:
                    context = f"{head} … {context}" if context else head
                yield start, end, piece, context
                previous = piece


@dataclass(frozen=True, slots=True)
class UnitSize:
    """How large units are.

    Attributes:
        min_chars: A sentence shorter than this joins the next one.
        max_chars: Longest unit; longer lines are cut at whitespace.
        turn_chars: A prose message up to this long is shown whole when one of its
            units is recalled (`turn_text`; 0: units alone).
    """

    min_chars: int = MIN_UNIT_CHARS
    max_chars: int = MAX_UNIT_CHARS
    turn_chars: int = TURN_CHARS


def turn_text(text: str, *, turn_chars: int) -> str | None:
    """``text`` as one line when it is a short prose turn a reader takes in whole (up to
    ``turn_chars`` characters, not a dump or a JSON payload), else None.

    Recall scores sentences but shows such a turn whole: it keeps its speaker, its date
    and what its short sentences refer to (docs/recall.md, "Units").
    """
    text = text.strip("\n")
    if not text.strip() or len(text) > turn_chars or _json_records(text) is not None:
        return None
    if any(p.count("\n") >= 2 for p in _PARAGRAPH.split(text)):
        return None
    return " ".join(line.strip() for line in text.split("\n") if line.strip())


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

    records = _json_records(text)
    if records is not None and len(records) > 1:
        head = text.strip()[:MAX_CONTEXT_CHARS].split("\n", 1)[0] if tool is None else ""
        out: list[Unit] = []
        for record in records:
            for piece in _chunks(record, size.max_chars):
                out.append(unit(len(out), 1, 1, piece, head))
        return out
    if records is not None:  # one JSON record: one unit
        return [unit(0, 1, text.count("\n") + 1, text.strip())]
    return [
        unit(part, start, end, body, context)
        for part, (start, end, body, context) in enumerate(_spans(text, size))
    ]


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
        str(message.text),
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
    "MIN_UNIT_CHARS",
    "TURN_CHARS",
    "Unit",
    "UnitSize",
    "split_message",
    "split_text",
    "states_value",
    "turn_text",
]
