"""The ``tools`` collector (seed 002's tool source)."""

from __future__ import annotations

from typing import Literal

import pytest
from langchain_core.tools import StructuredTool, tool

from ctxpolicy.collectors.base import get_collector
from ctxpolicy.collectors.tools import collect_tools, render_tool, render_type

from .conftest import count_cl100k, make_request


@tool
def search(query: str, k: int = 3, mode: Literal["web", "news"] = "web") -> str:
    """Search the web.

    Use for current events.
    """
    return ""


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return ""


def _big(i: int):
    return StructuredTool.from_function(
        func=lambda x: x, name=f"big_{i}", description="lengthy " * 200, args_schema=None
    )


def _request(service, cap=10_000):
    return make_request(
        {"type": "tools"}, services={"tools": service}, cap=cap, layer="tools__context"
    )


def test_registered_under_tools():
    assert get_collector("tools") is collect_tools


def test_renders_name_arguments_and_description_compactly():
    assert render_tool(search) == (
        '- search(query: string, k?: integer = 3, mode?: "web"|"news" = "web"): '
        "Search the web. Use for current events."
    )
    assert (
        render_tool(calculator)
        == "- calculator(expression: string): Evaluate an arithmetic expression."
    )


def test_render_type_covers_schema_shapes():
    assert (
        render_type({"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]})
        == "array[string]|null"
    )
    assert render_type({"$ref": "#/$defs/Point"}) == "Point"
    assert render_type({"type": ["string", "integer"]}) == "string|integer"
    assert render_type({"const": 3}) == "3"
    assert render_type({}) == "any"


def test_collects_all_tools_in_order():
    assert collect_tools(_request([search, calculator])) == "\n".join(
        [render_tool(search), render_tool(calculator)]
    )


def test_callable_service_is_called():
    assert collect_tools(_request(lambda: [calculator])) == render_tool(calculator)


def test_packs_whole_definitions_into_the_cap():
    tools = [search, _big(1), calculator, _big(2)]
    cap = count_cl100k(render_tool(search)) + count_cl100k(render_tool(calculator)) + 2
    text = collect_tools(_request(tools, cap=cap))
    assert text == f"{render_tool(search)}\n{render_tool(calculator)}"
    assert count_cl100k(text) <= cap
    assert collect_tools(_request(tools, cap=3)) is None
    assert collect_tools(_request([])) is None


def test_bad_service_is_a_clear_error():
    with pytest.raises(LookupError, match="'tools'"):
        collect_tools(make_request({"type": "tools"}, layer="tools__context"))
    with pytest.raises(TypeError, match="sequence"):
        collect_tools(_request("search"))
    with pytest.raises(TypeError, match="cannot render"):
        collect_tools(_request([object()]))
