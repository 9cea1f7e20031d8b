"""The HTML page: self-contained, escaped, with every layer and message."""

from __future__ import annotations

import re
from dataclasses import replace
from html.parser import HTMLParser

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ctxpolicy.render.html import render_html
from ctxpolicy.report import LayerReport
from tests.render.sample import sample_messages, sample_preview


class Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def parse(page: str) -> list[tuple[str, dict[str, str | None]]]:
    collector = Collector()
    collector.feed(page)
    return collector.tags


def test_page_is_self_contained() -> None:
    page = render_html(sample_preview())
    tags = parse(page)
    names = {tag for tag, _ in tags}
    assert not names & {"script", "link", "img", "iframe", "object", "embed"}
    assert not re.search(r"https?://|url\(|@import", page)
    assert all("src" not in attrs and "href" not in attrs for _, attrs in tags)
    csp = [a for t, a in tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in (csp[0]["content"] or "")


def test_page_has_layers_bar_and_messages() -> None:
    page = render_html(sample_preview())
    tags = parse(page)
    segments = [a for t, a in tags if t == "div" and "seg" in (a.get("class") or "").split()]
    layered = [a["data-layer"] for a in segments if a.get("data-layer")]
    assert layered == [
        "system_prompt",
        "framework__context",
        "knowledge__context",
        "compression__context",
        "checkpoint_messages",
        "query",
    ]
    rows = [a for t, a in tags if t == "tr" and a.get("data-layer")]
    assert len(rows) == 8
    excluded = [a["data-layer"] for a in rows if "excluded" in (a.get("class") or "")]
    assert excluded == ["todo__context"]
    assert "process react: in exclude" in page
    assert "truncated 310 tokens to fit cap 200 (truncate_tail)" in page
    articles = [a for t, a in tags if t == "article"]
    assert len(articles) == 7
    # messages are attributed to layers by their message counts
    assert [a["data-layer"] for a in articles][:3] == [
        "system_prompt",
        "framework__context",
        "knowledge__context",
    ]


def test_contents_are_escaped() -> None:
    messages = sample_messages()
    messages[0] = SystemMessage('<script>alert(1)</script> "quoted" & more')
    page = render_html(sample_preview(messages=messages, policy="<b>x</b>"))
    assert "<script>" not in page and "<b>x</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &#34;quoted&#34; &amp; more" in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page


def test_hostile_text_everywhere_stays_text() -> None:
    """Layer reasons, notes, errors, tool calls and message names are escaped too."""
    hostile = "<img src=x onerror=alert(1)>"
    layers = [
        LayerReport("system_prompt", "system_prompt", True, hostile, tokens=5, messages=1),
        LayerReport(
            "checkpoint_messages",
            "history",
            True,
            "history",
            tokens=5,
            messages=2,
            notes=(hostile,),
            error=hostile,
        ),
        LayerReport("query", "query", True, "always included", tokens=5, messages=0),
    ]
    messages = [
        SystemMessage("s"),
        AIMessage("", name=hostile, tool_calls=[{"name": hostile, "args": {}, "id": "c1"}]),
        ToolMessage(hostile, tool_call_id=hostile),
    ]
    page = render_html(sample_preview(messages=messages, layers=layers))
    tags = {tag for tag, _ in parse(page)}
    assert "img" not in tags and "script" not in tags
    assert hostile not in page
    assert page.count("&lt;img src=x onerror=alert(1)&gt;") >= 5


def test_segment_widths_are_token_shares() -> None:
    page = render_html(sample_preview())
    widths = dict(
        re.findall(
            r'data-layer="(\w+)" data-tokens="\d+" title="[^"]*" style="width:([\d.]+)%', page
        )
    )
    assert float(widths["checkpoint_messages"]) == pytest.approx(35.0)
    assert float(widths["system_prompt"]) == pytest.approx(6.0)


def test_content_blocks_and_roles() -> None:
    """List content shows its text blocks; a human message keeps its role."""
    page = render_html(sample_preview())
    assert "<pre>orders and regions.</pre>" in page
    assert 'class="msg role-human"' in page


def test_tool_calls_are_shown() -> None:
    messages = sample_messages()
    messages[5] = AIMessage("", tool_calls=[{"name": "run_sql", "args": {"q": 1}, "id": "c1"}])
    messages[6] = ToolMessage("3 rows", tool_call_id="c1")
    messages.append(HumanMessage("Write the query & explain it."))
    layers = [
        replace(layer, messages=4) if layer.name == "checkpoint_messages" else layer
        for layer in sample_preview().result.report.layers
    ]
    page = render_html(sample_preview(messages=messages, layers=layers))
    assert "tool call: run_sql({&#34;q&#34;: 1}) [c1]" in page
    assert "answers tool call [c1]" in page
