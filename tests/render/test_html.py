"""The HTML page: self-contained, escaped, with every layer and message."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from ctxpolicy.render.html import render_preview_html
from ctxpolicy.render.view import build_view
from tests.render.sample import sample_preview


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
    page = render_preview_html(sample_preview())
    tags = parse(page)
    names = {tag for tag, _ in tags}
    assert not names & {"script", "link", "img", "iframe", "object", "embed"}
    assert not re.search(r"https?://|url\(|@import", page)
    assert all("src" not in attrs and "href" not in attrs for _, attrs in tags)
    csp = [a for t, a in tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in (csp[0]["content"] or "")


def test_page_has_layers_bar_and_messages() -> None:
    page = render_preview_html(sample_preview())
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
    data = sample_preview()
    data["messages"][0]["content"] = '<script>alert(1)</script> "quoted" & more'
    data["policy"] = "<b>x</b>"
    page = render_preview_html(data)
    assert "<script>" not in page and "<b>x</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &quot;quoted&quot; &amp; more" in page


def test_segment_widths_are_token_shares() -> None:
    page = render_preview_html(sample_preview())
    widths = dict(
        re.findall(
            r'data-layer="(\w+)" data-tokens="\d+" title="[^"]*" style="width:([\d.]+)%', page
        )
    )
    assert float(widths["checkpoint_messages"]) == pytest.approx(35.0)
    assert float(widths["system_prompt"]) == pytest.approx(6.0)


def test_lenient_input_shapes() -> None:
    view = build_view(
        {
            "process": "p",
            "available_tokens": 10,
            "layers": [{"name": "query", "tokens": 3}],
            "messages": [{"role": "user", "content": "hi", "layer": "query"}, "bare"],
        }
    )
    assert [m.role for m in view.messages] == ["human", "message"]
    assert view.total_tokens == 3
    assert "bare" in render_preview_html(view)
    with pytest.raises(TypeError):
        build_view([])  # type: ignore[arg-type]


def test_tool_calls_are_shown() -> None:
    data = sample_preview()
    data["messages"][5] = {
        "layer": "checkpoint_messages",
        "type": "ai",
        "data": {"content": "", "tool_calls": [{"name": "run_sql", "args": {"q": 1}, "id": "c1"}]},
    }
    data["messages"].insert(6, {"type": "tool", "content": "3 rows", "tool_call_id": "c1"})
    page = render_preview_html(data)
    assert "tool call: run_sql({&quot;q&quot;: 1}) [c1]" in page
    assert "answers tool call [c1]" in page
