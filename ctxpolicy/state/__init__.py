"""The LangGraph state side: `Blackboard`, reducers and `StateBuilder`.

See docs/design.md, 'State rules'.

This package needs the ``langgraph`` extra (``pip install ctxpolicy[langgraph]``);
``import ctxpolicy`` never imports it.
"""

from __future__ import annotations

try:
    import langgraph.graph.message  # noqa: F401  (the reducers live there)
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "ctxpolicy.state needs the langgraph extra: pip install 'ctxpolicy[langgraph]'"
    ) from exc

from ctxpolicy.state.blackboard import (
    CONTEXT_FIELDS,
    AgentStatus,
    Blackboard,
    DroppedStateKeyError,
    MapReduceResult,
    MapReduceTask,
    TimelineEntry,
    blackboard_schema,
    check_schema_keys,
    merge_keys,
    merge_results,
    result_key,
    state_keys,
)
from ctxpolicy.state.buffer import UnknownStateKeyError
from ctxpolicy.state.builder import StateBuilder
from ctxpolicy.state.ids import stable_message_id, user_turn, with_stable_ids
from ctxpolicy.state.modules import check_persistable, persisted_layers, policy_state_fields
from ctxpolicy.state.snapshots import (
    ContextsSnapshot,
    MapReduceSnapshot,
    ReactSnapshot,
    RoutingSnapshot,
    SessionSnapshot,
    TimelineSnapshot,
    TodoSnapshot,
)

__all__ = [
    "CONTEXT_FIELDS",
    "AgentStatus",
    "Blackboard",
    "ContextsSnapshot",
    "DroppedStateKeyError",
    "MapReduceResult",
    "MapReduceSnapshot",
    "MapReduceTask",
    "ReactSnapshot",
    "RoutingSnapshot",
    "SessionSnapshot",
    "StateBuilder",
    "TimelineEntry",
    "TimelineSnapshot",
    "TodoSnapshot",
    "UnknownStateKeyError",
    "blackboard_schema",
    "check_persistable",
    "check_schema_keys",
    "merge_keys",
    "merge_results",
    "persisted_layers",
    "policy_state_fields",
    "result_key",
    "stable_message_id",
    "state_keys",
    "user_turn",
    "with_stable_ids",
]
