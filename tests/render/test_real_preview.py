"""The renderers read the real `ctxpolicy preview --format json` data unchanged."""

from __future__ import annotations

import html
import json
from pathlib import Path

from ctxpolicy.render.html import render_preview_html
from ctxpolicy.render.terminal import format_preview_layers
from ctxpolicy.render.view import build_view

REPO = Path(__file__).resolve().parents[2]


def real_preview() -> tuple[dict, object]:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from ctxpolicy import PolicyEngine
    from ctxpolicy.cli.preview import render_json

    engine = PolicyEngine.from_file(REPO / "policies" / "base.yaml")
    state = {
        "messages": [
            HumanMessage("Which table holds revenue?"),
            AIMessage("", tool_calls=[{"name": "search", "args": {"q": "rev"}, "id": "c1"}]),
            ToolMessage("orders(total)", tool_call_id="c1"),
            AIMessage("orders.total <b>"),
            HumanMessage("Weekly revenue by region & explain."),
        ],
        "todo": ["write the query"],
    }
    result = engine.compose(process="react", system_prompt="You are the SQL agent.", state=state)
    plan = engine.plan("react")
    layers = [layer.name for layer in result.report.layers for _ in range(layer.messages)]
    return json.loads(render_json(result, plan, layers=layers)), result


def test_view_of_real_preview_json() -> None:
    data, result = real_preview()
    view = build_view(data)
    assert view.policy == "datapillar-base"
    assert view.process == "react"
    assert [layer.name for layer in view.layers] == [layer.name for layer in result.report.layers]
    assert view.layers[0].name == "system_prompt"
    assert len(view.messages) == len(result.messages)
    assert all(m.layer for m in view.messages)
    assert [m.content for m in view.messages] == [str(m.content) for m in result.messages]
    assert view.total_tokens == result.report.total_tokens
    assert view.available_tokens == result.report.available_tokens
    assert any(m.tool_calls for m in view.messages)
    assert any(m.tool_call_id == "c1" for m in view.messages)


def test_both_renderers_on_real_preview() -> None:
    data, result = real_preview()
    page = render_preview_html(data)
    for message in result.messages:
        assert html.escape(str(message.content), quote=True) in page
    assert "orders.total &lt;b&gt;" in page
    text = format_preview_layers(data, color=False)
    assert f"{result.report.total_tokens:,} / {result.report.available_tokens:,} tokens" in text
    for layer in result.report.layers:
        assert layer.name in text
