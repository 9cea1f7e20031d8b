"""Packing whole pieces of text into a token cap."""

from __future__ import annotations

from collections.abc import Callable, Sequence


def pack_pieces(
    pieces: Sequence[str],
    *,
    cap_tokens: int,
    count_tokens: Callable[[str], int],
    separator: str = "\n",
) -> list[int]:
    """Indices of the pieces that fit ``cap_tokens`` when joined by ``separator``.

    Greedy in the given (priority) order: a piece that does not fit is skipped and smaller
    later pieces may still be taken. Pieces are never cut. The joined text of the result is
    checked with ``count_tokens`` and has at most ``cap_tokens`` tokens. Cost: one count
    per piece looked at plus one of the result; stops as soon as the cap is full.

    Raises:
        ValueError: ``cap_tokens`` is negative.
    """
    if cap_tokens < 0:
        raise ValueError(f"cap_tokens must be >= 0, got {cap_tokens}")
    taken = _greedy_fit(pieces, cap_tokens, count_tokens, separator)
    while taken and count_tokens(separator.join(pieces[i] for i in taken)) > cap_tokens:
        taken.pop()
    return taken


def _greedy_fit(
    pieces: Sequence[str],
    cap_tokens: int,
    count_tokens: Callable[[str], int],
    separator: str,
) -> list[int]:
    """Indices taken greedily by summed per-piece costs (before the joined-text check)."""
    taken: list[int] = []
    used = 0
    sep_cost = count_tokens(separator) if separator else 0
    for index, piece in enumerate(pieces):
        if used >= cap_tokens:
            break
        if not piece:
            continue
        cost = count_tokens(piece) + (sep_cost if taken else 0)
        if used + cost <= cap_tokens:
            taken.append(index)
            used += cost
    return taken
