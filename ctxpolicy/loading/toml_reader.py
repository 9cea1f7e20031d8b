"""TOML policy text -> plain data + source map.

``tomllib`` gives no node positions, so the source map comes from a best-effort scan
of the text for table headers and ``key =`` lines. The scan never fails: a key it
cannot place simply falls back to the nearest enclosing key that it could.
"""

from __future__ import annotations

import math
import re
import tomllib
from datetime import date, datetime, time
from typing import Any

from ctxpolicy.diagnostics import (
    MAX_DEPTH,
    MAX_NODES,
    JsonPath,
    Location,
    PolicyIssue,
    SourceMap,
    issue_at,
    locate,
)
from ctxpolicy.errors import PolicyFileRefusedError

_ERROR_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")
_BARE = r"[A-Za-z0-9_-]+"
_BASIC = r'"(?:[^"\\]|\\.)*"'
_LITERAL = r"'[^']*'"
_KEY_PART = rf"(?:{_BARE}|{_BASIC}|{_LITERAL})"
_DOTTED = rf"{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*"
_KEY_PART_RE = re.compile(_KEY_PART)
_TABLE_RE = re.compile(rf"^(\s*)\[\s*({_DOTTED})\s*\]")
_ARRAY_TABLE_RE = re.compile(rf"^(\s*)\[\[\s*({_DOTTED})\s*\]\]")
_KEY_VALUE_RE = re.compile(rf"^(\s*)({_DOTTED})\s*=")


def _split_key(dotted: str) -> list[str]:
    parts: list[str] = []
    for match in _KEY_PART_RE.finditer(dotted):
        raw = match.group(0)
        if raw.startswith('"'):
            parts.append(raw[1:-1].encode("utf-8").decode("unicode_escape", errors="replace"))
        elif raw.startswith("'"):
            parts.append(raw[1:-1])
        else:
            parts.append(raw)
    return parts


class _KeyScan:
    """The state of `scan_toml_keys`: the current table and the source map so far."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.smap: SourceMap = {(): Location(file, 1, 1, 1)}
        self.table: JsonPath = ()
        self.array_counts: dict[JsonPath, int] = {}

    def array_table(self, match: re.Match[str], number: int) -> None:
        """``[[a.b]]``: the next item of the array of tables ``a.b``."""
        base = tuple(_split_key(match.group(2)))
        index = self.array_counts.get(base, -1) + 1
        self.array_counts[base] = index
        self.table = (*base, index)
        where = Location(self.file, number, len(match.group(1)) + 1, number)
        self.smap.setdefault(base, where)
        self.smap[self.table] = where

    def table_header(self, match: re.Match[str], number: int) -> None:
        """``[a.b]``: a table (and every table above it that has no line yet)."""
        self.table = tuple(_split_key(match.group(2)))
        where = Location(self.file, number, len(match.group(1)) + 1, number)
        for end in range(1, len(self.table) + 1):
            self.smap.setdefault(self.table[:end], where)

    def key_value(self, match: re.Match[str], line: str, number: int) -> str | None:
        """``a.b = ...``: place the key; the quote of a multi-line string it opens, if any."""
        keys = tuple(_split_key(match.group(2)))
        rest = line[match.end() :]
        # a multi-line string that opens on this line starts its text on the next one
        value_line = number + 1 if rest.strip() in ('"""', "'''") else number
        where = Location(self.file, number, len(match.group(1)) + 1, value_line)
        for end in range(1, len(keys) + 1):
            self.smap.setdefault((*self.table, *keys[:end]), where)
        return next((q for q in ('"""', "'''") if rest.count(q) % 2 == 1), None)

    def line(self, line: str, number: int) -> str | None:
        """Place one line; the quote of a multi-line string it opens, if any."""
        if match := _ARRAY_TABLE_RE.match(line):
            self.array_table(match, number)
        elif match := _TABLE_RE.match(line):
            self.table_header(match, number)
        elif match := _KEY_VALUE_RE.match(line):
            return self.key_value(match, line, number)
        return None


def scan_toml_keys(text: str, file: str) -> SourceMap:
    """Best-effort map of TOML keys to their lines (never raises)."""
    scan = _KeyScan(file)
    in_multiline: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if in_multiline is None:
            in_multiline = scan.line(line, number)
        elif line.count(in_multiline) % 2 == 1:
            in_multiline = None
    return scan.smap


def _plain(value: Any, file: str, path: JsonPath, smap: SourceMap, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        where = Location(file, 1, 1, 1)
        message = f"nesting deeper than {MAX_DEPTH} levels"
        raise PolicyFileRefusedError(issue_at(where, path, message, "toml.too-deep"))
    if isinstance(value, dict):
        return {k: _plain(v, file, (*path, k), smap, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, file, (*path, i), smap, depth + 1) for i, v in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        where = locate(smap, path, default=file)
        message = f"{value!r} is not a finite number"
        raise PolicyFileRefusedError(issue_at(where, path, message, "value.non-finite"))
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    return value


def _count_nodes(value: Any) -> int:
    """Keys, tables, arrays and scalars of a parsed TOML document, counted as the YAML
    reader counts its nodes (iterative: no recursion)."""
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            count += len(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def _value_issue(text: str, file: str, exc: ValueError) -> PolicyIssue:
    """Locate a value tomllib could not convert (the longest run of digits, else 1:1)."""
    runs = list(re.finditer(r"[0-9_]{100,}", text))
    line = column = 1
    if runs:
        start = max(runs, key=lambda m: m.end() - m.start()).start()
        line = text.count("\n", 0, start) + 1
        column = start - (text.rfind("\n", 0, start) + 1) + 1
    message = str(exc).split(";")[0]
    return PolicyIssue(file, line, column, "$", f"TOML: bad value: {message}", "value.too-long")


def parse_toml(text: str, file: str) -> tuple[Any, SourceMap, list[PolicyIssue]]:
    """Parse TOML policy text.

    Returns:
        ``(data, sourcemap, issues)``; ``data`` is None when there are issues.
    """
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = _ERROR_POSITION.search(message)
        if found:
            line, column = int(found.group(1)), int(found.group(2))
        else:  # "(at end of document)"
            line, column = max(1, len(text.splitlines())), 1
        message = _ERROR_POSITION.sub("", message).replace("(at end of document)", "")
        message = message.strip() + (" (at end of document)" if not found else "")
        return None, {}, [PolicyIssue(file, line, column, "$", f"TOML: {message}", "toml.syntax")]
    except RecursionError:
        return None, {}, [PolicyIssue(file, 1, 1, "$", "TOML nesting too deep", "toml.too-deep")]
    except ValueError as exc:  # e.g. an integer past Python's 4300-digit conversion limit
        return None, {}, [_value_issue(text, file, exc)]
    nodes = _count_nodes(raw)
    if nodes > MAX_NODES:  # the same cap as YAML: keeps validation of giant files fast
        message = f"the document has more than {MAX_NODES} values ({nodes})"
        return None, {}, [PolicyIssue(file, 1, 1, "$", message, "file.too-many-nodes")]
    smap = scan_toml_keys(text, file)
    try:
        data = _plain(raw, file, (), smap)
    except PolicyFileRefusedError as refused:
        return None, {}, [refused.issue]
    return data, smap, []


__all__ = ["parse_toml", "scan_toml_keys"]
