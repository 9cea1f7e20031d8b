"""Reporters of ``ctxpolicy validate``: text, json and github, chosen by name.

Every reporter turns the same inputs (the files checked and the issues found) into
one string; the JSON shape is stable: ``{"valid": bool, "files": [...], "issues": [...]}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

from ctxpolicy.issues import PolicyIssue

Reporter = Callable[[Sequence[str], Sequence[PolicyIssue]], str]


def _errors(issues: Sequence[PolicyIssue]) -> int:
    return sum(1 for i in issues if i.severity == "error")


def report_text(files: Sequence[str], issues: Sequence[PolicyIssue]) -> str:
    """``FILE:LINE:COL: PATH: MESSAGE [RULE]`` per issue, then a summary line."""
    lines = [issue.format_text() for issue in issues]
    errors = _errors(issues)
    warnings = len(issues) - errors
    if errors:
        lines.append(f"{errors} error(s), {warnings} warning(s) in {len(files)} file(s)")
    else:
        extra = f", {warnings} warning(s)" if warnings else ""
        lines.append(f"{len(files)} file(s) valid{extra}")
    return "\n".join(lines) + "\n"


def report_json(files: Sequence[str], issues: Sequence[PolicyIssue]) -> str:
    """``{"valid": bool, "files": [...], "issues": [PolicyIssue dicts]}``."""
    payload = {
        "valid": _errors(issues) == 0,
        "files": list(files),
        "issues": [issue.to_dict() for issue in issues],
    }
    return json.dumps(payload, indent=2, ensure_ascii=False) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def report_github(files: Sequence[str], issues: Sequence[PolicyIssue]) -> str:
    """GitHub Actions workflow commands: ``::error file=F,line=L,col=C::MESSAGE``."""
    lines = []
    for issue in issues:
        command = "error" if issue.severity == "error" else "warning"
        props = (
            f"file={_escape_property(issue.file)},line={max(issue.line, 1)},"
            f"col={max(issue.column, 1)},title={_escape_property(issue.rule)}"
        )
        message = _escape_data(f"{issue.path}: {issue.message} [{issue.rule}]")
        lines.append(f"::{command} {props}::{message}")
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


__all__ = ["REPORTERS", "Reporter", "get_reporter", "report_github", "report_json", "report_text"]
