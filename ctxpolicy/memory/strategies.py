"""Seed 004 §5.2 context strategies and single-tier reads over a `TieredMemory`.

- ``minimal``: no history (the current task travels in the query layer).
- ``balanced``: the 5 most recent L1 items, the 3 L4 summaries most related to the query,
  the L2 working set; de-duplicated.
- ``comprehensive``: 10 recent, 5 related, L2, then the 20 most recent L3 summaries.

The plan order is the packing priority: when the cap is tight, recent and related items
go in before the (up to ``l2_size`` items) working set.

Every read is bounded by the tier sizes and limits, never by the history length.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from ctxpolicy.memory.packing import pack_pieces

if TYPE_CHECKING:
    from ctxpolicy.memory.items import MemoryItem
    from ctxpolicy.memory.tiered import TieredMemory

MemoryStrategy = Literal["minimal", "balanced", "comprehensive"]
MemoryTier = Literal["l1", "l2", "l3", "l4"]
MEMORY_STRATEGIES: tuple[str, ...] = get_args(MemoryStrategy)
MEMORY_TIERS: tuple[str, ...] = get_args(MemoryTier)

#: (tier, how many) per strategy, in priority order; None = the whole (bounded) tier.
STRATEGY_PLANS: dict[str, tuple[tuple[MemoryTier, int | None], ...]] = {
    "minimal": (),
    "balanced": (("l1", 5), ("l4", 3), ("l2", None)),
    "comprehensive": (("l1", 10), ("l4", 5), ("l2", None), ("l3", 20)),
}
#: Items read by a single-tier layer without ``limit``.
TIER_DEFAULT_LIMITS: dict[str, int | None] = {"l1": 10, "l2": None, "l3": 20, "l4": 5}
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory item selected for a context, with the tier it came from."""

    tier: MemoryTier
    item: MemoryItem


def content_key(text: str) -> str:
    """The de-duplication key of a text: whitespace collapsed, case folded."""
    return _SPACES.sub(" ", text).strip().casefold()


def read_tier(
    memory: TieredMemory, tier: MemoryTier, *, count: int | None, query: str | None
) -> list[MemoryItem]:
    """Up to ``count`` items of ``tier``, best first (L1/L3 newest first, L2 by importance,
    L4 by relevance to ``query``; L4 without a query reads nothing)."""
    if tier == "l1":
        return list(reversed(memory.get_l1(count or memory.l1_size)))
    if tier == "l2":
        items = memory.get_l2()
        return items if count is None else items[:count]
    if tier == "l3":
        return list(reversed(memory.get_l3(count or memory.l3_size)))
    if not query or not query.strip():
        return []
    return memory.search(query, count or 5)


def select_memory(
    memory: TieredMemory,
    *,
    strategy: MemoryStrategy | None = None,
    tier: MemoryTier | None = None,
    query: str | None = None,
    limit: int | None = None,
) -> list[Candidate]:
    """De-duplicated candidates in priority order, for a strategy or a single tier.

    Args:
        memory: The memory to read.
        strategy: ``minimal | balanced | comprehensive`` (default ``balanced`` when
            ``tier`` is not given either).
        tier: Read one tier instead.
        query: Text for the L4 search; None falls back to the newest L1 item.
        limit: Single tier: items to read. Strategy: at most this many candidates in all.

    Raises:
        ValueError: both or an unknown ``strategy``/``tier``, or ``limit`` < 1.
    """
    if strategy is not None and tier is not None:
        raise ValueError("give either strategy or tier, not both")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be an integer >= 1, got {limit!r}")
    if tier is not None:
        if tier not in MEMORY_TIERS:
            raise ValueError(f"tier must be one of {', '.join(MEMORY_TIERS)}; got {tier!r}")
        plan: tuple[tuple[MemoryTier, int | None], ...] = (
            (tier, limit if limit is not None else TIER_DEFAULT_LIMITS[tier]),
        )
        limit = None
    else:
        chosen = strategy or "balanced"
        if chosen not in MEMORY_STRATEGIES:
            raise ValueError(
                f"strategy must be one of {', '.join(MEMORY_STRATEGIES)}; got {strategy!r}"
            )
        plan = STRATEGY_PLANS[chosen]
    if query is None and any(t == "l4" for t, _ in plan):
        newest = memory.get_l1(1)
        query = newest[0].content if newest else None
    found = (
        Candidate(tier_name, item)
        for tier_name, count in plan
        for item in read_tier(memory, tier_name, count=count, query=query)
    )
    return dedupe_candidates(found, limit=limit)


def dedupe_candidates(
    candidates: Iterable[Candidate], *, limit: int | None = None
) -> list[Candidate]:
    """Candidates without repeats (same item id or same content), first occurrence wins."""
    seen_ids: set[str] = set()
    seen_text: set[str] = set()
    kept: list[Candidate] = []
    for candidate in candidates:
        key = content_key(candidate.item.content)
        if candidate.item.id in seen_ids or key in seen_text:
            continue
        seen_ids.add(candidate.item.id)
        seen_text.add(key)
        kept.append(candidate)
        if limit is not None and len(kept) >= limit:
            break
    return kept


def render_item(item: MemoryItem) -> str:
    """One item as a prompt line: ``- [kind] content`` (``[kind]`` only when known)."""
    label = f"[{item.kind}] " if item.kind else ""
    return f"- {label}{item.content.strip()}"


def pack_candidates(
    candidates: Sequence[Candidate],
    *,
    cap_tokens: int,
    count_tokens: Callable[[str], int],
) -> list[Candidate]:
    """The candidates whose rendered lines fit ``cap_tokens`` (whole items, priority order
    for choosing), returned in reading order: tiers in plan order, L1/L3 oldest first."""
    lines = [render_item(c.item) for c in candidates]
    kept = [
        candidates[i] for i in pack_pieces(lines, cap_tokens=cap_tokens, count_tokens=count_tokens)
    ]
    return order_for_reading(kept)


def order_for_reading(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Group by tier (first-appearance order); L1 and L3 groups chronological."""
    groups: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        groups.setdefault(candidate.tier, []).append(candidate)
    ordered: list[Candidate] = []
    for tier_name, group in groups.items():
        chronological = tier_name in ("l1", "l3")
        ordered.extend(sorted(group, key=lambda c: c.item.seq) if chronological else group)
    return ordered


def render_candidates(candidates: Sequence[Candidate]) -> str:
    """The lines of ``candidates`` joined by newlines."""
    return "\n".join(render_item(c.item) for c in candidates)
