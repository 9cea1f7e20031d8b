"""Deep merge for ``extends``: mappings merge (child wins), everything else replaces.

The merged source map keeps, for every value, the location in the file it came from,
so an inherited value still points at its parent's line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxpolicy.loading.sourcemap import JsonPath, Location, SourceMap

#: Mappings that replace as a whole: a collector is one choice, not a set of defaults.
_REPLACED_KEYS = frozenset({"collector"})


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


__all__ = ["deep_merge", "merge_sourcemaps"]
