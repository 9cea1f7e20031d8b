"""`Recaller`: one recall layer's index, kept up to date, searched for each call.

The engine makes one `Recaller` per recall layer on first use and keeps it for later
calls (that is how the index stays warm between calls without any wiring). Each call:
index the history's new messages → search the query's terms (bm25, plus a dense
ranking fused by reciprocal rank when an ``embeddings`` service is configured, plus
long-term memory when a ``memory`` service is) → `select_units` packs the layer.

See docs/recall.md.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ctxpolicy.errors import CollectorError, EmbeddingsUnavailableError
from ctxpolicy.recall.dense import DenseUnits
from ctxpolicy.recall.index import RecallHit, RecallIndex, query_terms
from ctxpolicy.recall.ingest import HistorySync, message_key, thread_key
from ctxpolicy.recall.postgres import PostgresRecallIndex
from ctxpolicy.recall.select import DEFAULT_HEADER, RecalledUnit, select_units
from ctxpolicy.recall.sqlite import SQLiteRecallIndex
from ctxpolicy.recall.units import Unit, UnitSize, turn_text

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from ctxpolicy.policy import RecallCollectorSpec

logger = logging.getLogger("ctxpolicy.recall")

#: Dense models a recall layer may name without a service (`ctxpolicy.recall.minilm`).
BUILTIN_EMBEDDINGS = ("minilm", "wordllama")
#: Rank constant of reciprocal rank fusion (the usual value from the RRF paper).
RRF_K = 60
#: Memory units get ``seq - MEMORY_POSITION_BASE`` as position: negative, in memory order.
MEMORY_POSITION_BASE = 1 << 62


@dataclass(frozen=True, slots=True)
class RecallRequest:
    """What one recall layer needs for one call.

    Attributes:
        layer: The recall layer, e.g. ``recall__context``.
        query: This call's query text.
        history: The whole history of the call (the index is fed from it).
        kept_from: Position of the oldest history message the prompt keeps.
        prompt_text: Text of the prompt's other layers (nothing is repeated).
        cap_tokens: Most tokens the layer's text may use.
        count_tokens: The policy's token counter.
        thread_id: The conversation's id (None: derived from the history).
        services: The call's services.
        repeat: A second packing for the same call (a smaller cap): reuse the search.
    """

    layer: str
    query: str | None
    history: Sequence[BaseMessage]
    kept_from: int
    prompt_text: str
    cap_tokens: int
    count_tokens: Callable[[str], int]
    thread_id: str | None
    services: Mapping[str, Any]
    repeat: bool = False


@dataclass(frozen=True, slots=True)
class RecallResult:
    """The text of a recall layer and what went into it.

    Attributes:
        text: The layer text, or None when nothing relevant was found.
        units: The units shown, in session order.
        indexed: Messages newly indexed by this call.
        thread: The thread key searched.
        warnings: What the call did without (a dense model that is not installed).
    """

    text: str | None
    units: tuple[RecalledUnit, ...]
    indexed: int
    thread: str
    warnings: tuple[str, ...] = ()


def open_index(spec: RecallCollectorSpec, services: Mapping[str, Any]) -> RecallIndex:
    """The index a recall spec names (see the ``recall`` collector's schema keys).

    Raises:
        CollectorError: the backend's location is missing or the index service is wrong.
    """
    if spec.index is not None:
        found = services.get(spec.index)
        if not isinstance(found, RecallIndex):
            raise CollectorError(
                "recall",
                f"service {spec.index!r} must be a RecallIndex, got {type(found).__name__}",
            )
        return found
    if spec.backend == "memory":
        return SQLiteRecallIndex(":memory:")
    if spec.backend == "sqlite":
        path = os.environ.get(spec.path_env) or spec.path
        if not path:
            raise CollectorError(
                "recall", f"backend sqlite needs 'path' or the variable {spec.path_env}"
            )
        return SQLiteRecallIndex(path)
    dsn = os.environ.get(spec.dsn_env)
    if not dsn:
        raise CollectorError(
            "recall", f"backend postgres needs a connection string in {spec.dsn_env}"
        )
    return PostgresRecallIndex(dsn)


def fuse_rankings(
    rankings: Sequence[tuple[float, Sequence[RecallHit]]], *, k: int = RRF_K
) -> list[RecallHit]:
    """Reciprocal rank fusion of weighted rankings (each best first) into one."""
    scores: dict[str, float] = {}
    hits: dict[str, RecallHit] = {}
    for weight, ranking in rankings:
        if weight <= 0:
            continue
        for rank, hit in enumerate(ranking):
            key = hit.unit.key
            scores[key] = scores.get(key, 0.0) + weight / (k + rank + 1)
            hits.setdefault(key, hit)
    order = sorted(scores, key=lambda key: scores[key], reverse=True)
    return [RecallHit(hits[key].unit, scores[key], hits[key].source) for key in order]


class Recaller:
    """Index, search and pack for one recall layer (see the module docstring).

    Args:
        spec: The layer's ``recall`` collector spec.
        index: The index (default: the one ``spec`` names, see `open_index`).
        services: Services used to open the index.
    """

    def __init__(
        self,
        spec: RecallCollectorSpec,
        *,
        index: RecallIndex | None = None,
        services: Mapping[str, Any] | None = None,
    ) -> None:
        self.spec = spec
        self.index = index if index is not None else open_index(spec, services or {})
        size = UnitSize(
            min_chars=spec.min_unit_chars,
            max_chars=spec.max_unit_chars,
            turn_chars=spec.turn_chars,
        )
        self.sync = HistorySync(self.index, size=size)
        self._dense: dict[str, Any] = {}
        # a builtin dense model, or why it could not be loaded (then lexical search only)
        self._builtin: Any = None
        self._last: tuple[tuple[str, str, int, str], list[RecallHit], list[str], int] | None = None

    def record(self, history: Sequence[BaseMessage], *, thread_id: str | None = None) -> int:
        """Index the new messages of ``history`` (for nodes that record a turn)."""
        return self.sync.sync(thread_key(history, thread_id), history).added

    def _memory_hits(self, services: Mapping[str, Any], query: str) -> list[RecallHit]:
        if self.spec.memory is None:
            return []
        memory = services.get(self.spec.memory)
        search = getattr(memory, "search", None)
        if search is None:
            raise CollectorError(
                "recall", f"memory service {self.spec.memory!r} has no search(query, limit)"
            )
        hits: list[RecallHit] = []
        for rank, item in enumerate(search(query, self.spec.memory_limit)):
            content = str(getattr(item, "content", item))
            tier = str(getattr(item, "tier", "") or "memory")
            item_id = str(getattr(item, "id", rank))
            part = getattr(item, "part", 0)
            seq = getattr(item, "seq", 0)
            # a negative position marks a memory unit (no session position); ordered by the
            # memory's insertion number, so a newer memory item reads after an older one
            position = (seq if isinstance(seq, int) else 0) - MEMORY_POSITION_BASE
            unit = Unit(
                f"memory:{item_id}",
                position,
                part if isinstance(part, int) else 0,
                tier,
                None,
                0,
                0,
                content,
            )
            hits.append(RecallHit(unit, 1.0 / (rank + 1), source="memory"))
        return hits

    def _embeddings(self, services: Mapping[str, Any]) -> Any:
        """The ``embeddings`` the spec names: a service, else a builtin model (loaded
        once); None when the builtin model's packages are missing (a warning says so)."""
        name = self.spec.embeddings
        assert name is not None
        found = services.get(name)
        if found is not None or name not in BUILTIN_EMBEDDINGS:
            return found
        if self._builtin is None:
            # loaded when a layer names one: it brings langchain-core's Embeddings and numpy
            from ctxpolicy.recall.minilm import load_builtin_embeddings

            try:
                self._builtin = load_builtin_embeddings(name)
            except EmbeddingsUnavailableError as exc:
                self._builtin = exc
                logger.warning("recall falls back to lexical search: %s", exc)
        if isinstance(self._builtin, EmbeddingsUnavailableError):
            return None
        return self._builtin

    @property
    def _warnings(self) -> tuple[str, ...]:
        """What every call of this layer does without: a builtin model not installed."""
        if isinstance(self._builtin, EmbeddingsUnavailableError):
            return (f"recall: lexical search only: {self._builtin}",)
        return ()

    def _dense_hits(self, request: RecallRequest, thread: str) -> list[RecallHit]:
        if self.spec.embeddings is None:
            return []
        embeddings = self._embeddings(request.services)
        if embeddings is None and self._warnings:
            return []
        if embeddings is None or not hasattr(embeddings, "embed_query"):
            raise CollectorError(
                "recall",
                f"embeddings service {self.spec.embeddings!r} must be a langchain-core Embeddings",
            )
        store = self._dense.get(thread)
        if store is None:
            store = self._dense[thread] = DenseUnits(embeddings, size=self.sync.size)
        store.sync(request.history)
        return store.search(request.query or "", limit=self.spec.candidates)

    def _search(
        self, request: RecallRequest, thread: str, key: tuple[str, str, int, str]
    ) -> tuple[list[RecallHit], list[str], int, int]:
        """Index the history's new messages and rank: ``(hits, terms, offset, indexed)``
        (no hits when the query has no terms). A repeated recall of the same call (the
        engine's spare, wider step) reuses the previous search once."""
        last = self._last
        if request.repeat and last is not None and last[0] == key:
            _, hits, terms, offset = last
            self._last = None  # one reuse: the wider recall right after the first
            return hits, terms, offset, 0
        synced = self.sync.sync(thread, request.history)
        terms = query_terms(request.query or "")
        if not terms:
            return [], terms, synced.offset, synced.added
        ranked = self.index.search(thread, terms, limit=self.spec.candidates, floor=True)
        dense = self._dense_hits(request, thread)
        if dense:
            ranked = fuse_rankings(
                [(self.spec.weights.bm25, ranked), (self.spec.weights.dense, dense)]
            )
        ranked = self._whole_turns(ranked, request.history, synced.offset)
        hits = [*self._memory_hits(request.services, request.query or ""), *ranked]
        self._last = (key, hits, terms, synced.offset)
        return hits, terms, synced.offset, synced.added

    def _whole_turns(
        self, ranked: Sequence[RecallHit], history: Sequence[BaseMessage], offset: int
    ) -> list[RecallHit]:
        """Score fine, show whole: a hit from a short prose turn shows the whole turn,
        ranked by its best unit (a turn's other units are dropped)."""
        turn_chars = min(self.spec.turn_chars, self.spec.max_unit_chars)
        if turn_chars <= 0:
            return list(ranked)
        out: list[RecallHit] = []
        seen: set[str] = set()
        for hit in ranked:
            unit = hit.unit
            at = unit.position - offset
            if unit.tool is not None or not 0 <= at < len(history):
                out.append(hit)  # a tool's output or call, or a message no longer at hand
                continue
            text = turn_text(str(history[at].text), turn_chars=turn_chars)
            if text is None:
                out.append(hit)
            elif unit.message_id not in seen:
                seen.add(unit.message_id)
                whole = replace(unit, part=0, start_line=1, end_line=1, text=text, context="")
                out.append(RecallHit(whole, hit.score, hit.source))
        return out

    def recall(self, request: RecallRequest) -> RecallResult:
        """Index the history's new messages, search, and pack the layer."""
        history = request.history
        thread = thread_key(history, request.thread_id)
        last_key = message_key(history[-1], len(history) - 1) if history else ""
        key = (thread, request.query or "", len(history), last_key)
        hits, terms, offset, indexed = self._search(request, thread, key)
        if not terms:
            return RecallResult(None, (), indexed, thread, self._warnings)

        # messages edited under their ids (the later ones unchanged): never shown; a
        # message is checked only once one of its units would be shown (few per call)
        stale: set[int] = set()
        checked: set[int] = set()
        positions = {hit.unit.message_id: hit.unit.position for hit in hits}

        def in_history(position: int, message_id: str) -> bool:
            # below the offset: a message a compaction folded into the summary (this
            # session's own past: a restore's abandoned branch is removed at the sync)
            at = position - offset
            if at < 0:
                return True
            return (
                at < len(history)
                and position not in stale
                and message_key(history[at], position) == message_id
            )

        def found_stale(units: Sequence[RecalledUnit]) -> bool:
            """Check the messages of ``units`` not checked yet; True if one was edited."""
            found = False
            for unit in units:
                position = positions.get(unit.message_id, -1)
                if position < offset or position in checked:
                    continue  # memory, summarized, or checked already
                checked.add(position)
                if not self.sync.is_current(thread, unit.message_id, history[position - offset]):
                    stale.add(position)
                    found = True
            return found

        header = DEFAULT_HEADER if self.spec.header is None else self.spec.header
        cap = request.cap_tokens
        while True:
            text, units = select_units(
                hits,
                terms=terms,
                in_history=in_history,
                kept_from=offset + request.kept_from,
                prompt_text=request.prompt_text,
                cap_tokens=cap,
                count_tokens=request.count_tokens,
                header=header,
            )
            if found_stale(units):
                continue  # select again without the edited messages' units
            # lines are counted one by one; the joined text can differ by a token or two
            if text is None or request.count_tokens(text) <= request.cap_tokens or cap <= 0:
                if stale:
                    self._reindex(request, thread, offset, sorted(stale))
                return RecallResult(text, units, indexed, thread, self._warnings)
            cap -= max(8, request.count_tokens(text) - request.cap_tokens)

    def _reindex(
        self, request: RecallRequest, thread: str, offset: int, positions: Sequence[int]
    ) -> None:
        """Index (and embed) again the messages edited under their ids at ``positions``:
        searchable as they read now from the next call on."""
        self._last = None  # the spare step must not reuse hits of the old text
        dense = self._dense.get(thread)
        for position in positions:
            self.sync.reindex(thread, request.history, offset, position)
            if dense is not None:
                dense.reembed(request.history, position - offset)

    def close(self) -> None:
        """Close the index."""
        self.index.close()


__all__ = ["RRF_K", "RecallRequest", "RecallResult", "Recaller", "fuse_rankings", "open_index"]
