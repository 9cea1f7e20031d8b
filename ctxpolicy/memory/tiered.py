"""`TieredMemory`: seed 004's four tiers.

- L1: ring buffer of the ``l1_size`` most recent items.
- L2: importance-ranked working set of at most ``l2_size`` items. An item enters while
  L2 is not full when its importance is above ``l2_threshold`` (0.6); once full, only
  when it beats the current minimum, which is evicted.
- L3: summaries (summarizer service, or a deterministic extractive summary) of the items
  evicted from L1; the ``l3_size`` most recent are kept.
- L4: a semantic index of every L3 summary behind langchain-core's `VectorStore`; never
  trimmed. With a LangGraph `BaseStore`, every summary is also written through to it, so
  L3/L4 survive the process (`TieredMemory.from_store`).

Reads cost what they return: `get_l1` walks ``limit`` items, `get_l2` sorts at most
``l2_size`` items, `search` is the vector store's business.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import itertools
import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ctxpolicy.memory.items import (
    ITEM_KINDS,
    MemoryItem,
    check_importance,
    check_kind,
    new_item_id,
    score_importance,
)
from ctxpolicy.memory.summaries import check_summarizer, summarize_item

if TYPE_CHECKING:
    from langchain_core.documents import Document
    from langchain_core.messages import BaseMessage
    from langchain_core.vectorstores import VectorStore
    from langgraph.store.base import BaseStore

    from ctxpolicy.memory.items import ItemKind

DATA_FORMAT = "ctxpolicy.memory/1"
DEFAULT_NAMESPACE: tuple[str, ...] = ("ctxpolicy", "memory")
_STORE_PAGE = 500


def _check_size(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def _check_limit(value: Any, name: str = "limit") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def _check_namespace(namespace: Any) -> tuple[str, ...]:
    if (
        not isinstance(namespace, tuple)
        or not namespace
        or not all(isinstance(part, str) and part and "." not in part for part in namespace)
    ):
        raise ValueError(
            f"namespace must be a non-empty tuple of non-empty strings without '.', "
            f"got {namespace!r}"
        )
    return namespace


def item_to_document_metadata(item: MemoryItem) -> dict[str, Any]:
    """Flat, scalar-only metadata for an L4 document (fits any vector store)."""
    return {
        "item_id": item.id,
        "importance": item.importance,
        "seq": item.seq,
        "kind": item.kind or "",
        "tags": json.dumps(list(item.tags), ensure_ascii=False),
        "item_metadata": json.dumps(dict(item.metadata), ensure_ascii=False, default=str),
    }


def item_from_document(doc: Document) -> MemoryItem:
    """The memory item an L4 document stands for (foreign documents get neutral defaults)."""
    meta = doc.metadata
    raw_tags = meta.get("tags", "[]")
    raw_meta = meta.get("item_metadata", "{}")
    try:
        tags = tuple(json.loads(raw_tags)) if isinstance(raw_tags, str) else tuple(raw_tags)
        extra = json.loads(raw_meta) if isinstance(raw_meta, str) else dict(raw_meta)
    except (TypeError, ValueError):
        tags, extra = (), {}
    importance = meta.get("importance")
    valid_importance = (
        isinstance(importance, int | float)
        and not isinstance(importance, bool)
        and 0.0 <= importance <= 1.0
    )
    seq = meta.get("seq", -1)
    kind = meta.get("kind") or None
    fallback_id = hashlib.blake2b(doc.page_content.encode("utf-8"), digest_size=16).hexdigest()
    return MemoryItem(
        id=str(meta.get("item_id") or doc.id or fallback_id),
        content=doc.page_content,
        importance=float(importance) if valid_importance else 0.5,  # type: ignore[arg-type]
        seq=seq if isinstance(seq, int) and not isinstance(seq, bool) else -1,
        kind=kind if kind in ITEM_KINDS else None,
        tags=tuple(str(t) for t in tags),
        metadata=extra if isinstance(extra, dict) else {},
    )


_F = TypeVar("_F", bound=Callable[..., Any])


def _locked(method: _F) -> _F:
    """Run ``method`` under the memory's re-entrant lock (safe across threads)."""

    @functools.wraps(method)
    def wrapper(self: TieredMemory, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return cast("_F", wrapper)


class TieredMemory:
    """Seed 004's tiered memory (L1 recent, L2 important, L3 summaries, L4 semantic).

    Args:
        l1_size: Capacity of the L1 ring buffer.
        l2_size: Capacity of the L2 working set.
        l3_size: Number of L3 summaries kept in memory.
        summarizer: L3 summarizer: a ``BaseChatModel`` or a callable ``(text) -> str``;
            None uses a deterministic extractive summary.
        vector_store: L4 index (any langchain-core ``VectorStore``); None uses the offline
            `LocalVectorStore` over `HashingEmbeddings`.
        store: A LangGraph ``BaseStore`` that every L3 summary is written through to.
        namespace: Store namespace of this memory (one per session/agent).
        l2_threshold: Importance an item must exceed to enter a non-full L2.
        auto_promote: Run `promote` after every `add` (else call it yourself, e.g. once per
            step, to batch summarizer calls).

    Raises:
        ValueError: a size is not an integer >= 1, ``l2_threshold`` is not in [0, 1],
            ``namespace`` is malformed or ``summarizer`` is not usable (the message names it).
    """

    def __init__(
        self,
        l1_size: int = 50,
        l2_size: int = 100,
        l3_size: int = 500,
        *,
        summarizer: Any = None,
        vector_store: VectorStore | None = None,
        store: BaseStore | None = None,
        namespace: tuple[str, ...] = DEFAULT_NAMESPACE,
        l2_threshold: float = 0.6,
        auto_promote: bool = True,
    ) -> None:
        self._l1_size = _check_size(l1_size, "l1_size")
        self._l2_size = _check_size(l2_size, "l2_size")
        self._l3_size = _check_size(l3_size, "l3_size")
        self._l2_threshold = check_importance(l2_threshold, name="l2_threshold")
        check_summarizer(summarizer)
        self._summarizer = summarizer
        self._namespace = _check_namespace(namespace)
        self._store = store
        self._auto_promote = bool(auto_promote)
        if vector_store is None:
            from ctxpolicy.memory.vectors import default_vector_store

            self._vectors: VectorStore = default_vector_store()
            self._own_vectors = True
        else:
            self._vectors = vector_store
            self._own_vectors = False
        self._seq = 0
        self._l1: deque[MemoryItem] = deque()
        self._l2: dict[str, MemoryItem] = {}
        self._l2_heap: list[tuple[float, int, str]] = []
        self._l3: deque[MemoryItem] = deque(maxlen=self._l3_size)
        self._unoffered: deque[MemoryItem] = deque()
        self._pending: deque[MemoryItem] = deque()
        self._l4_count = 0
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ properties

    @property
    def l1_size(self) -> int:
        """Capacity of L1."""
        return self._l1_size

    @property
    def l2_size(self) -> int:
        """Capacity of L2."""
        return self._l2_size

    @property
    def l3_size(self) -> int:
        """Capacity of L3."""
        return self._l3_size

    @property
    def namespace(self) -> tuple[str, ...]:
        """Store namespace of this memory."""
        return self._namespace

    @property
    def vector_store(self) -> VectorStore:
        """The L4 index."""
        return self._vectors

    @property
    def total_added(self) -> int:
        """Number of items ever added."""
        return self._seq

    @_locked
    def stats(self) -> dict[str, int]:
        """Item counts per tier (``l4`` counts what this process indexed)."""
        return {
            "l1": len(self._l1),
            "l2": len(self._l2),
            "l3": len(self._l3),
            "l4": self._l4_count,
            "pending": len(self._pending) + len(self._unoffered),
        }

    # ------------------------------------------------------------------ writing

    @_locked
    def add(
        self,
        content: str,
        *,
        importance: float | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        kind: ItemKind | None = None,
        item_id: str | None = None,
    ) -> MemoryItem:
        """Remember ``content`` (into L1; promotion follows unless ``auto_promote=False``).

        Args:
            content: The text (non-empty).
            importance: Score in [0, 1]; None derives it from ``kind``/``metadata``
                (`score_importance`: user 0.9, failed tool 0.8, successful tool 0.7, 0.5).
            tags: Free labels.
            metadata: JSON-like extra data.
            kind: What the item records (``user``, ``tool_failure``, ``tool_success``, ...).
            item_id: Stable id (e.g. the same item distributed to several sessions).

        Returns:
            The stored item.

        Raises:
            ValueError: an argument is invalid (the message names it).
        """
        if not isinstance(content, str) or not content.strip():
            raise ValueError(f"content must be a non-empty string, got {content!r}")
        if isinstance(tags, str) or not all(isinstance(t, str) for t in tags):
            raise ValueError(f"tags must be a sequence of strings, got {tags!r}")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise ValueError(f"metadata must be a mapping, got {metadata!r}")
        if item_id is not None and (not isinstance(item_id, str) or not item_id):
            raise ValueError(f"item_id must be a non-empty string, got {item_id!r}")
        checked_kind = check_kind(kind)
        score = (
            score_importance(kind=checked_kind, metadata=metadata)
            if importance is None
            else check_importance(importance)
        )
        item = MemoryItem(
            id=item_id or new_item_id(),
            content=content,
            importance=score,
            seq=self._seq,
            kind=checked_kind,
            tags=tuple(tags),
            metadata=dict(metadata or {}),
        )
        self._seq += 1
        self._l1.append(item)
        self._unoffered.append(item)
        if len(self._l1) > self._l1_size:
            self._pending.append(self._l1.popleft())
        if self._auto_promote:
            self.promote()
        return item

    def add_message(
        self, message: BaseMessage, *, importance: float | None = None
    ) -> MemoryItem | None:
        """Remember a LangChain message (kind and importance from its type).

        Returns:
            The stored item, or None when the message has no text and no tool calls.
        """
        from ctxpolicy.memory.messages import describe_message

        content, kind, metadata = describe_message(message)
        if not content.strip():
            return None
        return self.add(content, importance=importance, kind=kind, metadata=metadata)

    @_locked
    def promote(self) -> int:
        """Run the L1→L2→L3→L4 promotions that are due.

        New items are offered to L2 (seed rule); items evicted from L1 are summarized into
        L3, indexed in L4 and written through to the store.

        Returns:
            How many promotions happened (L2 entries plus summaries).
        """
        moved = 0
        while self._unoffered:
            moved += self._offer_l2(self._unoffered.popleft())
        summaries: list[MemoryItem] = []
        while self._pending:
            item = self._pending.popleft()
            summary = replace(item, content=summarize_item(item, self._summarizer) or item.content)
            self._l3.append(summary)
            summaries.append(summary)
        if summaries:
            self._index(summaries)
            moved += len(summaries)
        return moved

    def _offer_l2(self, item: MemoryItem) -> int:
        if item.id in self._l2:  # the same id added again: it competes as the newer copy
            del self._l2[item.id]
            self._l2_heap = [entry for entry in self._l2_heap if entry[2] != item.id]
            heapq.heapify(self._l2_heap)
        if len(self._l2) < self._l2_size:
            if item.importance <= self._l2_threshold:
                return 0
        elif item.importance > self._l2_heap[0][0]:
            _, _, evicted = heapq.heappop(self._l2_heap)
            del self._l2[evicted]
        else:
            return 0
        self._l2[item.id] = item
        heapq.heappush(self._l2_heap, (item.importance, item.seq, item.id))
        return 1

    def _index(self, summaries: Sequence[MemoryItem]) -> None:
        self._vectors.add_texts(
            [s.content for s in summaries],
            metadatas=[item_to_document_metadata(s) for s in summaries],
            ids=[s.id for s in summaries],
        )
        self._l4_count += len(summaries)
        if self._store is not None:
            for summary in summaries:
                self._store.put((*self._namespace, "summaries"), summary.id, summary.to_data())

    # ------------------------------------------------------------------ reading

    @_locked
    def get_l1(self, limit: int | None = None) -> list[MemoryItem]:
        """The ``limit`` most recent L1 items (all when None), oldest first.

        Raises:
            ValueError: ``limit`` is not an integer >= 1.
        """
        if limit is None:
            return list(self._l1)
        count = _check_limit(limit)
        recent = list(itertools.islice(reversed(self._l1), count))
        recent.reverse()
        return recent

    @_locked
    def get_l2(self) -> list[MemoryItem]:
        """The L2 working set, most important first (newer first among equals)."""
        return sorted(self._l2.values(), key=lambda i: (-i.importance, -i.seq))

    @_locked
    def get_l3(self, limit: int | None = None) -> list[MemoryItem]:
        """The ``limit`` most recent L3 summaries (all when None), oldest first.

        Raises:
            ValueError: ``limit`` is not an integer >= 1.
        """
        if limit is None:
            return list(self._l3)
        count = _check_limit(limit)
        recent = list(itertools.islice(reversed(self._l3), count))
        recent.reverse()
        return recent

    @_locked
    def search(self, query: str, limit: int = 5) -> list[MemoryItem]:
        """The ``limit`` L4 summaries most relevant to ``query`` (best first).

        Raises:
            TypeError: ``query`` is not a string.
            ValueError: ``limit`` is not an integer >= 1.
        """
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {query!r}")
        count = _check_limit(limit)
        if not query.strip():
            return []
        return [item_from_document(doc) for doc in self._vectors.similarity_search(query, k=count)]

    # ------------------------------------------------------------------ plain data

    @_locked
    def to_data(self) -> dict[str, Any]:
        """Plain data (JSON-compatible when item metadata is) that `from_data` restores.

        L4 is included only for the built-in offline index; an external vector store is
        assumed to persist itself.
        """
        l4: list[dict[str, Any]] | None = None
        if self._own_vectors:
            from ctxpolicy.memory.vectors import LocalVectorStore

            if isinstance(self._vectors, LocalVectorStore):
                l4 = [
                    {"id": doc.id, "content": doc.page_content, "metadata": dict(doc.metadata)}
                    for doc in self._vectors.all_documents()
                ]
        return {
            "format": DATA_FORMAT,
            "l1_size": self._l1_size,
            "l2_size": self._l2_size,
            "l3_size": self._l3_size,
            "l2_threshold": self._l2_threshold,
            "seq": self._seq,
            "l1": [i.to_data() for i in self._l1],
            "l2": [i.to_data() for i in self._l2.values()],
            "l3": [i.to_data() for i in self._l3],
            "pending": [i.to_data() for i in self._pending],
            "unoffered": [i.id for i in self._unoffered],
            "l4": l4,
            "l4_count": self._l4_count,
        }

    @classmethod
    def from_data(
        cls,
        data: Mapping[str, Any],
        *,
        summarizer: Any = None,
        vector_store: VectorStore | None = None,
        store: BaseStore | None = None,
        namespace: tuple[str, ...] = DEFAULT_NAMESPACE,
        auto_promote: bool = True,
    ) -> TieredMemory:
        """Rebuild a memory from `to_data` output.

        Raises:
            ValueError: ``data`` is not memory data of this format (the message says why).
        """
        if not isinstance(data, Mapping) or data.get("format") != DATA_FORMAT:
            raise ValueError(f"data must be TieredMemory.to_data() output ({DATA_FORMAT!r})")
        memory = cls(
            data.get("l1_size"),  # type: ignore[arg-type]  # validated by __init__
            data.get("l2_size"),  # type: ignore[arg-type]
            data.get("l3_size"),  # type: ignore[arg-type]
            summarizer=summarizer,
            vector_store=vector_store,
            store=store,
            namespace=namespace,
            l2_threshold=data.get("l2_threshold", 0.6),
            auto_promote=auto_promote,
        )

        def items(key: str) -> list[MemoryItem]:
            raw = data.get(key)
            if not isinstance(raw, list):
                raise ValueError(f"memory data field {key!r} must be a list")  # noqa: TRY004
            return [MemoryItem.from_data(entry) for entry in raw]

        seq = data.get("seq")
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise ValueError(f"memory data field 'seq' must be an integer >= 0, got {seq!r}")
        memory._seq = seq
        memory._l1.extend(items("l1"))
        for item in items("l2"):
            memory._l2[item.id] = item
            memory._l2_heap.append((item.importance, item.seq, item.id))
        heapq.heapify(memory._l2_heap)
        memory._l3.extend(items("l3"))
        memory._pending.extend(items("pending"))
        by_id = {i.id: i for i in itertools.chain(memory._pending, memory._l1)}
        unoffered = data.get("unoffered", [])
        if not isinstance(unoffered, list) or any(i not in by_id for i in unoffered):
            raise ValueError("memory data field 'unoffered' must list ids of L1/pending items")
        memory._unoffered.extend(by_id[i] for i in unoffered)
        l4 = data.get("l4")
        if l4 and vector_store is None:
            memory._vectors.add_texts(
                [doc["content"] for doc in l4],
                metadatas=[dict(doc["metadata"]) for doc in l4],
                ids=[doc["id"] for doc in l4],
            )
        count = data.get("l4_count", 0)
        memory._l4_count = count if isinstance(count, int) else 0
        return memory

    # ------------------------------------------------------------------ BaseStore

    @classmethod
    def from_store(
        cls,
        store: BaseStore,
        *,
        namespace: tuple[str, ...] = DEFAULT_NAMESPACE,
        l1_size: int = 50,
        l2_size: int = 100,
        l3_size: int = 500,
        summarizer: Any = None,
        vector_store: VectorStore | None = None,
        reindex: bool | None = None,
        auto_promote: bool = True,
    ) -> TieredMemory:
        """A memory whose L3/L4 are restored from ``store`` (L1/L2 start empty).

        L3 gets the ``l3_size`` most recent stored summaries; L4 is re-indexed from every
        stored summary unless an external ``vector_store`` is given (it persists itself;
        pass ``reindex=True`` to index into it anyway). New summaries keep being written
        through to ``store``.
        """
        memory = cls(
            l1_size,
            l2_size,
            l3_size,
            summarizer=summarizer,
            vector_store=vector_store,
            store=store,
            namespace=namespace,
            auto_promote=auto_promote,
        )
        stored = sorted(load_summaries(store, namespace=memory.namespace), key=lambda i: i.seq)
        memory._l3.extend(stored[-memory.l3_size :])
        if stored:
            memory._seq = stored[-1].seq + 1
        if reindex if reindex is not None else vector_store is None:
            for start in range(0, len(stored), _STORE_PAGE):
                chunk = stored[start : start + _STORE_PAGE]
                memory._vectors.add_texts(
                    [s.content for s in chunk],
                    metadatas=[item_to_document_metadata(s) for s in chunk],
                    ids=[s.id for s in chunk],
                )
            memory._l4_count = len(stored)
        return memory


def load_summaries(store: BaseStore, *, namespace: tuple[str, ...]) -> Iterable[MemoryItem]:
    """Every summary stored under ``namespace`` (paged reads)."""
    offset = 0
    while True:
        page = store.search((*namespace, "summaries"), limit=_STORE_PAGE, offset=offset)
        for entry in page:
            yield MemoryItem.from_data(entry.value)
        if len(page) < _STORE_PAGE:
            return
        offset += len(page)
