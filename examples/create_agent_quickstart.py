"""ctxpolicy in front of every model call of a LangChain 1.x ``create_agent`` agent.

Run from the repository root (needs ``pip install 'ctxpolicy[langchain]'``):

    .venv/bin/python examples/create_agent_quickstart.py

One line puts the policy in front of the model: ``ContextPolicyMiddleware`` composes
each call's messages under ``policies/long-session.yaml`` (layer order, budgets, the
input once, a structurally valid history, a recall layer for long sessions) in place of
``SummarizationMiddleware`` / ``ContextEditingMiddleware``. The "LLM" is a langchain-core
fake chat model that answers from a script, so this runs offline; it prints the prompt
the model saw on every call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxpolicy.integrations.langchain import ContextPolicyMiddleware

ROOT = Path(__file__).resolve().parent.parent


class ScriptedToolModel(FakeMessagesListChatModel):
    """Answers from ``responses`` in order and prints every prompt it is sent."""

    calls: int = 0

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self  # the script already holds the tool calls

    def _generate(self, messages: list[BaseMessage], stop=None, run_manager=None, **kwargs):
        self.calls += 1
        print(f"\n--- prompt of model call {self.calls} ({len(messages)} messages)")
        for message in messages:
            content = " ".join(str(message.text).split())
            tool_calls = ", ".join(c["name"] for c in getattr(message, "tool_calls", None) or [])
            suffix = f"  [tool calls: {tool_calls}]" if tool_calls else ""
            print(f"  {message.type:>6}: {content[:90]}{suffix}")
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


@tool
def row_count(table: str) -> str:
    """Count the rows of a warehouse table."""
    return f"{table}: 1,204,331 rows (yesterday: 1,250,002)"


@tool
def last_load(table: str) -> str:
    """When and how the last load of a table ran."""
    return f"{table}: loaded 02:00 UTC, 3 of 4 partitions (dt=2024-06-01 missing)"


def show_layers(name: str, result) -> None:
    """``on_compose`` hook: which layers the policy put in the prompt, and their tokens."""
    report = result.report
    layers = ", ".join(f"{layer.name} {layer.tokens}" for layer in report.layers if layer.messages)
    print(f"\n[{name}] {report.total_tokens} of {report.available_tokens} tokens: {layers}")


def main() -> None:
    model = ScriptedToolModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[  # two tools in parallel
                    {"name": "row_count", "args": {"table": "dwd.orders_daily"}, "id": "call_1"},
                    {"name": "last_load", "args": {"table": "dwd.orders_daily"}, "id": "call_2"},
                ],
            ),
            AIMessage("45,671 rows are missing: partition dt=2024-06-01 did not load."),
        ]
    )
    tools = [row_count, last_load]
    policy = ContextPolicyMiddleware(
        ROOT / "policies" / "long-session.yaml", on_compose=show_layers
    )
    agent = create_agent(
        model,
        tools,
        system_prompt="You are a data analyst.",
        middleware=[policy],  # the one line: no SummarizationMiddleware, no trimming hook
        checkpointer=InMemorySaver(),
    )
    state = agent.invoke(
        {"messages": [HumanMessage("Why did dwd.orders_daily lose rows yesterday?")]},
        {"configurable": {"thread_id": "quickstart"}},
    )
    print(f"\nfinal answer: {state['messages'][-1].text}")
    print(f"(the tool schemas took {policy.tool_tokens(tools)} tokens off the budget)")
    print(f"state holds {len(state['messages'])} messages (the prompt is never written back)")


if __name__ == "__main__":
    main()
