"""Edit one value of a TOML policy for the common layouts; refuse the rest clearly."""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

from ctxpolicy.editing.values import (
    _BARE_TOML_KEY_RE,
    EditError,
    _splice,
    _verify,
    _yaml_float,
    quote_double,
)

# --------------------------------------------------------------------------- TOML

_TOML_HEADER_RE = re.compile(r"^\s*\[(?!\[)\s*([^\]]+?)\s*\]\s*(?:#.*)?$")
_TOML_ARRAY_HEADER_RE = re.compile(r"^\s*\[\[")
_TOML_KV_RE = re.compile(r"^(\s*)([A-Za-z0-9_\-.\" ]+?)\s*=\s*(.*?)\r?\n?$")
_TOML_TAIL_RE = re.compile(r"^\s*(?:#.*)?$")


def _toml_key_parts(raw: str) -> tuple[str, ...] | None:
    parts: list[str] = []
    for raw_piece in raw.split("."):
        piece = raw_piece.strip()
        if _BARE_TOML_KEY_RE.match(piece):
            parts.append(piece)
        elif len(piece) >= 2 and piece[0] == piece[-1] == '"' and '"' not in piece[1:-1]:
            parts.append(piece[1:-1])
        else:
            return None
    return tuple(parts)


def _toml_key(segment: str) -> str:
    return segment if _BARE_TOML_KEY_RE.match(segment) else quote_double(segment)


def _toml_render(value: Any) -> str:  # noqa: PLR0911 - one return per TOML type
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return _yaml_float(value)
    if isinstance(value, str):
        return quote_double(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_render(v) for v in value) + "]"
    if isinstance(value, Mapping):
        items = (f"{_toml_key(str(k))} = {_toml_render(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if value is None:
        raise EditError("VALUE: TOML has no null; give a value (or remove the key by hand)")
    raise EditError(f"VALUE: cannot write a value of type {type(value).__name__}")


def _load_toml_data(text: str) -> Any:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise EditError(f"the file is not valid TOML: {exc}") from None


def _toml_value_end(rest: str) -> int | None:
    """Length of the single-line TOML value at the start of ``rest`` (None if none)."""
    for end in range(1, len(rest) + 1):
        if not _TOML_TAIL_RE.match(rest[end:]):
            continue
        try:
            tomllib.loads("x = " + rest[:end])
        except tomllib.TOMLDecodeError:
            continue
        return end
    return None


def _toml_scan(
    lines: Sequence[str],
) -> tuple[list[tuple[int, tuple[str, ...], re.Match[str]]], dict[tuple[str, ...], int]]:
    """Key-value lines (line number, full key, match) and each table's last line."""
    table: tuple[str, ...] | None = ()
    last_line: dict[tuple[str, ...], int] = {}
    entries: list[tuple[int, tuple[str, ...], re.Match[str]]] = []
    for number, line in enumerate(lines):
        if _TOML_ARRAY_HEADER_RE.match(line):
            table = None
            continue
        header = _TOML_HEADER_RE.match(line)
        if header:
            table = _toml_key_parts(header.group(1))
            if table is not None:
                last_line[table] = number
            continue
        match = _TOML_KV_RE.match(line)
        parts = None if match is None else _toml_key_parts(match.group(2))
        if table is None or match is None or parts is None:
            continue
        last_line[table] = number
        entries.append((number, (*table, *parts), match))
    return entries, last_line


def set_toml_value(text: str, key: Sequence[str], value: Any) -> str:
    """Set ``key`` to ``value`` in TOML text, touching only that value's characters.

    Supported: replacing a value written on one line; adding a key to an existing
    ``[table]`` or the top level; appending a new ``[table]`` for a missing parent.

    Raises:
        EditError: anything else (multi-line values, inline tables, arrays of tables),
            or an edit that could not be verified.
    """
    if not key:
        raise EditError("KEY: empty key")
    rendered = _toml_render(value)
    _load_toml_data(text)
    lines = re.findall(r"[^\n]*\n|[^\n]+$", text)  # only \n ends a TOML line
    newline = "\r\n" if "\r\n" in text else "\n"
    target = tuple(key)
    entries, last_line = _toml_scan(lines)
    for number, full_key, match in entries:
        if full_key != target:
            continue
        rest = match.group(3)
        size = _toml_value_end(rest)
        if size is None:
            raise EditError(
                f"{'.'.join(key)} is a multi-line TOML value; `set` only rewrites values "
                "written on one line — edit it by hand"
            )
        start = match.start(3)
        lines[number] = _splice(lines[number], start, start + size, rendered)
        return _toml_checked(text, "".join(lines), key, value)
    parent, last = target[:-1], target[-1]
    new_line = f"{_toml_key(last)} = {rendered}{newline}"
    if parent in last_line:
        at = last_line[parent] + 1
        if not lines[at - 1].endswith("\n"):
            lines[at - 1] += newline
        lines.insert(at, new_line)
    else:
        tail = "" if not text or text.endswith("\n") else newline
        header_text = ".".join(_toml_key(p) for p in parent)
        lines.append(f"{tail}{newline}[{header_text}]{newline}{new_line}")
    return _toml_checked(text, "".join(lines), key, value)


def _toml_checked(old: str, new: str, key: Sequence[str], value: Any) -> str:
    try:
        _verify(old, new, key, value, loader=_load_toml_data)
    except EditError:
        raise EditError(
            f"could not set {'.'.join(key)} in this TOML file safely (the key lives in an "
            "inline table, an array of tables or a dotted key elsewhere); nothing was "
            "written — edit it by hand"
        ) from None
    return new
