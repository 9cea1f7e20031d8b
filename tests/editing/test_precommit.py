"""The published pre-commit hook and the repository's own use of it."""

from __future__ import annotations

import re
import shlex

from ruamel.yaml import YAML

from tests.editing.conftest import REPO, run_cli


def load(name: str):
    return YAML(typ="safe", pure=True).load((REPO / name).read_text(encoding="utf-8"))


def test_published_hooks() -> None:
    hook, installed = load(".pre-commit-hooks.yaml")
    assert hook["id"] == "ctxpolicy-validate"
    assert hook["language"] == "python"  # installs this package, console script included
    # the lean variant builds nothing: it runs the ctxpolicy the project installed
    assert installed["id"] == "ctxpolicy-validate-installed"
    assert installed["language"] == "system"
    for published in (hook, installed):
        assert published["entry"] == "ctxpolicy validate"
        assert published["pass_filenames"] is False  # validates the whole folder
        for name in ("policies/base.yaml", "policies/teams/analytics.toml", "x/templates/todo.j2"):
            assert re.search(published["files"], name)
        assert not re.search(published["files"], "README.md")


def test_repository_uses_its_own_hook(monkeypatch, capsys) -> None:
    config = load(".pre-commit-config.yaml")
    [repo] = config["repos"]
    assert repo["repo"] == "local"
    hooks = {hook["id"]: hook for hook in repo["hooks"]}
    assert set(hooks) == {"ctxpolicy-validate", "ruff-format"}
    # the formatting `make test` checks (`ruff format --check`) is applied on commit
    assert shlex.split(hooks["ruff-format"]["entry"]) == [".venv/bin/ruff", "format"]
    hook = hooks["ctxpolicy-validate"]
    assert re.search(hook["files"], "policies/teams/data-platform.yaml")
    argv = shlex.split(hook["entry"])
    assert argv[:2] == [".venv/bin/ctxpolicy", "validate"]
    # the same command, in-process, from the repository root: the bundled policies pass
    monkeypatch.chdir(REPO)
    assert run_cli(*argv[1:]) == 0
    capsys.readouterr()
