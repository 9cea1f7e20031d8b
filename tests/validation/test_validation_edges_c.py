"""Edges of the remembered checks (the run's memo, the remembered plans) and of the
ratio-sum limit: what a run remembers never changes what it reports."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ctxpolicy.diagnostics import Finding
from ctxpolicy.policy import Policy
from ctxpolicy.validation import semantic
from ctxpolicy.validation.files import check_files
from ctxpolicy.validation.schema_check import check_schema
from ctxpolicy.validation.semantic import check_budget, check_cache_order

BAD_TEMPLATE = "a\n{% if %}"
BAD_MESSAGE = "template syntax error: Expected an expression, got 'end of statement block'"


def _policy(**extra: Any) -> Policy:
    return Policy.model_validate({"version": 1, "name": "t", **extra})


# ------------------------------------------------------------------ the ratio-sum limit


def test_ratios_summing_exactly_to_the_limit_pass() -> None:
    # 0.5 + 0.500000001 is exactly RATIO_SUM_LIMIT (1.0 + 1e-9) in floating point
    ratios = {"a__context": 0.5, "b__context": 0.500000001}
    assert sum(ratios.values()) == semantic.RATIO_SUM_LIMIT
    assert list(check_budget(_policy(budget={"ratios": ratios}))) == []


def test_ratios_just_over_the_limit_are_refused() -> None:
    ratios = {"a__context": 0.5, "b__context": 0.500000002}
    assert list(check_budget(_policy(budget={"ratios": ratios}))) == [
        Finding(
            ("budget", "ratios"), "ratios sum to 1.000000002, more than 1.0", "budget.ratios-sum"
        )
    ]


# ------------------------------------------------------------------ the remembered plans

MEMORY_ORDER = ["system_prompt", "recent__context", "checkpoint_messages", "query"]


def _cache_breaker(name: str, policy: str) -> Finding:
    return Finding(
        ("order", 1),
        f"recent__context (memory) changes with every query but is ordered before stable "
        f"layers checkpoint_messages: their prompt-cache prefix is lost on every call of "
        f"policy {policy}; order per-query layers after stable ones or set "
        f"layers.{name}.cache: volatile-ok",
        "order.cache-breaker",
        severity="warning",
    )


def test_a_policy_whose_settings_cannot_be_remembered_is_still_planned(monkeypatch) -> None:
    # memory ``shares`` is a mapping: the plans of this policy have no key to be kept under
    monkeypatch.setattr(semantic, "_PLANS", {})
    collector = {"type": "memory", "strategy": "balanced", "shares": {"search": 1}}
    policy = _policy(order=MEMORY_ORDER, layers={"recent__context": {"collector": collector}})
    expected = [_cache_breaker("recent__context", "t")]
    assert list(check_cache_order(policy)) == expected
    assert list(check_cache_order(policy)) == expected


def test_remembered_plans_are_kept_apart_by_budget(monkeypatch) -> None:
    # ratios over 1 make every plan with both layers impossible (no warning); the same
    # policy with valid ratios must not get those remembered plans
    monkeypatch.setattr(semantic, "_PLANS", {})
    layers = {"recent__context": {"collector": {"type": "memory", "tier": "l1"}}}
    over = _policy(
        order=MEMORY_ORDER,
        layers=layers,
        budget={"ratios": {"recent__context": 0.6, "checkpoint_messages": 0.6}},
    )
    valid = _policy(
        order=MEMORY_ORDER,
        layers=layers,
        budget={"ratios": {"recent__context": 0.3, "checkpoint_messages": 0.6}},
    )
    assert list(check_cache_order(over)) == []
    assert list(check_cache_order(valid)) == [_cache_breaker("recent__context", "t")]
    assert list(check_cache_order(over)) == []


# ------------------------------------------------------------------ the schema memo


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1], "[1] is not of type 'object'"),
        ("policy", "'policy' is not of type 'object'"),
        (None, "None is not of type 'object'"),
    ],
)
def test_a_document_that_is_no_mapping_gets_the_same_findings_with_a_memo(
    data: Any, message: str
) -> None:
    expected = [Finding((), message, "schema.type")]
    assert check_schema(data) == expected
    assert check_schema(data, memo={}) == expected


def test_a_memo_keeps_the_verdict_of_each_document() -> None:
    memo: dict = {}
    valid = {"version": 1, "name": "t", "order": ["system_prompt", "checkpoint_messages", "query"]}
    broken = {**valid, "order": "system_prompt"}
    assert check_schema(valid, memo=memo) == []
    assert check_schema(broken, memo=memo) == [
        Finding(("order",), "'system_prompt' is not of type 'array'", "schema.type")
    ]
    assert check_schema(valid, memo=memo) == []


# ------------------------------------------------------------------ the template-file memo


def _template_policy(source: Path, **layers: str) -> Policy:
    policy = _policy(
        layers={
            name: {"collector": {"type": "state", "field": "f", "template_file": file}}
            for name, file in layers.items()
        }
    )
    policy._source = source
    return policy


def _syntax(layer: str, file: str) -> Finding:
    return Finding(
        ("layers", layer, "collector", "template_file"),
        BAD_MESSAGE,
        "template.syntax",
        file=file,
        line=2,
        column=1,
    )


def test_layers_sharing_a_template_file_each_get_its_findings(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.j2").write_text(BAD_TEMPLATE, encoding="utf-8")
    policy = _template_policy(tmp_path / "p.yaml", a__context="bad.j2", b__context="bad.j2")
    expected = [_syntax("a__context", "bad.j2"), _syntax("b__context", "bad.j2")]
    assert check_files(policy) == expected
    memo: dict = {}
    assert check_files(policy, memo=memo) == expected
    assert check_files(policy, memo=memo) == expected


def test_a_remembered_template_file_is_checked_again_when_it_changes(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    template = tmp_path / "t.j2"
    template.write_text("fine {{ x }}", encoding="utf-8")
    policy = _template_policy(tmp_path / "p.yaml", a__context="t.j2")
    memo: dict = {}
    assert check_files(policy, memo=memo) == []
    template.write_text(BAD_TEMPLATE, encoding="utf-8")  # another size: another signature
    assert check_files(policy, memo=memo) == [_syntax("a__context", "t.j2")]


def test_a_template_file_that_is_not_there_is_checked_again_every_time(
    tmp_path: Path, monkeypatch
) -> None:
    # with no file there is nothing to tell that the path has not changed: a dangling
    # link first pointing inside the folder, then outside it, gets each time's finding
    (tmp_path / "pol").mkdir()
    monkeypatch.chdir(tmp_path / "pol")
    link = tmp_path / "pol" / "t.j2"
    link.symlink_to(tmp_path / "pol" / "gone.j2")
    policy = _template_policy(tmp_path / "pol" / "p.yaml", a__context="t.j2")
    where = ("layers", "a__context", "collector", "template_file")
    memo: dict = {}
    missing = [Finding(where, "template file t.j2 does not exist", "template.missing")]
    assert check_files(policy, memo=memo) == missing
    os.remove(link)
    link.symlink_to(tmp_path / "elsewhere.j2")
    outside = (tmp_path / "elsewhere.j2").as_posix()
    assert check_files(policy, memo=memo) == [
        Finding(
            where,
            f"'t.j2' is a symlink to {outside}, outside the policy's folder",
            "path.symlink-outside",
        )
    ]
