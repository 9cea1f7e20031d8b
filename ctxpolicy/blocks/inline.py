"""Inline references in a query: ``[guide.md:12:30]`` and ``[profile.md#a/b]`` resolved.

See docs/design.md, 'Files as context', and docs/files.md, 'Inline references in the
query'. A policy switches this on with ``layers.query.references: {root: docs}``; the
engine then calls `expand_query` on the runtime query (or the checkpoint's input
HumanMessage, in the prompt only). The query keeps its text and each referenced piece
follows it once, labelled with its file and lines, as `ctxpolicy.blocks.manifest`'s
``merge_references`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ctxpolicy.blocks.references import Reference, find_references, resolve_reference
from ctxpolicy.blocks.sandbox import DEFAULT_MAX_FILE_BYTES
from ctxpolicy.errors import BlocksError

PIECE_SEPARATOR = "\n\n"


@dataclass(frozen=True, slots=True)
class QueryReference:
    """One inline reference of a query, as the compose report lists it.

    Attributes:
        ref: The reference as written (``[guide.md:12:30]``).
        file: The file, relative to the references root.
        lines: First and last line included (None when skipped).
        tokens: Tokens of the labelled piece added to the query (0 when skipped).
        error: Why it was skipped (``on_error: skip``), else None.
    """

    ref: str
    file: str
    lines: tuple[int, int] | None
    tokens: int
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON output."""
        return {
            "ref": self.ref,
            "file": self.file,
            "lines": list(self.lines) if self.lines is not None else None,
            "tokens": self.tokens,
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class ExpandedQuery:
    """A query with its inline references resolved.

    Attributes:
        text: The query, then each resolved piece once (``[label]`` + text).
        references: Every inline reference, resolved or skipped, in order.
    """

    text: str
    references: tuple[QueryReference, ...]

    @property
    def changed(self) -> bool:
        """Whether any piece was added."""
        return any(r.error is None for r in self.references)


def expand_query(
    query: str,
    root: Path | str | Callable[[], Path],
    *,
    on_error: Literal["fail", "skip"] = "fail",
    count_tokens: Callable[[str], int] = len,
    max_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> ExpandedQuery:
    """Resolve the inline references of ``query`` inside ``root``.

    Args:
        query: The user's text.
        root: The references root (or a function returning it, called only when the
            query has a reference).
        on_error: ``fail`` raises; ``skip`` leaves the reference text as it was and
            lists it with its error.
        count_tokens: Counts the tokens of each added piece (for the report).
        max_bytes: Size limit of each file read.

    Raises:
        BlocksError: (``on_error: fail``) a reference escapes the root, names a missing
            file or block, or a bad line range; the message names the reference.
    """
    try:
        refs: list[Reference] = find_references(query)
    except BlocksError:
        if on_error == "fail":
            raise
        return ExpandedQuery(query, ())
    if not refs:
        return ExpandedQuery(query, ())
    pieces: list[str] = [query]
    listed: list[QueryReference] = []
    base: Path | None = None
    for ref in refs:
        try:
            if base is None:
                base = root() if callable(root) else Path(root)
            piece = resolve_reference(base, ref, max_bytes=max_bytes)
        except BlocksError as exc:
            if on_error == "fail":
                raise BlocksError(f"reference {ref}: {exc}") from exc
            listed.append(QueryReference(str(ref), ref.path, None, 0, str(exc)))
            continue
        text = piece.format()
        pieces.append(text)
        listed.append(
            QueryReference(
                str(ref), ref.path, (piece.start_line, piece.end_line), count_tokens(text)
            )
        )
    return ExpandedQuery(PIECE_SEPARATOR.join(pieces), tuple(listed))


__all__ = ["ExpandedQuery", "QueryReference", "expand_query"]
