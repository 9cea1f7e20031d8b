"""Context strategies as token shares of the layer cap, and single-tier reads.

A strategy gives each **source** a share of the layer's cap:

- ``search``: the units of memory most relevant to the query (`TieredMemory.search`:
  bm25 over every item ever added, newer statements first);
- ``l1``: the most recent items, newest first;
- ``l2``: the working set, most important first;
- ``l3``: the most recent summaries, newest first.

=================  ======  ====  ====  ====
strategy           search  l1    l2    l3
=================  ======  ====  ====  ====
``minimal``        (nothing: the layer is left out)
``balanced``       0.5     0.2   0.3   --
``comprehensive``  0.45    0.2   0.2   0.15
=================  ======  ====  ====  ====

Packing (`pack_shares`): each source takes whole items, in its order, while they fit its
share; then whatever is left of the cap goes to the remaining items, search hits first,
then L1, L2, L3. A source with share 0 is not read. Items are never cut, repeats (same id,
or same text ignoring case and spacing) count once, and the joined text never exceeds the
cap. So the layer fills its cap whenever memory holds enough items, and query-relevant
units come first.

Every read is bounded by the tier sizes and `MAX_SEARCH_POOL`, never by the history length.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, get_args

from ctxpolicy.layers import MemorySource, MemoryStrategy, MemoryTier
from ctxpolicy.memory.packing import pack_pieces

if TYPE_CHECKING:
    from ctxpolicy.memory.items import MemoryItem
    from ctxpolicy.memory.tiered import TieredMemory

MEMORY_STRATEGIES: tuple[str, ...] = get_args(MemoryStrategy)
MEMORY_TIERS: tuple[str, ...] = get_args(MemoryTier)
MEMORY_SOURCES: tuple[str, ...] = get_args(MemorySource)

#: Share of the layer cap per source, by strategy (the packing priority is
#: `MEMORY_SOURCES` order: search, l1, l2, l3).
STRATEGY_SHARES: Mapping[str, Mapping[str, float]] = {
    "minimal": {},
    "balanced": {"search": 0.5, "l1": 0.2, "l2": 0.3},
    "comprehensive": {"search": 0.45, "l1": 0.2, "l2": 0.2, "l3": 0.15},
}
#: Search hits a strategy reads first (more for a large cap: one per 24 tokens), and at
#: most: while the cap is not 90 % full and the search had more, it reads twice as many.
SEARCH_POOL = 96
MAX_SEARCH_POOL = 500
#: Most L3 summaries a strategy reads.
L3_POOL = 100
#: The candidate tier of each source (search hits are the "related" L4 reads).
SOURCE_TIER: Mapping[str, MemoryTier] = {"search": "l4", "l1": "l1", "l2": "l2", "l3": "l3"}
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


def item_key(item: MemoryItem) -> str:
    """The de-duplication id of an item: its id, plus ``#part`` for a unit of a longer one."""
    key = getattr(item, "key", None)
    return key if isinstance(key, str) else item.id


def check_shares(shares: Mapping[str, float]) -> dict[str, float]:
    """``shares`` checked (sources of `MEMORY_SOURCES`, numbers in [0, 1]) and scaled down
    proportionally when they add up to more than 1.

    Raises:
        ValueError: an unknown source or a share outside [0, 1] (the message names it).
    """
    checked: dict[str, float] = {}
    for source, share in shares.items():
        if source not in MEMORY_SOURCES:
            raise ValueError(
                f"shares: unknown source {source!r} (one of {', '.join(MEMORY_SOURCES)})"
            )
        if (
            isinstance(share, bool)
            or not isinstance(share, int | float)
            or not math.isfinite(share)
            or not 0 <= share <= 1
        ):
            raise ValueError(f"shares[{source!r}] must be a number in [0, 1], got {share!r}")
        checked[source] = float(share)
    total = sum(checked.values())
    if total > 1:
        checked = {s: v / total for s, v in checked.items()}
    return checked


def strategy_shares(
    strategy: MemoryStrategy | None, shares: Mapping[str, float] | None = None
) -> dict[str, float]:
    """The shares to use: ``shares`` when given (they replace the strategy's), else the
    strategy's (`STRATEGY_SHARES`; ``balanced`` when None).

    Raises:
        ValueError: an unknown strategy or bad shares.
    """
    if shares is not None:
        return check_shares(shares)
    chosen = strategy or "balanced"
    if chosen not in MEMORY_STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(MEMORY_STRATEGIES)}; got {chosen!r}")
    return dict(STRATEGY_SHARES[chosen])


def read_tier(
    memory: TieredMemory, tier: MemoryTier, *, count: int | None, query: str | None
) -> list[MemoryItem]:
    """Up to ``count`` items of ``tier``, best first (L1/L3 newest first, L2 by importance,
    L4 by relevance to ``query`` among the items that left L1; without a query, nothing)."""
    if tier == "l1":
        return list(reversed(memory.get_l1(count or memory.l1_size)))
    if tier == "l2":
        items = memory.get_l2()
        return items if count is None else items[:count]
    if tier == "l3":
        return list(reversed(memory.get_l3(count or memory.l3_size)))
    if not query or not query.strip():
        return []
    return list(memory.search(query, count or 5, tiers=("l2", "l3", "l4")))


def search_pool(cap_tokens: int | None) -> int:
    """How many search hits a strategy reads for a cap (`SEARCH_POOL`..`MAX_SEARCH_POOL`)."""
    if cap_tokens is None:
        return SEARCH_POOL
    return max(SEARCH_POOL, min(MAX_SEARCH_POOL, cap_tokens // 24))


def read_source(
    memory: TieredMemory,
    source: MemorySource,
    *,
    query: str | None,
    cap_tokens: int | None = None,
    search_hits: int | None = None,
) -> list[MemoryItem]:
    """The items of one strategy source, in its priority order (see the module docstring).

    The search reads ``search_hits`` hits (default: `search_pool` of ``cap_tokens``)."""
    if source == "search":
        if not query or not query.strip():
            return []
        return list(memory.search(query, search_hits or search_pool(cap_tokens)))
    if source == "l3":
        return read_tier(memory, "l3", count=min(L3_POOL, memory.l3_size), query=None)
    return read_tier(memory, source, count=None, query=None)


def _default_query(memory: TieredMemory, query: str | None) -> str | None:
    if query is not None:
        return query
    newest = memory.get_l1(1)
    return newest[0].content if newest else None


def select_memory(
    memory: TieredMemory,
    *,
    strategy: MemoryStrategy | None = None,
    tier: MemoryTier | None = None,
    query: str | None = None,
    limit: int | None = None,
    shares: Mapping[str, float] | None = None,
) -> list[Candidate]:
    """De-duplicated candidates in priority order, for a strategy or a single tier.

    A strategy reads each source with a positive share (search hits, then L1, L2, L3; see
    the module docstring) without a cap; `pack_memory` applies the shares of a cap.

    Args:
        memory: The memory to read.
        strategy: ``minimal | balanced | comprehensive`` (default ``balanced`` when
            ``tier`` is not given either).
        tier: Read one tier instead.
        query: Text for the search; None falls back to the newest L1 item.
        limit: Single tier: items to read. Strategy: at most this many candidates in all.
        shares: Replace the strategy's shares (which sources are read).

    Raises:
        ValueError: both or an unknown ``strategy``/``tier``, ``limit`` < 1, or bad shares.
    """
    if strategy is not None and tier is not None:
        raise ValueError("give either strategy or tier, not both")
    _check_limit(limit)
    if tier is not None:
        return _select_tier(memory, tier, query=query, limit=limit)
    pools = source_pools(memory, strategy_shares(strategy, shares), query=query)
    return dedupe_candidates((c for pool in pools.values() for c in pool), limit=limit)


def _check_limit(limit: int | None) -> None:
    """Raise ``ValueError`` unless ``limit`` is None or an integer >= 1."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be an integer >= 1, got {limit!r}")


def _select_tier(
    memory: TieredMemory, tier: MemoryTier, *, query: str | None, limit: int | None
) -> list[Candidate]:
    """`select_memory` for a single tier (``limit`` items, default its tier limit).

    Raises:
        ValueError: an unknown ``tier``.
    """
    if tier not in MEMORY_TIERS:
        raise ValueError(f"tier must be one of {', '.join(MEMORY_TIERS)}; got {tier!r}")
    count = limit if limit is not None else TIER_DEFAULT_LIMITS[tier]
    if tier == "l4":
        query = _default_query(memory, query)
    found = (Candidate(tier, i) for i in read_tier(memory, tier, count=count, query=query))
    return dedupe_candidates(found)


def source_pools(
    memory: TieredMemory,
    shares: Mapping[str, float],
    *,
    query: str | None,
    cap_tokens: int | None = None,
    search_hits: int | None = None,
) -> dict[str, list[Candidate]]:
    """The candidates of every source with a positive share, in `MEMORY_SOURCES` order.

    ``search_hits`` (default: `search_pool` of ``cap_tokens``) search hits are read."""
    query = _default_query(memory, query) if shares.get("search", 0) > 0 else query
    pools: dict[str, list[Candidate]] = {}
    for source in MEMORY_SOURCES:
        if shares.get(source, 0) > 0:
            tier = SOURCE_TIER[source]
            items = read_source(
                memory,
                source,  # type: ignore[arg-type]
                query=query,
                cap_tokens=cap_tokens,
                search_hits=search_hits,
            )
            pools[source] = [Candidate(tier, item) for item in items]
    return pools


def pack_shares(
    pools: Mapping[str, Sequence[Candidate]],
    shares: Mapping[str, float],
    *,
    cap_tokens: int,
    count_tokens: Callable[[str], int],
    limit: int | None = None,
    used_out: list[int] | None = None,
) -> list[Candidate]:
    """Whole candidates packed by source shares into ``cap_tokens`` (see the module
    docstring), returned in reading order (`order_for_reading`). ``used_out`` receives
    the tokens used (lines and separators as counted one by one).

    Cost: one token count per candidate looked at, plus one of the separator and one of
    the result.

    Raises:
        ValueError: ``cap_tokens`` is negative.
    """
    if cap_tokens < 0:
        raise ValueError(f"cap_tokens must be >= 0, got {cap_tokens}")
    sources = [s for s in MEMORY_SOURCES if shares.get(s, 0) > 0 and pools.get(s)]
    lines: list[str] = []
    taken: list[Candidate] = []
    seen_ids: set[str] = set()
    seen_text: set[str] = set()
    costs: dict[tuple[str, int], int] = {}
    texts: dict[tuple[str, int], str] = {}
    separator = "\n"
    sep_cost = count_tokens(separator)
    used = 0

    def cost_of(source: str, index: int, line: str) -> int:
        found = costs.get((source, index))
        if found is None:
            found = costs[(source, index)] = count_tokens(line)
        return found

    def consider(source: str, budget: float) -> float:
        nonlocal used
        spent = 0.0
        for index, candidate in enumerate(pools[source]):
            if limit is not None and len(taken) >= limit:
                break
            if cap_tokens - used <= sep_cost:
                break
            key = item_key(candidate.item)
            if key in seen_ids:
                continue
            text = texts.get((source, index))
            if text is None:
                text = texts[(source, index)] = content_key(candidate.item.content)
            if text in seen_text:
                continue
            line = render_item(candidate.item)
            cost = cost_of(source, index, line) + (sep_cost if taken else 0)
            if spent + cost > budget or used + cost > cap_tokens:
                continue
            taken.append(candidate)
            lines.append(line)
            seen_ids.add(key)
            seen_text.add(text)
            spent += cost
            used += cost
        return spent

    for source in sources:  # 1. every source within its share
        consider(source, shares[source] * cap_tokens)
    for source in sources:  # 2. the rest of the cap, search hits first
        consider(source, float(cap_tokens))
    while taken and count_tokens(separator.join(lines)) > cap_tokens:
        taken.pop()
        lines.pop()
    if used_out is not None:
        used_out.append(used)
    return order_for_reading(taken)


def pack_memory(
    memory: TieredMemory,
    *,
    cap_tokens: int,
    count_tokens: Callable[[str], int],
    strategy: MemoryStrategy | None = None,
    shares: Mapping[str, float] | None = None,
    query: str | None = None,
    limit: int | None = None,
) -> list[Candidate]:
    """A strategy's candidates packed by shares into ``cap_tokens``, in reading order.

    Raises:
        ValueError: an unknown strategy, bad shares, ``limit`` < 1 or a negative cap.
    """
    _check_limit(limit)
    chosen = strategy_shares(strategy, shares)
    if not chosen or cap_tokens <= 0:
        return []
    hits = search_pool(cap_tokens)
    pools = source_pools(memory, chosen, query=query, search_hits=hits)
    while True:
        used: list[int] = []
        packed = pack_shares(
            pools,
            chosen,
            cap_tokens=cap_tokens,
            count_tokens=count_tokens,
            limit=limit,
            used_out=used,
        )
        if _packing_done(
            pools, packed, used=used[0], hits=hits, cap_tokens=cap_tokens, limit=limit
        ):
            return packed
        # the cap is not full and there may be more relevant units: read more of them
        hits = min(MAX_SEARCH_POOL, hits * 2)
        pools["search"] = source_pools(memory, {"search": 1.0}, query=query, search_hits=hits)[
            "search"
        ]


def _packing_done(
    pools: Mapping[str, Sequence[Candidate]],
    packed: Sequence[Candidate],
    *,
    used: int,
    hits: int,
    cap_tokens: int,
    limit: int | None,
) -> bool:
    """Whether `pack_memory` should stop reading more search hits: the cap is (nearly)
    full, ``limit`` is reached, the search returned fewer than ``hits`` or ``hits`` is at
    `MAX_SEARCH_POOL`."""
    exhausted = len(pools.get("search", ())) < hits
    full = used >= 0.9 * cap_tokens or (limit is not None and len(packed) >= limit)
    return full or exhausted or hits >= MAX_SEARCH_POOL


def dedupe_candidates(
    candidates: Iterable[Candidate], *, limit: int | None = None
) -> list[Candidate]:
    """Candidates without repeats (same item id, or same content), first occurrence wins.

    A search hit that is one unit of a longer item counts under ``id#part``.
    """
    seen_ids: set[str] = set()
    seen_text: set[str] = set()
    kept: list[Candidate] = []
    for candidate in candidates:
        key = content_key(candidate.item.content)
        ident = item_key(candidate.item)
        if ident in seen_ids or key in seen_text:
            continue
        seen_ids.add(ident)
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
    for choosing), returned in reading order (`order_for_reading`)."""
    lines = [render_item(c.item) for c in candidates]
    kept = [
        candidates[i] for i in pack_pieces(lines, cap_tokens=cap_tokens, count_tokens=count_tokens)
    ]
    return order_for_reading(kept)


def order_for_reading(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Group by tier (first-appearance order); L1, L3 and L4 (search) groups chronological,
    so a correction reads after what it corrects; L2 stays by importance."""
    groups: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        groups.setdefault(candidate.tier, []).append(candidate)
    ordered: list[Candidate] = []
    for tier_name, group in groups.items():
        if tier_name == "l2":
            ordered.extend(group)
        else:
            ordered.extend(sorted(group, key=lambda c: (c.item.seq, _part(c.item))))
    return ordered


def _part(item: MemoryItem) -> int:
    part = getattr(item, "part", 0)
    return part if isinstance(part, int) else 0


def render_candidates(candidates: Sequence[Candidate]) -> str:
    """The lines of ``candidates`` joined by newlines."""
    return "\n".join(render_item(c.item) for c in candidates)
