"""Memory curation: dismiss what turned out useless, keep the conversation coherent.

The files (and the message log) stay the complete record; the history the model sees
is a *curated view* (docs/design.md, 'Files as context'). A dismissed tool result is
replaced by a placeholder that says what was read and why it was dropped —
``[read ground-truth.md:30-50 — dismissed: not relevant]`` — so the model still knows
it looked and what it concluded. Dismissals come from the user or from the model
itself (the `dismiss_memory` tool) and go to an append-only `CurationLog` that can be
audited and saved as JSON.

Curation never breaks the structure of the history: a dismissed ToolMessage keeps its
``tool_call_id`` (the AIMessage's tool call still has its answer), a dismissed AI
message keeps its tool calls.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.tools import StructuredTool, ToolException

from ctxpolicy.errors import BlocksError

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage
    from langchain_core.tools import StructuredTool

DismissedBy = Literal["model", "user"]
MAX_SUMMARY_CHARS = 500


@dataclass(frozen=True, slots=True)
class Dismissal:
    """One dismissal, as recorded.

    Attributes:
        target_id: The ToolMessage's ``tool_call_id`` or a message ``id``.
        summary: Why it was dismissed / what it said, in a few words.
        by: ``model`` (the dismiss_memory tool) or ``user``.
        sequence: Position in the log (0-based); later dismissals of a target win.
    """

    target_id: str
    summary: str
    by: DismissedBy
    sequence: int


class CurationLog:
    """Append-only, thread-safe log of dismissals (the audit trail of curation)."""

    def __init__(self, records: Iterable[Dismissal] = ()) -> None:
        """Start a log, optionally from saved records."""
        self._lock = threading.Lock()
        self._records: list[Dismissal] = list(records)

    def dismiss(self, target_id: str, *, summary: str, by: DismissedBy = "user") -> Dismissal:
        """Record that ``target_id`` should be shown as a placeholder from now on.

        Raises:
            BlocksError: an empty target or summary, or a summary over 500 characters.
        """
        if not isinstance(target_id, str) or not target_id.strip():
            raise BlocksError("dismiss: target_id must be a non-empty message or tool call id")
        summary = summary.strip() if isinstance(summary, str) else ""
        if not summary:
            raise BlocksError("dismiss: summary must say briefly why (it becomes the placeholder)")
        if len(summary) > MAX_SUMMARY_CHARS:
            raise BlocksError(
                f"dismiss: summary is {len(summary)} characters; the limit is {MAX_SUMMARY_CHARS}"
            )
        with self._lock:
            record = Dismissal(target_id.strip(), summary, by, len(self._records))
            self._records.append(record)
        return record

    @property
    def records(self) -> tuple[Dismissal, ...]:
        """Every dismissal, in the order recorded."""
        with self._lock:
            return tuple(self._records)

    def get(self, target_id: str) -> Dismissal | None:
        """The latest dismissal of ``target_id``, or None."""
        with self._lock:
            for record in reversed(self._records):
                if record.target_id == target_id:
                    return record
        return None

    def to_data(self) -> list[dict[str, Any]]:
        """The log as JSON-ready data."""
        return [asdict(record) for record in self.records]

    @classmethod
    def from_data(cls, data: Sequence[Mapping[str, Any]]) -> CurationLog:
        """A log from `to_data` output.

        Raises:
            BlocksError: an entry lacks a field or has a wrong ``by``.
        """
        records: list[Dismissal] = []
        for index, entry in enumerate(data):
            try:
                by = entry["by"]
                if by not in ("model", "user"):
                    raise BlocksError(f"curation log[{index}].by must be 'model' or 'user'")
                records.append(Dismissal(str(entry["target_id"]), str(entry["summary"]), by, index))
            except KeyError as exc:
                raise BlocksError(f"curation log[{index}] lacks {exc.args[0]!r}") from None
        return cls(records)


def describe_tool_call(name: str, args: Mapping[str, Any]) -> str:
    """What a tool call did, in the words of a placeholder (``read guide.md:3-9``)."""
    path = args.get("path") or args.get("file")
    if name == "read_file" and path:
        return _describe_read_file(path, args)
    if name == "read_block" and path:
        return f"read {path}#{args.get('block_id', '')}"
    if name == "search":
        return f"searched {args.get('pattern', '')!r} in {args.get('path') or '.'}"
    if name == "list_files":
        return f"listed {args.get('path') or '.'}"
    return f"{name} result"


def _describe_read_file(path: str, args: Mapping[str, Any]) -> str:
    """``read guide.md`` or, with a line range, ``read guide.md:3-9``."""
    start, end = args.get("start_line"), args.get("end_line")
    if start is not None or end is not None:
        return f"read {path}:{start or 1}-{end if end is not None else 'end'}"
    return f"read {path}"


def format_placeholder(what: str, summary: str) -> str:
    """``[read ground-truth.md:30-50 — dismissed: not relevant]``."""
    return f"[{what} — dismissed: {summary}]"


def curate_messages(messages: Sequence[BaseMessage], log: CurationLog) -> list[BaseMessage]:
    """The history with every dismissed message replaced by its placeholder (pure).

    A ToolMessage is matched by ``tool_call_id`` (or ``id``); other messages by ``id``.
    Tool call ids, tool calls and message ids are kept, so the structure is unchanged.
    """
    calls: dict[str, tuple[str, Mapping[str, Any]]] = {}
    out: list[BaseMessage] = []
    for message in messages:
        _remember_tool_calls(message, calls)
        call_id = getattr(message, "tool_call_id", None)
        dismissal = (log.get(call_id) if call_id else None) or (
            log.get(message.id) if message.id else None
        )
        if dismissal is None:
            out.append(message)
            continue
        update = _placeholder_update(message, call_id, calls, dismissal)
        out.append(message.model_copy(update=update))
    return out


def _remember_tool_calls(
    message: BaseMessage, calls: dict[str, tuple[str, Mapping[str, Any]]]
) -> None:
    """Record the ``(name, args)`` of each tool call ``message`` makes, by call id."""
    for call in getattr(message, "tool_calls", None) or ():
        if call.get("id"):
            calls[call["id"]] = (call["name"], call.get("args") or {})


def _placeholder_update(
    message: BaseMessage,
    call_id: str | None,
    calls: Mapping[str, tuple[str, Mapping[str, Any]]],
    dismissal: Dismissal,
) -> dict[str, Any]:
    """The ``model_copy`` update that turns a dismissed message into its placeholder.

    A tool result is described by the call that produced it (and loses its artifact);
    any other message by its type.
    """
    if call_id:
        name, args = calls.get(call_id, (getattr(message, "name", None) or "tool", {}))
        what = describe_tool_call(name, args)
        update: dict[str, Any] = {"content": format_placeholder(what, dismissal.summary)}
        if hasattr(message, "artifact"):
            update["artifact"] = None
    else:
        update = {"content": format_placeholder(f"{message.type} message", dismissal.summary)}
    return update


def unmatched_dismissals(messages: Sequence[BaseMessage], log: CurationLog) -> list[Dismissal]:
    """Dismissals whose target is not in ``messages`` (to report, never to ignore silently)."""
    ids = {m.id for m in messages if m.id} | {
        m.tool_call_id  # type: ignore[attr-defined]
        for m in messages
        if getattr(m, "tool_call_id", None)
    }
    return [r for r in log.records if r.target_id not in ids]


DISMISS_MEMORY = "dismiss_memory"


def dismissals_from_history(messages: Sequence[BaseMessage]) -> CurationLog:
    """The dismissals a model made with ``dismiss_memory`` inside a conversation.

    Each ``dismiss_memory`` tool call answered by a ToolMessage that is not an error
    is one dismissal (by ``model``). In a LangGraph graph they live in the checkpointed
    history itself, so they survive a restore without a state key of their own.
    """
    calls: dict[str, Mapping[str, Any]] = {}
    log = CurationLog()
    for message in messages:
        for call in getattr(message, "tool_calls", None) or ():
            if call.get("name") == DISMISS_MEMORY and call.get("id"):
                calls[call["id"]] = call.get("args") or {}
        call_id = getattr(message, "tool_call_id", None)
        if call_id in calls and getattr(message, "status", "success") != "error":
            args = calls.pop(call_id)
            try:
                log.dismiss(
                    str(args.get("target_message_id", "")),
                    summary=str(args.get("summary", "")),
                    by="model",
                )
            except BlocksError:  # the tool refused it too
                continue
    return log


def curated_by_tool_calls(
    messages: Sequence[BaseMessage],
) -> tuple[list[BaseMessage], CurationLog]:
    """`curate_messages` with the dismissals of `dismissals_from_history`.

    Messages not dismissed are the same objects as in ``messages``.
    """
    log = dismissals_from_history(messages)
    if not log.records:
        return list(messages), log
    return curate_messages(messages, log), log


def create_dismiss_memory_tool(log: CurationLog) -> StructuredTool:
    """The ``dismiss_memory`` tool for a model: it records into ``log`` (by ``model``).

    Args:
        log: Where dismissals are recorded; apply them with `curate_messages`.
    """

    def dismiss_memory(target_message_id: str, summary: str) -> str:
        try:
            record = log.dismiss(target_message_id, summary=summary, by="model")
        except BlocksError as exc:
            raise ToolException(str(exc)) from None
        return (
            f"dismissed {record.target_id}: from now on it is shown as "
            f"'[... — dismissed: {record.summary}]'"
        )

    return StructuredTool.from_function(
        func=dismiss_memory,
        name="dismiss_memory",
        description=(
            "Drop a tool result you no longer need from your working memory. "
            "target_message_id: the tool_call_id of the tool result (or a message id). "
            "summary: a few words saying what it was and why it is not needed; it "
            "replaces the content as a placeholder so the conversation stays coherent."
        ),
        handle_tool_error=True,
    )
