"""The ``memory`` collector: a strategy or one tier of tiered memory, packed into the cap.

Policy::

    memory__context:
      collector: {type: memory, service: memory, strategy: balanced}   # or tier: l1|l2|l3|l4
    # shares: {search: 0.5, l1: 0.2, l2: 0.3}   # replace the strategy's shares of the cap

The service (looked up in the engine's services, then in state under the same name) is a
`TieredMemory`, its `TieredMemory.to_data` output, or a `MemorySessions`. For sessions,
state ``session_ids`` (a list) or ``session_id`` picks the sessions to aggregate; else
the call's thread's session (``compose(thread_id=)``, else the running LangGraph thread:
a thread never reads the L1 of sessions it did not name); with no thread, every open
session. The search query is the call's
query, else the newest L1 item.

A strategy (or ``shares``) packs whole items by token shares of the layer's cap (see
`ctxpolicy.memory.strategies`); a single tier reads its ``limit`` items in order.
The collector never creates a memory: tier sizes belong to the `TieredMemory` service.
With ``tiers: {l1, l2, l3}`` and no service, `ctxpolicy.engine.PolicyEngine` keeps one
memory of those sizes per conversation, records the history it is given into it, and
passes it to this collector as the service.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctxpolicy.collectors.base import lookup_service
from ctxpolicy.collectors.items import ItemsText
from ctxpolicy.layers import MemoryStrategy
from ctxpolicy.memory.sessions import MemoryNotDurableWarning, MemorySessions, current_thread_id
from ctxpolicy.memory.strategies import (
    MEMORY_STRATEGIES,
    content_key,
    pack_candidates,
    pack_memory,
    render_item,
    select_memory,
)
from ctxpolicy.memory.tiered import TieredMemory

if TYPE_CHECKING:
    from ctxpolicy.collectors.base import CollectRequest
    from ctxpolicy.memory.strategies import Candidate
    from ctxpolicy.policy import Policy


def resolve_memory(request: CollectRequest, name: str) -> TieredMemory | MemorySessions:
    """The memory service ``name`` of this call.

    Raises:
        LookupError: neither the services nor the state hold ``name``.
        TypeError: the value is not a memory.
    """
    value = lookup_service(request.services, request.state, name)
    if value is None:
        raise LookupError(
            f"memory collector of layer {request.layer!r}: no service or state entry {name!r} "
            "(pass services={'" + name + "': TieredMemory(...)})"
        )
    if isinstance(value, TieredMemory | MemorySessions):
        return value
    if isinstance(value, Mapping):
        return TieredMemory.from_data(value)
    raise TypeError(
        f"memory collector of layer {request.layer!r}: {name!r} must be a TieredMemory, "
        f"MemorySessions or TieredMemory.to_data() output, got {type(value).__name__}"
    )


def _own_session(state: Mapping[str, Any], thread_id: str | None) -> str | None:
    """State ``session_id``, else the call's thread (``thread_id``, else the LangGraph
    thread the call runs in); None when there is neither."""
    one = state.get("session_id")
    if isinstance(one, str) and one:
        return one
    return thread_id if thread_id is not None else current_thread_id()


def call_session_ids(state: Mapping[str, Any], thread_id: str | None = None) -> list[str] | None:
    """The sessions a call reads: state ``session_ids``, else ``session_id``, else the
    call's thread (``thread_id``, else the running LangGraph thread); None: none named
    and no thread (then a `MemorySessions` layer reads every open session)."""
    ids = state.get("session_ids")
    if isinstance(ids, Sequence) and not isinstance(ids, str):
        return [str(i) for i in ids]
    own = _own_session(state, thread_id)
    return None if own is None else [own]


def _current_session(
    memory: Any, state: Mapping[str, Any], thread_id: str | None = None
) -> str | None:
    """The session of this call for agent-scoped `MemorySessions` (``agent=`` given):
    state ``session_id``, else the call's thread; None otherwise (also when the state
    names ``session_ids``: the call aggregates those)."""
    if not isinstance(memory, MemorySessions) or memory.agent is None:
        return None
    if state.get("session_ids"):
        return None
    return _own_session(state, thread_id)


def call_strategy(state: Mapping[str, Any]) -> MemoryStrategy | None:
    """The call's ``context_strategy`` (state key), which overrides a memory layer's
    strategy (docs/memory.md); None when the state sets none.

    Raises:
        ValueError: the value is not ``minimal``, ``balanced`` or ``comprehensive``.
    """
    value = state.get("context_strategy")
    if value is None or value == "":
        return None
    if value not in MEMORY_STRATEGIES:
        raise ValueError(
            f"context_strategy must be one of {', '.join(MEMORY_STRATEGIES)}; got {value!r}"
        )
    found: MemoryStrategy = value
    return found


def _shares_and_strategy(
    spec: Any, state: Mapping[str, Any]
) -> tuple[MemoryStrategy, dict[str, float] | None]:
    """The strategy and shares of this call: the call's ``context_strategy`` replaces the
    policy's strategy and its shares (a single-tier layer keeps its spec)."""
    spec_shares = getattr(spec, "shares", None)
    shares = dict(spec_shares) if spec_shares is not None else None
    override = call_strategy(state) if spec.tier is None else None
    if override is not None:
        return override, None
    return spec.strategy, shares


def _session_candidates(
    memory: MemorySessions,
    request: CollectRequest,
    *,
    strategy: MemoryStrategy,
    shares: dict[str, float] | None,
) -> list[Candidate]:
    """Candidates of a `MemorySessions`: an agent's scoped view of this session (this
    session's L1/L2, the agent's L3, global L4 hits), else the aggregate of the
    state's sessions (none named: the running thread's, outside a graph every open one)."""
    spec: Any = request.spec
    current = _current_session(memory, request.state, request.thread_id)
    if current is not None and spec.tier is None:
        return memory.scoped(
            current,
            strategy=strategy,
            query=request.query,
            max_tokens=request.cap_tokens,
            count_tokens=request.count_tokens,
            shares=shares,
            limit=spec.limit,
        )
    # with a thread: its own session, never every open one
    ids = call_session_ids(request.state, request.thread_id)
    return memory.aggregate(
        memory.restore_sessions(ids) if ids is not None else None,  # unknown ids: none
        strategy=strategy,
        tier=spec.tier,
        query=request.query,
        limit=spec.limit,
        max_tokens=request.cap_tokens,
        count_tokens=request.count_tokens,
        shares=shares,
    )


def _memory_candidates(
    memory: TieredMemory,
    request: CollectRequest,
    *,
    strategy: MemoryStrategy,
    shares: dict[str, float] | None,
) -> list[Candidate]:
    """Candidates of one `TieredMemory`: a single tier in order, or a strategy."""
    spec: Any = request.spec
    if spec.tier is not None:
        selected = select_memory(memory, tier=spec.tier, query=request.query, limit=spec.limit)
        return pack_candidates(
            selected, cap_tokens=request.cap_tokens, count_tokens=request.count_tokens
        )
    return pack_memory(
        memory,
        cap_tokens=request.cap_tokens,
        count_tokens=request.count_tokens,
        strategy=strategy,
        shares=shares,
        query=request.query,
        limit=spec.limit,
    )


def collect_memory(request: CollectRequest) -> str | None:
    """Render the memory selected by the layer's spec, whole items packed into the cap.

    Returns:
        One line per item (``- [kind] content``), or None when nothing is selected or fits.
    """
    spec: Any = request.spec
    memory = resolve_memory(request, spec.service)
    if request.cap_tokens <= 0:
        return None
    strategy, shares = _shares_and_strategy(spec, request.state)
    if isinstance(memory, MemorySessions):
        candidates = _session_candidates(memory, request, strategy=strategy, shares=shares)
    else:
        candidates = _memory_candidates(memory, request, strategy=strategy, shares=shares)
    if not candidates:
        return None
    # whole items with their keys: a later layer showing one of them again drops it
    return ItemsText(
        [render_item(c.item) for c in candidates],
        [(f"id:{c.item.id}", content_key(c.item.content)) for c in candidates],
    )


def check_sessions_active(
    specs: Iterable[Any],
    services: Mapping[str, Any],
    state: Mapping[str, Any],
    *,
    thread_id: str | None = None,
) -> None:
    """Refuse a call of a paused or ended session before anything runs (docs/memory.md,
    'Scopes and lifecycle'): for each memory layer (``specs``) reading an agent's
    `MemorySessions`, the call's session (state ``session_id``, else ``thread_id``, else
    the LangGraph thread: `_current_session`, the session the collector reads) must be
    active, or the turn it composes for could not be recorded.

    Raises:
        SessionInactiveError: the session is paused or ended (a ``ValueError``).
    """
    if state.get("session_ids"):  # the call aggregates the sessions it names
        return
    for spec in specs:
        memory = lookup_service(services, state, spec.service)
        current = _current_session(memory, state, thread_id)
        if current is not None:
            memory.check_active(current)


def warn_volatile_memory(policy: Policy, services: Mapping[str, Any]) -> None:
    """Warn (`MemoryNotDurableWarning`) for each memory service of ``policy``'s layers that
    a restarted process cannot restore: a `TieredMemory` or `MemorySessions` without a
    store, or with an in-process ``InMemoryStore`` (docs/memory.md, 'Persistence through
    LangGraph's BaseStore')."""
    seen: set[int] = set()
    for name in policy.block_layers:
        spec = policy.layer(name).collector
        if spec is None or spec.type != "memory":
            continue
        memory = services.get(spec.service)
        if not isinstance(memory, TieredMemory | MemorySessions) or id(memory) in seen:
            continue
        seen.add(id(memory))
        store = memory.store
        if store is not None and not _in_process(store):
            continue
        where = "no store" if store is None else "an in-process InMemoryStore"
        warnings.warn(
            f"layer {name!r}: memory service {spec.service!r} ({type(memory).__name__}) has "
            f"{where}, so a restarted process starts it empty (L1/L2 and everything else); "
            "give it a persistent LangGraph store (SqliteStore, PostgresStore) and restore it "
            "with TieredMemory.from_store / MemorySessions(store=...), or declare "
            "`tiers:` on the layer and pass no service (rebuilt from the checkpoint)",
            MemoryNotDurableWarning,
            stacklevel=4,
        )


def _in_process(store: Any) -> bool:
    """Whether ``store`` is LangGraph's in-process ``InMemoryStore`` (gone with the process)."""
    from langgraph.store.memory import InMemoryStore  # noqa: PLC0415 - a store is given: langgraph is there

    return isinstance(store, InMemoryStore)
