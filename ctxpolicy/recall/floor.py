"""The relevance floor: a hit that matches only the session's common words is noise.

On a long chat the speakers' names, "today" or "thanks" occur in a large share of the
turns. A question that names a person ("What are Kate's hobbies?") then matches dozens
of short greetings by that name alone, and they would fill the layer. A term is
*common* when more than `COMMON_SHARE` of the session's units hold it (and at least
`MIN_COMMON_UNITS` do, so a short session is never filtered). A hit is packed only when
it holds at least one query term that is not common; a query whose matching terms are
all common recalls nothing, and its room stays with the other layers.

Pure: counts in, hits out. The counts come from the index (``term_postings``).
See docs/recall.md, "Relevance floor".
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence

from ctxpolicy.recall.index import RecallHit

#: A term held by more than this share of the session's units is common.
COMMON_SHARE = 0.05
#: ... and by at least this many units (a short session keeps every term).
MIN_COMMON_UNITS = 20
_LATIN = re.compile(r"[0-9a-z_]", re.ASCII)


def _stem(word: str) -> str:
    """A crude suffix strip, only to find a term's inflections in a unit's text."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def terms_pattern(terms: Collection[str]) -> re.Pattern[str] | None:
    """A pattern finding words that start with one of the (stemmed) ``terms``.

    A Latin term must start a word; a Han term (no spaces between words) may occur
    anywhere. Group 1 is the stem found.
    """
    stems = sorted({_stem(t.lower()) for t in terms if t}, key=len, reverse=True)
    if not stems:
        return None
    parts = [(r"(?<!\w)" if _LATIN.match(s) else "") + re.escape(s) for s in stems]
    return re.compile("(" + "|".join(parts) + r")\w*", re.IGNORECASE)


def distinctive_terms(units: int, postings: Mapping[str, int], terms: Sequence[str]) -> list[str]:
    """The ``terms`` that some unit holds and that are not common (see the module)."""
    limit = max(COMMON_SHARE * units, MIN_COMMON_UNITS - 1)
    return [t for t in terms if postings.get(t, 0) > 0 and postings[t] <= limit]


def above_floor(hits: Sequence[RecallHit], distinctive: Collection[str]) -> list[RecallHit]:
    """The ``hits`` holding at least one of the ``distinctive`` terms, in their order."""
    pattern = terms_pattern(distinctive)
    if pattern is None:
        return []
    return [
        hit
        for hit in hits
        if pattern.search(hit.unit.text)
        or pattern.search(hit.unit.context)
        or (hit.unit.tool is not None and pattern.search(hit.unit.tool))
    ]


__all__ = [
    "COMMON_SHARE",
    "MIN_COMMON_UNITS",
    "above_floor",
    "distinctive_terms",
    "terms_pattern",
]
