"""Validation in two passes: the JSON Schema (structure), then semantic rules.

`check_policy` runs the semantic rules on any typed `Policy` (built in code or
loaded); `validate_data` runs both passes on plain data and places every finding
in its file, line and column.

One run reports everything it can: when the schema finds errors, the semantic rules
still run on the parts of the document that are structurally valid (each rule whose
sections passed the schema; see `ctxpolicy.validation.sections`), so fixing the
reported problems does not reveal new ones. Validation never imports
`ctxpolicy.loading`: the loader reads the files and hands the data over.

The pydantic models (and pydantic) are imported the first time a `Policy` is built.
``build_policy(..., typed=False)``, what ``ctxpolicy validate`` asks for, checks a
document the schema accepted as a `ctxpolicy.validation.plain.PlainPolicy` instead: the
same findings, without pydantic (docs/design.md, 'Validation without the models').
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, MutableMapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ctxpolicy.diagnostics import Finding, JsonPath, Location, PolicyIssue, place_finding
from ctxpolicy.schema import load_schema
from ctxpolicy.validation.files import check_files
from ctxpolicy.validation.plain import PlainPolicy
from ctxpolicy.validation.schema_check import check_schema, did_you_mean
from ctxpolicy.validation.sections import BrokenSections
from ctxpolicy.validation.semantic import RULE_SECTIONS, RULES, check_semantics

if TYPE_CHECKING:
    from ctxpolicy.policy import Policy

#: The sections the file rules read (each layer and each process on its own).
FILE_RULE_SECTIONS = frozenset({"layers.*", "processes.*", "tools"})


#: What a run has worked out already (``DocumentCache.checks``): checks of shared values
#: and files, for the next policy that shares them.
Memo = MutableMapping[Hashable, Any]


def check_policy(policy: Policy, *, memo: Memo | None = None) -> list[Finding]:
    """Every semantic finding for a typed policy (order, budget, persistence, processes,
    template and path rules)."""
    return [*check_semantics(policy), *check_files(policy, memo=memo)]


def _models() -> ModuleType:
    """`ctxpolicy.policy` (and pydantic), imported the first time a `Policy` is built."""
    from ctxpolicy import policy  # declared lazy import (docs/design.md)

    return policy


def _model_findings(exc: ValueError) -> list[Finding]:
    errors = getattr(exc, "errors", None)  # a pydantic ValidationError has its errors
    if not callable(errors):
        return [Finding((), str(exc), "schema.model")]
    findings = []
    for error in errors():
        loc = error["loc"]
        path = tuple(p for p in loc if isinstance(p, int) or ("[" not in p and "-" not in p))
        findings.append(Finding(path, error["msg"], "schema.model"))
    return findings


def _typed(data: Any, *, source: Path | None, base_dirs: Mapping[str, Path] | None) -> Policy:
    """The `Policy` of structurally valid data, with the folders its paths resolve against.

    Raises:
        ValueError: the models refuse the data.
    """
    policy: Policy = _models().Policy.model_validate(data)
    policy._source = source
    policy._base_dirs = dict(base_dirs or {})
    return policy


def _rules_on_valid_parts(
    data: Any,
    errors: list[Finding],
    *,
    source: Path | None,
    base_dirs: Mapping[str, Path] | None,
    memo: Memo | None = None,
) -> list[Finding]:
    """The semantic findings of the parts of ``data`` the schema ``errors`` leave intact."""
    broken = BrokenSections.of(errors)
    if broken.everything or not isinstance(data, dict):
        return []
    try:
        policy = _typed(broken.prune(data), source=source, base_dirs=base_dirs)
    except ValueError:
        return []  # what is left still does not make a policy: the schema errors say why
    known = frozenset(load_schema()["properties"])  # the top-level keys of the format
    findings = [
        finding
        for rule in RULES
        if broken.allows(RULE_SECTIONS[rule], known=known)
        for finding in rule(policy)
    ]
    if broken.allows(FILE_RULE_SECTIONS, known=known):
        findings.extend(check_files(policy, memo=memo))
    return findings


def build_policy(
    data: Any,
    *,
    source: Path | None = None,
    base_dirs: Mapping[str, Path] | None = None,
    memo: Memo | None = None,
    typed: bool = True,
) -> tuple[Policy | None, list[Finding]]:
    """Both passes over plain data.

    Args:
        data: The policy data.
        source: The policy file (relative paths in it resolve against its folder).
        base_dirs: The folder each relative path resolves against (see `Policy`).
        memo: What this run has worked out already (`Memo`); None works it all out.
            Values in ``data`` are remembered by identity: ``data`` must not change.
        typed: False: only the findings are wanted. A document the schema accepts is then
            checked as a `PlainPolicy`, without building its `Policy` (and without
            importing pydantic); the policy returned is None, the findings the same.

    Returns:
        The typed policy (None when the structure is invalid, or ``typed`` is False) and
        every finding: the schema's, and the semantic rules' on every part the schema
        errors leave intact.
    """
    findings = check_schema(data, memo=memo)
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        partial = _rules_on_valid_parts(data, errors, source=source, base_dirs=base_dirs, memo=memo)
        return None, [*findings, *partial]
    if not typed:
        plain = PlainPolicy(data, source=source, base_dirs=base_dirs, memo=memo)
        return None, [*findings, *check_policy(plain.as_policy(), memo=memo)]
    try:
        policy = _typed(data, source=source, base_dirs=base_dirs)
    except ValueError as exc:  # the schema and the models disagree: still report, never raise
        return None, [*findings, *_model_findings(exc)]
    return policy, [*findings, *check_policy(policy, memo=memo)]


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
    memo: Memo | None = None,
    typed: bool = True,
) -> tuple[Policy | None, list[PolicyIssue]]:
    """Both passes, with every finding placed at its file, line and column (``memo`` and
    ``typed``: see `build_policy`)."""
    policy, findings = build_policy(
        data, source=source, base_dirs=base_dirs, memo=memo, typed=typed
    )
    if policy is not None:
        policy._order_locations = _order_locations(policy, sourcemap)
        policy._sourcemap = sourcemap
    issues = [place_finding(f, sourcemap, default_file=file) for f in findings]
    if any(i.severity == "error" for i in issues):
        policy = None
    return policy, issues


__all__ = [
    "FILE_RULE_SECTIONS",
    "RULES",
    "RULE_SECTIONS",
    "Finding",
    "Memo",
    "build_policy",
    "check_policy",
    "check_schema",
    "did_you_mean",
    "place_finding",
    "validate_data",
]
