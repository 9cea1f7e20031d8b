"""Read-only views that the StateBuilder modules return from ``snapshot()``.

Each is a frozen value: a node reads a module's fields once, as one object, instead
of picking keys out of the raw state dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxpolicy.state.blackboard import (
        AgentStatus,
        MapReduceResult,
        MapReduceTask,
        TimelineEntry,
    )


@dataclass(frozen=True, slots=True)
class SessionSnapshot:
    """Which conversation this state belongs to."""

    namespace: str | None
    session_id: str | None


@dataclass(frozen=True, slots=True)
class RoutingSnapshot:
    """Routing and the outcome of the last agent run."""

    active_agent: str | None
    assigned_task: str | None
    last_agent_status: AgentStatus | None
    last_agent_failure_kind: str | None
    last_agent_error: str | None


@dataclass(frozen=True, slots=True)
class ReactSnapshot:
    """What a ReAct controller tracks between steps."""

    goal: str | None
    plan: tuple[str, ...]
    reflection: str | None
    error_retry_count: int


@dataclass(frozen=True, slots=True)
class MapReduceSnapshot:
    """The MapReduce run: the plan, the current task (in a worker) and the results."""

    goal: str | None
    understanding: str | None
    tasks: tuple[MapReduceTask, ...]
    task: MapReduceTask | None
    results: tuple[MapReduceResult, ...]

    def missing_tasks(self) -> tuple[MapReduceTask, ...]:
        """Tasks of the plan that have no result yet."""
        done = {r.get("task_id") for r in self.results}
        return tuple(t for t in self.tasks if t["id"] not in done)


@dataclass(frozen=True, slots=True)
class TimelineSnapshot:
    """The run timeline, including entries appended but not flushed yet."""

    entries: tuple[TimelineEntry, ...]


@dataclass(frozen=True, slots=True)
class ContextsSnapshot:
    """The persisted ``__context`` layers present in the state."""

    values: Mapping[str, str]

    def get(self, layer: str) -> str | None:
        """The persisted text of ``layer`` (None when absent)."""
        return self.values.get(layer)


TodoSnapshot = dict[str, Any] | list[Any] | None

__all__ = [
    "ContextsSnapshot",
    "MapReduceSnapshot",
    "ReactSnapshot",
    "RoutingSnapshot",
    "SessionSnapshot",
    "TimelineSnapshot",
    "TodoSnapshot",
]
