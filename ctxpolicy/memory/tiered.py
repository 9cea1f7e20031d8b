"""`TieredMemory`: four tiers, over one full-text search index.

- L1: ring buffer of the ``l1_size`` most recent items.
- L2: importance-ranked working set of at most ``l2_size`` items. ``l2_policy="refresh"``
  (default): a newer item about the same subject replaces the older one, and a full L2
  takes an item at least as important as its minimum, evicting the oldest of the least
  important. ``l2_policy="seed"``: the literal rule of docs/design.md, 'Memory tiers and
  scopes' (enter above ``l2_threshold`` while not full; once full only by beating the
  minimum).
- L3: summaries (summarizer service, or a deterministic extractive summary that keeps
  the lines carrying facts) of the items evicted from L1; the ``l3_size`` most recent
  are kept. A summary keeps the id of its item, whose full text stays in the index.
- L4: every item ever added, split into fact-sized units (`ctxpolicy.recall.units`) and
  indexed at once in a `SQLiteRecallIndex` (SQLite FTS5, bm25) owned by the memory;
  never trimmed. `search` ranks over it (fused with a user-supplied ``vector_store``
  by reciprocal rank when given). With a LangGraph `BaseStore`, every summary (with the
  full text) is written through, so L3/L4 survive the process (`TieredMemory.from_store`).

Messages are recorded once per version: the memory keeps, per message key, the
fingerprint of the version it recorded, and a message edited under its id replaces the
old version in every tier (docs/memory.md, 'Edits').

Reads cost what they return: `get_l1` walks ``limit`` items, `get_l2` sorts at most
``l2_size`` items, `search` is one bm25 query over the index.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import heapq
import itertools
import json
import re
import threading
from collections import deque
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, get_args

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage

from ctxpolicy.memory.facts import has_value, is_correction, is_question, is_statement, subject_keys
from ctxpolicy.memory.items import (
    ITEM_KINDS,
    MemoryHit,
    MemoryItem,
    check_importance,
    check_kind,
    new_item_id,
    score_importance,
)
from ctxpolicy.memory.messages import analysis_text, describe_message
from ctxpolicy.memory.summaries import (
    EXTRACTIVE_MAX_TOKENS,
    check_summarizer,
    summarize_item,
)
from ctxpolicy.memory.tasks import TASK_KEY, TASK_SUMMARY_KEY, summarize_task, task_of, task_records
from ctxpolicy.recall.index import query_terms
from ctxpolicy.recall.ingest import MessageFingerprints, message_version
from ctxpolicy.recall.sqlite import SQLiteRecallIndex
from ctxpolicy.recall.units import split_text

if TYPE_CHECKING:
    from langchain_core.documents import Document
    from langchain_core.vectorstores import VectorStore
    from langgraph.store.base import BaseStore, SearchItem

    from ctxpolicy.memory.items import ItemKind
    from ctxpolicy.recall.index import RecallHit, RecallIndex

DATA_FORMAT = "ctxpolicy.memory/2"
_OLD_FORMATS = ("ctxpolicy.memory/1",)
DEFAULT_NAMESPACE: tuple[str, ...] = ("ctxpolicy", "memory")
#: Store namespace part of the items now in L1/L2 (and L1's pending promotions), one entry
#: per tier and item (key ``<tier>:<seq>``), and the key of its entry listing each tier's
#: items in order.
LIVE_PART = "live"
TIERS_KEY = "tiers"
_STORE_PAGE = 500
#: Rank constant of reciprocal rank fusion (bm25 with a user-supplied vector store).
_RRF_K = 60
#: Search hits ranked per query before the final choice (at least; 1.5 x limit if more).
_POOL = 200
#: At most this many newer statements about the same subject are put before an older hit.
_NEWER_PER_HIT = 2

L2Policy = Literal["refresh", "seed"]
"""How L2 takes items: ``refresh`` (default) or the literal ``seed`` rule (docs/design.md)."""
L2_POLICIES: tuple[str, ...] = get_args(L2Policy)
MEMORY_HIT_TIERS = ("l1", "l2", "l3", "l4")
_SPACES = re.compile(r"\s+")


def _check_size(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def _check_add_arguments(
    content: Any, *, tags: Any, metadata: Any, item_id: Any, tier: Any
) -> None:
    """Raise ``ValueError`` naming the first invalid argument of `TieredMemory.add`."""
    _check_add_text(content, tags=tags)
    _check_add_options(metadata, item_id=item_id, tier=tier)


def _check_add_text(content: Any, *, tags: Any) -> None:
    """Raise ``ValueError`` for an empty or non-string ``content`` or non-string tags."""
    if not isinstance(content, str) or not content.strip():
        raise ValueError(f"content must be a non-empty string, got {content!r}")
    if isinstance(tags, str) or not all(isinstance(t, str) for t in tags):
        raise ValueError(f"tags must be a sequence of strings, got {tags!r}")


def _check_add_options(metadata: Any, *, item_id: Any, tier: Any) -> None:
    """Raise ``ValueError`` for a non-mapping ``metadata``, a bad ``item_id`` or ``tier``."""
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ValueError(f"metadata must be a mapping, got {metadata!r}")
    if item_id is not None and (not isinstance(item_id, str) or not item_id):
        raise ValueError(f"item_id must be a non-empty string, got {item_id!r}")
    if tier not in ("l1", "l2"):
        raise ValueError(f"tier must be 'l1' or 'l2', got {tier!r}")


def _check_message(message: object) -> None:
    if not isinstance(message, BaseMessage):
        raise TypeError(f"message must be a BaseMessage, got {type(message).__name__}")


def _check_limit(value: Any, name: str = "limit") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def _newest(items: deque[MemoryItem], limit: int | None) -> list[MemoryItem]:
    """The ``limit`` newest of ``items`` (all when None), oldest first (`get_l1`, `get_l3`).

    Raises:
        ValueError: ``limit`` is not an integer >= 1.
    """
    if limit is None:
        return list(items)
    recent = list(itertools.islice(reversed(items), _check_limit(limit)))
    recent.reverse()
    return recent


def _check_hit_tiers(tiers: Collection[str] | None) -> frozenset[str] | None:
    """``tiers`` as a set (None for all).

    Raises:
        ValueError: an unknown tier.
    """
    wanted = None if tiers is None else frozenset(tiers)
    if wanted is not None and not wanted <= set(MEMORY_HIT_TIERS):
        raise ValueError(f"tiers must be among {', '.join(MEMORY_HIT_TIERS)}; got {tiers!r}")
    return wanted


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


def _check_l2_policy(value: Any) -> L2Policy:
    if value not in L2_POLICIES:
        raise ValueError(f"l2_policy must be one of {', '.join(L2_POLICIES)}; got {value!r}")
    found: L2Policy = value
    return found


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
    tags, extra = _document_tags_and_metadata(meta)
    kind = meta.get("kind") or None
    fallback_id = hashlib.blake2b(doc.page_content.encode("utf-8"), digest_size=16).hexdigest()
    return MemoryItem(
        id=str(meta.get("item_id") or doc.id or fallback_id),
        content=doc.page_content,
        importance=_document_importance(meta),
        seq=_document_seq(meta),
        kind=kind if kind in ITEM_KINDS else None,
        tags=tuple(str(t) for t in tags),
        metadata=extra if isinstance(extra, dict) else {},
    )


def _document_tags_and_metadata(meta: Mapping[str, Any]) -> tuple[tuple[Any, ...], Any]:
    """An L4 document's decoded ``tags`` and ``item_metadata`` (``((), {})`` when they do
    not decode)."""
    raw_tags = meta.get("tags", "[]")
    raw_meta = meta.get("item_metadata", "{}")
    try:
        tags = tuple(json.loads(raw_tags)) if isinstance(raw_tags, str) else tuple(raw_tags)
        extra = json.loads(raw_meta) if isinstance(raw_meta, str) else dict(raw_meta)
    except (TypeError, ValueError):
        tags, extra = (), {}
    return tags, extra


def _document_importance(meta: Mapping[str, Any]) -> float:
    """An L4 document's importance when it is a number in [0, 1], else 0.5."""
    importance = meta.get("importance")
    valid_importance = (
        isinstance(importance, int | float)
        and not isinstance(importance, bool)
        and 0.0 <= importance <= 1.0
    )
    return float(importance) if valid_importance else 0.5  # type: ignore[arg-type]


def _document_seq(meta: Mapping[str, Any]) -> int:
    """An L4 document's ``seq`` when it is an integer, else -1."""
    seq = meta.get("seq", -1)
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else -1


def item_subjects(item: MemoryItem) -> frozenset[str]:
    """What ``item`` states something about, for the L2 refresh rule.

    ``metadata["subject"]`` (a string) or ``subject:<name>`` tags when given; else the
    subjects of its ``X is Y`` statements (`ctxpolicy.memory.facts.subject_keys`). Keys are
    sorted, space-joined lower-case words, so ``"Deploy region"`` given as metadata and
    ``"the deploy region is eu-west-3"`` said in text meet.
    """
    given = [item.metadata.get("subject")]
    given += [tag[len("subject:") :] for tag in item.tags if tag.startswith("subject:")]
    named = {_subject_name(g) for g in given if isinstance(g, str) and g.strip()}
    named.discard("")
    if named:
        return frozenset(named)
    return subject_keys(analysis_text(item.content, item.metadata))


def _subject_name(text: str) -> str:
    return " ".join(sorted(set(re.findall(r"\w+", text.lower()))))


class TieredMemory:
    """Tiered memory (L1 recent, L2 important, L3 summaries, L4 searchable).

    Args:
        l1_size: Capacity of the L1 ring buffer.
        l2_size: Capacity of the L2 working set.
        l3_size: Number of L3 summaries kept in memory.
        summarizer: L3 summarizer: a ``BaseChatModel`` or a callable ``(text) -> str``;
            None uses a deterministic extractive summary of ``summary_tokens``.
        vector_store: An optional dense L4 ranking (any langchain-core ``VectorStore``,
            e.g. `ctxpolicy.memory.vectors.LocalVectorStore`): summaries are added to it
            and its results are fused with the bm25 ranking. None: bm25 only.
        store: A LangGraph ``BaseStore`` that every L3 summary (with its item's full text)
            is written through to.
        namespace: Store namespace of this memory (one per session/agent); also its
            thread in the search index.
        l2_threshold: Importance an item must exceed to enter L2.
        auto_promote: Run `promote` after every `add` (else call it yourself, e.g. once per
            step, to batch summarizer calls). Indexing for `search` happens at `add` either way.
        l2_policy: ``refresh`` (default) or ``seed`` (see the module docstring).
        summary_tokens: Budget of the extractive L3 summary (estimated tokens).
        index: The search index (any `ctxpolicy.recall.index.RecallIndex`); None creates an
            in-memory `SQLiteRecallIndex` owned by this memory.

    Raises:
        ValueError: a size is not an integer >= 1, ``l2_threshold`` is not in [0, 1],
            ``namespace``/``l2_policy`` is malformed or ``summarizer`` is not usable (the
            message names it).
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
        l2_policy: L2Policy = "refresh",
        summary_tokens: int = EXTRACTIVE_MAX_TOKENS,
        index: RecallIndex | None = None,
    ) -> None:
        self._l1_size = _check_size(l1_size, "l1_size")
        self._l2_size = _check_size(l2_size, "l2_size")
        self._l3_size = _check_size(l3_size, "l3_size")
        self._l2_threshold = check_importance(l2_threshold, name="l2_threshold")
        self._l2_policy = _check_l2_policy(l2_policy)
        self._summary_tokens = _check_size(summary_tokens, "summary_tokens")
        check_summarizer(summarizer)
        self._summarizer = summarizer
        self._namespace = _check_namespace(namespace)
        self._thread = "memory:" + ".".join(self._namespace)
        self._store = store
        self._auto_promote = bool(auto_promote)
        self._vectors = vector_store
        if index is None:
            index = SQLiteRecallIndex(":memory:")
            self._owns_index = True
        else:
            self._owns_index = False
        self._index: RecallIndex = index
        self._seq = 0
        self._l1: deque[MemoryItem] = deque()
        self._l2: dict[str, MemoryItem] = {}
        self._l2_heap: list[tuple[float, int, str]] = []
        self._l2_keys: dict[str, frozenset[str]] = {}
        self._l2_by_subject: dict[str, set[str]] = {}
        self._l3: deque[MemoryItem] = deque(maxlen=self._l3_size)
        self._unoffered: deque[MemoryItem] = deque()
        self._pending: deque[MemoryItem] = deque()
        # every item ever added (full text), by seq; the newest seq of each id
        self._archive: dict[int, MemoryItem] = {}
        self._latest: dict[str, int] = {}
        # per recorded message key, the fingerprint of the version recorded (docs/memory.md,
        # 'Edits'); keys `add` stored without a message have none and match by id
        self._versions: dict[str, str] = {}
        self._fingerprints = MessageFingerprints()
        self._l4_count = 0
        self._lock = threading.RLock()
        # what the store holds of L1/L2, entry key -> item (docs/memory.md, 'Persistence
        # through LangGraph's BaseStore')
        self._stored_live: dict[str, MemoryItem] = {}
        self._stored_tiers: dict[str, Any] | None = None
        self._writes = 0

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
    def l2_policy(self) -> L2Policy:
        """How L2 takes items (``refresh`` or ``seed``)."""
        return self._l2_policy

    @property
    def namespace(self) -> tuple[str, ...]:
        """Store namespace of this memory."""
        return self._namespace

    @property
    def store(self) -> BaseStore | None:
        """The LangGraph store every tier is written through to (None: this process only)."""
        return self._store

    @property
    def vector_store(self) -> VectorStore | None:
        """The optional dense L4 ranking (None: bm25 only)."""
        return self._vectors

    @property
    def index(self) -> RecallIndex:
        """The full-text search index of every item (L4)."""
        return self._index

    @property
    def total_added(self) -> int:
        """Number of items ever added."""
        return self._seq

    def stats(self) -> dict[str, int]:
        """Item counts per tier: ``l4`` counts the items that left L1 (summarized and
        searchable beyond L1), ``indexed`` every item in the index, ``pending`` the
        promotions not run yet."""
        with self._lock:
            return {
                "l1": len(self._l1),
                "l2": len(self._l2),
                "l3": len(self._l3),
                "l4": self._l4_count,
                "indexed": len(self._archive),
                "pending": len(self._pending) + len(self._unoffered),
            }

    # ------------------------------------------------------------------ writing

    def add(
        self,
        content: str,
        *,
        importance: float | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        kind: ItemKind | None = None,
        item_id: str | None = None,
        tier: Literal["l1", "l2"] = "l1",
    ) -> MemoryItem:
        """Remember ``content``: into L1 and the search index at once; promotion follows
        unless ``auto_promote=False``. With ``tier="l2"`` (what `MemorySessions.distribute`
        uses) the item skips L1 and enters the L2 working set directly (evicting the
        least important item of a full L2); it is searchable as well.

        Args:
            content: The text (non-empty).
            importance: Score in [0, 1]; None derives it from ``kind``/``metadata`` and the
                text (`score_importance`).
            tags: Free labels (``subject:<name>`` names the item's subject for L2).
            metadata: JSON-like extra data (``subject`` names the item's subject for L2).
            kind: What the item records (``user``, ``tool_failure``, ``tool_success``, ...).
            item_id: Stable id (e.g. the same item distributed to several sessions). Adding
                an id again stores a newer version (it replaces the older one in L2 and
                in search results; a message version recorded under that id is no longer
                compared, see `is_recorded`).

        Returns:
            The stored item.

        Raises:
            ValueError: an argument is invalid (the message names it).
        """
        with self._lock, self._writing():
            _check_add_arguments(content, tags=tags, metadata=metadata, item_id=item_id, tier=tier)
            checked_kind = check_kind(kind)
            if importance is None:
                score = score_importance(
                    kind=checked_kind,
                    metadata=metadata,
                    content=analysis_text(content, metadata),
                )
            else:
                score = check_importance(importance)
            item = MemoryItem(
                id=item_id or new_item_id(),
                content=content,
                importance=score,
                seq=self._seq,
                kind=checked_kind,
                tags=tuple(tags),
                metadata=dict(metadata or {}),
            )
            self._index_items([item])
            self._seq += 1
            self._archive[item.seq] = item
            self._latest[item.id] = item.seq
            self._versions.pop(item.id, None)
            if tier == "l2":
                self._put_l2(item)
                return item
            self._l1.append(item)
            self._unoffered.append(item)
            if len(self._l1) > self._l1_size:
                self._pending.append(self._l1.popleft())
            if self._auto_promote:
                self.promote()
            return item

    def _put_l2(self, item: MemoryItem) -> None:
        """Put ``item`` into L2 directly (a newer copy of its id replaces the older one; a
        full L2 evicts its least important item, the oldest among equals)."""
        if item.id in self._l2:
            self._l2_remove(item.id)
        if len(self._l2) >= self._l2_size:
            self._l2_remove(self._l2_heap[0][2])
        keys = item_subjects(item) if self._l2_policy == "refresh" else frozenset()
        self._l2_insert(item, keys)

    def add_message(
        self, message: BaseMessage, *, importance: float | None = None
    ) -> MemoryItem | None:
        """Remember a LangChain message once per version (kind and importance from its type
        and text).

        The item id is the message's ``id`` (an id-less message gets a digest of its type,
        text, tool calls and tool call id). Adding a message the memory holds as it reads
        now (`is_recorded`) is a no-op that returns the stored item, also after
        `from_data`, so a node may record every message of its turn and a resumed run adds
        nothing twice. A message edited under its id (LangGraph time travel,
        ``update_state``) replaces the version recorded before, in every tier (see
        docs/memory.md, 'Edits').

        Returns:
            The stored item, or None when the message has no text and no tool calls.

        Raises:
            TypeError: ``message`` is not a ``BaseMessage``.
        """
        with self._lock, self._writing():
            key, fingerprint = self._version(message)
            if self._holds(key, fingerprint):
                return self._archive[self._latest[key]]
            self._drop_version(key)
            item = self._add_plain(message, key=key, importance=importance)
            if item is not None:
                self._versions[key] = fingerprint
            return item

    def _add_plain(
        self, message: BaseMessage, *, key: str, importance: float | None = None
    ) -> MemoryItem | None:
        """Add ``message`` under ``key`` (None when it has no text and no tool calls)."""
        content, kind, metadata = describe_message(message)
        if not content.strip():
            return None
        return self.add(content, importance=importance, kind=kind, metadata=metadata, item_id=key)

    def record(
        self, messages: Iterable[BaseMessage], *, forget_abandoned: bool = False
    ) -> list[MemoryItem]:
        """Add each message not recorded as it reads now (see `add_message`), in order.

        A message edited under its id replaces the version recorded before.

        Args:
            messages: The messages, oldest first.
            forget_abandoned: The memory records one conversation and ``messages`` is all
                of it from its first message not recorded as it reads (what the engine
                passes the memory it keeps per layer and thread). Then an edited message
                means a fork (LangGraph time travel): the messages recorded after its old
                version that ``messages`` does not hold are on the abandoned branch, and
                are forgotten too. Leave it off for a memory several conversations feed.

        Returns:
            The items this call added (messages already recorded as they read, and
            messages without text, are left out).

        Raises:
            TypeError: a message is not a ``BaseMessage``.
        """
        with self._lock, self._writing():
            batch = list(messages)
            records = task_records(batch, known_calls=self._recent_calls())
            parent: str | None = None
            added: list[MemoryItem] = []
            first_seq = self._seq
            replaced: list[int] = []  # seqs of the versions edits replaced
            keys: set[str] = set()
            for message in batch:
                key, fingerprint = self._version(message)
                keys.add(key)
                if message.type == "human":
                    parent = key
                if self._holds(key, fingerprint):
                    continue
                old = self._drop_version(key)  # an edit: the version recorded before goes
                if old is not None:
                    replaced.append(old)
                calls = getattr(message, "tool_calls", None)
                task = records.get(key)
                if task is None and not calls:
                    item = self._add_plain(message, key=key)
                else:  # a tool step (task record) or the AI message that asked for it
                    item = self._add_step(message, key=key, task=task, calls=calls, parent=parent)
                if item is not None:
                    self._versions[key] = fingerprint
                    added.append(item)
            if replaced and forget_abandoned:
                self._forget_abandoned(after=min(replaced), before=first_seq, keep=keys)
            return added

    def _forget_abandoned(self, *, after: int, before: int, keep: set[str]) -> None:
        """Forget the messages recorded after the old version of an edited message (seq
        ``after``) and before this `record` call (seq ``before``) that its batch does not
        hold (``keep``): the branch a time-travel fork abandoned (docs/memory.md, 'Edits').
        Items `add` stored without a message are kept."""
        # every key with a recorded fingerprint is a known key
        abandoned = [
            key for key in self._versions if key not in keep and after < self._latest[key] < before
        ]
        for key in abandoned:
            self._drop_version(key)

    def _version(self, message: BaseMessage) -> tuple[str, str]:
        """``(key, fingerprint)`` of ``message`` (`message_version`; the fingerprint is
        hashed once per message object and content).

        Raises:
            TypeError: ``message`` is not a ``BaseMessage``.
        """
        _check_message(message)
        return message_version(message, fingerprint=self._fingerprints.of(message))

    def is_recorded(self, message: BaseMessage) -> bool:
        """Whether ``message`` is recorded as it reads now: its key (its id, or a digest of
        an id-less message's content) is known and its fingerprint
        (`ctxpolicy.recall.ingest.message_fingerprint`) is the one of the version recorded.

        False for a message edited under its id after it was recorded. Where no
        fingerprint was recorded for the key (data written before fingerprints were
        kept, an item `add` stored under that id) the key alone decides, as `has` does.
        A message's fingerprint is computed once per message object and content (see
        docs/memory.md, 'Edits').

        Raises:
            TypeError: ``message`` is not a ``BaseMessage``.
        """
        _check_message(message)
        with self._lock:
            if message.id and str(message.id) not in self._latest:
                return False  # a new message: no digest needed
            return self._holds(*self._version(message))

    def _holds(self, key: str, fingerprint: str) -> bool:
        """Whether the version ``fingerprint`` of message ``key`` is the one recorded (or
        the key is known and no fingerprint was recorded for it: matched by id)."""
        return key in self._latest and self._versions.get(key, fingerprint) == fingerprint

    def _drop_version(self, key: str) -> int | None:
        """Forget the recorded version of message ``key`` wherever it shows, for the
        edited version that replaces it: L1 and the promotions not run yet, L2, L3, the
        search index and the archive; when it had left L1, its summary in the store and
        in the vector store too (docs/memory.md, 'Edits').

        Returns:
            The seq of the version forgotten (None: the key was unknown).
        """
        seq = self._latest.pop(key, None)
        if seq is None:
            return None
        del self._versions[key]  # a known key that is dropped has a fingerprint
        old = self._archive.pop(seq)
        self._index.forget_messages(self._thread, [self._index_key(old)])
        left_l1 = not any(i.seq == seq for i in itertools.chain(self._l1, self._pending))
        self._l1 = _without(self._l1, key)
        self._pending = _without(self._pending, key)
        self._unoffered = _without(self._unoffered, key)
        self._l3 = _without(self._l3, key)
        if key in self._l2:
            self._l2_remove(key)
        if left_l1:
            self._forget_summary(key)
        return seq

    def _forget_summary(self, key: str) -> None:
        """Remove the summary of message ``key`` (it had left L1) from the L4 count, the
        store and the vector store (one whose ``delete`` is not implemented keeps it;
        `search` passes over it once the new version is recorded: not the newest of its
        id)."""
        self._l4_count = max(0, self._l4_count - 1)
        if self._store is not None:
            self._store.delete((*self._namespace, "summaries"), key)
        if self._vectors is not None:
            with contextlib.suppress(NotImplementedError):
                self._vectors.delete(ids=[key])

    def _add_step(
        self,
        message: BaseMessage,
        *,
        key: str,
        task: Any,
        calls: Any,
        parent: str | None,
    ) -> MemoryItem | None:
        """Add a tool step (with its task record) or the AI message that asked for it
        (with its tool calls); None when the message has no text."""
        content, kind, metadata = describe_message(message)
        if not content.strip():
            return None
        if task is not None:
            metadata[TASK_KEY] = task.to_data()
        if calls:
            metadata["tool_calls"] = _call_entries(calls, parent)
        return self.add(content, kind=kind, metadata=metadata, item_id=key)

    def _recent_calls(self) -> dict[str, dict[str, Any]]:
        """Tool calls of the AI messages in L1 (a ToolMessage recorded in a later batch
        than its call still becomes a task record)."""
        calls: dict[str, dict[str, Any]] = {}
        for item in self._l1:
            for call in item.metadata.get("tool_calls") or ():
                if isinstance(call, Mapping) and call.get("id"):
                    calls[str(call["id"])] = dict(call)
        return calls

    def tasks(self, limit: int | None = None) -> list[Any]:
        """The task records (`ctxpolicy.memory.tasks.TaskRecord`) of the newest items that
        carry one, oldest first (at most ``limit``; all ever added when None).

        Raises:
            ValueError: ``limit`` is not an integer >= 1.
        """
        with self._lock:
            count = None if limit is None else _check_limit(limit)
            found = []
            for seq in sorted(self._archive, reverse=True):
                item = self._archive[seq]
                if self._latest.get(item.id) != seq:
                    continue
                task = task_of(item)
                if task is not None:
                    found.append(task)
                    if count is not None and len(found) >= count:
                        break
            found.reverse()
            return found

    def close(self) -> None:
        """Close the search index if this memory created it (a given ``index`` stays open)."""
        with self._lock:
            if self._owns_index:
                self._index.close()

    def has(self, item_id: str) -> bool:
        """Whether an item (or message) with this id was ever added."""
        with self._lock:
            return item_id in self._latest

    def original(self, item_id: str) -> MemoryItem | None:
        """The newest stored version of an item with its full text (an L3 summary or a
        search hit points at it by id), or None for an unknown id."""
        with self._lock:
            seq = self._latest.get(item_id)
            return None if seq is None else self._archive.get(seq)

    def promote(self) -> int:
        """Run the L1→L2→L3 promotions that are due.

        New items are offered to L2 (`l2_policy`); items evicted from L1 are summarized
        into L3, added to the optional vector store and written through to the store.
        (Every item is in the search index from the moment it is added.)

        Returns:
            How many promotions happened (L2 entries plus summaries).
        """
        with self._lock, self._writing():
            moved = 0
            while self._unoffered:
                moved += self._offer_l2(self._unoffered.popleft())
            done: list[tuple[MemoryItem, MemoryItem]] = []
            while self._pending:
                item = self._pending.popleft()
                summary = self._summary_of(item)
                self._l3.append(summary)
                done.append((item, summary))
            if done:
                self._archive_out(done)
                moved += len(done)
            return moved

    def _summary_of(self, item: MemoryItem) -> MemoryItem:
        """The L3 summary of ``item``; a task record's keeps the action, a parameter
        summary and a result summary (`ctxpolicy.memory.tasks.summarize_task`)."""
        task = task_of(item)
        if task is None:
            text = summarize_item(item, self._summarizer, max_tokens=self._summary_tokens)
            return replace(item, content=text or item.content)
        result = replace(item, content=task.result) if task.result.strip() else None
        result_text = (
            summarize_item(result, self._summarizer, max_tokens=self._summary_tokens)
            if result is not None
            else ""
        )
        text, fields = summarize_task(task, result_text)
        fields = {**fields, "tags": list(item.tags), "importance": item.importance}
        return replace(item, content=text, metadata={**item.metadata, TASK_SUMMARY_KEY: fields})

    # ------------------------------------------------------------------ L2

    def _l2_remove(self, item_id: str) -> None:
        del self._l2[item_id]
        self._l2_heap = [entry for entry in self._l2_heap if entry[2] != item_id]
        heapq.heapify(self._l2_heap)
        for key in self._l2_keys.pop(item_id, frozenset()):
            ids = self._l2_by_subject.get(key)
            if ids is not None:
                ids.discard(item_id)
                if not ids:
                    del self._l2_by_subject[key]

    def _l2_insert(self, item: MemoryItem, keys: frozenset[str]) -> None:
        self._l2[item.id] = item
        heapq.heappush(self._l2_heap, (item.importance, item.seq, item.id))
        if keys:
            self._l2_keys[item.id] = keys
            for key in keys:
                self._l2_by_subject.setdefault(key, set()).add(item.id)

    def _offer_l2(self, item: MemoryItem) -> int:
        if item.id in self._l2:  # the same id added again: it competes as the newer copy
            self._l2_remove(item.id)
        if self._l2_policy == "seed":
            return self._offer_l2_seed(item)
        keys = item_subjects(item)
        same = {i for key in keys for i in self._l2_by_subject.get(key, ())}
        if same:  # a newer statement about the same subject supersedes the older ones
            return self._supersede_l2(item, keys, same)
        return self._admit_l2(item, keys)

    def _supersede_l2(self, item: MemoryItem, keys: frozenset[str], same: set[str]) -> int:
        """Replace the L2 items ``same`` (about the same subject) by ``item``, which keeps
        the highest of their importances."""
        inherited = max(self._l2[i].importance for i in same)
        for old in same:
            self._l2_remove(old)
        if inherited > item.importance:
            item = replace(item, importance=inherited)
        self._l2_insert(item, keys)
        return 1

    def _admit_l2(self, item: MemoryItem, keys: frozenset[str]) -> int:
        """Take ``item`` into L2 when above the threshold; when full, only by beating the
        least important (oldest among equals), which is evicted. Returns 1 if taken."""
        if item.importance <= self._l2_threshold:
            return 0
        if len(self._l2) >= self._l2_size:
            if item.importance < self._l2_heap[0][0]:
                return 0
            _, _, evicted = self._l2_heap[0]  # least important, oldest among equals
            self._l2_remove(evicted)
        self._l2_insert(item, keys)
        return 1

    def _offer_l2_seed(self, item: MemoryItem) -> int:
        """The L2 rule of docs/design.md, literally: above the threshold while not full;
        once full, only by beating the minimum, which is evicted."""
        if len(self._l2) < self._l2_size:
            if item.importance <= self._l2_threshold:
                return 0
        elif item.importance > self._l2_heap[0][0]:
            _, _, evicted = self._l2_heap[0]
            self._l2_remove(evicted)
        else:
            return 0
        self._l2_insert(item, frozenset())
        return 1

    # ------------------------------------------------------------------ store: L1/L2

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Around a public write: once the outermost one ends, L1/L2 go to the store."""
        self._writes += 1
        try:
            yield
        finally:
            self._writes -= 1
            if self._writes == 0 and self._store is not None:
                self._sync_live(self._store)

    def _live_entries(self) -> tuple[dict[str, MemoryItem], dict[str, Any]]:
        """The L1/L2 items (and L1's pending and unoffered ones) as store entries, and the
        entry listing each tier's items in order (by ``seq``)."""
        entries: dict[str, MemoryItem] = {}
        tiers: dict[str, Any] = {"seq": self._seq}
        for tier, items in (
            ("l1", self._l1),
            ("pending", self._pending),
            ("l2", self._l2.values()),
        ):
            seqs = []
            for item in items:
                entries[f"{tier}:{item.seq}"] = item
                seqs.append(item.seq)
            tiers[tier] = seqs
        tiers["unoffered"] = [item.seq for item in self._unoffered]
        return entries, tiers

    def _sync_live(self, store: BaseStore) -> None:
        """Write L1/L2 through to ``store``: new or changed entries put, gone ones deleted,
        the tiers' order put when it changed (a write costs what changed, O(l1 + l2) to
        compare)."""
        entries, tiers = self._live_entries()
        namespace = (*self._namespace, LIVE_PART)
        for key, item in entries.items():
            if self._stored_live.get(key) is not item:
                value = item.to_data()
                fingerprint = self._versions.get(item.id)
                if fingerprint is not None and self._latest.get(item.id) == item.seq:
                    value["fingerprint"] = fingerprint
                store.put(namespace, key, value)
        for key in self._stored_live.keys() - entries.keys():
            store.delete(namespace, key)
        self._stored_live = entries
        if tiers != self._stored_tiers:
            store.put(namespace, TIERS_KEY, tiers)
            self._stored_tiers = tiers

    def _restore_live(self, store: BaseStore) -> None:
        """Put back the L1/L2 items ``store`` holds (`_sync_live`): in their tiers and
        order, in the archive and the search index when they are not there yet, with their
        message fingerprints. L1 keeps its ``l1_size`` newest; older ones are promoted."""
        namespace = (*self._namespace, LIVE_PART)
        found = store.get(namespace, TIERS_KEY)
        tiers = found.value if found is not None else None
        if not isinstance(tiers, Mapping):
            return
        stored = {e.key: e.value for e in search_all(store, namespace)}
        loaded = _live_items(tiers, stored)
        self._adopt_live(loaded, stored)
        by_tier = {tier: [i for k, i in loaded.items() if k[0] == tier] for tier in _LIVE_TIERS}
        l1 = by_tier["l1"]
        overflow = max(0, len(l1) - self._l1_size)
        self._pending.extend([*by_tier["pending"], *l1[:overflow]])
        self._l1.extend(l1[overflow:])
        unoffered = set(tiers.get("unoffered") or ())
        self._unoffered.extend(i for i in self._l1 if i.seq in unoffered)
        for item in sorted(by_tier["l2"], key=lambda i: i.seq)[-self._l2_size :]:
            keys = item_subjects(item) if self._l2_policy == "refresh" else frozenset()
            self._l2_insert(item, keys)
        seq = tiers.get("seq")
        if isinstance(seq, int) and not isinstance(seq, bool):
            self._seq = max(self._seq, seq)
        self._stored_live = {f"{tier}:{i.seq}": i for (tier, _), i in loaded.items()}
        self._stored_tiers = dict(tiers)

    def _adopt_live(
        self, loaded: Mapping[tuple[str, int], MemoryItem], stored: Mapping[str, Any]
    ) -> None:
        """The restored L1/L2 items into the archive and the index (those not restored from
        a summary already), with the fingerprints stored with them."""
        fresh = {i.seq: i for i in loaded.values() if i.seq not in self._archive}
        items = [fresh[seq] for seq in sorted(fresh)]
        for item in items:
            self._archive[item.seq] = item
            if self._latest.get(item.id, -1) < item.seq:
                self._latest[item.id] = item.seq
        self._index_items(items)
        for (tier, seq), item in loaded.items():
            fingerprint = stored[f"{tier}:{seq}"].get("fingerprint")
            if isinstance(fingerprint, str):
                self._versions[item.id] = fingerprint

    # ------------------------------------------------------------------ L3/L4

    def _index_key(self, item: MemoryItem) -> str:
        return f"{item.seq}:{item.id}"

    def _index_items(self, items: Sequence[MemoryItem]) -> None:
        """Split ``items`` into units and add them to the search index (one transaction)."""
        entries = []
        for item in items:
            key = self._index_key(item)
            tool = item.metadata.get("tool")
            units = split_text(
                item.content,
                message_id=key,
                position=item.seq,
                role=item.kind or "memory",
                tool=tool if isinstance(tool, str) else None,
            )
            entries.append((item.seq, key, units))
        self._index.add_messages(self._thread, entries)

    def _archive_out(self, done: Sequence[tuple[MemoryItem, MemoryItem]]) -> None:
        """Bookkeeping for items that left L1: vector store and write-through."""
        summaries = [summary for _, summary in done]
        if self._vectors is not None:
            self._vectors.add_texts(
                [s.content for s in summaries],
                metadatas=[item_to_document_metadata(s) for s in summaries],
                ids=[s.id for s in summaries],
            )
        self._l4_count += len(done)
        if self._store is not None:
            for item, summary in done:
                value = {**summary.to_data(), "full_content": item.content}
                fingerprint = self._versions.get(item.id)
                if fingerprint is not None:  # the message version it records
                    value["fingerprint"] = fingerprint
                self._store.put((*self._namespace, "summaries"), summary.id, value)

    # ------------------------------------------------------------------ reading

    def get_l1(self, limit: int | None = None) -> list[MemoryItem]:
        """The ``limit`` most recent L1 items (all when None), oldest first.

        Raises:
            ValueError: ``limit`` is not an integer >= 1.
        """
        with self._lock:
            return _newest(self._l1, limit)

    def get_l2(self) -> list[MemoryItem]:
        """The L2 working set, most important first (newer first among equals)."""
        with self._lock:
            return sorted(self._l2.values(), key=lambda i: (-i.importance, -i.seq))

    def get_l3(self, limit: int | None = None) -> list[MemoryItem]:
        """The ``limit`` most recent L3 summaries (all when None), oldest first.

        Raises:
            ValueError: ``limit`` is not an integer >= 1.
        """
        with self._lock:
            return _newest(self._l3, limit)

    def _tier_of(self, item: MemoryItem, l1: set[int], l3: set[int]) -> str:
        if item.seq in l1:
            return "l1"
        held = self._l2.get(item.id)
        if held is not None and held.seq == item.seq:
            return "l2"
        return "l3" if item.seq in l3 else "l4"

    def search(
        self, query: str, limit: int = 5, *, tiers: Collection[str] | None = None
    ) -> list[MemoryHit]:
        """The ``limit`` units of memory most relevant to ``query``, best first.

        bm25 over every item ever added (SQLite FTS5; a line of a long tool output is its
        own unit), fused with the optional ``vector_store`` by reciprocal rank. **Newer
        statements win**: a hit is returned only right after the newer statements that
        match the same query terms (at most two: answers holding a value first, then
        corrections, then the newest), and is left out when they do not fit ``limit``, so
        a corrected fact is never returned alone. Versions of an item id that was added
        again later are left out.

        Args:
            query: The text to search for.
            limit: Most hits returned.
            tiers: Only hits whose item is now in these tiers (``l1``, ``l2``, ``l3``,
                ``l4``); None for all. The newer statements that come with a hit come
                whatever their tier.

        Returns:
            `MemoryHit` items: ``content`` is the unit's text (the whole item when it is
            one unit), ``id`` the item's id, ``tier`` where the item is now.

        Raises:
            TypeError: ``query`` is not a string.
            ValueError: ``limit`` is not an integer >= 1, or an unknown tier.
        """
        with self._lock:
            if not isinstance(query, str):
                raise TypeError(f"query must be a string, got {query!r}")
            count = _check_limit(limit)
            wanted = _check_hit_tiers(tiers)
            if not query.strip():
                return []
            terms = query_terms(query)
            pool = max(count * 3 // 2, _POOL) + (len(self._l1) if wanted is not None else 0)
            lexical = self._index.search(self._thread, terms, limit=pool) if terms else []
            hits = self._lexical_hits(lexical, terms)
            if self._vectors is not None:
                hits = self._fuse_dense(hits, query, pool)
            primary = None if wanted is None else [h.tier in wanted for h in hits]
            return _newer_first(hits, terms, count, primary=primary)

    def _lexical_hits(self, found: Sequence[RecallHit], terms: Sequence[str]) -> list[MemoryHit]:
        """bm25 hits as `MemoryHit` items, re-ranked: by the share of the query's terms a
        unit contains (the index ranks only the rarer terms of a query whose common terms
        match too many units: x(0.5 + share)); a unit stating something that holds a value
        (``X is 5``, ``key = value``) is likelier an answer (x1.3), a question is not one
        (x0.6), a correction is (x1.2); by the item's importance (x(0.8 + 0.4 importance))."""
        l1 = {i.seq for i in self._l1}
        l3 = {i.seq for i in self._l3}
        hits: list[MemoryHit] = []
        for hit in found:
            unit = hit.unit
            item = self._archive.get(unit.position)
            if item is None or self._latest.get(item.id) != item.seq:
                continue
            whole = unit.part == 0 and unit.text == item.content.strip()
            weight = _unit_weight(unit.text, unit.part, item, terms)
            hits.append(
                MemoryHit(
                    id=item.id,
                    content=unit.text,
                    importance=item.importance,
                    seq=item.seq,
                    kind=item.kind,
                    tags=item.tags,
                    metadata=item.metadata,
                    tier=self._tier_of(item, l1, l3),
                    score=hit.score * weight,
                    part=unit.part,
                    whole=whole,
                )
            )
        hits.sort(key=lambda h: -h.score)
        return hits

    def _fuse_dense(self, lexical: list[MemoryHit], query: str, pool: int) -> list[MemoryHit]:
        """Reciprocal rank fusion of the bm25 hits and the vector store's results."""
        assert self._vectors is not None
        docs = self._vectors.similarity_search(query, k=pool)
        scores: dict[str, float] = {}
        by_key: dict[str, MemoryHit] = {}
        best_of_seq: dict[int, str] = {}
        for rank, hit in enumerate(lexical):
            scores[hit.key] = scores.get(hit.key, 0.0) + 1.0 / (_RRF_K + rank + 1)
            by_key.setdefault(hit.key, hit)
            best_of_seq.setdefault(hit.seq, hit.key)
        for rank, doc in enumerate(docs):
            found = item_from_document(doc)
            if self._superseded(found):
                continue  # a version superseded by a later add of the same id
            key = best_of_seq.get(found.seq) if found.seq >= 0 else None
            if key is None:
                key = self._dense_hit_key(found, by_key)
            scores[key] = scores.get(key, 0.0) + 1.0 / (_RRF_K + rank + 1)
        order = sorted(scores, key=lambda k: -scores[k])
        return [replace(by_key[k], score=scores[k]) for k in order]

    def _superseded(self, found: MemoryItem) -> bool:
        """Whether a vector store result is a version replaced by a later add of its id."""
        latest = self._latest.get(found.id)
        return latest is not None and latest != found.seq and found.seq >= 0

    def _dense_hit_key(self, found: MemoryItem, by_key: dict[str, MemoryHit]) -> str:
        """The fusion key of a vector store result without a bm25 hit of its item; its
        hit (with the archived item's fields when known) is added to ``by_key``."""
        key = f"dense:{found.id}"
        item = self._archive.get(found.seq) if found.seq >= 0 else None
        base = replace(item, content=found.content) if item is not None else found
        by_key.setdefault(key, MemoryHit(**_fields(base), whole=True))
        return key

    # ------------------------------------------------------------------ plain data

    def to_data(self) -> dict[str, Any]:
        """Plain data (JSON-compatible when item metadata is) that `from_data` restores.

        Holds every item ever added (full text, ``archive``), so the search index is
        rebuilt on load, and the fingerprint of each recorded message version
        (``versions``: message key to fingerprint). An external ``vector_store`` is
        assumed to persist itself.
        """
        with self._lock:
            live = {i.seq for i in itertools.chain(self._l1, self._pending)}
            return {
                "format": DATA_FORMAT,
                "l1_size": self._l1_size,
                "l2_size": self._l2_size,
                "l3_size": self._l3_size,
                "l2_threshold": self._l2_threshold,
                "l2_policy": self._l2_policy,
                "summary_tokens": self._summary_tokens,
                "seq": self._seq,
                "l1": [i.to_data() for i in self._l1],
                "l2": [i.to_data() for i in self._l2.values()],
                "l3": [i.to_data() for i in self._l3],
                "pending": [i.to_data() for i in self._pending],
                "unoffered": [i.id for i in self._unoffered],
                "archive": [i.to_data() for s, i in self._archive.items() if s not in live],
                "l4_count": self._l4_count,
                "versions": dict(self._versions),
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
        index: RecallIndex | None = None,
    ) -> TieredMemory:
        """Rebuild a memory from `to_data` output (the search index is rebuilt from it).

        Data of the previous format (``ctxpolicy.memory/1``) loads too: its L4 summaries
        become the searchable archive. Data without ``versions`` (written before message
        fingerprints were kept) matches its messages by id only (`is_recorded`).

        Raises:
            ValueError: ``data`` is not memory data of this format (the message says why).
        """
        fmt = data.get("format") if isinstance(data, Mapping) else None
        if fmt != DATA_FORMAT and fmt not in _OLD_FORMATS:
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
            l2_policy=data.get("l2_policy", "refresh"),
            summary_tokens=data.get("summary_tokens", EXTRACTIVE_MAX_TOKENS),
            index=index,
        )

        items = functools.partial(_data_items, data)
        memory._seq = _data_seq(data)
        memory._l1.extend(items("l1"))
        memory._l3.extend(items("l3"))
        memory._pending.extend(items("pending"))
        archived = items("archive") if fmt == DATA_FORMAT else _old_l4_items(data.get("l4"))
        everything = sorted(
            itertools.chain(archived, memory._l1, memory._pending), key=lambda i: i.seq
        )
        for item in everything:
            memory._archive[item.seq] = item
            memory._latest[item.id] = item.seq
        memory._versions.update(_data_versions(data, memory._latest))
        memory._index_items(everything)
        for item in sorted(items("l2"), key=lambda i: i.seq):
            keys = item_subjects(item) if memory._l2_policy == "refresh" else frozenset()
            memory._l2_insert(item, keys)
        memory._unoffered.extend(_data_unoffered(data, memory))
        count = data.get("l4_count", 0)
        memory._l4_count = count if isinstance(count, int) else 0
        if store is not None:
            memory._sync_live(store)
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
        l2_policy: L2Policy = "refresh",
        index: RecallIndex | None = None,
    ) -> TieredMemory:
        """A memory restored from ``store``: every tier, as the memory that wrote it left it.

        L1/L2 get the items the store holds for them (a memory with a store writes its
        L1/L2 through after each write, docs/memory.md, 'Persistence through LangGraph's
        BaseStore'; L1 keeps its ``l1_size`` newest, older ones are promoted); L3 gets the
        ``l3_size`` most recent stored summaries; the search index is rebuilt
        from the full text of every stored item. An external ``vector_store`` persists
        itself (pass ``reindex=True`` to add the stored summaries to it anyway). New
        summaries keep being written through to ``store``. The fingerprint stored with a
        message's summary is restored (entries without one match by id, `is_recorded`).
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
            l2_policy=l2_policy,
            index=index,
        )
        found = sorted(_load_versions(store, memory.namespace), key=lambda e: e[0].seq)
        stored = [(summary, full) for summary, full, _ in found]
        memory._restore_stored(stored)
        memory._versions.update((full.id, fp) for _, full, fp in found if fp is not None)
        if vector_store is not None and reindex:
            _add_summaries_to_vectors(vector_store, stored)
        with memory._lock, memory._writing():
            memory._restore_live(store)
            if memory._auto_promote and memory._pending:
                memory.promote()
        return memory

    def _restore_stored(self, stored: Sequence[tuple[MemoryItem, MemoryItem]]) -> None:
        """Fill L3 (newest summaries), the archive and the search index from ``stored``
        ``(summary, full item)`` pairs in ``seq`` order."""
        self._l3.extend(summary for summary, _ in stored[-self.l3_size :])
        if stored:
            self._seq = stored[-1][0].seq + 1
        for _, full in stored:
            self._archive[full.seq] = full
            self._latest[full.id] = full.seq
        for start in range(0, len(stored), _STORE_PAGE):
            self._index_items([full for _, full in stored[start : start + _STORE_PAGE]])
        self._l4_count = len(stored)


#: The tiers whose items a memory with a store writes through (`TieredMemory._sync_live`).
_LIVE_TIERS = ("l1", "pending", "l2")


def _live_items(
    tiers: Mapping[str, Any], stored: Mapping[str, Any]
) -> dict[tuple[str, int], MemoryItem]:
    """The stored L1/L2 items, by ``(tier, seq)`` in each tier's order (entries missing or
    malformed are left out)."""
    loaded: dict[tuple[str, int], MemoryItem] = {}
    for tier in _LIVE_TIERS:
        for seq in tiers.get(tier) or ():
            value = stored.get(f"{tier}:{seq}")
            if isinstance(value, Mapping) and isinstance(seq, int):
                loaded[(tier, seq)] = MemoryItem.from_data(value)
    return loaded


def _add_summaries_to_vectors(
    vector_store: VectorStore, stored: Sequence[tuple[MemoryItem, MemoryItem]]
) -> None:
    """Add the summaries of ``stored`` to ``vector_store``, a page at a time."""
    for start in range(0, len(stored), _STORE_PAGE):
        chunk = [summary for summary, _ in stored[start : start + _STORE_PAGE]]
        vector_store.add_texts(
            [s.content for s in chunk],
            metadatas=[item_to_document_metadata(s) for s in chunk],
            ids=[s.id for s in chunk],
        )


def _call_entries(calls: Iterable[Mapping[str, Any]], parent: str | None) -> list[dict[str, Any]]:
    """The ``tool_calls`` metadata of an AI message's calls (with the parent task id)."""
    return [
        {
            "id": c.get("id"),
            "name": c["name"],
            "args": c.get("args") or {},
            "parent_task_id": parent,
        }
        for c in calls
    ]


def _unit_weight(text: str, part: int, item: MemoryItem, terms: Sequence[str]) -> float:
    """The re-ranking factor of a bm25 unit (see `TieredMemory._lexical_hits`)."""
    analysed = text
    if part == 0:
        analysed = analysis_text(text, item.metadata)
    _, answer, correction, question = unit_signals(analysed)
    weight = 0.6 if question else 1.3 if answer else 1.0
    if correction:
        weight *= 1.2
    weight *= 0.8 + 0.4 * item.importance
    if terms:
        weight *= 0.5 + len(_matched_terms(text, terms)) / len(terms)
    return weight


def _data_items(data: Mapping[str, Any], key: str) -> list[MemoryItem]:
    """The items of memory data field ``key``.

    Raises:
        ValueError: the field is not a list of item data.
    """
    raw = data.get(key)
    if not isinstance(raw, list):
        raise ValueError(f"memory data field {key!r} must be a list")  # noqa: TRY004
    return [MemoryItem.from_data(entry) for entry in raw]


def _data_seq(data: Mapping[str, Any]) -> int:
    """Memory data's ``seq`` (the next item's sequence number).

    Raises:
        ValueError: it is not an integer >= 0.
    """
    seq = data.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise ValueError(f"memory data field 'seq' must be an integer >= 0, got {seq!r}")
    return seq


def _data_versions(data: Mapping[str, Any], latest: Mapping[str, int]) -> dict[str, str]:
    """Memory data's ``versions`` (message key to fingerprint) of the keys it holds; empty
    for data written before fingerprints were kept.

    Raises:
        ValueError: ``versions`` is not a mapping of strings to strings.
    """
    raw = data.get("versions", {})
    if not isinstance(raw, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise ValueError("memory data field 'versions' must map message keys to fingerprints")
    return {key: fingerprint for key, fingerprint in raw.items() if key in latest}


def _without(items: deque[MemoryItem], item_id: str) -> deque[MemoryItem]:
    """``items`` without those of id ``item_id`` (the tiers' deques have no ``maxlen``)."""
    return deque(i for i in items if i.id != item_id)


def _data_unoffered(data: Mapping[str, Any], memory: TieredMemory) -> list[MemoryItem]:
    """The L1/pending items of ``memory`` that memory data lists as not offered to L2 yet.

    Raises:
        ValueError: ``unoffered`` is not a list of ids of L1/pending items.
    """
    by_id = {i.id: i for i in itertools.chain(memory._pending, memory._l1)}
    unoffered = data.get("unoffered", [])
    if not isinstance(unoffered, list) or any(i not in by_id for i in unoffered):
        raise ValueError("memory data field 'unoffered' must list ids of L1/pending items")
    return [by_id[i] for i in unoffered]


def _fields(item: MemoryItem) -> dict[str, Any]:
    return {
        "id": item.id,
        "content": item.content,
        "importance": item.importance,
        "seq": item.seq,
        "kind": item.kind,
        "tags": item.tags,
        "metadata": item.metadata,
    }


def _old_l4_items(raw: Any) -> list[MemoryItem]:
    """The items of format-1 data's L4 documents (their summaries)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError("memory data field 'l4' must be a list")  # noqa: TRY004
    return [
        item_from_document(Document(page_content=d["content"], metadata=d["metadata"], id=d["id"]))
        for d in raw
    ]


@functools.lru_cache(maxsize=65_536)
def _matched_terms_cached(text: str, terms: tuple[str, ...]) -> frozenset[str]:
    words = set(_WORDS.findall(text.lower()))
    return frozenset(
        t for t in terms if t in words or f"{t}s" in words or (t.endswith("s") and t[:-1] in words)
    )


@functools.lru_cache(maxsize=65_536)
def unit_signals(text: str) -> tuple[bool, bool, bool, bool]:
    """``(statement or correction, statement holding a value, correction, question)`` of a
    unit's text (cached)."""
    flat = _SPACES.sub(" ", text).strip()
    if is_question(flat):
        return False, False, False, True
    statement = is_statement(flat)
    correction = is_correction(flat)
    return statement or correction, statement and has_value(flat), correction, False


def _unit_text(hit: MemoryHit) -> str:
    """A hit's text for analysis: a tool result's first unit without ``name -> ``."""
    return analysis_text(hit.content, hit.metadata) if hit.part == 0 else hit.content


_WORDS = re.compile(r"\w+", re.UNICODE)


def _matched_terms(text: str, terms: Sequence[str]) -> frozenset[str]:
    """The query terms a text contains (a plural ``s`` ignored either way; cached)."""
    return _matched_terms_cached(text, tuple(terms))


def _newer_first(
    hits: list[MemoryHit],
    terms: Sequence[str],
    limit: int,
    *,
    primary: Sequence[bool] | None = None,
) -> list[MemoryHit]:
    """Take ``hits`` (best first) up to ``limit``; each with the newer statements about the
    same terms put before it, or not at all (see `TieredMemory.search`). Only hits marked
    ``primary`` (all when None) are taken for themselves."""
    subjects = [_matched_terms(h.content, terms) for h in hits]
    newer = _NewerStatements(hits, subjects, _preferred_statements(hits))
    taken: set[int] = set()
    out: list[MemoryHit] = []
    for i in range(len(hits)):
        if i in taken or (primary is not None and not primary[i]):
            continue
        group = [*newer.before(i, taken), i]
        if len(out) + len(group) > limit:
            continue
        out.extend(hits[j] for j in group)
        taken.update(group)
        if len(out) >= limit:
            break
    return out


def _preferred_statements(hits: list[MemoryHit]) -> list[int]:
    """Indices of the hits that state something: answers (holding a value) first,
    corrections first among them, then the newest."""
    signals = [unit_signals(_unit_text(h)) for h in hits]
    return sorted(
        (j for j, signal in enumerate(signals) if signal[0]),
        key=lambda j: (signals[j][1], signals[j][2], hits[j].seq, hits[j].part),
        reverse=True,
    )


class _NewerStatements:
    """For `_newer_first`: the newer statements about a hit's terms (at most
    `_NEWER_PER_HIT`, preferred ones first), candidates cached per term set."""

    def __init__(
        self, hits: list[MemoryHit], subjects: list[frozenset[str]], preferred: list[int]
    ) -> None:
        self.hits = hits
        self.subjects = subjects
        self.preferred = preferred
        self.supersets: dict[frozenset[str], list[int]] = {}

    def before(self, i: int, taken: set[int]) -> list[int]:
        """The statements to put before hit ``i`` (none taken yet, newer than it)."""
        mine = self.subjects[i]
        if not mine:
            return []
        candidates = self.supersets.get(mine)
        if candidates is None:
            candidates = [j for j in self.preferred if mine <= self.subjects[j]]
            self.supersets[mine] = candidates
        hits = self.hits
        position = (hits[i].seq, hits[i].part)
        newer: list[int] = []
        for j in candidates:
            if j != i and j not in taken and (hits[j].seq, hits[j].part) > position:
                newer.append(j)
                if len(newer) >= _NEWER_PER_HIT:
                    break
        return newer


def load_summaries(store: BaseStore, *, namespace: tuple[str, ...]) -> Iterable[MemoryItem]:
    """Every summary stored under ``namespace`` (paged reads)."""
    for summary, _ in load_stored(store, namespace=namespace):
        yield summary


def search_all(store: BaseStore, namespace: tuple[str, ...]) -> Iterator[SearchItem]:
    """Every entry the store holds under ``namespace``, read in pages of `_STORE_PAGE`
    (a store's ``search`` returns at most ``limit`` entries: one call can miss some)."""
    offset = 0
    while True:
        page = store.search(namespace, limit=_STORE_PAGE, offset=offset)
        yield from page
        if len(page) < _STORE_PAGE:
            return
        offset += len(page)


def load_stored(
    store: BaseStore, *, namespace: tuple[str, ...]
) -> Iterable[tuple[MemoryItem, MemoryItem]]:
    """``(summary, item with its full text)`` of every item stored under ``namespace``.

    Entries written before the full text was stored give the summary twice.
    """
    for summary, full, _ in _load_versions(store, namespace):
        yield summary, full


def _load_versions(
    store: BaseStore, namespace: tuple[str, ...]
) -> Iterator[tuple[MemoryItem, MemoryItem, str | None]]:
    """`load_stored`'s pairs with the fingerprint of the message version each records
    (None for an item that is no message, or an entry written before they were kept)."""
    for entry in search_all(store, (*namespace, "summaries")):
        summary = MemoryItem.from_data(entry.value)
        full = entry.value.get("full_content")
        fingerprint = entry.value.get("fingerprint")
        yield (
            summary,
            replace(summary, content=full) if isinstance(full, str) else summary,
            fingerprint if isinstance(fingerprint, str) else None,
        )
