"""Loading policy files: parse (YAML/TOML), merge ``extends``, apply the environment,
validate, and return a frozen `Policy` (or every issue found).

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
from ctxpolicy.loading.sourcemap import JsonPath, Location, SourceMap, format_path

__all__ = [
    "JsonPath",
    "LoadResult",
    "Location",
    "Provenance",
    "SourceMap",
    "explain_policy",
    "format_path",
    "iter_policy_files",
    "load_policy",
    "resolve_policy",
    "validate_paths",
]
