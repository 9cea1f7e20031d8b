"""Plan details a caller reads: exact reasons, layer fields, JSON keys and cache warnings."""

from __future__ import annotations

from pathlib import Path

import yaml

from ctxpolicy.layers import DEFAULT_ORDER
from ctxpolicy.loading import load_policy
from ctxpolicy.plan import cache_order_warnings, plan_layers
from tests.engine.conftest import design_data, make_policy

SP, FW, EX, KN, TD, CP, HI, Q = DEFAULT_ORDER

RETRIEVER = {"type": "retriever", "service": "knowledge", "top_k": 5, "on_error": "skip"}
SHARED_REASON = "shared layer; enable_share_context true and process react: share_context true"


def _warning(name: str, kind: str, stable: str, policy: str = "data-platform") -> str:
    return (
        f"{name} ({kind}) changes with every query but is ordered before stable layers "
        f"{stable}: their prompt-cache prefix is lost on every call of policy {policy}; "
        f"order per-query layers after stable ones or set layers.{name}.cache: volatile-ok"
    )


def test_reasons_of_system_prompt_and_query_are_exact() -> None:
    react = plan_layers(make_policy(), "react")
    assert react.get(SP).reason == "system_prompt: always included (private to the agent)"  # type: ignore[union-attr]
    assert react.get(Q).reason == (  # type: ignore[union-attr]
        "query: always included; process react: checkpoint "
        "(the input is the last HumanMessage of checkpoint_messages)"
    )
    worker = plan_layers(make_policy(), "mapreduce_worker")
    assert worker.get(Q).reason == (  # type: ignore[union-attr]
        "query: always included; process mapreduce_worker: runtime "
        "(the engine appends HumanMessage(query))"
    )


def test_planned_layer_fields_and_json() -> None:
    plan = plan_layers(make_policy(), "react")
    layers = plan.to_dict()["layers"]
    assert layers[0] == {
        "name": SP,
        "kind": "system_prompt",
        "role": "system",
        "overflow": "error",
        "cap": 13824,
        "ratio": 0.12,
        "persist": False,
        "shared": False,
        "collector": None,
        "reason": "system_prompt: always included (private to the agent)",
    }
    assert layers[3] == {
        "name": KN,
        "kind": "block",
        "role": "system",
        "overflow": "truncate_tail",
        "cap": 11520,
        "ratio": 0.1,
        "persist": False,
        "shared": True,
        "collector": "retriever",
        "reason": SHARED_REASON,
    }
    assert layers[-1]["role"] == "human"
    assert [(x["name"], x["persist"]) for x in layers] == [
        (SP, False),
        (FW, False),
        (EX, False),
        (KN, False),
        (TD, False),
        (CP, True),
        (HI, True),
        (Q, False),
    ]
    kn = plan.get(KN)
    assert kn is not None
    assert kn.shared is True and kn.role == "system" and kn.ratio == 0.1
    assert kn.clear_tool_results is False
    assert plan.get(HI).clear_tool_results is False  # type: ignore[union-attr]
    assert plan.get(SP).shared is False  # type: ignore[union-attr]


def test_layer_without_ratio_has_none() -> None:
    data = design_data()
    del data["budget"]["ratios"][EX]
    plan = plan_layers(make_policy(data), "react")
    assert plan.get(EX).ratio is None  # type: ignore[union-attr]
    assert plan.get(FW).ratio == 0.05  # type: ignore[union-attr]


def test_never_persisted_layers_stay_unpersisted_whatever_the_policy_says() -> None:
    data = design_data()
    data["layers"][FW]["persist"] = True
    data["layers"][EX] = {"persist": True}
    plan = plan_layers(make_policy(data), "react")
    assert plan.get(FW).persist is False  # type: ignore[union-attr]
    assert plan.get(EX).persist is True  # type: ignore[union-attr]


def test_clear_tool_results_reaches_the_plan() -> None:
    data = design_data()
    data["layers"][HI]["clear_tool_results"] = True
    plan = plan_layers(make_policy(data), "react")
    assert plan.get(HI).clear_tool_results is True  # type: ignore[union-attr]


def test_layer_plan_json_keys_and_values() -> None:
    plan = plan_layers(make_policy(), "mapreduce_worker")
    data = plan.to_dict()
    layers = data.pop("layers")
    assert [x["name"] for x in layers] == [SP, FW, KN, Q]
    assert data == {
        "process": "mapreduce_worker",
        "query_path": "runtime",
        "available_tokens": 115200,
        "tokenizer": "cl100k_base",
        "redistribute": True,
        "enable_share_context": True,
        "policy": "data-platform",
        "excluded": [
            {
                "name": EX,
                "reason": "process mapreduce_worker: share_context false, not in include",
            },
            {
                "name": TD,
                "reason": "process mapreduce_worker: share_context false, not in include",
            },
            {
                "name": CP,
                "reason": "process mapreduce_worker: share_context false, not in include",
            },
            {"name": HI, "reason": "process mapreduce_worker: checkpoint_messages false"},
        ],
        "warnings": [],
    }
    assert plan.policy_name == "data-platform"


def test_layer_plan_json_carries_the_warnings() -> None:
    plan = plan_layers(make_policy(), "react")
    assert plan.to_dict()["warnings"] == [
        _warning(KN, "retriever", "todo__context, compression__context, checkpoint_messages")
    ]
    assert plan.warnings == tuple(plan.to_dict()["warnings"])


def test_merge_system_follows_the_model() -> None:
    assert plan_layers(make_policy(), "react").merge_system is False
    data = design_data()
    data["model"]["system_messages"] = "merge"
    assert plan_layers(make_policy(data), "react").merge_system is True


def test_cache_warning_text_is_exact() -> None:
    plan = plan_layers(make_policy(), "react")
    assert plan.warnings == (
        _warning(KN, "retriever", "todo__context, compression__context, checkpoint_messages"),
    )


def test_cache_warning_when_only_the_history_follows() -> None:
    data = design_data()
    data["order"] = [SP, FW, EX, TD, CP, KN, HI, Q]
    assert plan_layers(make_policy(data), "react").warnings == (
        _warning(KN, "retriever", "checkpoint_messages"),
    )


def test_cache_warning_for_the_layer_right_before_the_only_stable_one() -> None:
    policy = make_policy()
    kn = policy.layer(KN).collector
    found = list(cache_order_warnings(policy, [(KN, "block", kn), (HI, "history", None)]))
    assert found == [(KN, _warning(KN, "retriever", "checkpoint_messages"))]


def test_acknowledged_layer_does_not_hide_later_breakers() -> None:
    data = design_data()
    data["layers"][KN]["cache"] = "volatile-ok"
    data["layers"][EX] = {"collector": dict(RETRIEVER)}
    data["order"] = [SP, FW, KN, EX, TD, CP, HI, Q]
    plan = plan_layers(make_policy(data), "react")
    assert plan.warnings == (
        _warning(EX, "retriever", "todo__context, compression__context, checkpoint_messages"),
    )


def test_warnings_of_a_loaded_policy_name_the_order_entry(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(design_data(), sort_keys=False), encoding="utf-8")
    policy = load_policy(path)
    where = policy._order_locations[KN]
    assert where.startswith(f"{path}:")
    plan = plan_layers(policy, "react")
    assert plan.warnings == (
        f"{where}: "
        + _warning(KN, "retriever", "todo__context, compression__context, checkpoint_messages"),
    )
