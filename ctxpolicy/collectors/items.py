"""Whole items across layers: one item once per prompt (docs/memory.md, 'One item once per prompt').

The ``memory`` and ``agent_outputs`` collectors return an `ItemsText`: the layer text
plus its items, each with the keys that say which item it is (its id, its text ignoring
case and spacing). After the collectors ran, `unique_items` walks the layers in the
policy's order and drops from a later layer every item an earlier layer already shows,
so the same note never reaches one prompt twice (the earlier layer keeps it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


class ItemsText(str):
    """A layer text made of whole items (a ``str``: collectors and the composer see text).

    Attributes:
        pieces: The items as the layer prints them, in order (joined by newlines).
        keys: Per piece, the keys naming its item (``id:<item id>``, its text's key).
    """

    pieces: tuple[str, ...]
    keys: tuple[frozenset[str], ...]

    def __new__(cls, pieces: Sequence[str], keys: Sequence[Iterable[str]]) -> ItemsText:
        text = super().__new__(cls, "\n".join(pieces))
        text.pieces = tuple(pieces)
        text.keys = tuple(frozenset(k) for k in keys)
        return text


def unique_items(order: Sequence[str], values: Mapping[str, str | None]) -> dict[str, str | None]:
    """``values`` with each item shown once: walking ``order``, an `ItemsText` layer loses
    the pieces whose item an earlier one shows (a layer left with none becomes None).
    Other values are kept as they are."""
    seen: set[str] = set()
    result = dict(values)
    for name in order:
        value = values.get(name)
        if not isinstance(value, ItemsText):
            continue
        kept = [i for i, keys in enumerate(value.keys) if not keys & seen]
        for keys in value.keys:
            seen.update(keys)
        if len(kept) < len(value.pieces):
            pieces = [value.pieces[i] for i in kept]
            result[name] = ItemsText(pieces, [value.keys[i] for i in kept]) if pieces else None
    return result


__all__ = ["ItemsText", "unique_items"]
