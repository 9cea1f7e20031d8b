"""Reporters of ``ctxpolicy validate``: text, json and github, chosen by name.

Every reporter turns the same inputs (the files checked and the issues found) into
one string; the JSON shape is stable: ``{"format_version": 1, "valid": bool,
"files": [...], "issues": [...]}``.

An issue about a whole file (missing, unreadable: line 0 in `PolicyIssue`) has no
position, and no reporter invents one: text reads ``FILE: MESSAGE [RULE]``, JSON gives
``"line": null, "column": null``, github an annotation with ``file=`` only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ctxpolicy.diagnostics import PolicyIssue
from ctxpolicy.render import FORMAT_VERSION

Reporter = Callable[[Sequence[str], Sequence[PolicyIssue]], str]


def has_position(issue: PolicyIssue) -> bool:
    """False for an issue about a whole file (missing, unreadable): no line to point at."""
    return issue.line > 0


def format_issue(issue: PolicyIssue) -> str:
    """One issue as text: ``FILE:LINE:COL: PATH: MESSAGE [RULE]``, or ``FILE: MESSAGE [RULE]``
    for an issue about a whole file (no made-up ``0:0``)."""
    return issue.format_text()


def json_issue(issue: PolicyIssue) -> dict[str, Any]:
    """The JSON form of an issue: `PolicyIssue.to_dict`, position null when it has none."""
    data = issue.to_dict()
    if not has_position(issue):
        data.update(line=None, column=None)
    return data


def _errors(issues: Sequence[PolicyIssue]) -> int:
    return sum(1 for i in issues if i.severity == "error")


def report_text(files: Sequence[str], issues: Sequence[PolicyIssue]) -> str:
    """``FILE:LINE:COL: PATH: MESSAGE [RULE]`` per issue, then a summary line."""
    lines = [format_issue(issue) for issue in issues]
    errors = _errors(issues)
    warnings = len(issues) - errors
    if errors:
        lines.append(f"{errors} error(s), {warnings} warning(s) in {len(files)} file(s)")
    else:
        extra = f", {warnings} warning(s)" if warnings else ""
        lines.append(f"{len(files)} file(s) valid{extra}")
    return "\n".join(lines) + "\n"


def report_json(files: Sequence[str], issues: Sequence[PolicyIssue]) -> str:
    """``{"format_version": 1, "valid": bool, "files": [...], "issues": [...]}``."""
    payload = {
        "format_version": FORMAT_VERSION,
        "valid": _errors(issues) == 0,
        "files": list(files),
        "issues": [json_issue(issue) for issue in issues],
    }
    return json.dumps(payload, indent=2, ensure_ascii=False) + "\n"


def escape_data(text: str) -> str:
    """Escape the message of a GitHub workflow command (``%``, CR, LF)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a property value of a GitHub workflow command (also ``:`` and ``,``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_command(issue: PolicyIssue) -> str:
    """``::error file=F,line=L,col=C,title=RULE::PATH: MESSAGE [RULE]`` (or ``::warning``);
    an issue about a whole file gets ``file=`` and ``title=`` only."""
    command = "error" if issue.severity == "error" else "warning"
    props = [f"file={escape_property(issue.file)}"]
    if has_position(issue):
        props += [f"line={issue.line}", f"col={max(issue.column, 1)}"]
        text = f"{issue.path}: {issue.message} [{issue.rule}]"
    else:
        text = format_issue(issue).removeprefix(f"{issue.file}: ")
    props.append(f"title={escape_property(issue.rule)}")
    return f"::{command} {','.join(props)}::{escape_data(text)}"


def report_github(files: Sequence[str], issues: Sequence[PolicyIssue]) -> str:
    """GitHub Actions workflow commands: ``::error file=F,line=L,col=C::MESSAGE``."""
    lines = [github_command(issue) for issue in issues]
    if not issues:
        lines.append(f"::notice::{len(files)} policy file(s) valid")
    return "\n".join(lines) + "\n"


REPORTERS: Mapping[str, Reporter] = {
    "text": report_text,
    "json": report_json,
    "github": report_github,
}


def get_reporter(name: str) -> Reporter:
    """The reporter called ``name``.

    Raises:
        ValueError: no reporter has that name.
    """
    try:
        return REPORTERS[name]
    except KeyError:
        known = ", ".join(REPORTERS)
        raise ValueError(f"unknown format {name!r}; choose one of {known}") from None


__all__ = [
    "FORMAT_VERSION",
    "REPORTERS",
    "Reporter",
    "escape_data",
    "escape_property",
    "format_issue",
    "get_reporter",
    "github_command",
    "has_position",
    "json_issue",
    "report_github",
    "report_json",
    "report_text",
]
