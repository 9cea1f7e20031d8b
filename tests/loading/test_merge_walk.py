"""A file that extends one parent gets its source map in one walk (`extends._over_parent`):
the same map, in the same order, as the two `merge_sourcemaps` walks it replaces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxpolicy.diagnostics import JsonPath, Location, SourceMap
from ctxpolicy.loading.extends import (
    _over_parent,
    _without_extends,
    deep_merge,
    merge_sourcemaps,
    resolve_extends,
)
from ctxpolicy.loading.read import read_document

ROOT = Path(__file__).resolve().parents[2]

_KEYS = st.sampled_from(["a", "b", "c", "extends", "layers", "x"])
_DATA = st.recursive(
    st.one_of(st.none(), st.integers(0, 3), st.sampled_from(["s", "t"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=3)),
    max_leaves=12,
)


def _paths(value: Any, path: JsonPath = ()) -> list[JsonPath]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


@st.composite
def _maps(draw: Any, data: Any, file: str) -> SourceMap:
    """A source map of some of ``data``'s paths, and of paths it does not have (a TOML
    scan can place keys the parsed data lacks)."""
    paths = _paths(data) + draw(st.lists(st.tuples(_KEYS, st.integers(0, 2)), max_size=3))
    chosen = [p for p in paths if draw(st.booleans())]
    return {p: Location(file, n + 1, 1, n + 1) for n, p in enumerate(chosen)}


def _reference(final: Any, data: dict[str, Any], smap: SourceMap, child: SourceMap) -> SourceMap:
    first = deep_merge({}, data)
    return merge_sourcemaps(final, merge_sourcemaps(first, {}, smap), child)


@settings(max_examples=500, deadline=None)
@given(st.data())
def test_one_walk_equals_two(draw: st.DataObject) -> None:
    parent = draw.draw(st.dictionaries(_KEYS, _DATA, max_size=4))
    child = draw.draw(st.dictionaries(_KEYS, _DATA, max_size=4))
    parent_map = draw.draw(_maps(parent, "parent"))
    child_map = draw.draw(_maps(child, "child"))
    data = {k: v for k, v in parent.items() if k != "extends"}
    smap = {p: loc for p, loc in parent_map.items() if p[:1] != ("extends",)}
    final = deep_merge(data, child)
    expected = _reference(final, data, smap, child_map)
    found = _over_parent(final, data, parent_map, child_map)
    assert found == expected
    assert list(found) == list(expected)


def test_the_bundled_team_policies() -> None:
    teams = sorted((ROOT / "policies" / "teams").glob("*.*"))
    assert teams
    for path in teams:
        merged = resolve_extends(path)
        assert merged.data is not None and len(merged.chain) == 2
        data, smap = _without_extends(resolve_extends(merged.chain[0]))
        document, _ = read_document(path)
        assert document is not None
        expected = _reference(merged.data, data, smap, document.sourcemap)
        assert merged.sourcemap == expected
        assert list(merged.sourcemap) == list(expected)
