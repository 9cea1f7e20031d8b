"""A long ReAct session composed with policies/long-session.yaml: what recall brings back.

    .venv/bin/python examples/long_session.py

Builds an 8,000-turn session in which the facts the last question needs were said long
ago: a port stated early and corrected later, and one log line inside a 60-line tool
dump. The history layer keeps only the newest turns; the recall layer finds the rest.
No model is called: the script prints the composed prompt's recall layer and report.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxpolicy import PolicyEngine

POLICY = Path(__file__).resolve().parent.parent / "policies" / "long-session.yaml"


def build_session(turns: int = 8000) -> list[BaseMessage]:
    """A seeded session: chit-chat, tool calls with log dumps, two facts and a correction."""
    messages: list[BaseMessage] = [
        HumanMessage("Note for later: the orders replica listens on port 5432.", id="u0"),
        AIMessage("Noted: orders replica on 5432.", id="a0"),
    ]
    for i in range(1, turns):
        messages.append(HumanMessage(f"How did nightly batch {i} go?", id=f"u{i}"))
        if i % 50 == 0:
            call = {"name": "get_logs", "args": {"job": f"batch-{i}"}, "id": f"c{i}"}
            messages.append(AIMessage("", tool_calls=[call], id=f"t{i}"))
            lines = [f"02:{m:02d} batch-{i} INFO wrote {m * 1000} rows" for m in range(60)]
            if i == 300:
                lines[41] = "02:41 batch-300 ERROR connection pool exhausted on pg-replica-7"
            messages.append(ToolMessage("\n".join(lines), tool_call_id=f"c{i}", id=f"r{i}"))
        if i == 3000:
            messages.append(
                AIMessage("Correction: the orders replica now listens on port 6432.", id=f"a{i}")
            )
            continue
        messages.append(AIMessage(f"Batch {i} finished; all partitions were loaded.", id=f"a{i}"))
    return messages


def main() -> None:
    engine = PolicyEngine.from_file(POLICY)
    history = build_session()
    question = HumanMessage(
        "Which replica ran out of connections, and which port does the orders replica use?",
        id="q",
    )
    result = engine.compose(
        process="react",
        system_prompt="You are the on-call SRE agent.",
        state={"messages": [*history, question]},
    )
    report = result.report
    recall = report.layer("recall__context")
    kept = report.layer("checkpoint_messages")
    print(
        f"session: {len(history) + 1} messages; the history layer keeps the newest {kept.messages}"
    )
    print(f"prompt: {report.total_tokens:,} of {report.available_tokens:,} tokens\n")
    print("recall__context (what the model sees):")
    recall_text = next(str(m.content) for m in result.messages if "Recalled from" in str(m.content))
    for line in recall_text.splitlines()[:12]:
        print(f"  {line}")
    print("\nwhy each unit came back (label, source, score, tokens):")
    for unit in recall.recalled[:12]:
        print(f"  {unit.label:<28} {unit.source:<8} {unit.score:6.2f} {unit.tokens:>4} tok")
    for note in recall.notes:
        print(f"note: {note}")


if __name__ == "__main__":
    main()
