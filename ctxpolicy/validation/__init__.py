"""Validation in two passes: the JSON Schema (structure), then semantic rules.

`check_policy` runs the semantic rules on any typed `Policy` (built in code or
loaded); `validate_data` runs both passes on plain data and places every finding
in its file, line and column.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctxpolicy.issues import PolicyIssue
from ctxpolicy.loading.sourcemap import JsonPath, Location
from ctxpolicy.policy import Policy
from ctxpolicy.validation.files import check_files
from ctxpolicy.validation.findings import Finding, place_finding
from ctxpolicy.validation.schema_check import check_schema, did_you_mean
from ctxpolicy.validation.semantic import RULES, check_semantics


def check_policy(policy: Policy) -> list[Finding]:
    """Every semantic finding for a typed policy (order, budget, persistence, processes,
    template and path rules)."""
    return [*check_semantics(policy), *check_files(policy)]


def _model_findings(exc: Exception) -> list[Finding]:
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return [Finding((), str(exc), "schema.model")]
    findings = []
    for error in exc.errors():
        loc = error["loc"]
        path = tuple(p for p in loc if isinstance(p, int) or ("[" not in p and "-" not in p))
        findings.append(Finding(path, error["msg"], "schema.model"))
    return findings


def build_policy(
    data: Any,
    *,
    source: Path | None = None,
    base_dirs: Mapping[str, Path] | None = None,
) -> tuple[Policy | None, list[Finding]]:
    """Both passes over plain data.

    Returns:
        The typed policy (None when the structure is invalid) and every finding.
    """
    findings = check_schema(data)
    if any(f.severity == "error" for f in findings):
        return None, findings
    try:
        policy = Policy.model_validate(data)
    except ValueError as exc:  # the schema and the models disagree: still report, never raise
        return None, [*findings, *_model_findings(exc)]
    policy._source = source
    policy._base_dirs = dict(base_dirs or {})
    return policy, [*findings, *check_policy(policy)]


def _order_locations(policy: Policy, sourcemap: Mapping[JsonPath, Location]) -> dict[str, str]:
    """``file:line:col`` of each layer's ``order`` entry that a file set."""
    found: dict[str, str] = {}
    for index, name in enumerate(policy.order):
        where = sourcemap.get(("order", index))
        if where is not None and where.line > 0 and not where.file.startswith("<"):
            found.setdefault(name, where.describe())
    return found


def validate_data(
    data: Any,
    sourcemap: Mapping[JsonPath, Location],
    *,
    file: str,
    source: Path | None = None,
    base_dirs: Mapping[str, Path] | None = None,
) -> tuple[Policy | None, list[PolicyIssue]]:
    """Both passes, with every finding placed at its file, line and column."""
    policy, findings = build_policy(data, source=source, base_dirs=base_dirs)
    if policy is not None:
        policy._order_locations = _order_locations(policy, sourcemap)
    issues = [place_finding(f, sourcemap, default_file=file) for f in findings]
    if any(i.severity == "error" for i in issues):
        policy = None
    return policy, issues


__all__ = [
    "RULES",
    "Finding",
    "build_policy",
    "check_policy",
    "check_schema",
    "did_you_mean",
    "place_finding",
    "validate_data",
]
