"""A memory layer with `tiers` and no service: the engine keeps the memory itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from ctxpolicy import PolicyEngine, PolicyValidationError, load_policy

POLICY = """\
version: 1
name: owned-memory
model: {context_window: 3000, tokenizer: cl100k_base}
budget:
  output_reserve: 0.0
  ratios: {system_prompt: 0.05, memory__context: 0.35, checkpoint_messages: 0.5, query: 0.1}
order: [system_prompt, memory__context, checkpoint_messages, query]
layers:
  memory__context:
    shared: false
    collector:
      type: memory
      strategy: balanced
      tiers: {l1: 5, l2: 10, l3: 50}
processes:
  react: {checkpoint_messages: true, share_context: true, query: checkpoint}
default_process: react
"""


def history(turns: int) -> list:
    out = [HumanMessage("Remember: the orders DB port is 6432.", id="fact")]
    for i in range(turns):
        out.append(HumanMessage(f"status of batch job {i}?", id=f"h{i}"))
        out.append(AIMessage(f"batch job {i} finished in {i % 50} minutes", id=f"a{i}"))
    return out


@pytest.fixture
def engine(tmp_path: Path) -> PolicyEngine:
    path = tmp_path / "p.yaml"
    path.write_text(POLICY, encoding="utf-8")
    return PolicyEngine.from_file(path)


def test_the_engine_keeps_and_feeds_a_memory_of_the_policys_sizes(engine) -> None:
    msgs = [*history(300), HumanMessage("Which port does the orders DB use?", id="q")]
    result = engine.compose(system_prompt="s", state={"messages": msgs}, thread_id="t1")
    memory_text = next(str(m.content) for m in result.messages if "6432" in str(m.content))
    assert "batch job 299" not in memory_text or "6432" in memory_text
    assert result.report.layer("memory__context").source == "collector"
    (memory,) = engine._memories.values()
    assert (memory.l1_size, memory.l2_size, memory.l3_size) == (5, 10, 50)
    assert memory.total_added == len(msgs)  # every message once
    again = [*msgs, AIMessage("It is 6432.", id="ans"), HumanMessage("thanks", id="q2")]
    engine.compose(system_prompt="s", state={"messages": again}, thread_id="t1")
    assert memory.total_added == len(again)  # only the two new ones
    engine.record([*again, AIMessage("you're welcome", id="bye")], thread_id="t1")
    assert memory.total_added == len(again) + 1


def test_each_conversation_gets_its_own_memory(engine) -> None:
    one = [HumanMessage("the vault path is kv/aaa", id="x1"), HumanMessage("vault path?", id="x2")]
    two = [HumanMessage("the vault path is kv/bbb", id="y1"), HumanMessage("vault path?", id="y2")]
    engine.compose(system_prompt="s", state={"messages": one}, thread_id="a")
    engine.compose(system_prompt="s", state={"messages": two}, thread_id="b")
    assert len(engine._memories) == 2


def test_a_given_service_wins_over_tiers(engine) -> None:
    from ctxpolicy.memory import TieredMemory

    given = TieredMemory()
    msgs = [*history(3), HumanMessage("port?", id="q")]
    engine.compose(system_prompt="s", state={"messages": msgs}, services={"memory": given})
    assert not engine._memories


def test_tier_sizes_are_validated_with_their_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(POLICY.replace("l2: 10", "l2: 0"), encoding="utf-8")
    with pytest.raises(PolicyValidationError) as info:
        load_policy(path)
    issue = info.value.issues[0]
    assert "l2" in issue.path and (issue.line, issue.column) == (14, 22)
