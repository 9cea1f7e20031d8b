"""The domain modules of `StateBuilder` (docs/design.md, 'State rules'): one per group of fields.

A node reads a module with ``snapshot()`` and writes it with use-case methods that
set a whole group of fields at once. No module exposes a field-level setter.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, get_args

from ctxpolicy.collectors.base import STATE_SERVICE_COLLECTORS
from ctxpolicy.errors import PersistenceError
from ctxpolicy.layers import COMPRESSION, PERSISTED_BY_DEFAULT, is_block_layer, may_persist
from ctxpolicy.logs import log_events
from ctxpolicy.state.blackboard import (
    AgentStatus,
    MapReduceResult,
    MapReduceTask,
    TimelineEntry,
    result_key,
)
from ctxpolicy.state.snapshots import (
    ContextsSnapshot,
    MapReduceSnapshot,
    ReactSnapshot,
    RoutingSnapshot,
    SessionSnapshot,
    TimelineSnapshot,
    TodoSnapshot,
)

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from ctxpolicy.policy import Policy
    from ctxpolicy.state.buffer import PatchBuffer

_STATUSES: tuple[str, ...] = get_args(AgentStatus)


def _text(value: Any, *, argument: str, allow_none: bool = False) -> str | None:
    if value is None and allow_none:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{argument} must be a string, got {type(value).__name__}")
    return value


def persisted_layers(policy: Policy | None) -> tuple[str, ...]:
    """The ``__context`` layers that may be written to state under ``policy``.

    Without a policy, only the layers persisted by default (``compression__context``).
    """
    if policy is None:
        return tuple(sorted(PERSISTED_BY_DEFAULT))
    return tuple(name for name in policy.block_layers if policy.layer(name).persist)


#: Collector types whose spec names a state key in ``field``.
_FIELD_COLLECTORS = frozenset({"state", "agent_outputs", "skills"})
#: Other state keys a collector type reads (docs/memory.md): the sessions a call reads,
#: and the call's memory strategy.
_READ_KEYS: Mapping[str, tuple[str, ...]] = {
    "memory": ("context_strategy", "session_id", "session_ids"),
    "aggregate": ("session_id", "session_ids"),
}


def policy_state_fields(policy: Policy | None) -> tuple[str, ...]:
    """The state keys ``policy``'s collectors read, sorted: the ``field`` of a ``state``,
    ``agent_outputs`` or ``skills`` collector, the ``service`` a ``memory``, ``skills`` or
    ``aggregate`` collector falls back to in state, and the keys a memory layer reads
    (``session_ids``, ``session_id``, ``context_strategy``).

    They belong to the graph's state schema (`state_schema`) whenever the policy uses
    them (LangGraph drops any other key of a graph's input), and `StateBuilder` accepts
    them.
    """
    if policy is None:
        return ()
    found: set[str] = set()
    for name in policy.block_layers:
        spec = policy.layer(name).collector
        if spec is None:
            continue
        field = getattr(spec, "field", None)
        if spec.type in _FIELD_COLLECTORS and isinstance(field, str):
            found.add(field)
        service = getattr(spec, "service", None)
        if (
            spec.type in STATE_SERVICE_COLLECTORS
            and isinstance(service, str)
            and service.isidentifier()
        ):
            found.add(service)
        found.update(_READ_KEYS.get(spec.type, ()))
    return tuple(sorted(found))


def check_persistable(layer: str, policy: Policy | None) -> None:
    """Raise `PersistenceError` (naming the layer and the reason) unless ``layer`` may persist."""
    if not isinstance(layer, str) or not is_block_layer(layer):
        raise PersistenceError(
            f"cannot persist {layer!r}: only __context block layers persist through "
            "contexts.persist (the history goes through memory.append/replace; "
            "system_prompt and query are runtime-only)"
        )
    if not may_persist(layer):
        raise PersistenceError(
            f"cannot persist {layer!r}: it is runtime-only by rule and may never be persisted "
            "(framework constraints depend on the framework version, not on the conversation)"
        )
    if policy is None:
        if layer not in PERSISTED_BY_DEFAULT:
            raise PersistenceError(
                f"cannot persist {layer!r}: no policy was given to StateBuilder, and without "
                f"one only {', '.join(sorted(PERSISTED_BY_DEFAULT))} persists"
            )
        return
    if layer not in policy.order:
        raise PersistenceError(
            f"cannot persist {layer!r}: policy {policy.name!r} has no such layer in its order"
        )
    if not policy.layer(layer).persist:
        raise PersistenceError(
            f"cannot persist {layer!r}: policy {policy.name!r} marks it runtime-only "
            f"(layers.{layer}.persist is false)"
        )


class _Module:
    __slots__ = ("_buf",)

    def __init__(self, buffer: PatchBuffer) -> None:
        self._buf = buffer


class SessionModule(_Module):
    """``namespace`` and ``session_id``: which conversation this is."""

    __slots__ = ()

    def snapshot(self) -> SessionSnapshot:
        """The session identity."""
        return SessionSnapshot(
            namespace=self._buf.read("namespace"), session_id=self._buf.read("session_id")
        )

    def open(self, *, namespace: str, session_id: str) -> None:
        """Set the session identity (normally done once by the entry point)."""
        self._buf.write("namespace", _text(namespace, argument="namespace"))
        self._buf.write("session_id", _text(session_id, argument="session_id"))


class RoutingModule(_Module):
    """Which agent runs, its task, and how the last run ended."""

    __slots__ = ()

    def snapshot(self) -> RoutingSnapshot:
        """Routing and last-run outcome as one view."""
        read = self._buf.read
        return RoutingSnapshot(
            active_agent=read("active_agent"),
            assigned_task=read("assigned_task"),
            last_agent_status=read("last_agent_status"),
            last_agent_failure_kind=read("last_agent_failure_kind"),
            last_agent_error=read("last_agent_error"),
        )

    def activate(self, agent_id: str) -> None:
        """Make ``agent_id`` the active agent."""
        self._buf.write("active_agent", _text(agent_id, argument="agent_id"))

    def assign_task(self, text: str) -> None:
        """Set the task the active agent works on."""
        self._buf.write("assigned_task", _text(text, argument="text"))

    def finish_agent(
        self, status: AgentStatus, failure_kind: str | None = None, error: str | None = None
    ) -> None:
        """Record how the agent ended; clears ``active_agent`` and ``assigned_task``.

        Raises:
            ValueError: unknown ``status``, or failure details given for a completed run.
        """
        if status not in _STATUSES:
            raise ValueError(f"status must be one of {', '.join(_STATUSES)}, got {status!r}")
        if status == "completed" and (failure_kind is not None or error is not None):
            raise ValueError("failure_kind and error are only for a failed or aborted run")
        self._buf.write("last_agent_status", status)
        self._buf.write(
            "last_agent_failure_kind", _text(failure_kind, argument="failure_kind", allow_none=True)
        )
        self._buf.write("last_agent_error", _text(error, argument="error", allow_none=True))
        self._buf.write("active_agent", None)
        self._buf.write("assigned_task", None)


class MemoryModule(_Module):
    """The persisted conversation (``messages``, an ``add_messages`` reducer field)."""

    __slots__ = ()

    def snapshot(self) -> tuple[BaseMessage, ...]:
        """The history: Human, AI and Tool messages only (with this node's writes applied)."""
        return tuple(m for m in self._buf.messages() if m.type in ("human", "ai", "tool"))

    def delta(self) -> tuple[BaseMessage, ...]:
        """What this node appended so far, with the stable ids the messages get."""
        return self._buf.appended_messages()

    def append(self, delta: Sequence[BaseMessage]) -> None:
        """Append the messages this node must persist (only the delta, never the prompt).

        Messages without an id get a stable one, so re-running the node on the same
        restored state replaces them instead of adding them twice.

        Raises:
            PersistenceError: a SystemMessage or RemoveMessage in ``delta``.
            TypeError: ``delta`` is not a sequence of messages.
        """
        self._buf.append_messages(delta)

    def replace(self, all_messages: Sequence[BaseMessage]) -> None:
        """Replace the whole history (compaction, repair).

        The patch is ``[RemoveMessage(id=REMOVE_ALL_MESSAGES), *all_messages]``.

        Raises:
            PersistenceError: called after ``append`` in the same node (the delta would
                be lost), or a SystemMessage/RemoveMessage in ``all_messages``.
        """
        self._buf.replace_messages(all_messages)


class DeliverablesModule(_Module):
    """``deliverable_keys``: what has been saved, each key once."""

    __slots__ = ()

    def snapshot(self) -> tuple[str, ...]:
        """The saved deliverable keys in save order."""
        return tuple(self._buf.read("deliverable_keys") or ())

    def record_saved(self, key: str) -> None:
        """Record that deliverable ``key`` was saved (no-op when already recorded)."""
        _text(key, argument="key")
        if not key:
            raise ValueError("key must be a non-empty string")
        keys = list(self.snapshot())
        if key not in keys:
            keys.append(key)
        self._buf.write("deliverable_keys", keys)


class TodoModule(_Module):
    """``todo``: the structured todo snapshot (rendered into ``todo__context`` by a collector)."""

    __slots__ = ()

    def snapshot(self) -> TodoSnapshot:
        """A copy of the todo snapshot (None when there is none)."""
        todo: TodoSnapshot = copy.deepcopy(self._buf.read("todo"))
        return todo

    def replace(self, todo: Mapping[str, Any] | Sequence[Any]) -> None:
        """Replace the todo snapshot."""
        if isinstance(todo, Mapping):
            self._buf.write("todo", copy.deepcopy(dict(todo)))
        elif isinstance(todo, Sequence) and not isinstance(todo, str | bytes):
            self._buf.write("todo", copy.deepcopy(list(todo)))
        else:
            raise TypeError(f"todo must be a mapping or a list, got {type(todo).__name__}")

    def clear(self) -> None:
        """Remove the todo snapshot."""
        self._buf.write("todo", None)


class ContextsModule(_Module):
    """Persisted ``__context`` layers: only those the policy marks ``persist: true``."""

    __slots__ = ("_policy",)

    def __init__(self, buffer: PatchBuffer, policy: Policy | None) -> None:
        super().__init__(buffer)
        self._policy = policy

    def snapshot(self) -> ContextsSnapshot:
        """The persisted layers present in the state."""
        values = {
            layer: self._buf.read(layer)
            for layer in persisted_layers(self._policy)
            if isinstance(self._buf.read(layer), str)
        }
        return ContextsSnapshot(values=values)

    def persist(self, mapping: Mapping[str, str]) -> None:
        """Write ``{layer: text}`` (e.g. ``ComposeResult.persist``) to the state.

        Every layer is checked before anything is written.

        Raises:
            PersistenceError: a layer that is not ``persist: true`` in the policy (the
                message names the layer and the reason), or a non-string value.
        """
        if not isinstance(mapping, Mapping):
            raise TypeError(f"mapping must be a mapping, got {type(mapping).__name__}")
        for layer, text in mapping.items():
            try:
                check_persistable(layer, self._policy)
            except PersistenceError as exc:
                log_events([(logging.WARNING, f"persist refused: {exc}")])
                raise
            if not isinstance(text, str):
                raise PersistenceError(
                    f"cannot persist {layer!r}: the value must be text, got {type(text).__name__}"
                )
            self._buf.check_key(layer)
        for layer, text in mapping.items():
            self._buf.write(layer, text)


class CompressionModule(_Module):
    """``compression__context``: the persisted history summary (never in ``messages``)."""

    __slots__ = ("_contexts",)

    def __init__(self, buffer: PatchBuffer, contexts: ContextsModule) -> None:
        super().__init__(buffer)
        self._contexts = contexts

    def snapshot(self) -> str | None:
        """The current summary (None when there is none)."""
        value = self._buf.read(COMPRESSION)
        return value if isinstance(value, str) else None

    def persist_compression(self, summary: str) -> None:
        """Persist the history summary.

        Raises:
            PersistenceError: the policy marks ``compression__context`` runtime-only.
        """
        self._contexts.persist({COMPRESSION: _text(summary, argument="summary") or ""})


class ReactModule(_Module):
    """ReAct controller fields: goal, plan, reflection and the error retry counter."""

    __slots__ = ()

    def snapshot(self) -> ReactSnapshot:
        """The ReAct view."""
        return ReactSnapshot(
            goal=self._buf.read("goal"),
            plan=tuple(self._buf.read("plan") or ()),
            reflection=self._buf.read("reflection"),
            error_retry_count=int(self._buf.read("error_retry_count") or 0),
        )

    def save_goal(self, goal: str) -> None:
        """Set the goal."""
        self._buf.write("goal", _text(goal, argument="goal"))

    def save_plan(self, plan: Sequence[str]) -> None:
        """Set the plan (a list of steps)."""
        if isinstance(plan, str):
            raise TypeError("plan must be a sequence of steps, got a single string")
        steps = [_text(step, argument=f"plan[{i}]") or "" for i, step in enumerate(plan)]
        self._buf.write("plan", steps)

    def save_reflection(self, reflection: str) -> None:
        """Set the latest reflection."""
        self._buf.write("reflection", _text(reflection, argument="reflection"))

    def reset_error_retry(self) -> None:
        """Set the error retry counter to 0."""
        self._buf.write("error_retry_count", 0)

    def inc_error_retry(self) -> int:
        """Add one to the error retry counter; returns the new value."""
        value = self.snapshot().error_retry_count + 1
        self._buf.write("error_retry_count", value)
        return value


def _normalize_task(task: str | Mapping[str, Any], *, index: int, argument: str) -> MapReduceTask:
    if isinstance(task, str):
        return {"id": f"task-{index + 1}", "description": task}
    if not isinstance(task, Mapping):
        raise TypeError(f"{argument} must be a string or a mapping, got {type(task).__name__}")
    description = task.get("description")
    if not isinstance(description, str):
        raise TypeError(f"{argument} needs a string 'description'")
    task_id = task.get("id", f"task-{index + 1}")
    if not isinstance(task_id, str) or not task_id:
        raise ValueError(f"{argument}.id must be a non-empty string, got {task_id!r}")
    out: dict[str, Any] = copy.deepcopy(dict(task))
    out["id"] = task_id
    return out  # type: ignore[return-value]


class MapReduceModule(_Module):
    """The MapReduce plan, the worker's current task and the results (reducer field)."""

    __slots__ = ()

    def snapshot(self) -> MapReduceSnapshot:
        """The MapReduce view (results with this node's pending writes applied)."""
        return MapReduceSnapshot(
            goal=self._buf.read("mapreduce_goal"),
            understanding=self._buf.read("mapreduce_understanding"),
            tasks=tuple(self._buf.read("mapreduce_tasks") or ()),
            task=self._buf.read("mapreduce_task"),
            results=tuple(self._buf.results()),
        )

    def init_plan(
        self, goal: str, understanding: str | None, tasks: Sequence[str | Mapping[str, Any]]
    ) -> tuple[MapReduceTask, ...]:
        """Start a new plan: goal, understanding and tasks; resets the results.

        Tasks may be strings (ids ``task-1``, ``task-2``, ...) or mappings with a
        ``description`` and an optional ``id``. Returns the normalized tasks.

        Raises:
            ValueError: two tasks share an id, or a task lacks a description.
        """
        if isinstance(tasks, str):
            raise TypeError("tasks must be a sequence of tasks, got a single string")
        normalized = [
            _normalize_task(t, index=i, argument=f"tasks[{i}]") for i, t in enumerate(tasks)
        ]
        seen: set[str] = set()
        for task in normalized:
            if task["id"] in seen:
                raise ValueError(f"tasks: duplicate task id {task['id']!r}")
            seen.add(task["id"])
        self._buf.write("mapreduce_goal", _text(goal, argument="goal"))
        self._buf.write(
            "mapreduce_understanding",
            _text(understanding, argument="understanding", allow_none=True),
        )
        self._buf.write("mapreduce_tasks", normalized)
        self._buf.write("mapreduce_task", None)
        self.reset_results()
        return tuple(normalized)

    def set_current_task(self, task: str | Mapping[str, Any]) -> MapReduceTask:
        """Set the single task a worker works on; returns it normalized."""
        normalized = _normalize_task(task, index=0, argument="task")
        self._buf.write("mapreduce_task", normalized)
        return normalized

    def append_result(self, result: MapReduceResult | Mapping[str, Any]) -> None:
        """Append one result (a task's later result replaces its earlier one).

        Raises:
            ValueError: ``result`` has no string ``task_id``.
        """
        result_key(result)
        self._buf.append_results([result])

    def append_results(self, results: Iterable[MapReduceResult | Mapping[str, Any]]) -> None:
        """Append several results (see `append_result`)."""
        items = list(results)
        for item in items:
            result_key(item)
        self._buf.append_results(items)

    def reset_results(self) -> None:
        """Clear the results (the patch carries ``Overwrite([])``)."""
        self._buf.reset_results()


class TimelineModule(_Module):
    """``timeline``: entries buffered by ``append`` and written as a whole by ``flush``."""

    __slots__ = ("_pending",)

    def __init__(self, buffer: PatchBuffer) -> None:
        super().__init__(buffer)
        self._pending: list[TimelineEntry] = []

    @property
    def dirty(self) -> bool:
        """Whether entries were appended since the last flush."""
        return bool(self._pending)

    def snapshot(self) -> TimelineSnapshot:
        """The timeline including entries not flushed yet."""
        base = list(self._buf.read("timeline") or ())
        return TimelineSnapshot(entries=tuple(base + self._pending))

    def append(self, entries: Iterable[TimelineEntry | Mapping[str, Any]]) -> None:
        """Buffer entries (written by ``flush``, or by ``StateBuilder.patch``)."""
        if isinstance(entries, Mapping):
            raise TypeError("entries must be an iterable of mappings, got a single mapping")
        for i, entry in enumerate(entries):
            if not isinstance(entry, Mapping):
                raise TypeError(f"entries[{i}] must be a mapping, got {type(entry).__name__}")
            self._pending.append(copy.deepcopy(dict(entry)))  # type: ignore[arg-type]

    def flush(self) -> None:
        """Write the timeline (existing entries plus the buffered ones) into the patch."""
        if not self._pending:
            return
        entries = list(self._buf.read("timeline") or ()) + self._pending
        self._pending = []
        self._buf.write("timeline", entries)


__all__ = [
    "CompressionModule",
    "ContextsModule",
    "DeliverablesModule",
    "MapReduceModule",
    "MemoryModule",
    "ReactModule",
    "RoutingModule",
    "SessionModule",
    "TimelineModule",
    "TodoModule",
    "check_persistable",
    "persisted_layers",
]
