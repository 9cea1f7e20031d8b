"""``make demo`` installs only what the demo runs (issue 33, finding 8): the core package,
no extra, and the demo's commands need nothing else."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: The runtime dependencies of the core package (pyproject's ``dependencies``), by module.
CORE_MODULES = {"langchain_core", "ctxpolicy", "pathlib", "__future__"}


def _target(makefile: str, name: str) -> tuple[str, list[str]]:
    match = re.search(rf"^{re.escape(name)}:(.*)\n((?:\t.*\n)*)", makefile, flags=re.M)
    assert match, name
    return match.group(1).strip(), [line.strip() for line in match.group(2).splitlines()]


def test_demo_installs_the_core_only() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    prerequisites, _ = _target(makefile, "demo")
    assert prerequisites == "$(DEMO_STAMP)"
    _, recipe = _target(makefile, "$(DEMO_STAMP)")
    installs = [line for line in recipe if "pip install" in line]
    assert installs and all("-e ." in line and "[" not in line for line in installs)


def test_the_demo_runs_core_commands_and_an_example_that_needs_no_extra() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    _, recipe = _target(makefile, "demo")
    scripts = [line.split()[-1] for line in recipe if line.startswith("$(BIN)/python ")]
    assert scripts == ["examples/long_session.py"]
    tree = ast.parse((REPO / scripts[0]).read_text(encoding="utf-8"))
    imported = {
        (node.module or "").split(".")[0] if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported - CORE_MODULES - set(sys.stdlib_module_names) == set()
    for line in recipe:
        if line.startswith("$(BIN)/ctxpolicy"):
            assert line.split()[1] in {"validate", "preview"}, line
