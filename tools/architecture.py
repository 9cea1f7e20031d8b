"""Figures about the package's structure, for the notes and docs/design.md.

Run ``python tools/architecture.py`` (``--json`` for a machine-readable line). It prints:

* lines of package code (physical lines of ``ctxpolicy/**/*.py``);
* functions above cyclomatic complexity 10 and 15 (radon, as ``radon cc`` counts);
* imports inside functions, split into ctxpolicy's own modules and third-party ones;
* import cycles between modules and between packages ("rooms"), module-level imports only
  (``if TYPE_CHECKING:`` blocks excluded, as they never run);
* hops per compose: calls from one ctxpolicy module into another during one warm
  ``PolicyEngine.compose`` of the demo policy (``policies/base.yaml``, process ``react``).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ctxpolicy"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(module: str, node: ast.ImportFrom, *, is_package: bool) -> list[str]:
    if node.level == 0:
        base = node.module or ""
    else:
        parts = module.split(".")
        keep = len(parts) - node.level + (1 if is_package else 0)
        base = ".".join(parts[:keep] + ([node.module] if node.module else []))
    # `from pkg import mod` imports a module when pkg/mod.py exists
    found = []
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        if _exists(candidate):
            found.append(candidate)
    return found or [base]


def _exists(module: str) -> bool:
    path = ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imports_of(path: Path) -> tuple[set[str], list[str], list[str]]:
    """Module-level ctxpolicy imports, and in-function imports (own, third-party)."""
    module = module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top: set[str] = set()
    own_inner: list[str] = []
    other_inner: list[str] = []

    def targets(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        return _resolve(module, node, is_package=path.name == "__init__.py")

    def walk(body: list[ast.stmt], *, inside_function: bool) -> None:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                for name in targets(node):
                    if inside_function:
                        (own_inner if name.startswith("ctxpolicy") else other_inner).append(name)
                    elif name.startswith("ctxpolicy"):
                        top.add(name)
            elif isinstance(node, ast.If) and _is_type_checking(node):
                continue
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                walk(node.body, inside_function=True)
            elif hasattr(node, "body"):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    walk(getattr(node, field, []) or [], inside_function=inside_function)

    walk(tree.body, inside_function=False)
    return top, own_inner, other_inner


def _room(module: str) -> str:
    """A room is a subpackage (``ctxpolicy.recall``) or a top-level module (``ctxpolicy.plan``)."""
    return ".".join(module.split(".")[:2])


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def import_graph(*, with_function_imports: bool = False) -> dict[str, set[str]]:
    """Module -> the ctxpolicy modules it imports (optionally counting imports in functions).

    The package's ``__init__`` is left out: its lazy attribute table points at everything.
    """
    graph: dict[str, set[str]] = {}
    for path in package_files():
        name = module_name(path)
        if name == "ctxpolicy":
            continue
        top, own_inner, _ = imports_of(path)
        targets = top | set(own_inner) if with_function_imports else top
        graph[name] = {target for target in targets if target not in (name, "ctxpolicy")}
    return graph


def room_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Package-level arrows; an `__init__` re-exporting its own children is not an arrow."""
    rooms: dict[str, set[str]] = defaultdict(set)
    for module, targets in graph.items():
        source = _room(module)
        rooms[source]
        for target in targets:
            room = _room(target)
            if room != source:
                rooms[source].add(room)
    return rooms


def complexity() -> list[tuple[int, str]]:
    """Cyclomatic complexity of every function and method (radon, as ``radon cc`` counts)."""
    from radon.complexity import cc_visit
    from radon.visitors import Class

    found = []
    for path in package_files():
        # radon lists functions and methods (flattened) beside their classes
        blocks = cc_visit(path.read_text(encoding="utf-8"))
        found.extend(
            (block.complexity, f"{path.relative_to(ROOT)}:{block.fullname}")
            for block in blocks
            if not isinstance(block, Class)
        )
    return sorted(found, reverse=True)


def compose_hops() -> tuple[int, int]:
    """(hops between ctxpolicy modules, distinct modules entered) in one warm compose."""
    sys.path.insert(0, str(ROOT))
    from ctxpolicy import load_policy
    from ctxpolicy.engine import PolicyEngine

    state = json.loads((ROOT / "examples" / "state.json").read_text(encoding="utf-8"))
    engine = PolicyEngine(load_policy(ROOT / "policies" / "base.yaml"))
    engine.compose(process="react", system_prompt="You are a data engineer.", state=state)
    hops = 0
    modules: set[str] = set()

    def profile(frame, event, _arg):  # noqa: ANN001, ANN202
        nonlocal hops
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
        if callee.startswith("ctxpolicy"):
            modules.add(callee)
            if caller.startswith("ctxpolicy") and caller != callee:
                hops += 1

    sys.setprofile(profile)
    try:
        engine.compose(process="react", system_prompt="You are a data engineer.", state=state)
    finally:
        sys.setprofile(None)
    return hops, len(modules)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--list", action="store_true", help="list the complex functions")
    args = parser.parse_args()

    files = package_files()
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in files)
    own_inner: list[str] = []
    other_inner: list[str] = []
    for path in files:
        _, own, other = imports_of(path)
        own_inner += own
        other_inner += other
    graph = import_graph()
    rooms = room_graph(graph)
    all_rooms = room_graph(import_graph(with_function_imports=True))
    scores = complexity()
    hops, entered = compose_hops()
    figures = {
        "modules": len(files),
        "lines": lines,
        "functions_over_10": sum(1 for s, _ in scores if s > 10),
        "functions_over_15": sum(1 for s, _ in scores if s > 15),
        "max_complexity": scores[0][0] if scores else 0,
        "imports_in_functions_own": len(own_inner),
        "imports_in_functions_third_party": len(other_inner),
        "module_cycles": _cycles(graph),
        "module_cycles_via_functions": _cycles(import_graph(with_function_imports=True)),
        "rooms": len(rooms),
        "room_arrows": sum(len(v) for v in rooms.values()),
        "room_cycles": _cycles(rooms),
        "room_arrows_via_functions": sum(len(v) for v in all_rooms.values()),
        "room_cycles_via_functions": _cycles(all_rooms),
        "hops_per_compose": hops,
        "modules_per_compose": entered,
    }
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:34} {value}")
    if args.list:
        for score, where in scores:
            if score > 10:
                print(f"{score:4}  {where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
