"""`ctxpolicy preview`: composed messages and the per-layer table; bad input exits 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxpolicy.cli import main

ROOT = Path(__file__).resolve().parents[2]
BASE = str(ROOT / "policies" / "base.yaml")
STATE = str(ROOT / "examples" / "state.json")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["preview", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_text_preview_of_the_example_state(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, BASE, "--process", "react", "--state", STATE)
    assert code == 0, err
    assert "process react" in out and "query path checkpoint" in out
    assert "checkpoint_messages" in out and "[tool calls: lineage_lookup]" in out
    assert "Compare yesterday's row count" in out
    assert "collector skipped" in out  # no knowledge service in a preview: shown, not fatal
    assert "prompt-cache" not in out  # base.yaml acknowledges its order (cache: volatile-ok)


def test_json_preview_and_excluded_layers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("You are a MapReduce worker.", encoding="utf-8")
    code, out, err = run(
        capsys,
        BASE,
        "--process",
        "mapreduce_worker",
        "--state",
        STATE,
        "--query",
        "count rows of partition 2024-06-01",
        "--system-prompt",
        f"@{prompt}",
        "--format",
        "json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert [m["layer"] for m in data["messages"]] == [
        "system_prompt",
        "framework__context",
        "query",
    ]
    assert data["messages"][0]["data"]["content"] == "You are a MapReduce worker."
    assert data["messages"][-1]["data"]["content"] == "count rows of partition 2024-06-01"
    layers = {layer["name"]: layer for layer in data["report"]["layers"]}
    assert not layers["checkpoint_messages"]["included"]
    assert layers["todo__context"]["reason"] == (
        "process mapreduce_worker: share_context false, not in include"
    )
    assert len(data["report"]["prefix_hashes"]) == len(data["messages"])
    not_in_include = "process mapreduce_worker: share_context false, not in include"
    assert data["plan"]["excluded"] == [
        {"name": "experience__context", "reason": not_in_include},
        {"name": "todo__context", "reason": not_in_include},
        {"name": "compression__context", "reason": not_in_include},
        {
            "name": "checkpoint_messages",
            "reason": "process mapreduce_worker: checkpoint_messages false",
        },
    ]


def test_share_context_switch_and_yaml_state(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    state = tmp_path / "state.yaml"
    state.write_text(
        "messages:\n  - {role: user, content: hello there}\ntodo: {a: done}\n", encoding="utf-8"
    )
    code, out, _ = run(capsys, BASE, "--state", str(state), "--share-context", "false")
    assert code == 0
    assert "enable_share_context false" in out
    assert "excluded: enable_share_context false" in out
    assert "hello there" in out


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "cannot parse"),
        ("[1, 2]", "expected a mapping"),
        ('{"messages": [{"type": "alien", "content": "x"}]}', "bad 'messages'"),
        ('{"messages": "hi"}', "'messages' must be a list"),
    ],
)
def test_bad_state_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, expected: str
) -> None:
    state = tmp_path / "state.json"
    state.write_text(content, encoding="utf-8")
    code, out, err = run(capsys, BASE, "--state", str(state))
    assert code == 2
    assert expected in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err and out == ""


def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, BASE, "--state", str(tmp_path / "missing.json"))
    assert code == 2 and "cannot read" in err
    code, _, err = run(capsys, BASE, "--process", "nope")
    assert code == 2 and "unknown process 'nope'" in err
    code, _, err = run(capsys, BASE, "--process", "mapreduce_worker")
    assert code == 2 and "give it with --query TEXT" in err
    code, _, err = run(capsys, BASE, "--state", STATE, "--query", "twice")
    # the CLI's own flags, never the Python argument (``query=``)
    assert code == 2 and "--query does not apply" in err and "--state FILE" in err
    assert "query=" not in err
    code, _, err = run(capsys, BASE)
    assert code == 2 and "--state FILE" in err and "builtin:samples/state.json" in err
    code, _, err = run(capsys, str(tmp_path / "nothing.yaml"))
    assert code == 2
    for text in (err,):
        assert "Traceback" not in text


def test_invalid_policy_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: Bad Name\n", encoding="utf-8")
    code, _, err = run(capsys, str(bad))
    assert code == 1
    assert "bad.yaml:2:" in err


def test_budget_error_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    policy = tmp_path / "tiny.yaml"
    policy.write_text(
        "version: 1\nname: tiny\nmodel: {context_window: 60}\nbudget: {output_reserve: 0}\n",
        encoding="utf-8",
    )
    code, _, err = run(capsys, str(policy), "--system-prompt", "word " * 200, "--state", STATE)
    assert code == 1
    assert "layer 'system_prompt' needs" in err


def test_html_preview_written_atomically_to_a_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    page = tmp_path / "preview.html"
    code, out, err = run(
        capsys, BASE, "--process", "react", "--state", STATE, "--format", "html", "-o", str(page)
    )
    assert code == 0, err
    assert out == ""
    html = page.read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith("<!doctype html")
    assert "checkpoint_messages" in html and "framework__context" in html
    assert [p.name for p in tmp_path.iterdir()] == ["preview.html"]  # no temp file left


def test_output_into_a_missing_folder_exits_2_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "missing" / "preview.html"
    code, _, err = run(capsys, BASE, "--process", "react", "--state", STATE, "-o", str(target))
    assert code == 2
    assert "--output" in err and "Traceback" not in err
    assert not target.parent.exists()


def test_text_preview_shows_the_stacked_window_bar_coloured_only_when_asked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    code, plain, _ = run(capsys, BASE, "--process", "react", "--state", STATE)
    assert code == 0
    assert "\x1b[" not in plain
    assert "tokens (" in plain and "free" in plain  # "[####....] 1,234 / 115,200 tokens (1.1%)"
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("FORCE_COLOR", "1")
    code, colored, _ = run(capsys, BASE, "--process", "react", "--state", STATE)
    assert code == 0
    assert "\x1b[" in colored
