"""Tiered memory (seed 004) and sessions (seed 002) as a context source.

`TieredMemory` keeps L1 (recent), L2 (important), L3 (summaries) and L4 (semantic index);
`MemorySessions` keeps one per session and aggregates/distributes across them; the
``memory`` collector (`ctxpolicy.memory.collector.collect_memory`) reads them into a
layer by strategy (``minimal | balanced | comprehensive``) or single tier.

Importing this package needs langchain-core (loaded lazily where possible) but never
langgraph unless a store is used.
"""

from ctxpolicy.memory.items import (
    IMPORTANCE_BY_KIND,
    ITEM_KINDS,
    ItemKind,
    MemoryItem,
    score_importance,
)
from ctxpolicy.memory.sessions import MemorySessions
from ctxpolicy.memory.strategies import (
    MEMORY_STRATEGIES,
    MEMORY_TIERS,
    Candidate,
    MemoryStrategy,
    MemoryTier,
    render_candidates,
    select_memory,
)
from ctxpolicy.memory.summaries import summarize_extractive
from ctxpolicy.memory.tiered import TieredMemory

__all__ = [
    "IMPORTANCE_BY_KIND",
    "ITEM_KINDS",
    "MEMORY_STRATEGIES",
    "MEMORY_TIERS",
    "Candidate",
    "ItemKind",
    "MemoryItem",
    "MemorySessions",
    "MemoryStrategy",
    "MemoryTier",
    "TieredMemory",
    "render_candidates",
    "score_importance",
    "select_memory",
    "summarize_extractive",
]
