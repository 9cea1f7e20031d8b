"""``ctxpolicy validate`` on many files: two processes give exactly the one-process report,
and valid policy files are checked without loading jsonschema, jinja2 or ruamel.yaml."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ctxpolicy.cli.validate as validate_verb
from ctxpolicy.cli import main

REPO = Path(__file__).resolve().parents[2]
HOSTILE = REPO / "tests" / "hostile" / "corpus"
CORPUS = REPO / "tests" / "corpus"

BASE = """version: 1
name: base
model:
  context_window: 8000
budget:
  ratios:
    query: 0.2
layers:
  knowledge__context:
    collector: {type: retriever, service: knowledge}
order: [system_prompt, knowledge__context, checkpoint_messages, query]
"""
TEAM = "version: 1\nname: team-{n}\nextends: ../base.yaml\nbudget:\n  ratios:\n    query: {r}\n"


def _run(argv: list[str], *, jobs: str, stderr: io.StringIO | None = None) -> tuple[int, str]:
    out = io.StringIO()
    saved = sys.stdout, sys.stderr, os.environ.get(validate_verb.JOBS_VARIABLE)
    sys.stdout, sys.stderr = out, stderr or io.StringIO()
    os.environ[validate_verb.JOBS_VARIABLE] = jobs
    try:
        code = main(argv)
    finally:
        sys.stdout, sys.stderr = saved[0], saved[1]
        if saved[2] is None:
            del os.environ[validate_verb.JOBS_VARIABLE]
        else:
            os.environ[validate_verb.JOBS_VARIABLE] = saved[2]
    return code, out.getvalue()


@pytest.fixture
def many(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A base, 80 team files extending it (some broken), and copies of the corpora."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base.yaml").write_text(BASE + "unknown_key: 1\n", encoding="utf-8")
    teams = tmp_path / "teams"
    teams.mkdir()
    for n in range(80):
        ratio = 3 if n % 17 == 5 else 0.1  # a few schema errors
        (teams / f"team{n:02d}.yaml").write_text(TEAM.format(n=n, r=ratio), encoding="utf-8")
    shutil.copytree(HOSTILE, tmp_path / "hostile")
    shutil.copytree(CORPUS, tmp_path / "corpus")
    return tmp_path


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
@pytest.mark.parametrize("fmt", ["text", "json", "github"])
def test_two_processes_report_exactly_what_one_does(many: Path, fmt: str) -> None:
    argv = ["validate", ".", "--format", fmt]
    assert len(list(many.rglob("*.y*ml"))) > validate_verb.PARALLEL_MIN_FILES
    one = _run(argv, jobs="1")
    two = _run(argv, jobs="2")
    assert one[0] == 1 and one[1]  # the planted problems are found
    assert two == one  # same exit code, same report, same order


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_second_process_that_fails_is_replaced_by_the_first(
    many: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = _run(["validate", "teams", "base.yaml"], jobs="1")
    parent = os.getpid()
    real = validate_verb.validate_paths
    in_parent: list[object] = []

    def failing_in_the_child(*args, **kwargs):  # type: ignore[no-untyped-def]
        if os.getpid() != parent:
            raise RuntimeError("the second process breaks")
        in_parent.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(validate_verb, "validate_paths", failing_in_the_child)
    assert _run(["validate", "teams", "base.yaml"], jobs="2") == expected
    assert len(in_parent) == 81  # the first process validated every file itself


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_progress_counts_the_files_of_both_processes(many: Path) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Terminal()
    _run(["validate", "teams"], jobs="2", stderr=err)
    assert "validating 80/80 files" in err.getvalue()


def test_few_files_or_one_job_stay_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(validate_verb.JOBS_VARIABLE, "2")
    assert validate_verb._jobs(validate_verb.PARALLEL_MIN_FILES - 1) == 1
    monkeypatch.setenv(validate_verb.JOBS_VARIABLE, "1")
    assert validate_verb._jobs(10_000) == 1


@pytest.mark.parametrize("value", ["0", "3", "two", "-1", "1.5"])
def test_a_bad_jobs_value_is_a_usage_error_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base.yaml").write_text(BASE, encoding="utf-8")
    err = io.StringIO()
    code, out = _run(["validate", "base.yaml"], jobs=value, stderr=err)
    assert (code, out) == (2, "")
    assert err.getvalue() == (
        "ctxpolicy validate: CTXPOLICY_VALIDATE_JOBS must be 1 (one process) or 2 (a second "
        f"one for many files), or unset (chosen by the load); got {value!r}\n"
    )


@pytest.mark.parametrize(("value", "expected"), [(" 1 ", 1), ("2", 2), ("", None), ("  ", None)])
def test_jobs_setting_reads_one_or_two_or_nothing(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: int | None
) -> None:
    monkeypatch.setenv(validate_verb.JOBS_VARIABLE, value)
    assert validate_verb.jobs_setting() == expected


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_by_default_a_second_process_only_when_a_cpu_is_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(validate_verb.JOBS_VARIABLE, raising=False)
    monkeypatch.setattr(validate_verb, "_idle_cpus", lambda: 1.6)
    assert validate_verb._jobs(10_000) == 2
    monkeypatch.setattr(validate_verb, "_idle_cpus", lambda: 0.4)
    assert validate_verb._jobs(10_000) == 1


# --------------------------------------------------------------------------- imports

_LAZY = (
    "sorted({m.split('.')[0] for m in sys.modules} & {'jsonschema', 'jinja2', 'ruamel', "
    "'pydantic'} | {m for m in sys.modules if m == 'importlib.metadata'})"
)


def _modules_after_validate(
    folder: Path, expected_code: int, env: dict[str, str] | None = None
) -> list[str]:
    script = (
        "import sys\n"
        "from ctxpolicy.cli import main\n"
        f"code = main(['validate', {str(folder)!r}, '--format', 'json'])\n"
        f"assert code == {expected_code}, code\n"
        f"print({_LAZY})"
    )
    environ = {k: v for k, v in os.environ.items() if not k.upper().startswith("CTXPOLICY_")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={**environ, **(env or {})},
    )
    return eval(done.stdout.strip().splitlines()[-1])  # a printed list of names


def test_valid_plain_policies_need_no_jsonschema_jinja2_ruamel_pydantic_or_metadata(
    tmp_path: Path,
) -> None:
    for n in range(3):
        (tmp_path / f"p{n}.yaml").write_text(BASE.replace("base", f"p{n}"), encoding="utf-8")
    assert _modules_after_validate(tmp_path, 0) == []


def test_each_is_loaded_when_a_file_needs_it(tmp_path: Path) -> None:
    (tmp_path / "schema-error.yaml").write_text("version: 1\nname: Bad Name\n", encoding="utf-8")
    (tmp_path / "anchors.yaml").write_text(
        "version: 1\nname: a\nvars: {x: &v 1, y: *v}\n", encoding="utf-8"
    )
    (tmp_path / "template.yaml").write_text(
        "version: 1\nname: t\norder: [system_prompt, a__context, checkpoint_messages, query]\n"
        "layers:\n  a__context:\n    collector: {type: template, template: '{{ x }}'}\n",
        encoding="utf-8",
    )
    with_pydantic = ["importlib.metadata", "jinja2", "jsonschema", "pydantic", "ruamel"]
    assert _modules_after_validate(tmp_path, 1) == with_pydantic  # pydantic loads metadata


def test_valid_team_files_need_no_pydantic(tmp_path: Path) -> None:
    # the CI case: a base with templates and files, and team files extending it
    shutil.copytree(REPO / "policies", tmp_path / "policies")
    assert _modules_after_validate(tmp_path / "policies", 0) == ["jinja2"]


def test_pydantic_is_loaded_to_read_a_ctxpolicy_variable(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(BASE, encoding="utf-8")
    found = _modules_after_validate(tmp_path, 0, {"CTXPOLICY_CONTEXT_WINDOW": "64000"})
    assert found == ["importlib.metadata", "pydantic"]
    found = _modules_after_validate(tmp_path, 1, {"CTXPOLICY_CONTEXT_WINDOW": "-3"})
    assert found == ["importlib.metadata", "pydantic"]
