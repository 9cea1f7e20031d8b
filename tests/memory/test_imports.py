"""Import hygiene: no langgraph without a store; ``import ctxpolicy`` stays light."""

from __future__ import annotations

import subprocess
import sys


def _run(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_memory_without_store_never_imports_langgraph():
    out = _run(
        "import sys; from ctxpolicy.memory import TieredMemory, select_memory;"
        "from ctxpolicy.collectors.memory import collect_memory;"
        "m = TieredMemory(2, 2, 2); [m.add(f'x{i}') for i in range(5)]; m.search('x1', 2);"
        "select_memory(m, strategy='comprehensive');"
        "print(any(k.startswith('langgraph') for k in sys.modules))"
    )
    assert out == "False"


def test_import_ctxpolicy_does_not_load_memory():
    out = _run("import sys, ctxpolicy; print('ctxpolicy.memory' in sys.modules)")
    assert out == "False"
