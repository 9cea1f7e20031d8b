"""The package's structure rules (docs/design.md, "Structure"), checked on the source.

`tools/architecture.py` computes the figures; these tests hold the rules: no import cycle,
no import that runs up the floors below, no ctxpolicy import hidden inside a function, no
function above cyclomatic complexity 15.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _architecture() -> ModuleType:
    path = ROOT / "tools" / "architecture.py"
    spec = importlib.util.spec_from_file_location("architecture", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("architecture", module)
    spec.loader.exec_module(module)
    return module


ARCH = _architecture()

#: The floors, lowest first. A room (a subpackage, or a top-level module) may import rooms on
#: its own floor or below, never above. docs/design.md explains each floor.
FLOORS: tuple[tuple[str, ...], ...] = (
    # ground: the vocabulary, errors, positions and findings
    ("errors", "diagnostics", "layers", "builtin", "logs"),
    # the format: models (the source of truth) and the schema generated from them
    ("policy", "policy_views", "schema", "schemas", "tokenizers"),
    # the pure pipeline: plan -> budget -> history -> compose -> report (validation checks
    # a policy's plans and templates with the same code, so it sits above)
    ("tokens", "templates", "budget", "plan", "history", "next_turn", "report", "compose"),
    # reading and checking policy files
    ("settings", "settings_model", "validation", "loading"),
    # what fills the layers
    ("summarize", "blocks", "memory", "recall", "collectors"),
    # the engine that runs one call
    ("engine",),
    # hosts: graph state, LangGraph / LangChain, test helpers
    ("state", "integrations", "testing"),
    # tools users run: renderers, editors, the command line
    ("render", "atomic", "editing", "diffing", "cli", "__main__"),
)

#: Third-party packages that are optional extras (or dev tools): imported where used.
OPTIONAL_IMPORTS = frozenset(
    {
        "langgraph",
        "langchain",
        "psycopg",
        "psycopg_pool",
        "wordllama",
        "numpy",
        "deepagents",
        "tokenizers",
        "safetensors",
    }
)


#: Imports made inside a function on purpose, each the one such import of its module:
#: what ``ctxpolicy validate`` needs only for an unusual file (docs/design.md, "Structure").
#: They still count in the import graph (cycles, floors).
LAZY_IMPORTS = {
    # the ruamel.yaml round-trip reader: a document outside libyaml's event reader's subset
    "ctxpolicy/loading/yaml_reader.py": ["ctxpolicy.loading.yaml_roundtrip"],
    # jsonschema: a document the compiled schema rejects (to explain its errors)
    "ctxpolicy/validation/schema_check.py": ["jsonschema"],
    # the template sandbox and jinja2: a policy with a template
    "ctxpolicy/validation/files.py": ["ctxpolicy.templates"],
    # the pydantic models: a document with schema errors, or a `Policy` to build
    "ctxpolicy/validation/__init__.py": ["ctxpolicy.policy"],
    # the pydantic settings model: a CTXPOLICY_* variable is set
    "ctxpolicy/settings.py": ["ctxpolicy.settings_model"],
    # rjieba (its dictionary loads on import, ~0.1 s): the first text with Han characters
    "ctxpolicy/recall/segment.py": ["rjieba"],
    # a builtin dense model (langchain-core's Embeddings and numpy): a recall layer that
    # names one
    "ctxpolicy/recall/recaller.py": ["ctxpolicy.recall.minilm"],
    # importlib.metadata: --version
    "ctxpolicy/cli/__init__.py": ["importlib.metadata"],
}


def _floor(room: str) -> int:
    short = room.split(".", 1)[1] if "." in room else room
    for level, names in enumerate(FLOORS):
        if short in names:
            return level
    pytest.fail(f"{room} is on no floor: add it to FLOORS (and to docs/design.md)")


def test_every_module_imports_without_a_cycle() -> None:
    graph = ARCH.import_graph(with_function_imports=True)
    assert ARCH._cycles(graph) == []
    assert ARCH._cycles(ARCH.room_graph(graph)) == []


def test_no_import_runs_upward() -> None:
    rooms = ARCH.room_graph(ARCH.import_graph(with_function_imports=True))
    upward = sorted(
        f"{source} -> {target}"
        for source, targets in rooms.items()
        for target in targets
        if _floor(target) > _floor(source)
    )
    assert upward == []


def test_no_ctxpolicy_import_inside_a_function() -> None:
    hidden = {}
    for path in ARCH.package_files():
        if path == ROOT / "ctxpolicy" / "__init__.py":
            continue  # the lazy public surface (PEP 562 __getattr__)
        _, own, other = ARCH.imports_of(path)
        heavy = [name for name in other if name.split(".")[0] not in OPTIONAL_IMPORTS]
        declared = LAZY_IMPORTS.get(path.relative_to(ROOT).as_posix(), [])
        if sorted(own + heavy) != sorted(declared):
            hidden[str(path.relative_to(ROOT))] = own + heavy
    assert hidden == {}


def test_no_function_is_above_complexity_15() -> None:
    too_complex = [f"{where} ({score})" for score, where in ARCH.complexity() if score > 15]
    assert too_complex == []


def test_the_readme_layout_names_every_room_of_the_tree() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Layout", 1)[1].split("```", 2)[1]
    named = {
        word.rstrip("/")
        for line in block.splitlines()[2:]
        for word in line.split("  ")[:6]
        if word.strip().endswith((".py", "/"))
        for word in [word.strip()]
    }
    package = ROOT / "ctxpolicy"
    rooms = {
        path.name
        for path in package.iterdir()
        if (path.suffix == ".py" and path.name not in ("__init__.py", "__main__.py"))
        or (path / "__init__.py").exists()
    }
    assert named == rooms


def test_every_room_is_on_a_floor() -> None:
    rooms = ARCH.room_graph(ARCH.import_graph(with_function_imports=True))
    for room in rooms:
        _floor(room)
