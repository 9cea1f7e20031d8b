"""`ctxpolicy set`: in-place edits that keep layout, validate first and write atomically."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ctxpolicy.layers import DEFAULT_ORDER
from ctxpolicy.loading import load_policy, validate_paths
from tests.editing.conftest import changed_lines, run_cli, stray_files


def test_set_ratio_changes_only_that_line(policies: Path, capsys) -> None:
    base = policies / "base.yaml"
    before = base.read_bytes()
    assert run_cli("set", str(base), "budget.ratios.query", "0.1") == 0
    after = base.read_bytes()
    diff = changed_lines(before, after)
    assert diff == [(diff[0][0], b"    query: 0.12\n", b"    query: 0.1\n")]
    assert load_policy(base).budget.ratios["query"] == 0.1
    assert "budget.ratios.query = 0.1" in capsys.readouterr().out


def test_set_switch_keeps_trailing_comment_column(policies: Path) -> None:
    base = policies / "base.yaml"
    before = base.read_bytes()
    assert run_cli("set", str(base), "model.tokenizer", "o200k_base") == 0
    [(_, old, new)] = changed_lines(before, base.read_bytes())
    assert old.index(b"#") == new.index(b"#")  # aligned comment stays aligned
    assert new.startswith(b"  tokenizer: o200k_base ")


def test_set_enable_share_context(policies: Path) -> None:
    base = policies / "base.yaml"
    before = base.read_text()
    assert run_cli("set", str(base), "enable_share_context", "false") == 0
    assert load_policy(base).enable_share_context is False
    after = base.read_text()
    assert after.replace("enable_share_context: false", "enable_share_context: true") == before


def test_set_flow_list_inside_flow_mapping(policies: Path) -> None:
    base = policies / "base.yaml"
    before = base.read_bytes()
    value = "[framework__context, knowledge__context, todo__context]"
    assert run_cli("set", str(base), "processes.mapreduce_worker.include", value) == 0
    [(_, old, new)] = changed_lines(before, base.read_bytes())
    assert b"include: [framework__context, knowledge__context]}" in old
    assert b"include: [framework__context, knowledge__context, todo__context]}" in new
    rule = load_policy(base).process("mapreduce_worker")
    assert rule.include == ("framework__context", "knowledge__context", "todo__context")


def test_set_keeps_quoting_style(tmp_path: Path) -> None:
    policy = tmp_path / "quoted.yaml"
    policy.write_text(
        "version: 1\nname: \"team-a\"   # quoted\nmodel:\n  tokenizer: 'cl100k_base'\n"
    )
    assert run_cli("set", str(policy), "name", "team-b") == 0
    assert run_cli("set", str(policy), "model.tokenizer", "o200k_base") == 0
    assert policy.read_text() == (
        "version: 1\nname: \"team-b\"   # quoted\nmodel:\n  tokenizer: 'o200k_base'\n"
    )


def test_set_creates_missing_mappings_after_siblings(policies: Path) -> None:
    team = policies / "teams" / "data-platform.yaml"
    before = team.read_text()
    assert run_cli("set", str(team), "processes.sql_review.share_context", "false") == 0
    after = team.read_text()
    assert load_policy(team).process("sql_review").share_context is False
    added = ["  sql_review:", "    share_context: false"]
    new_lines = after.splitlines()
    at = new_lines.index(added[0])
    assert new_lines[at : at + 2] == added
    assert new_lines[:at] + new_lines[at + 2 :] == before.splitlines()  # nothing else moved


def test_invalid_edit_exits_1_and_leaves_file_identical(policies: Path, capsys) -> None:
    base = policies / "base.yaml"
    before = base.read_bytes()
    mtime = base.stat().st_mtime_ns
    assert run_cli("set", str(base), "budget.ratios.query", "0.9") == 1
    err = capsys.readouterr().err
    assert "ratios" in err and "base.yaml" in err
    assert ".ctxpolicy-" not in err  # issues name the real file, not the temp copy
    assert base.read_bytes() == before
    assert base.stat().st_mtime_ns == mtime
    assert stray_files(policies) == []


def test_semantic_violation_is_refused(policies: Path) -> None:
    base = policies / "base.yaml"
    before = base.read_bytes()
    assert run_cli("set", str(base), "processes.mapreduce_worker.checkpoint_messages", "true") == 1
    assert run_cli("set", str(base), "layers.framework__context.persist", "true") == 1
    assert run_cli("set", str(base), "budget.ratios.nope", "0.1") == 1
    assert base.read_bytes() == before
    assert stray_files(policies) == []


def test_edit_of_parent_validates_with_extends_in_same_folder(policies: Path) -> None:
    team = policies / "teams" / "data-platform.yaml"
    before = team.read_bytes()
    # the child resolves its parent relative to its own folder: a good edit validates
    assert run_cli("set", str(team), "budget.ratios.warehouse__context", "0.05") == 0
    # an edit that is only wrong together with the parent's ratios is caught
    assert run_cli("set", str(team), "budget.ratios.checkpoint_messages", "0.9") == 1
    assert load_policy(team).budget.ratios["checkpoint_messages"] == 0.30
    assert team.read_bytes() != before
    assert stray_files(policies) == []


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("budget..query", "0.1"),
        ("", "0.1"),
        ("budget.ratios.query", "[unclosed"),
        ("version.major", "1"),  # a path through a scalar
        ("order.99", "query"),  # index out of range
    ],
)
def test_bad_key_or_value_exits_2(policies: Path, key: str, value: str, capsys) -> None:
    base = policies / "base.yaml"
    before = base.read_bytes()
    assert run_cli("set", str(base), key, value) == 2
    assert capsys.readouterr().err.strip()
    assert base.read_bytes() == before
    assert stray_files(policies) == []


def test_unreadable_or_missing_file_exits_2(tmp_path: Path, capsys) -> None:
    assert run_cli("set", str(tmp_path / "missing.yaml"), "name", "x") == 2
    assert "missing.yaml" in capsys.readouterr().err
    not_policy = tmp_path / "notes.txt"
    not_policy.write_text("name: x\n")
    assert run_cli("set", str(not_policy), "name", "y") == 2
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"version: 1\nname: \xff\xfe\n")
    assert run_cli("set", str(binary), "name", "y") == 2
    broken = tmp_path / "broken.yaml"
    broken.write_text("version: 1\nname: [unclosed\n")
    assert run_cli("set", str(broken), "name", "y") == 2
    assert broken.read_text() == "version: 1\nname: [unclosed\n"
    assert stray_files(tmp_path) == []


@pytest.mark.skipif(os.name != "posix", reason="permission bits are POSIX")
def test_mode_is_preserved(policies: Path) -> None:
    base = policies / "base.yaml"
    base.chmod(0o640)
    assert run_cli("set", str(base), "budget.ratios.query", "0.11") == 0
    assert stat.S_IMODE(base.stat().st_mode) == 0o640


def test_noop_edit_does_not_touch_the_file(policies: Path, capsys) -> None:
    base = policies / "base.yaml"
    mtime = base.stat().st_mtime_ns
    assert run_cli("set", str(base), "budget.ratios.query", "0.12") == 0
    assert "unchanged" in capsys.readouterr().out
    assert base.stat().st_mtime_ns == mtime


def test_toml_policy_edit(policies: Path) -> None:
    team = policies / "teams" / "analytics.toml"
    before = team.read_bytes()
    assert run_cli("set", str(team), "budget.ratios.knowledge__context", "0.18") == 0
    [(_, old, new)] = changed_lines(before, team.read_bytes())
    assert (old, new) == (b"knowledge__context = 0.16\n", b"knowledge__context = 0.18\n")
    assert load_policy(team).budget.ratios["knowledge__context"] == 0.18
    assert run_cli("set", str(team), "enable_share_context", "true") == 0
    assert load_policy(team).enable_share_context is True
    assert run_cli("set", str(team), "budget.ratios.knowledge__context", "0.99") == 1
    assert stray_files(policies) == []


_RATIO_KEYS = DEFAULT_ORDER


def test_concurrent_threads_never_corrupt_or_lose_edits(policies: Path) -> None:
    base = policies / "base.yaml"
    codes: list[int] = []
    values = {key: f"0.0{index + 1}" for index, key in enumerate(_RATIO_KEYS)}

    def edit(key: str) -> None:
        codes.append(run_cli("set", str(base), f"budget.ratios.{key}", values[key]))

    threads = [threading.Thread(target=edit, args=(key,)) for key in _RATIO_KEYS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert codes == [0] * len(_RATIO_KEYS)
    assert validate_paths([base]) == []
    ratios = load_policy(base).budget.ratios
    assert {k: ratios[k] for k in _RATIO_KEYS} == {k: float(v) for k, v in values.items()}
    assert stray_files(policies) == []


def test_concurrent_processes_never_corrupt_or_lose_edits(policies: Path) -> None:
    base = policies / "base.yaml"
    script = "import sys; from ctxpolicy.cli import main; sys.exit(main(sys.argv[1:]))"
    values = {key: f"0.0{index + 1}" for index, key in enumerate(_RATIO_KEYS[:5])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, "set", str(base), f"budget.ratios.{key}", value],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for key, value in values.items()
    ]
    results = [
        (proc.wait(timeout=120), proc.stderr.read() if proc.stderr else b"") for proc in procs
    ]
    for proc in procs:
        if proc.stderr:
            proc.stderr.close()
    assert [code for code, _ in results] == [0] * len(procs), results
    assert validate_paths([base]) == []
    ratios = load_policy(base).budget.ratios
    assert {k: ratios[k] for k in values} == {k: float(v) for k, v in values.items()}
    assert stray_files(policies) == []


@pytest.mark.skipif(os.name != "posix", reason="symlinks")
def test_symlinked_policy_keeps_its_link(policies: Path) -> None:
    link = policies / "current.yaml"
    link.symlink_to("base.yaml")
    assert run_cli("set", str(link), "budget.ratios.query", "0.11") == 0
    assert link.is_symlink()
    assert load_policy(policies / "base.yaml").budget.ratios["query"] == 0.11


def test_editing_commands_stay_light(policies: Path) -> None:
    """set/diff/init run at validate speed: no langchain-core, no tiktoken imported."""
    base = policies / "base.yaml"
    script = (
        "import sys\n"
        "from ctxpolicy.cli import main\n"
        f"assert main(['set', {str(base)!r}, 'budget.ratios.query', '0.11']) == 0\n"
        f"assert main(['diff', {str(base)!r}, {str(base)!r}]) == 0\n"
        f"assert main(['init', 'x', '--output', {str(policies / 'x.yaml')!r}]) == 0\n"
        "heavy = [m for m in ('langchain_core', 'tiktoken') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
