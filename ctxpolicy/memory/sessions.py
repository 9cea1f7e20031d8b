"""Sessions: per-session memory, aggregation and distribution.

See docs/design.md, 'Memory tiers and scopes'.

`MemorySessions` controls the memory of sessions: each session owns a
`TieredMemory` (L1/L2 private to it); `aggregate` merges several sessions' memory for one
agent (ranked, de-duplicated, trimmed to a token budget); `distribute` adds one item to
several sessions (broadcast, or filtered). L3/L4 of every session are written through
to a LangGraph ``BaseStore`` (an ``InMemoryStore`` unless you pass one; ``store=False``
for none), so a new process restores them.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from ctxpolicy.errors import CtxPolicyError
from ctxpolicy.layers import MemoryStrategy, MemoryTier
from ctxpolicy.memory.items import MemoryItem, new_item_id
from ctxpolicy.memory.packing import pack_pieces
from ctxpolicy.memory.strategies import (
    MEMORY_SOURCES,
    Candidate,
    content_key,
    dedupe_candidates,
    pack_candidates,
    pack_shares,
    render_item,
    select_memory,
    source_pools,
    strategy_shares,
)
from ctxpolicy.memory.tiered import DEFAULT_NAMESPACE, TieredMemory, load_stored, search_all

if TYPE_CHECKING:
    from langchain_core.vectorstores import VectorStore
    from langgraph.store.base import BaseStore

    from ctxpolicy.memory.items import ItemKind

SESSIONS_FORMAT = "ctxpolicy.memory.sessions/1"
_TIER_RANK = {"l1": 0, "l4": 1, "l2": 2, "l3": 3}
#: Namespace of global (L4) memory shared by every agent.
GLOBAL_NAMESPACE: tuple[str, ...] = ("ctxpolicy", "global")
#: Reserved part of an agent's namespace holding its L3 (not a session id).
AGENT_PART = "_agent"
LIFECYCLE_PART = "_lifecycle"
SessionStatus = Literal["active", "paused", "ended"]
SESSION_STATUSES: tuple[str, ...] = ("active", "paused", "ended")


class SessionInactiveError(CtxPolicyError, ValueError):
    """A turn of a paused or ended session (it records nothing until resumed)."""


class MemoryNotDurableWarning(UserWarning):
    """A memory service that a restarted process cannot restore (no persistent store)."""


def current_thread_id() -> str | None:
    """The LangGraph ``thread_id`` of the running graph call (None outside a graph)."""
    try:
        from langgraph.config import get_config
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    try:
        found = (get_config().get("configurable") or {}).get("thread_id")
    except RuntimeError:
        return None
    return None if found is None else str(found)


#: Importance of a session's persisted ``__context`` layer in `MemorySessions.aggregate_context`.
CONTEXT_IMPORTANCE = 0.8
_CONTEXT_SUFFIX = "__context"
#: A session's state (e.g. its LangGraph thread's values), or a function returning it.
SessionContexts = Mapping[str, Mapping[str, Any]] | Callable[[str], Mapping[str, Any] | None]


@dataclass(frozen=True, slots=True)
class ContextPiece:
    """One piece of an aggregated session context (`MemorySessions.aggregate_context`).

    Attributes:
        session_id: The session it comes from.
        source: A persisted layer name (``compression__context``) or ``memory:<tier>``.
        text: The piece as it goes into the prompt.
        importance: Its rank key (a layer's: ``context_importance``; memory: the item's).
    """

    session_id: str
    source: str
    text: str
    importance: float

    def render(self) -> str:
        """The piece labelled with its session and source."""
        return f"[{self.session_id} · {self.source}]\n{self.text}"


def render_context(pieces: Sequence[ContextPiece]) -> str:
    """Aggregated pieces as one layer text (the order given; pieces separated by a blank line)."""
    return "\n\n".join(piece.render() for piece in pieces)


def _interleave(pools: Sequence[Sequence[Candidate]]) -> list[Candidate]:
    """The candidates of several ranked lists, rank by rank (first of each, then second...)."""
    return [c for rank in itertools.zip_longest(*pools) for c in rank if c is not None]


def _check_session_id(session_id: Any) -> str:
    if not isinstance(session_id, str) or not session_id or "." in session_id:
        raise ValueError(f"session_id must be a non-empty string without '.', got {session_id!r}")
    if session_id in (AGENT_PART, LIFECYCLE_PART):
        raise ValueError(f"session_id {session_id!r} is reserved")
    return session_id


def _check_persist_interval(persist_interval: Any) -> None:
    """Raise ``ValueError`` unless ``persist_interval`` is None or a number > 0."""
    if persist_interval is not None and (
        isinstance(persist_interval, bool)
        or not isinstance(persist_interval, int | float)
        or persist_interval <= 0
    ):
        raise ValueError(f"persist_interval must be a number > 0, got {persist_interval!r}")


def _unique_pieces(ranked: Iterable[tuple[Any, ...]]) -> list[ContextPiece]:
    """The pieces (last element of each ranked entry) without repeats of the same text
    (ignoring case and spacing), first occurrence wins."""
    seen: set[str] = set()
    unique: list[ContextPiece] = []
    for *_, piece in ranked:
        key = content_key(piece.text)
        if key not in seen:
            seen.add(key)
            unique.append(piece)
    return unique


def default_store() -> BaseStore:
    """A LangGraph ``InMemoryStore`` (imported here, so langgraph loads only when used).

    Raises:
        ImportError: langgraph is not installed (install the ``langgraph`` extra, or pass
            ``store=False``).
    """
    try:
        from langgraph.store.memory import InMemoryStore
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "MemorySessions persists L3/L4 through langgraph's BaseStore; install "
            "'ctxpolicy[langgraph]' or pass store=False"
        ) from exc
    return InMemoryStore()


class MemorySessions:
    """Per-session tiered memories of one agent.

    Args:
        l1_size: L1 capacity of each session.
        l2_size: L2 capacity of each session.
        l3_size: L3 capacity of each session.
        summarizer: L3 summarizer shared by the sessions (see `TieredMemory`).
        store: LangGraph ``BaseStore`` for L3/L4; None creates an ``InMemoryStore``;
            False disables persistence.
        namespace: Store namespace prefix; a session lives under ``(*namespace, id)``.
        vector_store_factory: ``(session_id) -> VectorStore`` for each session's L4;
            None uses the offline default.
        agent: The agent these sessions belong to: its namespace is
            ``(*namespace, agent)`` (sessions under it, its L3 under ``_agent``).
        global_namespace: Where L4 (global, durable) items are written.
        persist_interval: Seconds between automatic L3→L4 persists (`maybe_persist`,
            run by `record`); None: only when a session ends or `persist` is called.

    Scopes and lifecycle (docs/memory.md, 'Scopes and lifecycle'): L1 is private to a
    session and never distributed; L2 is per session and the target of `distribute`;
    `aggregate_agent` summarizes the sessions' L2 into the agent's L3; `persist` writes
    the agent's L3 to the global L4 namespace; `end` does both for one session. A
    session is ``active``, ``paused`` or ``ended``.

    Raises:
        ValueError: a size or the namespace is invalid (the message names it).
    """

    def __init__(
        self,
        *,
        l1_size: int = 50,
        l2_size: int = 100,
        l3_size: int = 500,
        summarizer: Any = None,
        store: BaseStore | Literal[False] | None = None,
        namespace: tuple[str, ...] = DEFAULT_NAMESPACE,
        vector_store_factory: Callable[[str], VectorStore] | None = None,
        agent: str | None = None,
        global_namespace: tuple[str, ...] = GLOBAL_NAMESPACE,
        persist_interval: float | None = None,
    ) -> None:
        if agent is not None:
            namespace = (*namespace, _check_session_id(agent))
        # Validate sizes/namespace/summarizer once, with the memory's own messages.
        TieredMemory(l1_size, l2_size, l3_size, summarizer=summarizer, namespace=namespace)
        TieredMemory(namespace=global_namespace)
        _check_persist_interval(persist_interval)
        self._sizes = (l1_size, l2_size, l3_size)
        self._summarizer = summarizer
        self._namespace = namespace
        self._agent = agent
        self._global_namespace = global_namespace
        self._store: BaseStore | None = (
            None if store is False else (default_store() if store is None else store)
        )
        self._vector_store_factory = vector_store_factory
        self._sessions: dict[str, TieredMemory] = {}
        self._status: dict[str, SessionStatus] = {}
        self._agent_l3: dict[str, MemoryItem] = {}
        self._persisted: set[str] = set()
        self._persist_interval = persist_interval
        self._last_persist = time.monotonic()
        self._global: TieredMemory | None = None
        if self._store is not None:
            self._restore_from_store(self._store)

    def _restore_from_store(self, store: BaseStore) -> None:
        """Load the agent's L3 summaries and the sessions' lifecycle statuses from ``store``."""
        namespace = self._namespace
        for summary, _ in load_stored(store, namespace=(*namespace, AGENT_PART)):
            self._agent_l3[summary.id] = summary
        for entry in search_all(store, (*namespace, LIFECYCLE_PART)):
            status = entry.value.get("status")
            if status in SESSION_STATUSES:
                self._status[entry.key] = status

    @property
    def store(self) -> BaseStore | None:
        """The store L3/L4 are written through to (None when disabled)."""
        return self._store

    @property
    def session_ids(self) -> tuple[str, ...]:
        """Ids of the open sessions, in creation order."""
        return tuple(self._sessions)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    def session(self, session_id: str) -> TieredMemory:
        """The memory of ``session_id``, created on first use (L3/L4 restored from the store).

        Raises:
            ValueError: ``session_id`` is empty or contains ``.``.
        """
        found = self._sessions.get(_check_session_id(session_id))
        if found is not None:
            return found
        l1, l2, l3 = self._sizes
        namespace = (*self._namespace, session_id)
        vectors = self._vector_store_factory(session_id) if self._vector_store_factory else None
        if self._store is not None:
            memory = TieredMemory.from_store(
                self._store,
                namespace=namespace,
                l1_size=l1,
                l2_size=l2,
                l3_size=l3,
                summarizer=self._summarizer,
                vector_store=vectors,
            )
        else:
            memory = TieredMemory(
                l1, l2, l3, summarizer=self._summarizer, vector_store=vectors, namespace=namespace
            )
        self._sessions[session_id] = memory
        return memory

    def restore_sessions(self, session_ids: Iterable[str]) -> list[str]:
        """Open those of ``session_ids`` that this process has not opened but the store
        holds (restored from it, `session`); an id the store does not hold opens nothing.

        Returns:
            The ids of ``session_ids`` open now, in order, each once.

        Raises:
            ValueError: a session id is empty or contains ``.``.
        """
        ids = list(dict.fromkeys(_check_session_id(s) for s in session_ids))
        store = self._store
        if store is not None:
            for sid in ids:
                if sid not in self._sessions and store.search((*self._namespace, sid), limit=1):
                    self.session(sid)
        return [sid for sid in ids if sid in self._sessions]

    def close(self, session_id: str) -> None:
        """Forget the in-process memory of ``session_id`` (its stored L3/L4 stay).

        Raises:
            KeyError: no such open session.
        """
        if session_id not in self._sessions:
            raise KeyError(f"no open session {session_id!r}")
        del self._sessions[session_id]

    def distribute(
        self,
        content: str,
        *,
        session_ids: Iterable[str] | None = None,
        where: Callable[[str, TieredMemory], bool] | None = None,
        importance: float | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        kind: ItemKind | None = None,
    ) -> dict[str, MemoryItem]:
        """Add one item to several sessions (distribute).

        Args:
            content: The item text.
            session_ids: Target sessions (created when missing); None broadcasts to every
                open session.
            where: Filter ``(session_id, memory) -> bool``; only sessions it accepts get it.
            importance: As `TieredMemory.add`.
            tags: As `TieredMemory.add`.
            metadata: As `TieredMemory.add`.
            kind: As `TieredMemory.add`.

        Returns:
            The stored item per receiving session; the item id is the same in all of them,
            so aggregation counts it once.

        Raises:
            ValueError: an argument is invalid (the message names it).
        """
        targets = list(self._sessions) if session_ids is None else list(session_ids)
        for session_id in targets:
            _check_session_id(session_id)
        if where is not None and not callable(where):
            raise ValueError(
                f"where must be a callable (session_id, memory) -> bool, got {where!r}"
            )
        item_id = new_item_id()
        delivered: dict[str, MemoryItem] = {}
        for session_id in dict.fromkeys(targets):
            if self.status(session_id) != "active":
                continue  # a paused or ended session takes no new items
            memory = self.session(session_id)
            if where is not None and not where(session_id, memory):
                continue
            delivered[session_id] = memory.add(
                content,
                importance=importance,
                tags=tags,
                metadata=metadata,
                kind=kind,
                item_id=item_id,
                tier="l2",  # L2 is the target of distribute; L1 stays private
            )
        return delivered

    # ------------------------------------------------------------------ lifecycle

    @property
    def agent(self) -> str | None:
        """The agent these sessions belong to (None: no agent level)."""
        return self._agent

    @property
    def namespace(self) -> tuple[str, ...]:
        """The agent's namespace (sessions live under it)."""
        return self._namespace

    def status(self, session_id: str) -> SessionStatus:
        """``active`` (also for a session never seen), ``paused`` or ``ended``."""
        return self._status.get(_check_session_id(session_id), "active")

    def check_active(self, session_id: str) -> None:
        """Raise `SessionInactiveError` unless ``session_id`` is active (a turn may run).

        Raises:
            SessionInactiveError: the session is paused or ended (a ``ValueError``).
        """
        status = self.status(session_id)
        if status != "active":
            raise SessionInactiveError(
                f"session {session_id!r} is {status}; resume it before recording"
            )

    def _set_status(self, session_id: str, status: SessionStatus) -> None:
        self._status[session_id] = status
        if self._store is not None:
            self._store.put((*self._namespace, LIFECYCLE_PART), session_id, {"status": status})

    def pause(self, session_id: str) -> None:
        """Pause a session: it takes no distributed items and no `record` until `resume`.

        Raises:
            ValueError: the session has ended.
        """
        if self.status(session_id) == "ended":
            raise ValueError(f"session {session_id!r} has ended")
        self._set_status(session_id, "paused")

    def resume(self, session_id: str) -> None:
        """Make a paused session active again.

        Raises:
            ValueError: the session has ended.
        """
        if self.status(session_id) == "ended":
            raise ValueError(f"session {session_id!r} has ended")
        self._set_status(session_id, "active")

    def end(self, session_id: str) -> list[MemoryItem]:
        """End a session: its L2 is summarized into the agent's L3 (`aggregate_agent`) and
        the agent's L3 written to the global L4 (`persist`); then it is ``ended``. With a
        store, a session this process has not opened yet is restored from it first (its
        L1/L2 are written through, docs/memory.md, 'Scopes and lifecycle').

        Returns:
            The items this call wrote to L4.
        """
        if self.status(session_id) == "ended":
            return []
        if self.restore_sessions([session_id]):  # after a restart: L1/L2 from the store
            self.aggregate_agent([session_id])
        written = self.persist()
        self._set_status(session_id, "ended")
        return written

    def record(self, messages: Iterable[Any], *, session_id: str | None = None) -> list[MemoryItem]:
        """Record a turn into a session's memory (`TieredMemory.record`).

        ``session_id`` defaults to the running LangGraph thread (a session is a thread),
        so `PolicyEngine.record` feeds the right session from inside a graph. Runs a due
        timed persist (`maybe_persist`).

        Sessions built without ``agent=`` record only with an explicit ``session_id``
        (they keep their earlier behaviour: `PolicyEngine.record` leaves them alone).

        Raises:
            ValueError: an agent's sessions and no session id (outside a graph).
            SessionInactiveError: the session is paused or ended (a ``ValueError``).
        """
        if session_id is None and self._agent is None:
            return []
        sid = session_id if session_id is not None else current_thread_id()
        if sid is None:
            raise ValueError("record: pass session_id (no LangGraph thread is running)")
        self.check_active(sid)
        added = self.session(sid).record(messages)
        self.maybe_persist()
        return added

    def aggregate_agent(self, session_ids: Iterable[str] | None = None) -> list[MemoryItem]:
        """L2 → L3: summarize the L2 items of ``session_ids`` (all open sessions when None)
        into the agent's L3 (one summary per item id, a task's with its action /
        parameter / result fields), written to ``(*namespace, "_agent")`` in the store.

        Returns:
            The agent's L3 items added or refreshed by this call.
        """
        ids = list(self._sessions) if session_ids is None else list(session_ids)
        changed: list[MemoryItem] = []
        for sid in dict.fromkeys(ids):
            memory = self._sessions.get(sid)
            if memory is None:
                continue
            for item in memory.get_l2():
                summary = memory._summary_of(item)
                summary = replace(
                    summary, metadata={**summary.metadata, "session_id": sid, "agent": self._agent}
                )
                old = self._agent_l3.get(item.id)
                if old is not None and old.content == summary.content:
                    continue
                self._agent_l3[item.id] = summary
                self._persisted.discard(item.id)
                changed.append(summary)
                if self._store is not None:
                    value = {**summary.to_data(), "full_content": item.content}
                    self._store.put((*self._namespace, AGENT_PART, "summaries"), item.id, value)
        return changed

    def agent_l3(self) -> list[MemoryItem]:
        """The agent's L3 (summaries aggregated from its sessions), most important first."""
        return sorted(self._agent_l3.values(), key=lambda i: (-i.importance, -i.seq))

    def persist(self) -> list[MemoryItem]:
        """L3 → L4: write the agent's L3 summaries not persisted yet to the global
        namespace (durable with a persistent ``BaseStore``, e.g. LangGraph's Postgres
        store), where `global_memory` of any process finds them.

        Returns:
            The items written.
        """
        self._last_persist = time.monotonic()
        if self._store is None:
            return []
        written: list[MemoryItem] = []
        for item_id, summary in self._agent_l3.items():
            if item_id in self._persisted:
                continue
            value = {**summary.to_data(), "full_content": summary.content}
            self._store.put((*self._global_namespace, "summaries"), item_id, value)
            self._persisted.add(item_id)
            written.append(summary)
        if written:
            self._global = None  # re-read on next use
        return written

    def maybe_persist(self, now: float | None = None) -> list[MemoryItem]:
        """`persist` when ``persist_interval`` seconds passed since the last one (the timer)."""
        if self._persist_interval is None:
            return []
        current = time.monotonic() if now is None else now
        if current - self._last_persist < self._persist_interval:
            return []
        self.aggregate_agent()
        return self.persist()

    def global_memory(self) -> TieredMemory | None:
        """The global L4 (every agent's persisted summaries), searchable; None without a
        store. Restored from the store, so another process sees what this one persisted."""
        if self._store is None:
            return None
        if self._global is None:
            self._global = TieredMemory.from_store(
                self._store, namespace=self._global_namespace, l1_size=1
            )
        return self._global

    def scoped(
        self,
        session_id: str,
        *,
        strategy: MemoryStrategy | None = None,
        query: str | None = None,
        max_tokens: int,
        count_tokens: Callable[[str], int],
        shares: Mapping[str, float] | None = None,
        limit: int | None = None,
    ) -> list[Candidate]:
        """What one session's call sees: its own L1/L2 and search hits, the agent's L3, and
        global L4 search hits after its own, packed by the strategy's shares."""
        chosen = strategy_shares(strategy, shares)
        memory = self.session(session_id)
        pools = source_pools(memory, chosen, query=query, cap_tokens=max_tokens)
        if chosen.get("l3", 0) > 0:
            pools["l3"] = [Candidate("l3", item) for item in self.agent_l3()]
        found = self.global_memory() if query and chosen.get("search", 0) > 0 else None
        if found is not None and query:
            hits = [Candidate("l4", hit) for hit in found.search(query, 10)]
            pools["search"] = [*pools.get("search", []), *hits]
        return pack_shares(
            pools, chosen, cap_tokens=max_tokens, count_tokens=count_tokens, limit=limit
        )

    def aggregate(
        self,
        session_ids: Iterable[str] | None = None,
        *,
        strategy: MemoryStrategy | None = None,
        tier: MemoryTier | None = None,
        query: str | None = None,
        limit: int | None = None,
        max_tokens: int | None = None,
        count_tokens: Callable[[str], int] | None = None,
        shares: Mapping[str, float] | None = None,
    ) -> list[Candidate]:
        """Several sessions' memory for one agent: merged, ranked, de-duplicated, trimmed.

        Each session contributes `select_memory` candidates; they are ranked by
        importance, then tier (recent, related, working set, summaries), then recency;
        repeats (same item id or content) count once. With ``max_tokens`` (``count_tokens``
        is then required) whole items are packed into that many tokens: for a strategy by
        its token shares (`ctxpolicy.memory.strategies.pack_shares`; each source's
        candidates taken from the sessions in turn, rank by rank), for a tier in rank
        order.

        A named session this process has not opened is restored from the store when the
        store holds it (`restore_sessions`).

        Raises:
            KeyError: a session id that is neither open nor held by the store.
            ValueError: ``max_tokens`` without ``count_tokens``, or bad strategy/tier/limit.
        """
        if session_ids is not None:  # after a restart: the stored ones come back
            session_ids = list(session_ids)
            self.restore_sessions(session_ids)
        ids = self._open_ids(session_ids)
        if max_tokens is not None and count_tokens is None:
            raise ValueError("count_tokens is required with max_tokens")
        if max_tokens is not None and count_tokens is not None and tier is None:
            return self._pack_by_shares(
                ids,
                strategy_shares(strategy, shares),
                query=query,
                limit=limit,
                max_tokens=max_tokens,
                count_tokens=count_tokens,
            )
        merged = self._merged_candidates(
            ids, strategy=strategy, tier=tier, query=query, shares=shares
        )
        ranked = dedupe_candidates(merged, limit=limit)
        if max_tokens is None or count_tokens is None:
            return ranked
        return pack_candidates(ranked, cap_tokens=max_tokens, count_tokens=count_tokens)

    def _open_ids(self, session_ids: Iterable[str] | None) -> list[str]:
        """``session_ids`` as a list (None: every open session).

        Raises:
            KeyError: a session id that is not open.
        """
        ids = list(self._sessions) if session_ids is None else list(session_ids)
        missing = [s for s in ids if s not in self._sessions]
        if missing:
            raise KeyError(f"no open session(s): {', '.join(map(repr, missing))}")
        return ids

    def _merged_candidates(
        self,
        ids: list[str],
        *,
        strategy: MemoryStrategy | None,
        tier: MemoryTier | None,
        query: str | None,
        shares: Mapping[str, float] | None,
    ) -> list[Candidate]:
        """The `select_memory` candidates of every session, ranked by importance, then
        tier, then recency (repeats kept)."""
        merged = [
            candidate
            for session_id in dict.fromkeys(ids)
            for candidate in select_memory(
                self._sessions[session_id],
                strategy=strategy,
                tier=tier,
                query=query,
                shares=shares,
            )
        ]
        merged.sort(key=lambda c: (-c.item.importance, _TIER_RANK[c.tier], -c.item.seq))
        return merged

    def _pack_by_shares(
        self,
        ids: list[str],
        chosen: Mapping[str, float],
        *,
        query: str | None,
        limit: int | None,
        max_tokens: int,
        count_tokens: Callable[[str], int],
    ) -> list[Candidate]:
        """`aggregate` by token shares: each source's candidates taken from the sessions in
        turn, rank by rank, then packed by `pack_shares`."""
        per_session = [
            source_pools(self._sessions[sid], chosen, query=query, cap_tokens=max_tokens)
            for sid in dict.fromkeys(ids)
        ]
        pools = {
            source: _interleave([p.get(source, []) for p in per_session])
            for source in MEMORY_SOURCES
        }
        return pack_shares(
            pools, chosen, cap_tokens=max_tokens, count_tokens=count_tokens, limit=limit
        )

    def aggregate_context(
        self,
        contexts: SessionContexts,
        session_ids: Iterable[str] | None = None,
        *,
        max_tokens: int,
        count_tokens: Callable[[str], int],
        query: str | None = None,
        strategy: MemoryStrategy | None = None,
        layers: Iterable[str] | None = None,
        context_importance: float = CONTEXT_IMPORTANCE,
        separator: str = "\n\n",
    ) -> list[ContextPiece]:
        """Several sessions' whole contexts for one agent: merged, ranked, trimmed.

        The aggregation flow of docs/memory.md, 'Aggregating session contexts': each
        session builds its context (its persisted ``__context`` layers, read from
        ``contexts``, plus its memory when the session is open here or held by the store
        (restored, `restore_sessions`): `select_memory` by ``strategy`` for ``query``);
        the pieces of all sessions are ranked by
        importance (a layer counts as ``context_importance``, a memory item as its own
        importance; at equal importance layers first, then sessions in the given order,
        newer items first), repeats (same text ignoring case and spacing) count once, and
        whole pieces are packed into ``max_tokens`` (a piece that does not fit is left
        out; smaller later ones may still fit).

        Args:
            contexts: Per session, its state (e.g. ``graph.get_state(config).values`` of
                the session's thread), as a mapping or a function ``(session_id) ->
                state | None``.
            session_ids: The sessions, in priority order; None: those of a mapping
                ``contexts`` followed by the open sessions.
            max_tokens: The budget (e.g. the layer's cap).
            count_tokens: Token counter of the policy's tokenizer.
            query: The call's query (memory search hits).
            strategy: Memory strategy of each session's part (default ``balanced``).
            layers: Only these ``__context`` layers (default: every non-empty one).
            context_importance: Rank of a persisted layer against memory items.
            separator: What the pieces are joined by (counted in the budget).

        Returns:
            The kept pieces, best first; `render_context` makes them a layer text.

        Raises:
            ValueError: ``max_tokens`` is negative, ``context_importance`` not in [0, 1],
                or a session id is invalid.
        """
        if max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
        if not 0 <= context_importance <= 1:
            raise ValueError(f"context_importance must be in [0, 1], got {context_importance!r}")
        ids = self._context_ids(contexts, session_ids)
        self.restore_sessions(ids)  # a stored session not open here brings its memory
        ranked = self._ranked_pieces(
            contexts,
            ids,
            wanted=None if layers is None else set(layers),
            context_importance=context_importance,
            query=query,
            strategy=strategy,
        )
        unique = _unique_pieces(ranked)
        texts = [piece.render() for piece in unique]
        kept = pack_pieces(
            texts, cap_tokens=max_tokens, count_tokens=count_tokens, separator=separator
        )
        return [unique[i] for i in kept]

    def _ranked_pieces(
        self,
        contexts: SessionContexts,
        ids: list[str],
        *,
        wanted: set[str] | None,
        context_importance: float,
        query: str | None,
        strategy: MemoryStrategy | None,
    ) -> list[tuple[float, int, int, int, ContextPiece]]:
        """Every session's pieces as ``(-importance, kind, order, age, piece)``, sorted.

        Raises:
            ValueError: a session id is invalid.
        """
        ranked: list[tuple[float, int, int, int, ContextPiece]] = []
        for order, sid in enumerate(dict.fromkeys(_check_session_id(s) for s in ids)):
            state = contexts.get(sid) if isinstance(contexts, Mapping) else contexts(sid)
            ranked.extend(
                (-piece.importance, kind, order, age, piece)
                for kind, age, piece in self._session_pieces(
                    sid,
                    state or {},
                    wanted=wanted,
                    context_importance=context_importance,
                    query=query,
                    strategy=strategy,
                )
            )
        ranked.sort(key=lambda entry: entry[:4])
        return ranked

    def _context_ids(
        self, contexts: SessionContexts, session_ids: Iterable[str] | None
    ) -> list[str]:
        """The session ids of `aggregate_context`: ``session_ids``, else those of a mapping
        ``contexts`` followed by the open sessions."""
        if session_ids is not None:
            return list(session_ids)
        if isinstance(contexts, Mapping):
            return [*contexts, *self._sessions]
        return list(self._sessions)

    def _session_pieces(
        self,
        sid: str,
        state: Mapping[str, Any],
        *,
        wanted: set[str] | None,
        context_importance: float,
        query: str | None,
        strategy: MemoryStrategy | None,
    ) -> list[tuple[int, int, ContextPiece]]:
        """One session's context (``Session.build_context``): ``(kind, -seq, piece)``."""
        pieces: list[tuple[int, int, ContextPiece]] = [
            (0, 0, ContextPiece(sid, name, value.strip(), context_importance))
            for name, value in state.items()
            if name.endswith(_CONTEXT_SUFFIX)
            and (wanted is None or name in wanted)
            and isinstance(value, str)
            and value.strip()
        ]
        memory = self._sessions.get(sid)
        if memory is not None:
            for candidate in select_memory(memory, strategy=strategy, query=query):
                item = candidate.item
                source = f"memory:{candidate.tier}"
                piece = ContextPiece(sid, source, render_item(item), item.importance)
                pieces.append((1, -item.seq, piece))
        return pieces

    def to_data(self) -> dict[str, Any]:
        """Plain data of every open session (`from_data` restores it)."""
        return {
            "format": SESSIONS_FORMAT,
            "sessions": {sid: memory.to_data() for sid, memory in self._sessions.items()},
        }

    @classmethod
    def from_data(
        cls,
        data: Mapping[str, Any],
        *,
        summarizer: Any = None,
        store: BaseStore | Literal[False] | None = None,
        namespace: tuple[str, ...] = DEFAULT_NAMESPACE,
    ) -> MemorySessions:
        """Rebuild sessions from `to_data` output.

        Raises:
            ValueError: ``data`` is not sessions data.
        """
        raw = data.get("sessions") if isinstance(data, Mapping) else None
        if not isinstance(raw, Mapping) or data.get("format") != SESSIONS_FORMAT:
            raise ValueError(f"data must be MemorySessions.to_data() output ({SESSIONS_FORMAT!r})")
        sessions = cls(summarizer=summarizer, store=store, namespace=namespace)
        for session_id, memory_data in raw.items():
            memory = TieredMemory.from_data(
                memory_data,
                summarizer=summarizer,
                store=sessions.store,
                namespace=(*namespace, _check_session_id(session_id)),
            )
            sessions._sessions[session_id] = memory
        if raw:
            first = next(iter(sessions._sessions.values()))
            sessions._sizes = (first.l1_size, first.l2_size, first.l3_size)
        return sessions
