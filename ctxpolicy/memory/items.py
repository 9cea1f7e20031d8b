"""Memory items and importance scoring (docs/design.md, 'Memory tiers and scopes').

A `MemoryItem` is one remembered piece of content: a user turn, a tool result, a
sub-task, a summary. Items are immutable and serialize to plain data.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args

from ctxpolicy.memory.facts import content_bonus

ItemKind = Literal["user", "tool_failure", "tool_success", "subtask", "agent", "note", "summary"]
"""What an item records; drives the default importance."""

ITEM_KINDS: tuple[str, ...] = get_args(ItemKind)

#: Importance scores by kind (user 0.9, failed tool 0.8, successful tool 0.7, sub-task
#: 0.5; docs/design.md, 'Memory tiers and scopes'). Other kinds get the neutral 0.5.
IMPORTANCE_BY_KIND: Mapping[str, float] = MappingProxyType(
    {
        "user": 0.9,
        "tool_failure": 0.8,
        "tool_success": 0.7,
        "subtask": 0.5,
        "agent": 0.5,
        "note": 0.5,
        "summary": 0.5,
    }
)
DEFAULT_IMPORTANCE = 0.5
_FAILED_STATUSES = frozenset({"failed", "failure", "error"})
_SUCCEEDED_STATUSES = frozenset({"completed", "success", "succeeded", "ok"})


def check_importance(value: Any, *, name: str = "importance") -> float:
    """``value`` as a float in [0, 1].

    Raises:
        ValueError: ``value`` is not a finite number in [0, 1] (the message names ``name``).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")  # noqa: TRY004
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return number


def check_kind(kind: Any) -> ItemKind | None:
    """``kind`` if it is one of `ITEM_KINDS` (or None).

    Raises:
        ValueError: unknown kind (the message names ``kind`` and lists the known ones).
    """
    if kind is None:
        return None
    if kind not in ITEM_KINDS:
        raise ValueError(f"kind must be one of {', '.join(ITEM_KINDS)}; got {kind!r}")
    found: ItemKind = kind
    return found


#: Kinds whose importance content may change (tool results keep their kind's score
#: unless the text adds facts; an "ok" from a tool is not small talk).
_CHITCHAT_KINDS = frozenset({None, "user", "agent", "note", "subtask"})
#: Importance of small talk ("thanks", "ok, cool") when content is scored.
CHITCHAT_IMPORTANCE = 0.3


def score_importance(
    *,
    kind: ItemKind | None = None,
    metadata: Mapping[str, Any] | None = None,
    content: str | None = None,
) -> float:
    """The default importance of an item: the rules of docs/design.md, then the content.

    In order: ``metadata["importance"]`` when present (final); the score of ``kind``; then
    ``metadata`` hints: ``source``/``role`` ``"user"`` → 0.9, ``status`` failed/error → 0.8,
    ``status`` completed/success → 0.7; otherwise 0.5. With ``content``, what the text says
    adjusts that base (`ctxpolicy.memory.facts.content_bonus`): a correction, a stated fact
    (numbers, ids, versions, hosts, ports in an ``X is Y`` statement), a ``remember``-like
    cue, an error or a decision add up to +0.3 (capped at 1.0); small talk (``thanks``,
    ``ok``) of a user, agent, note or sub-task drops to 0.3.

    Raises:
        ValueError: ``metadata["importance"]`` is not a number in [0, 1], or ``kind`` is unknown.
    """
    meta = metadata or {}
    if "importance" in meta:
        return check_importance(meta["importance"], name="metadata['importance']")
    checked = check_kind(kind)
    base = _kind_importance(checked, meta)
    if content is None:
        return base
    bonus = content_bonus(content, kind=checked)
    if bonus is None:
        return min(base, CHITCHAT_IMPORTANCE) if checked in _CHITCHAT_KINDS else base
    return round(min(1.0, base + bonus), 6)


def _kind_importance(kind: ItemKind | None, meta: Mapping[str, Any]) -> float:
    if kind is not None:
        return IMPORTANCE_BY_KIND[kind]
    if meta.get("source") == "user" or meta.get("role") == "user":
        return IMPORTANCE_BY_KIND["user"]
    status = str(meta.get("status", "")).lower()
    if status in _FAILED_STATUSES:
        return IMPORTANCE_BY_KIND["tool_failure"]
    if status in _SUCCEEDED_STATUSES:
        return IMPORTANCE_BY_KIND["tool_success"]
    return DEFAULT_IMPORTANCE


def new_item_id() -> str:
    """A fresh random item id."""
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One remembered piece of content.

    Attributes:
        id: Stable id; the same id in several sessions means the same item.
        content: The text.
        importance: Score in [0, 1]; ranks L2 and aggregation.
        seq: Insertion number within its memory (higher is newer).
        kind: What the item records, when known.
        tags: Free labels.
        metadata: JSON-like extra data (kept as given).
    """

    id: str
    content: str
    importance: float
    seq: int
    kind: ItemKind | None = None
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_data(self) -> dict[str, Any]:
        """Plain data (JSON-compatible when ``metadata`` is)."""
        return {
            "id": self.id,
            "content": self.content,
            "importance": self.importance,
            "seq": self.seq,
            "kind": self.kind,
            "tags": list(self.tags),
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> MemoryItem:
        """Rebuild an item from `to_data` output.

        Raises:
            ValueError: a field is missing or has the wrong type (the message names it).
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"memory item data must be a mapping, got {type(data).__name__}")  # noqa: TRY004
        item_id, content, seq = _required_fields(data)
        tags = data.get("tags", ())
        if isinstance(tags, str) or not all(isinstance(t, str) for t in tags):
            raise ValueError(f"memory item 'tags' must be a list of strings, got {tags!r}")
        metadata = data.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise ValueError(f"memory item 'metadata' must be a mapping, got {metadata!r}")  # noqa: TRY004
        return cls(
            id=item_id,
            content=content,
            importance=check_importance(data.get("importance", DEFAULT_IMPORTANCE)),
            seq=seq,
            kind=check_kind(data.get("kind")),
            tags=tuple(tags),
            metadata=dict(metadata),
        )


def _required_fields(data: Mapping[str, Any]) -> tuple[str, str, int]:
    """The checked ``(id, content, seq)`` of memory item data.

    Raises:
        ValueError: one of them is missing or has the wrong type (the message names it).
    """
    try:
        item_id, content, seq = data["id"], data["content"], data["seq"]
    except KeyError as exc:
        raise ValueError(f"memory item data lacks field {exc.args[0]!r}") from exc
    if not isinstance(item_id, str) or not item_id:
        raise ValueError(f"memory item 'id' must be a non-empty string, got {item_id!r}")
    if not isinstance(content, str):
        raise ValueError(f"memory item 'content' must be a string, got {content!r}")  # noqa: TRY004
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise ValueError(f"memory item 'seq' must be an integer, got {seq!r}")  # noqa: TRY004
    return item_id, content, seq


@dataclass(frozen=True, slots=True)
class MemoryHit(MemoryItem):
    """A search result: a memory item, or one unit (a line, a paragraph) of a longer one.

    Attributes:
        tier: Where the item is now: ``l1`` (recent), ``l2`` (working set), ``l3`` (its
            summary is among the kept L3 summaries) or ``l4`` (only in the index).
        score: Relevance (higher is better; comparable within one search only).
        part: Index of the unit within the item's text (0 for the first or only one).
        whole: Whether ``content`` is the item's whole text (else one unit of it).
    """

    tier: str = "l4"
    score: float = 0.0
    part: int = 0
    whole: bool = True

    @property
    def key(self) -> str:
        """A de-duplication key: the item id, plus ``#part`` for a unit of a longer item."""
        return self.id if self.whole else f"{self.id}#{self.part}"
