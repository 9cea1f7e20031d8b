"""What the tests of the benchmark scripts share: loading a script of `benchmarks/` by path
(they are scripts, not a package: each imports its siblings from its own folder)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as a module (its sibling modules importable meanwhile)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture
def benchmark_script() -> Callable[[str], ModuleType]:
    """Loads ``benchmarks/<name>.py`` by name."""
    return _load
