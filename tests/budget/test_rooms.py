"""`history_room` and `wide_recall_cap`: the two rooms the composer asks the budget for.

Both are pure functions of a plan (and the demands or the report's layers); each test
states the exact number the docstring's rule gives.
"""

from __future__ import annotations

import pytest

from ctxpolicy.budget import base_caps, history_room, redistribute_caps, wide_recall_cap
from ctxpolicy.plan import plan_layers
from ctxpolicy.policy import Policy
from ctxpolicy.report import LayerReport


def _plan(*, redistribute: bool = True):
    policy = Policy.model_validate(
        {
            "version": 1,
            "name": "rooms",
            "model": {"context_window": 1_000, "tokenizer": "approximate"},
            "budget": {
                "output_reserve": 0.0,
                "ratios": {
                    "system_prompt": 0.1,
                    "notes__context": 0.2,
                    "checkpoint_messages": 0.5,
                    "query": 0.1,
                },
                "redistribute": redistribute,
            },
            "order": ["system_prompt", "notes__context", "checkpoint_messages", "query"],
            "layers": {"notes__context": {"role": "system"}},
            "processes": {"p": {"checkpoint_messages": True, "query": "runtime"}},
            "default_process": "p",
        }
    )
    return plan_layers(policy, "p")


def test_history_room_is_available_minus_what_the_others_keep():
    plan = _plan()
    caps = {layer.name: layer.cap for layer in plan.layers}
    assert caps == {
        "system_prompt": 100,
        "notes__context": 200,
        "checkpoint_messages": 500,
        "query": 100,
    }
    # the others keep min(cap, demand): 30 + 200 (capped) + 0; the history's own demand
    # (whatever the composer put there) is not counted
    demands = {"system_prompt": 30, "notes__context": 900, "checkpoint_messages": 777, "query": 0}
    assert history_room(plan, demands, "checkpoint_messages") == 1_000 - 230


def test_history_room_is_never_below_the_history_cap():
    plan = _plan()
    demands = {"system_prompt": 100, "notes__context": 200, "checkpoint_messages": 0, "query": 100}
    assert history_room(plan, demands, "checkpoint_messages") == 600
    # a room asked for a layer the plan lacks is what the others leave
    assert history_room(plan, demands, "missing") == 1_000 - 400


def test_wide_recall_cap_gives_a_lone_recall_layer_what_the_others_do_not_use():
    plan = _plan()

    def layer(name, *, demand, base_cap, tokens, included=True):
        return LayerReport(
            name, "block", included, "r", demand=demand, base_cap=base_cap, tokens=tokens
        )

    layers = [
        layer("system_prompt", demand=40, base_cap=100, tokens=40),  # keeps its demand: 40
        layer("notes__context", demand=900, base_cap=200, tokens=250),  # uses more: 250
        layer("checkpoint_messages", demand=0, base_cap=None, tokens=300),  # no base cap: 300
        layer("query", demand=5, base_cap=100, tokens=0, included=False),  # not included: 0
        layer("zero__context", demand=50, base_cap=0, tokens=0),  # ratio 0, nothing sent: 0
        layer("recall__context", demand=999, base_cap=100, tokens=0),  # itself: not counted
    ]
    assert wide_recall_cap(plan, layers, "recall__context", recall_layers=1) == 1_000 - 590
    # only with redistribute and exactly one recall layer
    assert wide_recall_cap(plan, layers, "recall__context", recall_layers=2) is None
    assert wide_recall_cap(plan, layers, "recall__context", recall_layers=0) is None
    unshared = _plan(redistribute=False)
    assert wide_recall_cap(unshared, layers, "recall__context", recall_layers=1) is None


def test_redistribute_names_every_layer_without_a_demand():
    with pytest.raises(ValueError, match=r"^demands: no demand for layer\(s\) b, c$"):
        redistribute_caps({"a": 1, "b": 1, "c": 1}, {"a": 1}, order=["a", "b", "c"], available=3)


def test_layer_demands_hold_the_whole_cap_for_reserved_layers_only():
    from ctxpolicy.budget import layer_demands

    plan = _plan()
    texts = {"system_prompt": 30, "notes__context": 50}
    assert layer_demands(plan, texts) == {
        "system_prompt": 30,
        "notes__context": 50,
        "checkpoint_messages": 0,  # set by the composer
        "query": 0,  # no value this call
    }
    reserved = layer_demands(plan, texts, reserved={"notes__context", "query"})
    assert reserved == {
        "system_prompt": 30,
        "notes__context": 200,  # its cap, more than its text
        "checkpoint_messages": 0,
        "query": 100,
    }
    more = layer_demands(plan, {"notes__context": 250}, reserved={"notes__context"})
    assert more["notes__context"] == 250  # a text above the cap keeps its demand


def test_shared_caps_are_whole_tokens_rounded_down():
    caps = base_caps([("a", 0.5), ("b", None), ("c", None)], available=603)
    # unassigned floor(603 * 0.5) = 301, split in two: 150 each (not 150.5)
    assert caps == {"a": 301, "b": 150, "c": 150}
    assert all(type(cap) is int for cap in caps.values())


def test_a_last_single_token_of_room_is_still_given():
    caps = redistribute_caps({"a": 5, "b": 4}, {"a": 5, "b": 5}, order=["a", "b"], available=10)
    assert caps == {"a": 5, "b": 5}  # the pool of 1 goes to b
