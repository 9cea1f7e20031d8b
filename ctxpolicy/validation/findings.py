"""`Finding`: a rule's verdict on a JSON path, before it is placed in a file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ctxpolicy.issues import PolicyIssue, Severity
from ctxpolicy.loading.sourcemap import JsonPath, Location, format_path, locate


@dataclass(frozen=True, slots=True)
class Finding:
    """A problem at a JSON path of the effective policy.

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


__all__ = ["Finding", "place_finding"]
