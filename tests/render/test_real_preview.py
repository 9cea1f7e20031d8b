"""The renderers on a real composed call: typed values in, no JSON round trip."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, message_to_dict

from ctxpolicy import PolicyEngine
from ctxpolicy.loading import load_policy
from ctxpolicy.render.data import render_json
from ctxpolicy.render.formats import RENDERERS, get_renderer, render_preview
from ctxpolicy.render.html import render_html
from ctxpolicy.render.terminal import format_preview_layers
from ctxpolicy.render.view import Preview, build_view

REPO = Path(__file__).resolve().parents[2]
BASE = REPO / "policies" / "base.yaml"


def real_preview() -> Preview:
    policy = load_policy(BASE)
    engine = PolicyEngine(policy)
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
    return Preview.of(result, engine.plan("react"), policy=policy, source=str(BASE))


def test_view_of_real_preview() -> None:
    preview = real_preview()
    result = preview.result
    view = build_view(preview)
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


def test_json_shape_is_built_from_the_typed_values() -> None:
    """The stable ``preview --format json`` shape: key order and content pinned."""
    preview = real_preview()
    data = json.loads(render_json(preview))
    assert list(data) == ["format_version", "plan", "messages", "report", "persist"]
    assert data["format_version"] == 1
    assert data["plan"] == json.loads(json.dumps(preview.plan.to_dict(), default=str))
    assert data["report"] == json.loads(json.dumps(preview.result.report.to_dict(), default=str))
    assert data["persist"] == preview.result.persist
    expected = [
        {"layer": layer, **message_to_dict(message)}
        for message, layer in zip(preview.result.messages, preview.message_layers, strict=True)
    ]
    assert data["messages"] == json.loads(json.dumps(expected, default=str))
    assert list(data["messages"][0]) == ["layer", "type", "data"]


def test_every_renderer_on_real_preview() -> None:
    preview = real_preview()
    result = preview.result
    page = render_html(preview)
    for message in result.messages:
        assert html.escape(str(message.content), quote=False) in page
    assert "orders.total &lt;b&gt;" in page
    text = format_preview_layers(build_view(preview), color=False)
    assert f"{result.report.total_tokens:,} / {result.report.available_tokens:,} tokens" in text
    for layer in result.report.layers:
        assert layer.name in text
    assert set(RENDERERS) == {"text", "json", "html"}
    assert render_preview(preview, fmt="json") == render_json(preview)
    assert get_renderer("html") is render_html
    assert "process react" in render_preview(preview, fmt="text")


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown format 'pdf'"):
        get_renderer("pdf")
