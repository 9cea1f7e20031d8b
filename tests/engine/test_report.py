"""The compose report: reasons, cuts, JSON, prefix hashes and cache warnings."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, HumanMessage

from ctxpolicy.engine import PolicyEngine
from ctxpolicy.report import common_prefix, prefix_hashes
from ctxpolicy.testing import ListRetriever
from tests.engine.conftest import make_policy


def test_prefix_hashes_are_stable_and_prefix_sensitive() -> None:
    a = [HumanMessage("x"), AIMessage("y"), HumanMessage("z")]
    b = [HumanMessage("x"), AIMessage("y"), HumanMessage("other")]
    ha, hb = prefix_hashes(a), prefix_hashes(b)
    assert len(ha) == 3 and ha == prefix_hashes(list(a))
    assert ha[:2] == hb[:2] and ha[2] != hb[2]
    # the same message after a different prefix hashes differently
    assert prefix_hashes([AIMessage("y")])[0] != ha[1]
    # message boundaries matter: "ab" + "c" is not "a" + "bc"
    assert (
        prefix_hashes([HumanMessage("ab"), HumanMessage("c")])[1]
        != prefix_hashes([HumanMessage("a"), HumanMessage("bc")])[1]
    )


def test_two_turns_share_their_stable_prefix() -> None:
    engine = PolicyEngine(make_policy())
    history = [HumanMessage("q1"), AIMessage("a1"), HumanMessage("q2")]
    first = engine.compose(system_prompt="s", state={"messages": history})
    second = engine.compose(
        system_prompt="s", state={"messages": [*history, AIMessage("a2"), HumanMessage("q3")]}
    )
    shared = common_prefix(first.report, second.report)
    assert shared == len(first.messages)  # the whole first call is a cacheable prefix
    assert first.report.prefix_hashes == second.report.prefix_hashes[:shared]


def test_report_explains_every_layer_and_serializes() -> None:
    engine = PolicyEngine(make_policy(), services={"knowledge": ListRetriever(["doc"])})
    result = engine.compose(process="mapreduce_worker", system_prompt="s", query="task")
    data = json.loads(json.dumps(result.report.to_dict()))
    by_name = {layer["name"]: layer for layer in data["layers"]}
    assert list(by_name) == list(engine.policy.order)
    assert by_name["knowledge__context"]["included"] is True
    assert by_name["knowledge__context"]["source"] == "collector"
    assert by_name["experience__context"]["reason"] == (
        "process mapreduce_worker: share_context false, not in include"
    )
    assert by_name["query"]["tokens"] > 0 and by_name["query"]["cap"] >= by_name["query"]["tokens"]
    assert data["total_tokens"] == sum(layer["tokens"] for layer in data["layers"])
    assert result.report.included == (
        "system_prompt",
        "framework__context",
        "knowledge__context",
        "query",
    )


def test_cache_breaker_warning_reaches_the_report() -> None:
    result = PolicyEngine(make_policy()).compose(
        system_prompt="s", state={"messages": [HumanMessage("q")]}
    )
    assert any("knowledge__context (retriever)" in w for w in result.report.warnings)
