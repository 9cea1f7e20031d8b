"""The policies shipped in ``policies/`` say what the seeds say."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxpolicy.layers import DEFAULT_ORDER
from ctxpolicy.loading import load_policy, resolve_policy
from ctxpolicy.templates import render_template

POLICIES = Path(__file__).resolve().parents[2] / "policies"


def test_base_is_the_datapillar_default_of_seed_000() -> None:
    policy = load_policy(POLICIES / "base.yaml")
    assert policy.order == DEFAULT_ORDER
    assert policy.enable_share_context is True
    assert dict(policy.budget.ratios) == {
        "system_prompt": 0.12,
        "framework__context": 0.05,
        "experience__context": 0.06,
        "knowledge__context": 0.10,
        "todo__context": 0.05,
        "compression__context": 0.08,
        "checkpoint_messages": 0.36,
        "query": 0.12,
    }
    assert policy.layer("compression__context").persist is True
    assert policy.layer("framework__context").persist is False
    for name in ("mapreduce_planner", "mapreduce_worker", "mapreduce_reducer"):
        rule = policy.process(name)
        assert (rule.checkpoint_messages, rule.share_context, rule.query) == (
            False,
            False,
            "runtime",
        )
    assert policy.process("mapreduce_worker").include == (
        "framework__context",
        "knowledge__context",
    )
    for name in ("react", "sequential", "dynamic", "hierarchical"):
        assert policy.process(name).checkpoint_messages is True
    assert (
        (POLICIES / "base.yaml")
        .read_text(encoding="utf-8")
        .startswith("# yaml-language-server: $schema=../schemas/ctxpolicy.schema.json\n")
    )


def test_base_templates_render_without_a_state() -> None:
    policy = load_policy(POLICIES / "base.yaml")
    framework = policy.layers["framework__context"].collector
    assert framework is not None and framework.type == "template"
    text = render_template(framework.template or "", {"vars": dict(policy.vars)})
    assert text == "You run inside Datapillar. Answer in JSON."
    todo = policy.layers["todo__context"].collector
    assert todo is not None and todo.type == "state"
    base = policy.layer_base_dir("todo__context")
    assert base is not None
    source = (base / (todo.template_file or "")).read_text(encoding="utf-8")
    for value in (["a", "b"], {"step": "done"}, "free text"):
        rendered = render_template(source, {"value": value, "vars": {}})
        assert rendered.startswith("Current plan:")


def test_team_policies_extend_base_and_differ() -> None:
    base = load_policy(POLICIES / "base.yaml")
    platform = resolve_policy(POLICIES / "teams" / "data-platform.yaml")
    analytics = resolve_policy(POLICIES / "teams" / "analytics.toml")
    assert platform.policy is not None and analytics.policy is not None
    assert platform.chain[0].name == analytics.chain[0].name == "base.yaml"
    assert "warehouse__context" in platform.policy.order
    assert platform.policy.layer("checkpoint_messages").overflow == "summarize"
    assert platform.policy.layer_base_dir("warehouse__context") == (POLICIES / "teams")
    assert platform.policy.layer_base_dir("todo__context") == POLICIES
    assert analytics.policy.enable_share_context is False
    assert analytics.policy.budget.ratios["knowledge__context"] == 0.16
    assert analytics.policy.process("mapreduce_worker") == base.process("mapreduce_worker")


def test_loom_sources_is_seed_002s_budget_table() -> None:
    policy = load_policy(POLICIES / "loom-sources.yaml")
    ratios = dict(policy.budget.ratios)
    assert policy.budget.output_reserve == 0.10
    expected = {
        "system_prompt": 0.12,
        "query": 0.12,
        "tools__context": 0.15,
        "skills__context": 0.10,
        "recent__context": 0.18,
        "important__context": 0.12,
        "semantic__context": 0.06,
        "knowledge__context": 0.10,
        "agent_output__context": 0.05,
    }
    assert {k: v for k, v in ratios.items() if v} == expected
    assert sum(ratios.values()) == pytest.approx(1.0)
    collectors = {n: s.collector for n, s in policy.layers.items() if s.collector is not None}
    assert collectors["tools__context"].type == "tools"
    assert [
        collectors[n].tier
        for n in (
            "recent__context",
            "important__context",  # type: ignore[union-attr]
            "semantic__context",
        )
    ] == ["l1", "l2", "l4"]
    assert collectors["knowledge__context"].type == "retriever"
    assert "checkpoint_messages" in policy.order
    assert not any(rule.checkpoint_messages for rule in policy.processes.values())
