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
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ctxpolicy.memory.items import MemoryItem, new_item_id
from ctxpolicy.memory.strategies import (
    MEMORY_SOURCES,
    Candidate,
    MemoryStrategy,
    MemoryTier,
    dedupe_candidates,
    pack_candidates,
    pack_shares,
    select_memory,
    source_pools,
    strategy_shares,
)
from ctxpolicy.memory.tiered import DEFAULT_NAMESPACE, TieredMemory

if TYPE_CHECKING:
    from langchain_core.vectorstores import VectorStore
    from langgraph.store.base import BaseStore

    from ctxpolicy.memory.items import ItemKind

SESSIONS_FORMAT = "ctxpolicy.memory.sessions/1"
_TIER_RANK = {"l1": 0, "l4": 1, "l2": 2, "l3": 3}


def _interleave(pools: Sequence[Sequence[Candidate]]) -> list[Candidate]:
    """The candidates of several ranked lists, rank by rank (first of each, then second...)."""
    return [c for rank in itertools.zip_longest(*pools) for c in rank if c is not None]


def _check_session_id(session_id: Any) -> str:
    if not isinstance(session_id, str) or not session_id or "." in session_id:
        raise ValueError(f"session_id must be a non-empty string without '.', got {session_id!r}")
    return session_id


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
    ) -> None:
        # Validate sizes/namespace/summarizer once, with the memory's own messages.
        TieredMemory(l1_size, l2_size, l3_size, summarizer=summarizer, namespace=namespace)
        self._sizes = (l1_size, l2_size, l3_size)
        self._summarizer = summarizer
        self._namespace = namespace
        self._store: BaseStore | None = (
            None if store is False else (default_store() if store is None else store)
        )
        self._vector_store_factory = vector_store_factory
        self._sessions: dict[str, TieredMemory] = {}

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
            )
        return delivered

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

        Raises:
            KeyError: a session id that is not open.
            ValueError: ``max_tokens`` without ``count_tokens``, or bad strategy/tier/limit.
        """
        ids = list(self._sessions) if session_ids is None else list(session_ids)
        missing = [s for s in ids if s not in self._sessions]
        if missing:
            raise KeyError(f"no open session(s): {', '.join(map(repr, missing))}")
        if max_tokens is not None and count_tokens is None:
            raise ValueError("count_tokens is required with max_tokens")
        if max_tokens is not None and count_tokens is not None and tier is None:
            chosen = strategy_shares(strategy, shares)
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
        ranked = dedupe_candidates(merged, limit=limit)
        if max_tokens is None or count_tokens is None:
            return ranked
        return pack_candidates(ranked, cap_tokens=max_tokens, count_tokens=count_tokens)

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
