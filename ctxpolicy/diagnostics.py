"""Where a problem is and what it is: positions, findings, issues and the reader's limits.

The ground floor of everything that reports on a policy file (it imports only the
standard library):

* **Positions.** A *JSON path* is a tuple of mapping keys and sequence indexes, e.g.
  ``("budget", "ratios", "query")``; `format_path` renders it as
  ``$.budget.ratios.query``. A `SourceMap` maps each JSON path to the `Location` (file,
  line, column) the value came from, so an inherited value still points at its
  parent's line.
* **Findings and issues.** A rule returns `Finding`\\ s (a JSON path, a message, a rule
  id); `place_finding` turns one into a `PolicyIssue` at its file, line and column. A
  `PolicyIssue` is what users see (public: ``ctxpolicy.PolicyIssue``).
* **Limits** that keep hostile or broken policy files from crashing or hanging the
  reader (see docs/design.md, 'Validation rules').

Kept free of heavy imports: ``ctxpolicy validate`` must start fast.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final, Literal

from ctxpolicy.builtin import builtin_name

# --------------------------------------------------------------------------- limits

#: Largest policy file read, in bytes (checked before reading).
MAX_FILE_BYTES: Final = 1024 * 1024
#: Deepest nesting of mappings/sequences accepted.
MAX_DEPTH: Final = 64
#: Largest number of nodes a YAML document may have, its aliases expanded (a real policy
#: has a few hundred; the cap keeps "billion laughs" and giant files fast to refuse).
MAX_NODES: Final = 50_000
#: Longest ``extends`` chain (see docs/design.md, 'Validation rules').
MAX_EXTENDS_DEPTH: Final = 8
#: Suffixes of policy files.
POLICY_SUFFIXES: Final = (".yaml", ".yml", ".toml")

# ------------------------------------------------------------------------- positions

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


def display_name(path: Path) -> str:
    """How a file given by the user is named in issues: as given, with forward slashes
    (a file of the package's bundle as ``builtin:NAME``, never a path into a virtualenv)."""
    return builtin_name(path) or path.as_posix()


def shown_path(path: Path) -> str:
    """How a file found by ctxpolicy (a parent policy, a template) is named in messages:
    relative to the working folder when it is below it, ``builtin:NAME`` for a file of
    the package's bundle, else as it is."""
    bundled = builtin_name(path.absolute())
    if bundled is not None:
        return bundled
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return display_name(path)
    return display_name(path if relative.startswith("..") else Path(relative))


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


# ---------------------------------------------------------------------------- issues

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class PolicyIssue:
    """A problem in a policy file.

    Attributes:
        file: Path of the file the offending value comes from (a parent file when
            the value was inherited through ``extends``).
        line: 1-based line of the offending node (0 when unknown).
        column: 1-based column of the offending node (0 when unknown).
        path: JSON path of the offending value, e.g. ``$.budget.ratios.query``.
        message: What is wrong, in words a policy author understands.
        rule: Stable rule id, e.g. ``schema.type`` or ``order.starts-with-system-prompt``.
        severity: ``error`` (fails validation) or ``warning``.
    """

    file: str
    line: int
    column: int
    path: str
    message: str
    rule: str
    severity: Severity = "error"

    def format_text(self) -> str:
        """Render as ``FILE:LINE:COL: PATH: MESSAGE [RULE]``; an issue about a whole file
        or a variable (line 0) as ``FILE: MESSAGE [RULE]``, no made-up ``0:0``."""
        sev = "" if self.severity == "error" else "warning: "
        if self.line <= 0:
            path = "" if self.path in ("", "$") else f"{self.path}: "
            return f"{self.file}: {path}{sev}{self.message} [{self.rule}]"
        return (
            f"{self.file}:{self.line}:{self.column}: {self.path}: {sev}{self.message} [{self.rule}]"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data with the stable keys of the JSON reporter."""
        return asdict(self)

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        """Order issues by file, then position, then path."""
        return (self.file, self.line, self.column, self.path)


@dataclass(frozen=True, slots=True)
class Finding:
    """A rule's verdict on a JSON path of the effective policy, before it is placed in a file.

    Attributes:
        path: JSON path of the offending value.
        message: What is wrong.
        rule: Stable rule id.
        severity: ``error`` or ``warning``.
        line_offset: Lines below the start of the value's text (a line inside an
            inline template); None to point at the key itself.
        file: The problem is inside another file (e.g. a ``template_file``): its name.
        line: With ``file``: 1-based line in that file.
        column: With ``file``: 1-based column in that file.
    """

    path: JsonPath
    message: str
    rule: str
    severity: Severity = "error"
    line_offset: int | None = None
    file: str | None = None
    line: int = 0
    column: int = 0


def place_finding(
    finding: Finding, sourcemap: Mapping[JsonPath, Location], *, default_file: str
) -> PolicyIssue:
    """Turn a finding into a `PolicyIssue` at the deepest known location of its path."""
    path = format_path(finding.path)
    if finding.file is not None:
        return PolicyIssue(
            finding.file,
            finding.line,
            finding.column,
            path,
            finding.message,
            finding.rule,
            finding.severity,
        )
    where = locate(sourcemap, finding.path, default=default_file)
    line, column = where.line, where.column
    if finding.line_offset is not None and where.line > 0:
        line, column = (where.value_line or where.line) + finding.line_offset, 1
    return PolicyIssue(
        where.file, line, column, path, finding.message, finding.rule, finding.severity
    )


def issue_at(where: Location, path: JsonPath, message: str, rule: str) -> PolicyIssue:
    """An error `PolicyIssue` at ``where`` about the value at ``path``."""
    return PolicyIssue(where.file, where.line, where.column, format_path(path), message, rule)


def sorted_issues(issues: Iterable[PolicyIssue]) -> tuple[PolicyIssue, ...]:
    """``issues`` without duplicates, by file, position, path and rule."""
    return tuple(sorted(dict.fromkeys(issues), key=lambda i: (*i.sort_key, i.rule)))


__all__ = [
    "MAX_DEPTH",
    "MAX_EXTENDS_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_NODES",
    "POLICY_SUFFIXES",
    "Finding",
    "JsonPath",
    "Location",
    "PolicyIssue",
    "Severity",
    "SourceMap",
    "display_name",
    "format_path",
    "issue_at",
    "locate",
    "place_finding",
    "shown_path",
    "sorted_issues",
]
