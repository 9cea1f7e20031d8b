"""Edit one value of a TOML policy with tomlkit, keeping comments and layout.

tomlkit parses a TOML document into items that remember their text (comments, blank
lines, quoting, key order, the whitespace before a trailing comment), so setting one key
and dumping the document again changes only that key's text: a replaced value keeps
its line and its trailing comment (at the same column), a new key goes after the last
key of its table, a missing table is appended at the end. Multi-line strings and arrays,
dotted keys and inline tables are edited like any other value.

Every edit is checked like a YAML edit: the new text must parse to the old data with
exactly that one value set (`ctxpolicy.editing.values._verify`), or nothing is written.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

import tomlkit
from tomlkit.container import Container, OutOfOrderTableProxy
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import AoT, Array, InlineTable, Item, Table

from ctxpolicy.editing.values import EditError, _verify

__all__ = ["set_toml_value"]

_Parent = Container | OutOfOrderTableProxy | Table | InlineTable | Array | AoT
_PARENTS = (Container, OutOfOrderTableProxy, Table, InlineTable, Array, AoT)


def _load_toml_data(text: str) -> Any:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise EditError(f"the file is not valid TOML: {exc}") from None


def _toml_item(value: Any) -> Item:
    """``value`` as a tomlkit item; mappings become inline tables (one edit, one place).

    Raises:
        EditError: ``value`` is None (TOML has no null) or not plain data.
    """
    if value is None:
        raise EditError("VALUE: TOML has no null; give a value (or remove the key by hand)")
    if isinstance(value, Mapping):
        table = tomlkit.inline_table()
        for key, child in value.items():
            table.append(str(key), _toml_item(child))
        return table
    if isinstance(value, list):
        array = tomlkit.array()
        array.extend(_toml_item(child) for child in value)
        return array
    try:
        item: Item = tomlkit.item(value)
    except (TypeError, ValueError):
        raise EditError(f"VALUE: cannot write a value of type {type(value).__name__}") from None
    return item


def _child(parent: _Parent, segment: str, *, where: str) -> _Parent:
    """The table (or array) ``segment`` of ``parent``; a missing table is created.

    Raises:
        EditError: the key holds a value that is neither a table nor an array.
    """
    if isinstance(parent, Array | AoT):
        if not segment.isdigit() or int(segment) >= len(parent):
            raise EditError(f"{where}: no item {segment} in this array")
        found: Any = parent[int(segment)]
    elif segment in parent:
        found = parent[segment]
    else:
        created = tomlkit.table()
        parent[segment] = created
        return created
    if not isinstance(found, _PARENTS):
        raise EditError(f"{where}: not a table, so it has no key below it")
    return found


def _comment_gap(item: Item | None) -> str | None:
    trivia = getattr(item, "trivia", None)
    return trivia.comment_ws if trivia is not None and trivia.comment else None


def _set(parent: _Parent, segment: str, value: Item) -> None:
    """``parent[segment] = value``, keeping a trailing comment at its column."""
    if isinstance(parent, Array | AoT):
        parent[int(segment)] = value
        return
    old = parent.get(segment)
    old_item = old if isinstance(old, Item) else None
    gap = _comment_gap(old_item)
    parent[segment] = value
    if old_item is None or gap is None:
        return
    delta = len(value.as_string()) - len(old_item.as_string())
    value.trivia.comment_ws = " " * max(1, len(gap) - delta)


def set_toml_value(text: str, key: Sequence[str], value: Any) -> str:
    """Set ``key`` to ``value`` in TOML text, keeping every comment and the layout.

    Args:
        text: The TOML document.
        key: Key segments (a segment of digits indexes an array).
        value: Plain data (see `ctxpolicy.editing.parse_value`); not None.

    Raises:
        EditError: the text is not TOML, the value has no TOML form, the key runs
            through a value that is not a table, or the edit could not be verified.
    """
    if not key:
        raise EditError("KEY: empty key")
    item = _toml_item(value)
    _load_toml_data(text)
    try:
        document = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise EditError(f"the file is not valid TOML: {exc}") from None
    parent: _Parent = document
    for depth, segment in enumerate(key[:-1]):
        parent = _child(parent, segment, where=".".join(key[: depth + 1]))
    _set(parent, key[-1], item)
    new = tomlkit.dumps(document)
    try:
        _verify(text, new, key, value, loader=_load_toml_data)
    except EditError:
        raise EditError(
            f"could not set {'.'.join(key)} in this TOML file safely; nothing was "
            "written — edit it by hand"
        ) from None
    return new
