"""Task records: a finished agent step kept in memory as a task (docs/memory.md, 'Tasks').

An agent turn that used tools is a small task tree: the user's request (a HumanMessage)
is the parent task, each tool call answered by a ToolMessage is a task under it, with
its ``action`` (the tool), ``parameters`` (the call's arguments), ``result`` (the tool's
answer), ``success`` (the ToolMessage was not an error) and ``parent_task_id`` (the
request's item id). `TieredMemory.record` stores such a step as the ToolMessage's item,
with the record under ``metadata["task"]``; nothing else about the item changes (its
text stays ``tool -> result``, its importance is the tool rule's: 0.7 success, 0.8
failure, adjusted by content). When the item leaves L1, its L3 summary keeps the
action, a parameter summary and a result summary (`summarize_task`), also as plain
fields under ``metadata["task_summary"]``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxpolicy.memory.messages import message_key

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from ctxpolicy.memory.items import MemoryItem

TASK_KEY = "task"
TASK_SUMMARY_KEY = "task_summary"
#: Characters kept of one parameter value in a parameter summary.
PARAM_VALUE_CHARS = 60
#: Characters kept of a result in a task's L3 summary (extractive, facts first).
RESULT_SUMMARY_CHARS = 240


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One finished agent step (the seed's Task: action, parameters, result, ...).

    Attributes:
        task_id: The tool call id (unique within the conversation).
        action: What was done: the tool's name.
        parameters: The call's arguments.
        result: The tool's answer (text).
        success: False when the ToolMessage's status was ``error``.
        parent_task_id: Item id of the request the step served (its HumanMessage).
        metadata: ``agent`` (the AI message's ``name``) and ``message_id`` when known.
    """

    task_id: str
    action: str
    parameters: Mapping[str, Any]
    result: str
    success: bool
    parent_task_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_data(self) -> dict[str, Any]:
        """Plain data (JSON-compatible when ``parameters`` are)."""
        return {
            "task_id": self.task_id,
            "action": self.action,
            "parameters": dict(self.parameters),
            "result": self.result,
            "success": self.success,
            "parent_task_id": self.parent_task_id,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> TaskRecord:
        """Rebuild a record from `to_data` output.

        Raises:
            ValueError: a field is missing or has the wrong type.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"task data must be a mapping, got {type(data).__name__}")  # noqa: TRY004
        try:
            task_id, action = data["task_id"], data["action"]
        except KeyError as exc:
            raise ValueError(f"task data lacks field {exc.args[0]!r}") from None
        parameters = data.get("parameters") or {}
        if not isinstance(task_id, str) or not isinstance(action, str):
            raise ValueError(f"task 'task_id' and 'action' must be strings, got {data!r}")  # noqa: TRY004
        if not isinstance(parameters, Mapping):
            raise ValueError(f"task 'parameters' must be a mapping, got {parameters!r}")  # noqa: TRY004
        parent = data.get("parent_task_id")
        meta = data.get("metadata") or {}
        return cls(
            task_id=task_id,
            action=action,
            parameters=dict(parameters),
            result=str(data.get("result", "")),
            success=bool(data.get("success", True)),
            parent_task_id=parent if isinstance(parent, str) else None,
            metadata=dict(meta) if isinstance(meta, Mapping) else {},
        )


def task_of(item: MemoryItem) -> TaskRecord | None:
    """The task record an item carries (``metadata["task"]``), or None."""
    raw = item.metadata.get(TASK_KEY)
    if not isinstance(raw, Mapping):
        return None
    try:
        return TaskRecord.from_data(raw)
    except ValueError:
        return None


def summarize_params(parameters: Mapping[str, Any], *, max_value: int = PARAM_VALUE_CHARS) -> str:
    """``key=value, ...`` with each value's JSON cut to ``max_value`` characters."""
    parts = []
    for key, value in parameters.items():
        text = (
            value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        )
        if len(text) > max_value:
            text = text[: max_value - 1] + "…"
        parts.append(f"{key}={text}")
    return ", ".join(parts)


def summarize_task(task: TaskRecord, result_summary: str) -> tuple[str, dict[str, Any]]:
    """A task's L3 summary: the text ``action(params) -> ok|failed: result`` and the seed's
    plain fields (``task_id``, ``action``, ``param_summary``, ``result_summary``,
    ``success``, ``parent_task_id``)."""
    params = summarize_params(task.parameters)
    outcome = "ok" if task.success else "failed"
    text = f"{task.action}({params}) -> {outcome}: {result_summary}".strip()
    fields = {
        "task_id": task.task_id,
        "action": task.action,
        "param_summary": params,
        "result_summary": result_summary,
        "success": task.success,
        "parent_task_id": task.parent_task_id,
    }
    return text, fields


def task_records(
    messages: Iterable[BaseMessage],
    *,
    known_calls: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, TaskRecord]:
    """The task records of ``messages``, by the ToolMessage's memory key.

    Each ToolMessage answering a tool call of an AIMessage (in ``messages``, else in
    ``known_calls``: ``{call id: {"name", "args", "parent_task_id", "agent"}}``) becomes
    a record; its parent is the last HumanMessage before that AIMessage.
    """
    calls: dict[str, Mapping[str, Any]] = dict(known_calls or {})
    parent: str | None = None
    records: dict[str, TaskRecord] = {}
    for message in messages:
        if isinstance(message, HumanMessage):
            parent = message_key(message)
        elif isinstance(message, AIMessage):
            _note_calls(calls, message, parent)
        elif isinstance(message, ToolMessage):
            found = calls.get(message.tool_call_id)
            if found is None:
                continue
            records[message_key(message)] = _record_of(message, found)
    return records


def _note_calls(
    calls: dict[str, Mapping[str, Any]], message: AIMessage, parent: str | None
) -> None:
    """Add the tool calls (those with an id) of ``message`` to ``calls``, by call id."""
    for call in message.tool_calls:
        if call.get("id"):
            calls[str(call["id"])] = {
                "name": call["name"],
                "args": call.get("args") or {},
                "parent_task_id": parent,
                "agent": message.name,
            }


def _record_of(message: ToolMessage, found: Mapping[str, Any]) -> TaskRecord:
    """The task record of a tool result answering the known call ``found``."""
    meta: dict[str, Any] = {}
    if found.get("agent"):
        meta["agent"] = found["agent"]
    if message.id:
        meta["message_id"] = message.id
    return TaskRecord(
        task_id=message.tool_call_id,
        action=str(found.get("name") or message.name or "tool"),
        parameters=dict(found.get("args") or {}),
        result=str(message.text),
        success=message.status != "error",
        parent_task_id=found.get("parent_task_id"),
        metadata=meta,
    )


__all__ = [
    "TASK_KEY",
    "TASK_SUMMARY_KEY",
    "TaskRecord",
    "summarize_params",
    "summarize_task",
    "task_of",
    "task_records",
]
