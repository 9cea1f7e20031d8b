"""One run parses each policy file once: team files that extend one base share its parse."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxpolicy.cli import main as cli_main
from ctxpolicy.loading import extends as extends_module
from ctxpolicy.loading import validate_paths
from ctxpolicy.loading.extends import DocumentCache

BASE = """version: 1
name: base
model:
  context_window: 8000
budget:
  ratios:
    query: 0.2
"""

TEAM = """version: 1
name: team-{n}
extends: ../base.yaml
budget:
  ratios:
    query: {ratio}
"""


def _tree(tmp_path: Path, teams: int, *, bad: int | None = None) -> list[Path]:
    (tmp_path / "base.yaml").write_text(BASE, encoding="utf-8")
    folder = tmp_path / "teams"
    folder.mkdir()
    files = []
    for n in range(teams):
        ratio = 3 if n == bad else 0.1  # a ratio above 0.9 is a schema error
        path = folder / f"team{n}.yaml"
        path.write_text(TEAM.format(n=n, ratio=ratio), encoding="utf-8")
        files.append(path)
    return files


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    seen: list[Path] = []
    real = extends_module.read_document

    def counting(path: Path):  # type: ignore[no-untyped-def]
        seen.append(path)
        return real(path)

    monkeypatch.setattr(extends_module, "read_document", counting)
    return seen


def test_a_base_extended_by_many_team_files_is_parsed_once(tmp_path: Path, parses) -> None:
    _tree(tmp_path, 20)
    assert validate_paths(tmp_path) == []
    assert sorted(p.name for p in parses).count("base.yaml") == 1
    assert len(parses) == 21  # the base and each team file, once


def test_the_command_line_shares_the_parse_across_files(tmp_path: Path, parses, capsys) -> None:
    _tree(tmp_path, 5)
    assert cli_main(["validate", str(tmp_path)]) == 0
    capsys.readouterr()
    assert len(parses) == 6


def test_findings_are_the_same_with_and_without_sharing(tmp_path: Path) -> None:
    files = _tree(tmp_path, 6, bad=2)
    (tmp_path / "base.yaml").write_text(BASE + "unknown_key: 1\n", encoding="utf-8")
    shared = validate_paths(tmp_path)
    separate = validate_paths(tmp_path / "base.yaml")
    for file in files:
        separate += validate_paths(file, documents=DocumentCache())
    assert shared  # the planted problems are found
    assert set(shared) == set(separate)


def test_a_read_hands_out_a_copy(tmp_path: Path) -> None:
    _tree(tmp_path, 1)
    documents = DocumentCache()
    first, _ = documents.read(tmp_path / "base.yaml")
    assert first is not None
    first.data["budget"]["ratios"]["query"] = 0.9
    second, _ = documents.read(tmp_path / "base.yaml")
    assert second is not None
    assert second.data["budget"]["ratios"]["query"] == 0.2


def test_a_file_changed_during_the_run_is_parsed_again(tmp_path: Path) -> None:
    _tree(tmp_path, 1)
    base = tmp_path / "base.yaml"
    documents = DocumentCache()
    before, _ = documents.read(base)
    base.write_text(BASE.replace("8000", "16000"), encoding="utf-8")
    after, _ = documents.read(base)
    assert before is not None
    assert after is not None
    assert (before.data["model"]["context_window"], after.data["model"]["context_window"]) == (
        8000,
        16000,
    )
