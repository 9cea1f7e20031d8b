"""Base caps from ratios and redistribution of unused share."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ctxpolicy.budget import base_caps, redistribute_caps

# -- base_caps --------------------------------------------------------------------------


def test_ratio_layers_get_floor_of_their_share():
    caps = base_caps([("system", 0.1), ("history", 0.5), ("query", 0.05)], available=1000)
    assert caps == {"system": 100, "history": 500, "query": 50}
    assert list(caps) == ["system", "history", "query"]


def test_ratios_are_taken_as_written_not_as_binary_floats():
    # 0.29 * 100 == 28.999999999999996 in binary floating point
    assert base_caps([("a", 0.29)], available=100) == {"a": 29}
    assert base_caps([("a", 0.57)], available=100) == {"a": 57}


def test_layers_without_ratio_split_the_unassigned_share_equally():
    caps = base_caps(
        [("system", 0.2), ("knowledge", None), ("history", 0.5), ("memory", None)],
        available=1001,
    )
    # unassigned = floor(1001 * 0.3) = 300 -> 150 each
    assert caps == {"system": 200, "knowledge": 150, "history": 500, "memory": 150}


def test_the_bounds_of_a_ratio_are_allowed():
    # [0, 1] is closed at both ends: a layer may take everything, or nothing
    assert base_caps([("a", 1.0)], available=10) == {"a": 10}
    assert base_caps([("a", 1)], available=7) == {"a": 7}
    assert base_caps([("a", 0.0), ("b", None)], available=10) == {"a": 0, "b": 10}


def test_no_unassigned_share_left():
    assert base_caps([("a", 0.6), ("b", 0.4), ("c", None)], available=10) == {
        "a": 6,
        "b": 4,
        "c": 0,
    }
    assert base_caps([], available=10) == {}
    assert base_caps([("a", None)], available=0) == {"a": 0}


@pytest.mark.parametrize(
    ("layers", "available", "message"),
    [
        ([("a", 0.5)], -1, "available must be >= 0, got -1"),
        ([("a", 0.5), ("a", 0.1)], 10, "layer 'a' appears twice"),
        ([("a", 1.5)], 10, r"ratio of layer 'a' must be in \[0, 1\], got 1.5"),
        ([("a", -0.1)], 10, r"ratio of layer 'a' must be in \[0, 1\]"),
        ([("a", float("nan"))], 10, r"ratio of layer 'a' must be in \[0, 1\]"),
        ([("a", 0.7), ("b", 0.4)], 10, "ratios sum to 1.1, more than 1"),
    ],
)
def test_base_caps_errors(layers, available, message):
    with pytest.raises(ValueError, match=message):
        base_caps(layers, available=available)


ratios = st.one_of(st.none(), st.floats(min_value=0, max_value=1).map(lambda r: round(r, 3)))


@given(st.lists(ratios, max_size=8), st.integers(min_value=0, max_value=1_000_000))
@settings(deadline=None)
def test_base_caps_properties(layer_ratios, available):
    assume(sum(r for r in layer_ratios if r is not None) <= 1)
    layers = [(f"l{i}", r) for i, r in enumerate(layer_ratios)]
    caps = base_caps(layers, available=available)
    assert list(caps) == [name for name, _ in layers]
    assert sum(caps.values()) <= available
    assert all(cap >= 0 for cap in caps.values())
    for name, ratio in layers:
        if ratio is not None:
            assert abs(caps[name] - ratio * available) < 1 + 1e-6 * available
    shared = {caps[name] for name, ratio in layers if ratio is None}
    assert len(shared) <= 1


# -- redistribute_caps ------------------------------------------------------------------


def test_unused_share_goes_to_layers_that_need_more_in_order():
    caps = {"system": 100, "knowledge": 300, "history": 400, "query": 100}
    demands = {"system": 40, "knowledge": 900, "history": 500, "query": 20}
    result = redistribute_caps(caps, demands, order=list(caps), available=1000)
    # unused: 60 (system) + 80 (query) + 100 slack = 240 -> all to knowledge (first in order)
    assert result == {"system": 40, "knowledge": 540, "history": 400, "query": 20}


def test_later_layers_get_what_earlier_ones_leave():
    caps = {"a": 100, "b": 100, "c": 100}
    demands = {"a": 0, "b": 150, "c": 180}
    assert redistribute_caps(caps, demands, order=["a", "b", "c"], available=300) == {
        "a": 0,
        "b": 150,
        "c": 150,
    }
    assert redistribute_caps(caps, demands, order=["c", "b", "a"], available=300) == {
        "c": 180,
        "b": 120,
        "a": 0,
    }


def test_nothing_to_redistribute():
    caps = {"a": 10, "b": 10}
    assert redistribute_caps(caps, {"a": 10, "b": 99}, order=["a", "b"], available=20) == caps


@pytest.mark.parametrize(
    ("caps", "demands", "order", "available", "message"),
    [
        ({"a": 1}, {"a": 1}, ["a", "b"], 5, "order must name every layer of caps exactly once"),
        ({"a": 1}, {"a": 1}, ["a", "a"], 5, "order must name every layer of caps exactly once"),
        ({"a": 1, "b": 1}, {"a": 1}, ["a", "b"], 5, r"no demand for layer\(s\) b"),
        ({"a": 1}, {"a": -1}, ["a"], 5, "demand of layer 'a' is negative"),
        ({"a": -1}, {"a": 1}, ["a"], 5, "cap of layer 'a' is negative"),
        ({"a": 6}, {"a": 1}, ["a"], 5, r"caps sum to 6, more than available \(5\)"),
    ],
)
def test_redistribute_errors(caps, demands, order, available, message):
    with pytest.raises(ValueError, match=message):
        redistribute_caps(caps, demands, order=order, available=available)


@st.composite
def budgets(draw):
    n = draw(st.integers(min_value=1, max_value=8))
    names = [f"l{i}" for i in range(n)]
    available = draw(st.integers(min_value=0, max_value=10_000))
    weights = draw(st.lists(st.integers(0, 100), min_size=n, max_size=n))
    total = sum(weights) or 1
    # caps that never exceed available (sometimes with slack left over)
    fill = draw(st.floats(min_value=0, max_value=1))
    caps = {name: math.floor(available * fill * w / total) for name, w in zip(names, weights)}
    demands = {name: draw(st.integers(0, 2 * available + 10)) for name in names}
    order = draw(st.permutations(names))
    return caps, demands, order, available


@given(budgets())
@settings(deadline=None)
def test_redistribute_properties(case):
    caps, demands, order, available = case
    result = redistribute_caps(caps, demands, order=order, available=available)
    assert list(result) == list(order)
    assert sum(result.values()) <= available
    for name in order:
        floor = min(demands[name], caps[name])
        assert result[name] >= floor  # nobody goes below min(demand, base cap)
        assert result[name] <= max(demands[name], caps[name])
        assert result[name] <= demands[name]  # never more than it needs
    extra = {name: result[name] - min(demands[name], caps[name]) for name in order}
    for position, name in enumerate(order):
        if result[name] < demands[name]:
            # short of its demand: the pool ran dry here, nobody after it got extra
            assert sum(result.values()) == available or extra[name] == 0
            assert all(extra[later] == 0 for later in order[position + 1 :])
    if all(result[name] == demands[name] for name in order):
        assert sum(demands.values()) <= available
    else:
        assert sum(result.values()) == available  # share is never left unused while needed
