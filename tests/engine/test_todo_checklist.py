"""``todo__context`` renders structured todo items as a checklist (issue 13, defect 1).

Todo items are mappings (title or content, done or status, notes) or plain strings; the
bundled template, the template `ctxpolicy init` writes and the ``checklist`` filter turn
them into ``- [ ] title`` / ``- [x] title — notes`` lines, never into the repr of the
read-only view templates see.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from ctxpolicy.cli import main
from ctxpolicy.cli.init import render_team_policy
from ctxpolicy.collectors.template import readonly_view
from ctxpolicy.engine import PolicyEngine
from ctxpolicy.loading import load_policy
from ctxpolicy.templates import checklist, render_template

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "policies" / "base.yaml"
TODO = [
    {"title": "t1", "done": False},
    {"title": "t2", "done": True, "notes": "checked on prod"},
    {"content": "t3", "status": "in_progress"},
    {"title": "t4", "status": "completed"},
    "plain step",
]
EXPECTED = (
    "Current plan:\n"
    "- [ ] t1\n"
    "- [x] t2 — checked on prod\n"
    "- [ ] t3 (in progress)\n"
    "- [x] t4\n"
    "- plain step"
)


def todo_text(engine: PolicyEngine, todo: Any) -> str:
    state = {"messages": [HumanMessage("what next?")], "todo": todo}
    result = engine.compose(process="react", system_prompt="s", state=state)
    index = 0
    for entry in result.report.layers:
        if entry.name == "todo__context":
            assert entry.messages == 1, entry
            return str(result.messages[index].content)
        index += entry.messages
    raise AssertionError("no todo__context layer")


def test_base_policy_renders_dict_items_as_a_checklist() -> None:
    text = todo_text(PolicyEngine.from_file(BASE), TODO)
    assert "ReadOnlyMapping" not in text
    assert text == EXPECTED


def test_plain_strings_and_status_mappings_keep_working() -> None:
    engine = PolicyEngine.from_file(BASE)
    assert todo_text(engine, ["count rows", "check nulls"]) == (
        "Current plan:\n- count rows\n- check nulls"
    )
    assert todo_text(engine, {"locate tables": "done", "compare": "in progress"}) == (
        "Current plan:\n- [x] locate tables\n- [ ] compare (in progress)"
    )
    assert todo_text(engine, "free text") == "Current plan:\nfree text"


def test_preview_shows_the_checklist(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text(
        json.dumps({"messages": [{"type": "human", "content": "what next?"}], "todo": TODO}),
        encoding="utf-8",
    )
    code = main(
        ["preview", str(BASE), "--process", "react", "--state", str(state), "--format", "json"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    todo = [m["data"]["content"] for m in data["messages"] if m["layer"] == "todo__context"]
    assert todo == [EXPECTED]


def test_policy_written_by_init_renders_the_checklist(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(render_team_policy("team", extends=None, schema="s.json"), encoding="utf-8")
    assert todo_text(PolicyEngine(load_policy(path)), TODO) == EXPECTED


def test_mapping_items_are_usable_in_templates() -> None:
    value = readonly_view(TODO[:2])
    source = (
        "{% for item in value %}{{ item.title }}|{{ item['title'] }}|{{ item.get('done') }}"
        "|{{ item.get('notes', '-') }}|{{ item }}|{{ item | tojson }}\n{% endfor %}"
    )
    assert render_template(source, {"value": value}).splitlines() == [
        't1|t1|False|-|{"title": "t1", "done": false}|{"done": false, "title": "t1"}',
        (
            't2|t2|True|checked on prod|{"title": "t2", "done": true, "notes": "checked on prod"}'
            '|{"done": true, "notes": "checked on prod", "title": "t2"}'
        ),
    ]


def test_checklist_filter_edge_cases() -> None:
    assert checklist(None) == ""
    assert checklist([]) == ""
    assert checklist([{"x": 1}]) == '- [ ] {"x": 1}'
    assert checklist({"a": True, "b": None, "c": {"notes": "n"}, "d": 3}) == (
        "- [x] a\n- [ ] b\n- [ ] c — n\n- d: 3"
    )
    assert checklist([{"title": "t", "status": "pending"}, {"task": "u", "done": "done"}]) == (
        "- [ ] t\n- [x] u"
    )
