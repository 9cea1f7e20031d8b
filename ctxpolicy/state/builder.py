"""`StateBuilder`: the single entry point for reading and writing the Blackboard.

A node does exactly this::

    def node(state: Blackboard) -> dict[str, Any]:
        sb = StateBuilder(state, policy)
        task = sb.mapreduce.snapshot().task          # read: one snapshot per module
        sb.mapreduce.append_result({...})            # write: use-case methods only
        sb.routing.finish_agent("completed")
        return sb.patch()                            # one patch per node
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ctxpolicy.state.blackboard import Blackboard, state_keys
from ctxpolicy.state.buffer import PatchBuffer
from ctxpolicy.state.modules import (
    CompressionModule,
    ContextsModule,
    DeliverablesModule,
    MapReduceModule,
    MemoryModule,
    ReactModule,
    RoutingModule,
    SessionModule,
    TimelineModule,
    TodoModule,
    persisted_layers,
    policy_state_fields,
)

if TYPE_CHECKING:
    from ctxpolicy.policy import Policy


class StateBuilder:
    """Wraps one node's input state; collects its writes into one patch.

    Args:
        state: The state LangGraph passed to the node (a `Blackboard`, or the payload
            of a ``Send``).
        policy: The effective policy; decides which ``__context`` layers may be
            persisted (without one, only ``compression__context`` persists); the state
            keys its collectors read (`policy_state_fields`) are accepted too.
        schema: The state TypedDict (default `Blackboard`; a subclass or
            `blackboard_schema(...)` for extra fields).

    Raises:
        UnknownStateKeyError: ``state`` holds a key the schema does not declare.

    Attributes:
        session, routing, memory, deliverables, todo, compression, react, mapreduce,
        timeline, contexts: The domain modules.
    """

    __slots__ = (
        "_buf",
        "compression",
        "contexts",
        "deliverables",
        "mapreduce",
        "memory",
        "react",
        "routing",
        "session",
        "timeline",
        "todo",
    )

    def __init__(
        self,
        state: Mapping[str, Any],
        policy: Policy | None = None,
        *,
        schema: type[Any] = Blackboard,
    ) -> None:
        keys = (
            state_keys(schema)
            | frozenset(persisted_layers(policy))
            | frozenset(policy_state_fields(policy))
        )
        self._buf = PatchBuffer(state, keys=keys)
        self.session = SessionModule(self._buf)
        self.routing = RoutingModule(self._buf)
        self.memory = MemoryModule(self._buf)
        self.deliverables = DeliverablesModule(self._buf)
        self.todo = TodoModule(self._buf)
        self.contexts = ContextsModule(self._buf, policy)
        self.compression = CompressionModule(self._buf, self.contexts)
        self.react = ReactModule(self._buf)
        self.mapreduce = MapReduceModule(self._buf)
        self.timeline = TimelineModule(self._buf)

    def patch(self) -> dict[str, Any]:
        """The one update dict of this node (buffered timeline entries are flushed first)."""
        self.timeline.flush()
        return self._buf.to_patch()


__all__ = ["StateBuilder"]
