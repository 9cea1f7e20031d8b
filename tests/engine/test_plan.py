"""Process rules (DESIGN §3.1): the full process x switch matrix, reasons and caps."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxpolicy.errors import UnknownProcessError
from ctxpolicy.layers import DEFAULT_ORDER
from ctxpolicy.plan import plan_layers
from tests.engine.conftest import design_data, make_policy

SP, FW, EX, KN, TD, CP, HI, Q = DEFAULT_ORDER
ALL = [SP, FW, EX, KN, TD, CP, HI, Q]

# process -> (layers with sharing on, layers with sharing off)
MATRIX = {
    "react": (ALL, [SP, HI, Q]),
    "sequential": (ALL, [SP, HI, Q]),
    "dynamic": (ALL, [SP, HI, Q]),
    "hierarchical": (ALL, [SP, HI, Q]),
    "mapreduce_planner": ([SP, FW, EX, KN, Q], [SP, FW, EX, KN, Q]),
    "mapreduce_worker": ([SP, FW, KN, Q], [SP, FW, KN, Q]),
    "mapreduce_reducer": ([SP, FW, EX, KN, Q], [SP, FW, EX, KN, Q]),
}


@pytest.mark.parametrize("share", [True, False])
@pytest.mark.parametrize("process", sorted(MATRIX))
def test_process_switch_matrix(process: str, share: bool) -> None:
    policy = make_policy().with_share_context(share)
    plan = plan_layers(policy, process)
    expected = MATRIX[process][0 if share else 1]
    assert list(plan.names) == expected
    assert sorted([*plan.names, *(e.name for e in plan.excluded)]) == sorted(ALL)
    assert plan.enable_share_context is share
    assert plan.to_dict()["enable_share_context"] is share and "share_context" not in plan.to_dict()
    assert plan.query_path == ("runtime" if process.startswith("mapreduce_") else "checkpoint")


def test_matrix_covers_every_process_of_base_yaml() -> None:
    from ctxpolicy.loading import load_policy

    base = Path(__file__).resolve().parents[2] / "policies" / "base.yaml"
    if not base.exists():  # pragma: no cover - the loader helper ships it
        pytest.fail("policies/base.yaml is missing")
    for share in (True, False):
        policy = load_policy(base, enable_share_context=share)
        assert set(policy.processes) == set(MATRIX)
        for process, expected in MATRIX.items():
            assert list(plan_layers(policy, process).names) == expected[0 if share else 1]


def test_reasons_name_the_rule() -> None:
    plan = plan_layers(make_policy(), "mapreduce_worker")
    reasons = {e.name: e.reason for e in plan.excluded}
    assert reasons[EX] == "process mapreduce_worker: share_context false, not in include"
    assert reasons[HI] == "process mapreduce_worker: checkpoint_messages false"
    assert plan.get(KN) is not None
    assert plan.get(KN).reason == "process mapreduce_worker: in include"  # type: ignore[union-attr]
    off = plan_layers(make_policy().with_share_context(False), "react")
    assert off.exclusion(FW).reason.startswith("enable_share_context false")  # type: ignore[union-attr]


def test_exclude_beats_include_and_unshared_layers_always_come() -> None:
    data = design_data()
    data["layers"]["todo__context"]["shared"] = False
    data["processes"]["react"] = {"exclude": ["knowledge__context"]}
    data["processes"]["mapreduce_worker"]["exclude"] = ["framework__context"]
    data["processes"]["mapreduce_worker"]["include"] = ["knowledge__context"]
    policy = make_policy(data)
    worker = plan_layers(policy, "mapreduce_worker")
    assert list(worker.names) == [SP, KN, TD, Q]  # todo is not shared: every process gets it
    assert worker.exclusion(FW).reason == "process mapreduce_worker: in exclude"  # type: ignore[union-attr]
    react = plan_layers(policy.with_share_context(False), "react")
    assert list(react.names) == [SP, TD, HI, Q]
    assert react.get(TD).reason == "layer not shared: every process gets it"  # type: ignore[union-attr]


def test_caps_follow_the_ratios() -> None:
    policy = make_policy()
    plan = plan_layers(policy, "react")
    assert plan.available_tokens == 115200
    assert plan.caps[HI] == int(0.36 * 115200)
    assert plan.caps[Q] == int(0.12 * 115200)
    assert sum(plan.caps.values()) <= plan.available_tokens
    worker = plan_layers(policy, "mapreduce_worker")
    assert worker.caps[KN] == int(0.10 * 115200)


def test_layers_without_ratio_share_the_rest() -> None:
    data = design_data()
    data["budget"] = {"output_reserve": 0.0, "ratios": {"checkpoint_messages": 0.5}}
    data["model"] = {"context_window": 1000, "tokenizer": "cl100k_base"}
    plan = plan_layers(make_policy(data), "mapreduce_worker")  # no history: 4 layers share all
    assert plan.caps == {SP: 250, FW: 250, KN: 250, Q: 250}


def test_unknown_process() -> None:
    with pytest.raises(UnknownProcessError, match="nope"):
        plan_layers(make_policy(), "nope")


def test_plan_is_frozen_and_serializable() -> None:
    import json

    plan = plan_layers(make_policy(), "react")
    with pytest.raises(AttributeError):
        plan.process = "x"  # type: ignore[misc]
    data = json.loads(json.dumps(plan.to_dict()))
    assert [layer["name"] for layer in data["layers"]] == ALL


def test_cache_warning_for_per_query_layer_before_stable_ones() -> None:
    plan = plan_layers(make_policy(), "react")
    assert any(w.startswith("knowledge__context (retriever)") for w in plan.warnings)
    data = design_data()
    data["order"] = [SP, FW, EX, TD, CP, HI, KN, Q]
    assert plan_layers(make_policy(data), "react").warnings == ()
