"""``ctxpolicy compile CONTEXT_CONFIG.json``: a seed 003 manifest shown like ``preview``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ctxpolicy.cli import VERBS
from ctxpolicy.cli.compile import main as compile_main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A copy of the example manifest and its docs, in ``tmp_path``."""
    shutil.copytree(EXAMPLES / "docs", tmp_path / "docs")
    shutil.copy(EXAMPLES / "context-config.json", tmp_path / "context-config.json")
    return tmp_path


def test_compile_is_a_verb() -> None:
    assert "compile" in VERBS


def test_text_output_shows_messages_and_layers(run_cli, data: Path) -> None:
    code, out, err = run_cli({}, "compile", "context-config.json", "--root", "docs")
    assert (code, err) == (0, "")
    assert "policy context-manifest · process manifest" in out
    assert "profile__context" in out and "checkpoint_messages" in out
    assert "这段是什么意思 [guidance.md:12:30]" in out
    assert "dismissed: analogy that confused the learner" in out


def test_json_output_has_the_preview_shape(run_cli, data: Path) -> None:
    code, out, err = run_cli(
        {}, "compile", "context-config.json", "--root", "docs", "--format", "json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert list(doc)[:2] == ["format_version", "plan"]
    assert set(doc) >= {"messages", "report", "persist"}
    layers = [m["layer"] for m in doc["messages"]]
    assert layers[0] == "system_prompt" and layers[1] == "profile__context"
    assert layers[-1] == "query"
    last = doc["messages"][-1]["data"]["content"]
    assert "[ground-truth.md#量子力学基础/薛定谔方程 (lines 8-18)]" in last
    assert doc["report"]["total_tokens"] > 0


def test_html_is_written_atomically_to_output(run_cli, data: Path) -> None:
    code, out, err = run_cli(
        {}, "compile", "context-config.json", "--root", "docs", "--format", "html", "-o", "c.html"
    )
    assert (code, out, err) == (0, "", "")
    page = (data / "c.html").read_text(encoding="utf-8")
    assert page.lstrip().lower().startswith("<!doctype html")
    assert "profile__context" in page


def test_root_defaults_to_the_manifest_folder(run_cli, data: Path) -> None:
    shutil.copy(data / "context-config.json", data / "docs" / "context-config.json")
    code, _, err = run_cli({}, "compile", "docs/context-config.json")
    assert code == 0, err


def test_main_of_the_module_runs_the_verb(data: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(data)
    assert compile_main(["context-config.json", "--root", "docs", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["format_version"] == 1


@pytest.mark.parametrize(
    ("manifest", "expected", "code"),
    [
        ('{\n  "query": "x [../../secret.md:1:2]"\n}\n', "m.json:2:16: refused path", 1),
        ('{\n  "query": 5\n}\n', "m.json:2:3: invalid context manifest: query:", 1),
        ('{\n  "query": "a",\n}\n', "m.json:3:1: not JSON:", 1),
        ('{\n  "query": "see [nope.md:1:2]"\n}\n', "m.json:2:18: cannot read 'nope.md'", 1),
        (
            '{\n  "query": "q",\n  "references": [{"path": "guide.md", "block": "Nope"}]\n}\n',
            "m.json:3:48: no block 'Nope' in 'guide.md'",
            1,
        ),
    ],
    ids=["escape", "schema", "not-json", "missing-file", "missing-block"],
)
def test_errors_are_one_located_line(run_cli, manifest: str, expected: str, code: int) -> None:
    got, out, err = run_cli(
        {"m.json": manifest, "guide.md": "# Guide\ntext\n"}, "compile", "m.json"
    )
    assert got == code and out == ""
    assert err.startswith(expected), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.rstrip().endswith("]")  # [rule]


def test_a_missing_manifest_is_exit_2(run_cli) -> None:
    code, out, err = run_cli({}, "compile", "absent.json")
    assert (code, out) == (2, "")
    assert err.startswith("absent.json: cannot read:") and "[file.missing]" in err


def test_a_budget_policy_applies(run_cli, data: Path) -> None:
    policy = (
        "version: 1\nname: tight\nmodel: {context_window: 300}\n"
        "order: [system_prompt, profile__context, checkpoint_messages, query]\n"
        "processes: {manifest: {query: runtime}}\ndefault_process: manifest\n"
    )
    code, out, err = run_cli(
        {"tight.yaml": policy},
        "compile",
        "context-config.json",
        "--root",
        "docs",
        "--policy",
        "tight.yaml",
    )
    assert code == 1 and out == ""
    assert "[budget.exceeded]" in err and "Traceback" not in err


def test_a_manifest_over_the_size_limit_is_unreadable_exit_2(run_cli) -> None:
    """The manifest is read once, by the safe reader (size limit, regular files only):
    too large is an unreadable input (exit 2), not a missing file of the manifest."""
    big = '{"query": "' + "数" * 400_000 + '"}'
    code, out, err = run_cli({"big.json": big}, "compile", "big.json")
    assert (code, out) == (2, "")
    assert err.startswith("big.json: cannot read:") and "[file.unreadable]" in err, err
    assert len(err.strip().splitlines()) == 1


def test_an_output_error_names_the_compile_verb(run_cli, data: Path) -> None:
    argv = ("compile", "context-config.json", "--root", "docs", "-o", "无/x.html")
    code, out, err = run_cli({}, *argv)
    assert (code, out) == (2, "")
    assert err.startswith("ctxpolicy compile: --output 无/x.html: "), err


def test_a_root_that_is_no_folder_is_a_usage_error_naming_root(run_cli, data: Path) -> None:
    code, out, err = run_cli({}, "compile", "context-config.json", "--root", "不存在")
    assert (code, out) == (2, "")
    assert err == "ctxpolicy compile: --root 不存在: no such folder\n"
    (data / "a-file").write_text("x", encoding="utf-8")
    code, _, err = run_cli({}, "compile", "context-config.json", "--root", "a-file")
    assert code == 2 and err == "ctxpolicy compile: --root a-file: root is not a folder\n"
