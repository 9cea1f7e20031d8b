"""``validate`` output for files it cannot read, the JSON format version, and the progress
counter (issue 14, items 5 to 8)."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest

from ctxpolicy.cli import main
from ctxpolicy.cli.reporters import report_github, report_json, report_text
from ctxpolicy.diagnostics import PolicyIssue

REPO = Path(__file__).resolve().parents[2]
GOOD = "version: 1\nname: good\n"
#: Every character the workflow-command escaping must handle.
NASTY = "50%\r\nof: a,b"


# ------------------------------------------------------------------ github: missing path


def test_github_format_reports_a_missing_path_as_an_error_annotation(run_cli) -> None:
    code, out, err = run_cli(
        {"ok.yaml": GOOD}, "validate", "ok.yaml", "nowhere.yaml", "--format", "github"
    )
    assert code == 2
    assert out.splitlines() == [
        "::error file=nowhere.yaml,title=file.missing::no such file or folder [file.missing]"
    ]
    assert err == ""


def test_github_escaping_of_a_missing_path(run_cli) -> None:
    name = f"dir{NASTY}.yaml"
    code, out, _ = run_cli({}, "validate", name, "--format", "github")
    assert code == 2
    assert out == (
        "::error file=dir50%25%0D%0Aof%3A a%2Cb.yaml,title=file.missing"
        "::no such file or folder [file.missing]\n"
    )


def test_github_escaping_of_file_level_and_positioned_issues() -> None:
    file = f"p{NASTY}.yaml"
    issues = [
        PolicyIssue(file, 0, 0, "$", f"cannot read: {NASTY}", f"r{NASTY}"),
        PolicyIssue(file, 3, 4, "$.x", f"bad {NASTY}", "r.x", "warning"),
    ]
    assert report_github([file], issues).splitlines() == [
        (
            "::error file=p50%25%0D%0Aof%3A a%2Cb.yaml,title=r50%25%0D%0Aof%3A a%2Cb"
            "::cannot read: 50%25%0D%0Aof: a,b [r50%25%0D%0Aof: a,b]"
        ),
        (
            "::warning file=p50%25%0D%0Aof%3A a%2Cb.yaml,line=3,col=4,title=r.x"
            "::$.x: bad 50%25%0D%0Aof: a,b [r.x]"
        ),
    ]


def test_github_format_with_no_policy_files_is_an_error_annotation(run_cli) -> None:
    code, out, _ = run_cli({"empty/readme.md": "x"}, "validate", "empty", "--format", "github")
    assert code == 2
    assert out.startswith("::error::no policy files (.yaml, .yml, .toml) in empty")


# ---------------------------------------------------------- missing/unreadable: no 0:0


def test_text_names_a_missing_file_without_a_fake_position(run_cli) -> None:
    code, out, err = run_cli({"ok.yaml": GOOD}, "validate", "ok.yaml", "nowhere.yaml")
    assert code == 2
    assert "nowhere.yaml: no such file or folder [file.missing]" in out.splitlines()
    assert ":0:" not in out + err


def test_unreadable_file_in_every_format(run_cli, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")  # refused unread: a FIFO would block
    message = "cannot read file: not a regular file (a FIFO, socket or device)"
    code, out, _ = run_cli({}, "validate", "pipe.yaml")
    assert code == 2
    assert out.splitlines()[0] == f"pipe.yaml: {message} [file.unreadable]"
    code, out, _ = run_cli({}, "validate", "pipe.yaml", "--format", "github")
    assert code == 2
    expected = f"::error file=pipe.yaml,title=file.unreadable::{message} [file.unreadable]"
    assert out.splitlines() == [expected]
    code, out, _ = run_cli({}, "validate", "pipe.yaml", "--format", "json")
    assert code == 2
    [issue] = json.loads(out)["issues"]
    assert issue == {
        "file": "pipe.yaml",
        "line": None,
        "column": None,
        "path": "$",
        "message": message,
        "rule": "file.unreadable",
        "severity": "error",
    }
    for argv in (
        ["show", "pipe.yaml"],
        ["preview", "pipe.yaml"],
        ["diff", "pipe.yaml", "pipe.yaml"],
    ):
        code, out, err = run_cli({}, *argv)
        assert code == 2, argv
        assert f"pipe.yaml: {message} [file.unreadable]" in err.splitlines(), (argv, err)
        assert ":0:" not in err


def test_positioned_issues_keep_file_line_column(run_cli) -> None:
    code, out, _ = run_cli({"bad.yaml": GOOD + "bugdet: 1\n"}, "validate", "bad.yaml")
    assert code == 1 and out.startswith("bad.yaml:3:1: $.bugdet: ")


def test_reporters_agree_on_file_level_issues() -> None:
    issue = PolicyIssue("gone.yaml", 0, 0, "$", "no such file or folder", "file.missing")
    assert report_text([], [issue]).splitlines()[0] == (
        "gone.yaml: no such file or folder [file.missing]"
    )
    payload = json.loads(report_json([], [issue]))
    assert (payload["issues"][0]["line"], payload["issues"][0]["column"]) == (None, None)


# --------------------------------------------------------------------- format_version


def test_every_json_output_carries_the_format_version(run_cli) -> None:
    from ctxpolicy.cli.reporters import FORMAT_VERSION

    assert FORMAT_VERSION == 1
    code, out, _ = run_cli({"a.yaml": GOOD}, "validate", "a.yaml", "--format", "json")
    assert json.loads(out) == {
        "format_version": 1,
        "valid": True,
        "files": ["a.yaml"],
        "issues": [],
    }
    assert next(iter(json.loads(out))) == "format_version"  # first key, easy to spot
    base = str(REPO / "policies" / "base.yaml")
    state = str(REPO / "examples" / "state.json")
    code, out, _ = run_cli(
        {}, "preview", base, "--process", "react", "--state", state, "--format", "json"
    )
    data = json.loads(out)
    assert code == 0 and data["format_version"] == 1
    assert {"plan", "messages", "report", "persist"} <= set(data)
    code, out, _ = run_cli({}, "diff", base, base, "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["format_version"] == 1
    assert {"a", "b", "same", "values", "processes"} <= set(data)


# --------------------------------------------------------------------------- progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _validate(count: int, *argv: str, tty: bool) -> tuple[int, str, str]:
    folder = Path("many")
    folder.mkdir(exist_ok=True)
    for index in range(count):
        (folder / f"p{index:03d}.yaml").write_text(
            f"version: 1\nname: p{index}\n", encoding="utf-8"
        )
    out, err = io.StringIO(), (_Terminal() if tty else io.StringIO())
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        code = main(["validate", "many", *argv])
    finally:
        sys.stdout, sys.stderr = saved
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.usefixtures("in_tmp")
@pytest.mark.parametrize("fmt", ["text", "json", "github"])
def test_progress_on_a_terminal_with_many_files(fmt: str) -> None:
    code, out, err = _validate(25, "--format", fmt, tty=True)
    assert code == 0
    assert "validating 1/25" in err and "validating 25/25" in err
    assert err.startswith("\r") and err.endswith("\r")  # one line, rewritten, then cleared
    assert "\n" not in err
    _, quiet_out, quiet_err = _validate(25, "--format", fmt, tty=False)
    assert out == quiet_out and quiet_err == ""  # stdout never carries progress


@pytest.mark.usefixtures("in_tmp")
def test_no_progress_for_a_few_files_or_when_stderr_is_not_a_terminal() -> None:
    assert _validate(20, tty=True)[2] == ""
    assert _validate(40, tty=False)[2] == ""
