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
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxpolicy.builtin import is_builtin, missing_message, resolve_ref
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
    from_child, from_parent = child.get, parent.get
    stack: list[tuple[JsonPath, Any]] = [((), merged)]
    push, pop = stack.append, stack.pop
    while stack:
        path, value = pop()
        where = from_child(path) or from_parent(path)
        if where is not None:
            out[path] = where
        kind = type(value)
        if kind is dict or (kind is not list and isinstance(value, dict)):
            for key, item in value.items():
                push(((*path, key), item))
        elif kind is list or isinstance(value, list):
            for index, item in enumerate(value):
                push(((*path, index), item))
    return out


#: No value at this path of the parent's data.
_ABSENT: Any = object()


def _over_parent(
    merged: Any,
    parent_data: Any,
    parent: Mapping[JsonPath, Location],
    child: Mapping[JsonPath, Location],
) -> SourceMap:
    """`merge_sourcemaps` of ``merged`` over one parent, in one walk.

    The same map, in the same order, as ``merge_sourcemaps(merged, merge_sourcemaps(
    parent_data, {}, parent), child)``: the parent's location of a path counts only where
    ``parent_data`` has a value (the walk follows it alongside ``merged``).
    """
    out: SourceMap = {}
    from_child, from_parent = child.get, parent.get
    stack: list[tuple[JsonPath, Any, Any]] = [((), merged, parent_data)]
    push, pop = stack.append, stack.pop
    while stack:
        path, value, under = pop()
        where = from_child(path) or (None if under is _ABSENT else from_parent(path))
        if where is not None:
            out[path] = where
        if isinstance(value, dict):
            below = under if isinstance(under, dict) else {}
            for key, item in value.items():
                push(((*path, key), item, below.get(key, _ABSENT)))
        elif isinstance(value, list):
            count = len(under) if isinstance(under, list) else 0
            for index, item in enumerate(value):
                push(((*path, index), item, under[index] if index < count else _ABSENT))
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


def copy_data(value: Any) -> Any:
    """A deep copy of plain policy data (mappings, lists and immutable scalars).

    What the readers produce holds nothing else, and no value twice (an alias is read as
    a copy), so this equals `copy.deepcopy` on it, several times faster.
    """
    if type(value) is dict:
        return {key: copy_data(item) for key, item in value.items()}
    if type(value) is list:
        return [copy_data(item) for item in value]
    if isinstance(value, dict | list):  # a subclass: not from a reader, copied the slow way
        return copy.deepcopy(value)
    return value


class DocumentCache:
    """The parsed policy documents of one run, so a base many team files extend is parsed once.

    Keyed by the path as the reference names it (normalized) with the file's size and
    modification time: a file changed during the run is parsed again, and every issue
    keeps the file name it would have had without the cache. Each read hands out a copy of
    the data, so no caller can change what the next one sees; `sharing` gives a view that
    hands out the cached data itself, for a reader that never changes it.

    Attributes:
        checks: What validation worked out on this run's documents and files, for the
            next file that shares them (see `ctxpolicy.validation.validate_data`).
    """

    def __init__(self) -> None:
        self._documents: dict[
            tuple[str, int, int], tuple[ParsedDocument | None, list[PolicyIssue]]
        ] = {}
        self.checks: dict[Hashable, Any] = {}
        self._copies = True

    def sharing(self) -> DocumentCache:
        """This cache, handing out its documents without copying them.

        Their data is shared by every reader: only for one that never changes it (as
        `ctxpolicy.loading.resolve_policy`, which validates the merged data and hands out
        only the typed policy built from it).
        """
        view = DocumentCache.__new__(DocumentCache)
        view._documents, view.checks, view._copies = self._documents, self.checks, False
        return view

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
        if document is None or not self._copies:
            return document, list(issues)
        copied = ParsedDocument(document.file, copy_data(document.data), dict(document.sourcemap))
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
    parents: list[MergedDocument] = []
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
        parents.append(parent)
        chain.extend(c for c in parent.chain if c not in chain)
    if not parents:
        return MergedDocument(path, document.data, document.sourcemap, (path,), tuple(all_issues))
    if len(parents) == 1:  # the usual case: one walk instead of two
        data = {k: v for k, v in (parents[0].data or {}).items() if k != "extends"}
        final = deep_merge(data, document.data)
        final_map = _over_parent(final, data, parents[0].sourcemap, document.sourcemap)
    else:
        merged: dict[str, Any] = {}
        merged_map: SourceMap = {}
        for parent in parents:
            data, smap = _without_extends(parent)
            new = deep_merge(merged, data)
            merged_map = merge_sourcemaps(new, merged_map, smap)
            merged = new
        final = deep_merge(merged, document.data)
        final_map = merge_sourcemaps(final, merged_map, document.sourcemap)
    return MergedDocument(path, final, final_map, (*chain, path), tuple(all_issues))


def _target(
    child: Path, ref: str, stack: tuple[Path, ...]
) -> tuple[tuple[Path, Path] | None, str, str]:
    """``((path, real path), "", "")`` of where ``ref`` points, or ``(None, rule, message)``
    when it may not be followed. ``builtin:NAME`` is a policy bundled with the package."""
    builtin = is_builtin(ref)
    if builtin:
        target = resolve_ref(ref)
        # a name that names no file of the bundle (or would leave it) is not found
        if not target.is_file():
            return None, "extends.missing", f"extends {ref!r}: {missing_message(ref)}"
    elif not ref or Path(ref).is_absolute() or ref.startswith(("/", "\\")):
        return None, "extends.absolute", f"extends {ref!r} must be a path relative to this file"
    else:
        target = Path(os.path.normpath(child.parent / ref))
    if target.suffix.lower() not in POLICY_SUFFIXES:
        suffixes = ", ".join(POLICY_SUFFIXES)
        return None, "extends.not-policy", f"extends {ref!r} is not a policy file ({suffixes})"
    if not builtin and not target.is_file():
        message = f"extends {ref!r}: parent policy {display_name(target)} not found"
        return None, "extends.missing", message
    return _checked(target, stack)


def _checked(target: Path, stack: tuple[Path, ...]) -> tuple[tuple[Path, Path] | None, str, str]:
    """`_target`'s cycle and depth checks of an existing parent file."""
    real = target.resolve()
    if real in stack:
        names = " -> ".join(shown_path(p) for p in (*stack, real))
        return None, "extends.cycle", f"extends cycle: {names}"
    if len(stack) > MAX_EXTENDS_DEPTH:
        return None, "extends.depth", f"extends chain deeper than {MAX_EXTENDS_DEPTH} files"
    return (target, real), "", ""


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
    found, rule, message = _target(child, ref, stack)
    if found is None:
        issues.append(issue_at(where, ref_path, message, rule))
        return None
    target, real = found
    parent = _resolve(target, (*stack, real), documents)
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


__all__ = [
    "DocumentCache",
    "MergedDocument",
    "copy_data",
    "deep_merge",
    "merge_sourcemaps",
    "resolve_extends",
]
