"""Tiered memory and sessions as a context source (docs/design.md, 'Memory tiers and scopes').

`TieredMemory` keeps L1 (recent), L2 (important), L3 (summaries) and L4 (every item in a
full-text search index, `TieredMemory.search`);
`MemorySessions` keeps one per session and aggregates/distributes across them; the
``memory`` collector (`ctxpolicy.collectors.memory.collect_memory`) reads them into a
layer by strategy (``minimal | balanced | comprehensive``: token shares of the layer's
cap per source) or single tier.

Importing this package needs langchain-core (loaded lazily where possible) but never
langgraph unless a store is used.
"""

from ctxpolicy.layers import MemorySource, MemoryStrategy, MemoryTier
from ctxpolicy.memory.items import (
    IMPORTANCE_BY_KIND,
    ITEM_KINDS,
    ItemKind,
    MemoryHit,
    MemoryItem,
    score_importance,
)
from ctxpolicy.memory.sessions import (
    MemoryNotDurableWarning,
    MemorySessions,
    SessionInactiveError,
)
from ctxpolicy.memory.strategies import (
    MEMORY_SOURCES,
    MEMORY_STRATEGIES,
    MEMORY_TIERS,
    STRATEGY_SHARES,
    Candidate,
    pack_memory,
    render_candidates,
    select_memory,
)
from ctxpolicy.memory.summaries import summarize_extractive
from ctxpolicy.memory.tiered import L2_POLICIES, L2Policy, TieredMemory

__all__ = [
    "IMPORTANCE_BY_KIND",
    "ITEM_KINDS",
    "L2_POLICIES",
    "MEMORY_SOURCES",
    "MEMORY_STRATEGIES",
    "MEMORY_TIERS",
    "STRATEGY_SHARES",
    "Candidate",
    "ItemKind",
    "L2Policy",
    "MemoryHit",
    "MemoryItem",
    "MemoryNotDurableWarning",
    "MemorySessions",
    "MemorySource",
    "MemoryStrategy",
    "MemoryTier",
    "SessionInactiveError",
    "TieredMemory",
    "pack_memory",
    "render_candidates",
    "score_importance",
    "select_memory",
    "summarize_extractive",
]
