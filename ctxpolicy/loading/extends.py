"""Resolve an ``extends`` chain into one merged document (see docs/design.md, 'Validation rules').

Parents merge in the order listed (a later parent wins), then the child on top:
mappings merge key by key (the child wins), everything else replaces. The merged source
map keeps, for every value, the location in the file it came from, so an inherited value
still points at its parent's line.

Every problem with a parent reference (absolute path, not a policy file, missing,
cycle, chain deeper than `MAX_EXTENDS_DEPTH`) is reported at the child's ``extends``
line; problems inside a parent are reported in the parent file.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxpolicy.diagnostics import (
    MAX_EXTENDS_DEPTH,
    POLICY_SUFFIXES,
    JsonPath,
    Location,
    PolicyIssue,
    SourceMap,
    display_name,
    issue_at,
    locate,
    shown_path,
)
from ctxpolicy.loading.read import ParsedDocument, read_document

#: Mappings that replace as a whole: a collector is one choice, not a set of defaults.
_REPLACED_KEYS = frozenset({"collector"})


@dataclass(frozen=True, slots=True)
class MergedDocument:
    """A policy file with its ``extends`` chain merged in.

    Attributes:
        file: The child file.
        data: Merged plain data (None when the file itself could not be read).
        sourcemap: JSON path -> location, in whichever file set the value.
        chain: Every file merged, parents before children.
        issues: Problems found while reading and merging.
    """

    file: Path
    data: dict[str, Any] | None
    sourcemap: SourceMap = field(default_factory=dict)
    chain: tuple[Path, ...] = ()
    issues: tuple[PolicyIssue, ...] = ()


def deep_merge(parent: Any, child: Any) -> Any:
    """``child`` over ``parent``: mappings merge key by key, lists and scalars replace.

    A layer's ``collector`` mapping replaces the parent's whole (merging two collectors
    of different types would make a third that neither file wrote).
    """
    if isinstance(parent, dict) and isinstance(child, dict):
        merged = dict(parent)
        for key, value in child.items():
            if key in parent and key not in _REPLACED_KEYS:
                merged[key] = deep_merge(parent[key], value)
            else:
                merged[key] = value
        return merged
    return child


def merge_sourcemaps(
    merged: Any, parent: Mapping[JsonPath, Location], child: Mapping[JsonPath, Location]
) -> SourceMap:
    """Source map of ``merged``: the child's location where the child set a path, else
    the parent's."""
    out: SourceMap = {}
    stack: list[tuple[JsonPath, Any]] = [((), merged)]
    while stack:
        path, value = stack.pop()
        where = child.get(path) or parent.get(path)
        if where is not None:
            out[path] = where
        if isinstance(value, dict):
            stack.extend(((*path, k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend(((*path, i), v) for i, v in enumerate(value))
    return out


def _parents(data: dict[str, Any]) -> list[tuple[JsonPath, str]]:
    value = data.get("extends")
    if isinstance(value, str):
        return [(("extends",), value)]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [(("extends", i), v) for i, v in enumerate(value)]
    return []  # missing, or a type error the schema reports


def _without_extends(parent: MergedDocument) -> tuple[dict[str, Any], SourceMap]:
    """A parent's data and source map, its own ``extends`` left out."""
    data = {k: v for k, v in (parent.data or {}).items() if k != "extends"}
    smap = {p: loc for p, loc in parent.sourcemap.items() if p[:1] != ("extends",)}
    return data, smap


class DocumentCache:
    """The parsed policy documents of one run, so a base many team files extend is parsed once.

    Keyed by the path as the reference names it (normalized) with the file's size and
    modification time: a file changed during the run is parsed again, and every issue
    keeps the file name it would have had without the cache. Each read hands out a copy of
    the data, so no caller can change what the next one sees.
    """

    def __init__(self) -> None:
        self._documents: dict[
            tuple[str, int, int], tuple[ParsedDocument | None, list[PolicyIssue]]
        ] = {}

    def read(self, path: Path) -> tuple[ParsedDocument | None, list[PolicyIssue]]:
        """`read_document`, parsed at most once per file version."""
        try:
            stat = path.stat()
        except OSError:
            return read_document(path)
        key = (str(path), stat.st_mtime_ns, stat.st_size)
        found = self._documents.get(key)
        if found is None:
            found = self._documents[key] = read_document(path)
        document, issues = found
        if document is None:
            return None, list(issues)
        copied = ParsedDocument(
            document.file, copy.deepcopy(document.data), dict(document.sourcemap)
        )
        return copied, list(issues)


def _read(
    path: Path, documents: DocumentCache | None
) -> tuple[ParsedDocument | None, list[PolicyIssue]]:
    return read_document(path) if documents is None else documents.read(path)


def _resolve(
    path: Path, stack: tuple[Path, ...], documents: DocumentCache | None = None
) -> MergedDocument:
    document, issues = _read(path, documents)
    if document is None:
        return MergedDocument(path, None, issues=tuple(issues))
    all_issues = list(issues)
    merged: dict[str, Any] = {}
    merged_map: SourceMap = {}
    chain: list[Path] = []
    for ref_path, ref in _parents(document.data):
        where = locate(document.sourcemap, ref_path, default=display_name(path))
        parent = _parent(
            path,
            ref,
            where=where,
            ref_path=ref_path,
            stack=stack,
            issues=all_issues,
            documents=documents,
        )
        if parent is None:
            continue
        data, smap = _without_extends(parent)
        new = deep_merge(merged, data)
        merged_map = merge_sourcemaps(new, merged_map, smap)
        merged = new
        chain.extend(c for c in parent.chain if c not in chain)
    if not chain:
        return MergedDocument(path, document.data, document.sourcemap, (path,), tuple(all_issues))
    final = deep_merge(merged, document.data)
    final_map = merge_sourcemaps(final, merged_map, document.sourcemap)
    return MergedDocument(path, final, final_map, (*chain, path), tuple(all_issues))


def _target(child: Path, ref: str, stack: tuple[Path, ...]) -> tuple[Path | None, str, str]:
    """Where ``ref`` points, or ``(None, rule, message)`` when it may not be followed."""
    if not ref or Path(ref).is_absolute() or ref.startswith(("/", "\\")):
        return None, "extends.absolute", f"extends {ref!r} must be a path relative to this file"
    if Path(ref).suffix.lower() not in POLICY_SUFFIXES:
        suffixes = ", ".join(POLICY_SUFFIXES)
        return None, "extends.not-policy", f"extends {ref!r} is not a policy file ({suffixes})"
    target = Path(os.path.normpath(child.parent / ref))
    if not target.is_file():
        message = f"extends {ref!r}: parent policy {display_name(target)} not found"
        return None, "extends.missing", message
    real = target.resolve()
    if real in stack:
        names = " -> ".join(shown_path(p) for p in (*stack, real))
        return None, "extends.cycle", f"extends cycle: {names}"
    if len(stack) > MAX_EXTENDS_DEPTH:
        return None, "extends.depth", f"extends chain deeper than {MAX_EXTENDS_DEPTH} files"
    return target, "", ""


def _parent(
    child: Path,
    ref: str,
    *,
    where: Location,
    ref_path: JsonPath,
    stack: tuple[Path, ...],
    issues: list[PolicyIssue],
    documents: DocumentCache | None = None,
) -> MergedDocument | None:
    target, rule, message = _target(child, ref, stack)
    if target is None:
        issues.append(issue_at(where, ref_path, message, rule))
        return None
    parent = _resolve(target, (*stack, target.resolve()), documents)
    issues.extend(parent.issues)
    if parent.data is None:
        message = f"extends {ref!r}: parent policy {display_name(target)} is invalid"
        issues.append(issue_at(where, ref_path, message, "extends.invalid-parent"))
        return None
    if "version" not in parent.data:
        message = (
            f"extends {ref!r}: {display_name(target)} is not a policy file (it has no 'version')"
        )
        issues.append(issue_at(where, ref_path, message, "extends.not-policy"))
        return None
    return parent


def resolve_extends(path: Path, *, documents: DocumentCache | None = None) -> MergedDocument:
    """Read ``path`` and merge its ``extends`` chain (never raises for bad input).

    Args:
        path: The policy file.
        documents: Documents already parsed in this run (`validate_paths` shares one
            across files, so a common base is parsed once); None parses every file.
    """
    return _resolve(path, (path.resolve(),), documents)


__all__ = ["DocumentCache", "MergedDocument", "deep_merge", "merge_sourcemaps", "resolve_extends"]
