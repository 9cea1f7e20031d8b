"""The relevance floor: a hit that matches only the session's common words is noise.

On a long chat the speakers' names, "today" or "thanks" occur in a large share of the
turns. A question that names a person ("What are Kate's hobbies?") then matches dozens
of short greetings by that name alone, and they would fill the layer. A term is
*common* when more than `COMMON_SHARE` of the session's units hold it (and at least
`MIN_COMMON_UNITS` do, so a short session is never filtered). Both index backends search
only the units holding at least one query term that is not common (every term still
counts in their score): a query whose matching terms are all common recalls nothing,
and its room stays with the other layers.

Pure: the backends give their per-thread counts; `terms_pattern` is shared with
selection (which query terms a statement is about). See docs/recall.md, "Relevance floor".
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence

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


__all__ = [
    "COMMON_SHARE",
    "MIN_COMMON_UNITS",
    "distinctive_terms",
    "terms_pattern",
]
