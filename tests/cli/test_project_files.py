"""LICENSE and CHANGELOG exist and agree with the metadata; docs/ci.md works as written
(issue 14, items 9 and 10)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[2]


def test_license_is_the_mit_license_the_metadata_names() -> None:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert meta["license"] == "MIT"
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n")
    assert "Copyright (c) 2026 ctxpolicy engineers" in text
    assert "Permission is hereby granted, free of charge" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text


def test_changelog_keeps_a_changelog() -> None:
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog\n")
    assert "https://keepachangelog.com/en/1.1.0/" in text
    headings = re.findall(r"^## \[([^\]]+)\]", text, flags=re.M)
    assert headings[:2] == ["Unreleased", "0.1.0"]
    unreleased = text.split("## [Unreleased]", 1)[1].split("## [0.1.0]", 1)[0]
    for change in (
        "python -m ctxpolicy",
        "completion",
        "format_version",
        "CTXPOLICY_DEBUG",
        "NO_COLOR",
        "141",
        "extends",
    ):
        assert change in unreleased, change
    assert re.search(r"^### (Added|Changed|Fixed)$", unreleased, flags=re.M)


def _snippets(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M)


def test_ci_guide_installs_what_exists_and_pins_what_exists() -> None:
    text = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    assert not re.search(r"pip install ctxpolicy\b(?![\[@ ])", text)  # not on PyPI
    assert "v0.1.0" not in text  # no such tag
    workflow, precommit = (YAML(typ="safe", pure=True).load(s) for s in _snippets(text, "yaml")[:2])
    runs = [s.get("run", "") for s in workflow["jobs"]["validate"]["steps"]]
    install = next(r for r in runs if "pip install" in r)
    assert "git+https://" in install and "ctxpolicy @" in install
    [repo] = precommit["repos"]
    assert re.fullmatch(r"[0-9a-f]{40}", repo["rev"]) or "REPLACE" in repo["rev"].upper()
    [hook] = repo["hooks"]
    assert hook["id"] == "ctxpolicy-validate"
    files = re.compile(hook["files"])
    assert files.search("policies/base.yaml") and files.search("policies/teams/a.toml")
    assert files.search("policies/templates/todo.j2")
    assert not files.search(".github/workflows/ci.yml")
    assert not files.search("config/app.yaml")


def test_ci_guide_placeholders_are_marked() -> None:
    text = " ".join((REPO / "docs" / "ci.md").read_text(encoding="utf-8").split())
    assert "YOUR-ORG" in text and "placeholder" in text
    assert "no release tags" in text


def test_the_git_url_form_of_the_install_command_is_what_pip_accepts() -> None:
    """The install command's argument is a valid PEP 508 direct reference."""
    from packaging.requirements import Requirement

    text = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    match = re.search(r'pip install "(ctxpolicy @ git\+https://[^"]+)"', text)
    assert match, 'docs/ci.md shows pip install "ctxpolicy @ git+https://..."'
    requirement = Requirement(match.group(1))
    assert requirement.name == "ctxpolicy" and requirement.url.startswith("git+https://")
