"""What a CLI user expects of any command (issue 14): ``python -m``, ``--version``,
``NO_COLOR``, examples in every ``--help``, exit code 3 for internal errors."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ctxpolicy.cli import VERBS, main

REPO = Path(__file__).resolve().parents[2]
BASE = str(REPO / "policies" / "base.yaml")
STATE = str(REPO / "examples" / "state.json")


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CTXPOLICY_") and k not in ("NO_COLOR", "FORCE_COLOR")
    }
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def _python(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=_env(**env),
        check=False,
        timeout=120,
    )


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTXPOLICY_DEBUG", raising=False)


# ----------------------------------------------------------------- python -m, --version


def test_python_dash_m_ctxpolicy_runs_the_cli() -> None:
    done = _python("-m", "ctxpolicy", "validate", "policies")
    assert done.returncode == 0, done.stderr
    assert "file(s) valid" in done.stdout
    done = _python("-m", "ctxpolicy", "--version")
    assert done.returncode == 0
    assert done.stdout == f"ctxpolicy {importlib.metadata.version('ctxpolicy')}\n"


def test_version_comes_from_the_installed_metadata(run_cli, monkeypatch) -> None:
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "9.8.7")
    code, out, _ = run_cli({}, "--version")
    assert (code, out) == (0, "ctxpolicy 9.8.7\n")


def test_version_falls_back_to_the_package_version(run_cli, monkeypatch) -> None:
    import ctxpolicy

    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    code, out, _ = run_cli({}, "--version")
    assert (code, out) == (0, f"ctxpolicy {ctxpolicy.__version__}\n")


# ----------------------------------------------------------------------------- NO_COLOR


class _Tty:
    """A stdout replacement that says it is a terminal."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        raise OSError("not a real file")


def _coloured_commands(tmp_path: Path) -> list[list[str]]:
    other = tmp_path / "other.yaml"
    text = (
        Path(BASE)
        .read_text(encoding="utf-8")
        .replace("tokenizer: cl100k_base", "tokenizer: o200k_base")
    )
    other.write_text(text, encoding="utf-8")
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "todo.j2").write_text(
        (REPO / "policies" / "templates" / "todo.j2").read_text(encoding="utf-8"), encoding="utf-8"
    )
    return [
        ["preview", BASE, "--process", "react", "--state", STATE],
        ["diff", BASE, str(other)],
    ]


@pytest.mark.parametrize("value", ["1", "true", "0", "no"])
def test_no_color_any_non_empty_value_turns_colour_off_everywhere(
    tmp_path, monkeypatch, value: str
) -> None:
    tty = _Tty()
    monkeypatch.setattr(sys, "stdout", tty)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    for argv in _coloured_commands(tmp_path):
        tty.parts.clear()
        main(argv)
        assert "\x1b[" in "".join(tty.parts), argv  # a terminal gets colour ...
        monkeypatch.setenv("NO_COLOR", value)
        tty.parts.clear()
        main(argv)
        assert "\x1b[" not in "".join(tty.parts), argv  # ... unless NO_COLOR is set
        monkeypatch.setenv("FORCE_COLOR", "1")  # NO_COLOR wins even over FORCE_COLOR
        tty.parts.clear()
        main(argv)
        assert "\x1b[" not in "".join(tty.parts), argv
        monkeypatch.delenv("NO_COLOR")
        monkeypatch.delenv("FORCE_COLOR")


def test_no_color_in_a_real_terminal_free_subprocess() -> None:
    done = _python(
        "-m",
        "ctxpolicy",
        "preview",
        BASE,
        "--process",
        "react",
        "--state",
        STATE,
        FORCE_COLOR="1",
        NO_COLOR="1",
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in done.stdout + done.stderr


# ------------------------------------------------------------------------------- --help


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_help_ends_with_an_example(run_cli, verb: str) -> None:
    code, out, _ = run_cli({}, verb, "--help")
    assert code == 0
    assert "\nexamples:\n" in out, out
    examples = out.split("\nexamples:\n", 1)[1]
    lines = [line.strip() for line in examples.splitlines() if line.strip()]
    assert lines and lines[-1].startswith(f"ctxpolicy {verb}"), out
    for before, line in zip(["", *lines], lines):  # commands, comments, continued commands
        assert "ctxpolicy " in line or line.startswith("#") or before.endswith("\\"), lines


def test_top_level_help_documents_exit_codes_and_variables(run_cli) -> None:
    code, out, _ = run_cli({}, "--help")
    assert code == 0
    assert "exit codes:" in out
    codes = re.findall(r"^  (\d+) +(\S.*)$", out.split("exit codes:", 1)[1], flags=re.M)
    assert [code for code, _ in codes][:6] == ["0", "1", "2", "3", "130", "141"]
    assert dict(codes)["3"].startswith("internal error")
    for name in ("CTXPOLICY_DEBUG", "NO_COLOR", "FORCE_COLOR"):
        assert name in out
    assert "\nexamples:\n" in out


# ------------------------------------------------------------------ internal errors (3)


def test_unexpected_exception_is_exit_3_with_one_line_and_a_hint(run_cli, monkeypatch) -> None:
    import ctxpolicy.cli.schema as schema_verb

    def broken(_args):
        raise RuntimeError("boom\nsecond line of the message")

    monkeypatch.setattr(schema_verb, "run", broken)
    code, _out, err = run_cli({}, "schema")
    assert code == 3
    assert "Traceback" not in err
    first, *rest = err.splitlines()
    assert first == "ctxpolicy: internal error: RuntimeError: boom"
    assert len(rest) == 1 and "report" in rest[0] and "CTXPOLICY_DEBUG=1" in rest[0]


def test_ctxpolicy_debug_prints_the_traceback(run_cli, monkeypatch) -> None:
    import ctxpolicy.cli.validate as validate_verb

    def broken(_args):
        raise KeyError("no such thing")

    monkeypatch.setattr(validate_verb, "run", broken)
    monkeypatch.setenv("CTXPOLICY_DEBUG", "1")
    code, _out, err = run_cli({}, "validate")
    assert code == 3
    assert "Traceback (most recent call last)" in err and "KeyError" in err
    assert err.splitlines()[-2].startswith("ctxpolicy: internal error: KeyError")


def test_internal_error_in_the_console_script_process() -> None:
    script = (
        "import ctxpolicy.cli.show as verb\n"
        "verb.run = lambda args: 1 / 0\n"
        "from ctxpolicy.cli import console_main\n"
        "console_main()\n"
    )
    done = _python("-c", script, "show", BASE)
    assert done.returncode == 3
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(
        "ctxpolicy: internal error: ZeroDivisionError: division by zero\n"
    )
    done = _python("-c", script, "show", BASE, CTXPOLICY_DEBUG="1")
    assert done.returncode == 3 and "Traceback" in done.stderr


def test_known_errors_keep_their_exit_codes(run_cli, monkeypatch) -> None:
    import ctxpolicy.cli.schema as schema_verb
    from ctxpolicy.errors import CtxPolicyError

    def policy_error(_args):
        raise CtxPolicyError("bad policy")

    monkeypatch.setattr(schema_verb, "run", policy_error)
    assert run_cli({}, "schema")[0] == 1

    def interrupted(_args):
        raise KeyboardInterrupt

    monkeypatch.setattr(schema_verb, "run", interrupted)
    assert run_cli({}, "schema")[0] == 130


def test_main_keeps_the_logger_quiet_and_leaves_its_handlers_as_they_were() -> None:
    """The preview shows a skipped collector itself: `main` (not only the console
    script) keeps Python's last-resort handler from printing it a second time."""
    script = (
        "import logging, sys\n"
        "from ctxpolicy.cli import main\n"
        "code = main(['preview', 'builtin:base', '-p', 'mapreduce_worker',\n"
        "             '--query', '数一数 rows'])\n"
        "assert logging.getLogger('ctxpolicy').handlers == [], 'a handler left behind'\n"
        "sys.exit(code)\n"
    )
    done = _python("-c", script)
    assert done.returncode == 0, done.stderr
    assert "collector skipped" in done.stdout
    assert done.stderr == ""
