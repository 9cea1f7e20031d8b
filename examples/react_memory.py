"""A ReAct-style loop whose context comes from tiered memory, not the full transcript.

Runs offline: the "LLM" is langchain-core's `FakeMessagesListChatModel` replaying a
scripted plan. Each step the `PolicyEngine` composes the model input from the policy:
the system prompt, the tool definitions (``tools`` collector), the memory layer
(``memory`` collector, ``balanced`` strategy: recent items, related summaries, the
important working set) and the task. Every message of the loop goes into `TieredMemory`
instead of a growing message list, so the prompt stays the same size however long the
agent runs.

    .venv/bin/python examples/react_memory.py
"""

from __future__ import annotations

import zlib

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from ctxpolicy.engine import PolicyEngine
from ctxpolicy.memory import TieredMemory
from ctxpolicy.policy import Policy

POLICY = {
    "version": 1,
    "name": "react-memory",
    "model": {"context_window": 4_000},
    "order": ["system_prompt", "tools__context", "memory__context", "query"],
    "processes": {"react": {"query": "runtime", "checkpoint_messages": False}},
    "budget": {"ratios": {"tools__context": 0.15, "memory__context": 0.45}},
    "layers": {
        "tools__context": {"collector": {"type": "tools"}},
        "memory__context": {"collector": {"type": "memory", "strategy": "balanced"}},
    },
}

STOCK = {"widget": 12, "gadget": 0}


@tool
def check_stock(item: str) -> str:
    """Units of an item in the warehouse."""
    if item not in STOCK:
        raise ValueError(f"unknown item {item!r}")
    return str(STOCK[item])


@tool
def reorder(item: str, units: int) -> str:
    """Place a purchase order for an item."""
    return f"PO-{zlib.crc32(f'{item}:{units}'.encode()) % 10_000:04d} placed for {units} x {item}"


TOOLS = {t.name: t for t in (check_stock, reorder)}


def scripted_model() -> FakeMessagesListChatModel:
    def call(name: str, args: dict[str, object], n: int) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call_{n}"}])

    return FakeMessagesListChatModel(
        responses=[
            call("check_stock", {"item": "widget"}, 1),
            call("check_stock", {"item": "gizmo"}, 2),
            call("check_stock", {"item": "gadget"}, 3),
            call("reorder", {"item": "gadget", "units": 50}, 4),
            AIMessage("Widgets: 12 in stock. Gadgets were out of stock; I ordered 50."),
        ]
    )


def run_tool(message: AIMessage) -> list[ToolMessage]:
    results = []
    for call in message.tool_calls:
        try:
            output = TOOLS[call["name"]].invoke(call["args"])
            results.append(ToolMessage(str(output), tool_call_id=call["id"], name=call["name"]))
        except Exception as exc:  # noqa: BLE001 - a failed tool call is an observation
            results.append(
                ToolMessage(
                    f"error: {exc}", tool_call_id=call["id"], name=call["name"], status="error"
                )
            )
    return results


def main() -> None:
    memory = TieredMemory(l1_size=6, l2_size=10, l3_size=50)
    engine = PolicyEngine(
        Policy.model_validate(POLICY), services={"memory": memory, "tools": list(TOOLS.values())}
    )
    model = scripted_model()
    task = "Check stock of widget, gizmo and gadget; reorder anything that is out of stock."
    memory.add(task, kind="user")
    for step in range(1, 10):
        result = engine.compose(
            system_prompt="You are a warehouse agent. Use the tools.", query=task
        )
        print(f"--- step {step}: {result.report.total_tokens} prompt tokens")
        print(result.messages[2].content if len(result.messages) > 3 else "(no memory yet)")
        reply = model.invoke(result.messages)
        assert isinstance(reply, AIMessage)
        memory.add_message(reply)
        if not reply.tool_calls:
            print(f"\nFINAL ANSWER: {reply.content}")
            break
        for observation in run_tool(reply):
            memory.add_message(observation)
    print("\nL2 working set (most important first):")
    for item in memory.get_l2():
        print(f"  {item.importance:.1f} [{item.kind}] {item.content}")


if __name__ == "__main__":
    main()
