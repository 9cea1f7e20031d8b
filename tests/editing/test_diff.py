"""`ctxpolicy diff` and the pure `diff_policies`."""

from __future__ import annotations

import json
from pathlib import Path

from ctxpolicy.diffing import diff_data, diff_policies
from ctxpolicy.loading import load_policy
from ctxpolicy.policy import Policy
from tests.editing.conftest import run_cli


def test_same_policy_exits_0(policies: Path, capsys) -> None:
    base = str(policies / "base.yaml")
    assert run_cli("diff", base, base) == 0
    assert "identical" in capsys.readouterr().out


def test_key_changes_and_layers_lost(policies: Path, capsys) -> None:
    base = policies / "base.yaml"
    other = policies / "other.yaml"
    other.write_text(
        base.read_text().replace("enable_share_context: true", "enable_share_context: false")
    )
    assert run_cli("diff", str(base), str(other)) == 1
    out = capsys.readouterr().out
    assert "~ enable_share_context: true -> false" in out
    assert "react (changed)" in out
    assert "- loses: framework__context, experience__context" in out
    assert "mapreduce_worker" not in out  # its layers come from include: unchanged


def test_json_format(policies: Path, capsys) -> None:
    base = policies / "base.yaml"
    team = policies / "teams" / "data-platform.yaml"
    assert run_cli("diff", str(base), str(team), "--format", "json") == 1
    data = json.loads(capsys.readouterr().out)
    assert data["same"] is False
    paths = {v["path"]: v for v in data["values"]}
    assert paths["model.context_window"] == {
        "path": "model.context_window",
        "kind": "changed",
        "old": 128000,
        "new": 200000,
    }
    assert paths["budget.ratios.warehouse__context"]["kind"] == "added"
    procs = {p["process"]: p for p in data["processes"]}
    assert "warehouse__context" in procs["react"]["gained"]
    assert "warehouse__context" in procs["mapreduce_worker"]["gained"]


def test_environment_is_applied(policies: Path, monkeypatch, capsys) -> None:
    base = policies / "base.yaml"
    other = policies / "other.yaml"
    other.write_text(
        base.read_text().replace("enable_share_context: true", "enable_share_context: false")
    )
    monkeypatch.setenv("CTXPOLICY_ENABLE_SHARE_CONTEXT", "false")
    # both effective policies now have the switch off: only the raw files differ
    assert run_cli("diff", str(base), str(other)) == 0
    capsys.readouterr()


def test_unreadable_or_invalid_input_exits_2(policies: Path, tmp_path: Path, capsys) -> None:
    base = str(policies / "base.yaml")
    assert run_cli("diff", base, str(tmp_path / "missing.yaml")) == 2
    assert "missing.yaml" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: x\nbudget: {output_reserve: 5}\n")
    assert run_cli("diff", str(bad), base) == 2
    err = capsys.readouterr().err
    assert "bad.yaml:3:" in err


def test_diff_data_is_key_by_key_and_lists_whole() -> None:
    a = {"a": {"b": 1, "c": [1, 2]}, "gone": True}
    b = {"a": {"b": 2, "c": [1, 2, 3], "d": None}}
    changes = {c.path: (c.kind, c.old, c.new) for c in diff_data(a, b)}
    assert changes == {
        "a.b": ("changed", 1, 2),
        "a.c": ("changed", [1, 2], [1, 2, 3]),
        "a.d": ("added", None, None),
        "gone": ("removed", True, None),
    }
    assert diff_data({"x": 1}, {"x": 1.0}) != ()  # type changes count
    assert diff_data(a, a) == ()


def test_process_added_and_removed() -> None:
    a = Policy.model_validate({"version": 1, "name": "a"})
    b = Policy.model_validate(
        {
            "version": 1,
            "name": "a",
            "processes": {
                "react": {},
                "solo": {"checkpoint_messages": False, "query": "runtime"},
            },
        }
    )
    diff = diff_policies(a, b)
    kinds = {p.process: p.kind for p in diff.processes}
    assert kinds["solo"] == "added"
    assert kinds["mapreduce_worker"] == "removed"
    assert "react" not in kinds
    solo = next(p for p in diff.processes if p.process == "solo")
    assert "checkpoint_messages" not in solo.layers_b
    assert not diff.same


def test_query_path_change_is_reported() -> None:
    a = Policy.model_validate({"version": 1, "name": "a"})
    processes = {k: v.model_dump(exclude_none=True) for k, v in a.processes.items()}
    b = Policy.model_validate(
        {"version": 1, "name": "a", "processes": {**processes, "react": {"query": "runtime"}}}
    )
    [react] = [p for p in diff_policies(a, b).processes if p.process == "react"]
    assert react.query_path == ("checkpoint", "runtime")
    assert "query path: checkpoint -> runtime" in diff_policies(a, b).format_text()


def test_loaded_team_policy_diff_against_itself_is_empty(policies: Path) -> None:
    team = load_policy(policies / "teams" / "analytics.toml")
    assert diff_policies(team, team).same


def test_text_is_coloured_only_when_asked(policies: Path, monkeypatch, capsys) -> None:
    base = policies / "base.yaml"
    other = policies / "other.yaml"
    other.write_text(base.read_text().replace("tokenizer: cl100k_base", "tokenizer: o200k_base"))
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    assert run_cli("diff", str(base), str(other)) == 1
    assert "\x1b[" not in capsys.readouterr().out  # captured stdout is not a terminal
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert run_cli("diff", str(base), str(other)) == 1
    assert "\x1b[33m~ model.tokenizer" in capsys.readouterr().out
    monkeypatch.setenv("NO_COLOR", "1")
    assert run_cli("diff", str(base), str(other)) == 1
    assert "\x1b[" not in capsys.readouterr().out


def test_diff_data_reports_a_moved_value_at_both_ends() -> None:
    """A patch may say "move" for a value that left one key and appeared under another:
    the diff still names the key it left and the key it reached."""
    changes = {c.path: c.kind for c in diff_data({"x": {"k": 5}}, {"y": {"k": 5}})}
    assert changes == {"x": "removed", "y": "added"}
    assert [c.path for c in diff_data({"a/b": 1, "t": True}, {"a/b": 2, "t": 1})] == ["a/b", "t"]
    assert [c.path for c in diff_data({"a": 1}, {"a": 2}, prefix="vars")] == ["vars.a"]
