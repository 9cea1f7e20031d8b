"""Where each value of a policy came from: JSON path -> file, line, column.

A *JSON path* is a tuple of mapping keys and sequence indexes, e.g.
``("budget", "ratios", "query")``; `format_path` renders it as ``$.budget.ratios.query``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

JsonPath = tuple[str | int, ...]

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


@dataclass(frozen=True, slots=True)
class Location:
    """A position in a policy file (or another source such as an environment variable).

    Attributes:
        file: The file (or ``<env NAME>`` / ``<argument NAME>``).
        line: 1-based line of the key (mapping entry) or item; 0 when unknown.
        column: 1-based column; 0 when unknown.
        value_line: 1-based line where the value's text starts (the line after ``|``
            for a YAML block scalar); equals ``line`` when not known better.
    """

    file: str
    line: int = 0
    column: int = 0
    value_line: int = 0

    def describe(self) -> str:
        """``file:line:col`` (or just the file when the position is unknown)."""
        if self.line <= 0:
            return self.file
        return f"{self.file}:{self.line}:{self.column}"


SourceMap = dict[JsonPath, Location]


def format_path(path: JsonPath) -> str:
    """Render a JSON path as ``$.a.b[0]`` (keys that are not identifiers are quoted)."""
    out = ["$"]
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _PLAIN_KEY.match(part):
            out.append(f".{part}")
        else:
            escaped = part.replace("\\", "\\\\").replace("'", "\\'")
            out.append(f"['{escaped}']")
    return "".join(out)


def locate(sourcemap: Mapping[JsonPath, Location], path: JsonPath, *, default: str) -> Location:
    """The location of ``path``, or of its deepest prefix that has one.

    Args:
        sourcemap: The map to search.
        path: The JSON path of the offending value.
        default: File to report when not even the root has a location.
    """
    for end in range(len(path), -1, -1):
        found = sourcemap.get(path[:end])
        if found is not None:
            return found
    return Location(default, 1, 1, 1)


__all__ = ["JsonPath", "Location", "SourceMap", "format_path", "locate"]
