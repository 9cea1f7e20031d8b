"""The CLI tables of the README and docs/cli.md agree with the parser and each verb's exit
codes (issue 33, finding 7): every verb, every option, the exit codes the verb returns."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from ctxpolicy.cli import VERBS, build_parser, verb_module
from tests.support.help_examples import help_text

REPO = Path(__file__).resolve().parents[2]


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "verb")
    return dict(action.choices)  # type: ignore[arg-type]


def _rows(text: str, header: str) -> dict[str, tuple[str, str]]:
    """``{verb: (does, exit)}`` of the Markdown table under ``header``."""
    table = text.split(header, 1)[1].split("\n\n", 1)[0]
    rows: dict[str, tuple[str, str]] = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        command, does, exits = cells
        verb = command.strip("`").removeprefix("ctxpolicy ").split()[0]
        rows[verb] = (command + " " + does.replace("\\|", "|"), exits)
    return rows


TABLES = {
    "README.md": ("README.md", "| command | does | exit |"),
    "docs/cli.md": ("docs/cli.md", "| command | does | exit |"),
}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_table_names_every_verb_option_and_exit_code(name: str) -> None:
    path, header = TABLES[name]
    rows = _rows((REPO / path).read_text(encoding="utf-8"), header)
    assert list(rows) == list(VERBS), f"{name}: verbs differ from the parser's"
    for verb, parser in _subparsers().items():
        text, exits = rows[verb]
        options = {
            max(action.option_strings, key=len)
            for action in parser._actions
            if action.option_strings and "--help" not in action.option_strings
        }
        missing = sorted(o for o in options if o not in text)
        assert missing == [], f"{name}: {verb} row lacks {missing}"
        assert exits == verb_module(verb).EXIT_CODES, f"{name}: {verb} exit codes"


@pytest.mark.parametrize("verb", VERBS)
def test_help_gives_the_verbs_exit_codes(verb: str) -> None:
    assert f"exit codes: {verb_module(verb).EXIT_CODES}\n" in help_text(verb)


def test_diff_exits_2_on_an_invalid_file_as_documented(tmp_path: Path, monkeypatch) -> None:
    from ctxpolicy.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text("version: 1\nname: Bad Name\n", encoding="utf-8")
    assert main(["diff", "builtin:base", "bad.yaml"]) == 2
    assert main(["diff", "builtin:base", "missing.yaml"]) == 2
    assert main(["diff", "builtin:base", "builtin:base"]) == 0
    assert main(["diff", "builtin:base", "builtin:long-session"]) == 1
    assert "2 usage/invalid/unreadable" in verb_module("diff").EXIT_CODES
