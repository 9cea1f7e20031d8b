"""``order.cache-breaker`` plans each distinct process once and remembers the plans of
recent policies; its findings are those of planning every process of every policy."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxpolicy.diagnostics import Finding
from ctxpolicy.loading import resolve_policy
from ctxpolicy.plan import cache_order_warnings, plan_layers
from ctxpolicy.policy import Policy
from ctxpolicy.validation import semantic
from ctxpolicy.validation.semantic import check_cache_order

ROOT = Path(__file__).resolve().parents[2]


def _reference(policy: Policy) -> Iterator[Finding]:
    """The rule as it was: every process planned, nothing remembered."""
    index = {name: i for i, name in reversed(list(enumerate(policy.order)))}
    seen: set[str] = set()
    for process in policy.processes:
        try:
            plan = plan_layers(policy, process)
        except Exception:
            continue
        described = [(layer.name, layer.kind, layer.collector) for layer in plan.layers]
        for name, text in cache_order_warnings(policy, described):
            if text not in seen and name in index:
                seen.add(text)
                yield Finding(
                    ("order", index[name]), text, "order.cache-breaker", severity="warning"
                )


def _policies() -> list[Policy]:
    found = []
    for folder in ("policies", "examples", "tests/corpus/valid", "tests/corpus/semantic"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".yaml", ".toml"):
                result = resolve_policy(path)
                if result.policy is not None:
                    found.append(result.policy)
    return found


POLICIES = _policies()


def _variants(policy: Policy) -> Iterator[Policy]:
    """The policy, renamed, with another window, without its switch, with a layer flipped."""
    yield policy
    yield policy.model_copy(update={"name": "renamed"})
    yield policy.model_copy(update={"model": policy.model.model_copy(update={"context_window": 7})})
    yield policy.with_share_context(not policy.enable_share_context)
    for name, spec in policy.layers.items():
        if spec.collector is not None:
            flipped = spec.model_copy(update={"cache": None if spec.cache else "volatile-ok"})
            yield policy.model_copy(update={"layers": {**policy.layers, name: flipped}})
            break


def test_there_are_policies_with_cache_warnings() -> None:
    assert any(list(_reference(p)) for p in POLICIES)


@pytest.mark.parametrize("index", range(len(POLICIES)))
def test_the_findings_are_those_of_planning_every_process(index: int) -> None:
    for policy in _variants(POLICIES[index]):
        expected = list(_reference(policy))
        semantic._PLANS.clear()
        assert list(check_cache_order(policy)) == expected  # planned
        assert list(check_cache_order(policy)) == expected  # remembered


def test_remembered_plans_keep_each_policy_s_own_name() -> None:
    policy = next(p for p in POLICIES if list(_reference(p)))
    semantic._PLANS.clear()
    first = list(check_cache_order(policy))
    other = policy.model_copy(update={"name": "another-team"})
    second = list(check_cache_order(other))
    assert second == list(_reference(other))
    assert all("another-team" in f.message for f in second)
    assert first != second
