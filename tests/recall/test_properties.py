"""Property tests: with a recall layer every composition invariant still holds.

Budget never exceeded (or `BudgetExceededError`), layer order kept, the query exactly
once, the history structurally valid, and recall never repeats a kept message.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage

from ctxpolicy.engine import PolicyEngine
from ctxpolicy.errors import BudgetExceededError
from ctxpolicy.loading import load_policy
from ctxpolicy.testing import assert_composed_valid
from tests.engine.test_properties import histories

from .conftest import LONG_SESSION

POLICY = load_policy(LONG_SESSION)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=histories(min_units=5),
    window=st.integers(200, 5000),
    question=st.sampled_from(["alpha tool", "数据 SELECT", "naïve x1 beta", "nothing matches"]),
    redistribute=st.booleans(),
)
def test_recall_keeps_every_invariant(
    history: list[Any], window: int, question: str, redistribute: bool
) -> None:
    data = POLICY.model_dump(mode="json", exclude_none=True)
    data["model"]["context_window"] = window
    data["budget"]["redistribute"] = redistribute
    policy = type(POLICY).model_validate(data)
    engine = PolicyEngine(policy)
    query = HumanMessage("QUERY " + question, id="the-query")
    try:
        result = engine.compose(
            process="react", system_prompt="SYS", state={"messages": [*history, query]}
        )
    except BudgetExceededError as exc:
        assert exc.tokens > exc.cap
        event(f"budget exceeded: {exc.layer}")
        return
    plan = engine.plan("react")
    assert_composed_valid(result, plan)
    assert sum(m is query for m in result.messages) == 1
    assert sum("QUERY" in str(m.content) for m in result.messages) == 1
    layer = result.report.layer("recall__context")
    assert layer.tokens <= (layer.cap or 0)
    kept = {id(m) for m in result.messages}
    recalled_positions = {u.label.split()[0] for u in layer.recalled}
    if layer.recalled:
        event("recalled")
        # nothing recalled from a message the prompt keeps
        for position, message in enumerate(history):
            if id(message) in kept:
                assert f"#{position}" not in recalled_positions
