"""Loading policy files: parse (YAML/TOML), merge ``extends``, apply the environment,
validate, and return a frozen `Policy` (or every issue found).

The pipeline reads load -> validate: `ctxpolicy.loading.loader` reads and merges the
files, then hands the data to `ctxpolicy.validation` (which never imports loading).

Public entry points: `load_policy`, `validate_paths`, `resolve_policy` (the full
`LoadResult` with source map and issues) and `explain_policy` (where each effective
value came from).
"""

from __future__ import annotations

from ctxpolicy.loading.loader import (
    LoadResult,
    Provenance,
    explain_policy,
    iter_policy_files,
    load_policy,
    resolve_policy,
    validate_paths,
)

__all__ = [
    "LoadResult",
    "Provenance",
    "explain_policy",
    "iter_policy_files",
    "load_policy",
    "resolve_policy",
    "validate_paths",
]
