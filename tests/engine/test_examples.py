"""The bundled examples run: quickstart.py and the preview of examples/state.json."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quickstart_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "=== react: 10 messages" in done.stdout
    assert "=== mapreduce_worker: 4 messages" in done.stdout
    assert "excluded checkpoint_messages: process mapreduce_worker" in done.stdout


def test_plans_budgets_and_reports_are_light() -> None:
    """What the validate path and the renderers read needs neither langchain-core nor tiktoken.

    The engine and the composer import both at module level, like every dependency that
    is no optional extra (tests/test_architecture.py); plans, caps and reports do not.
    """
    code = (
        "import sys, ctxpolicy.plan, ctxpolicy.budget, ctxpolicy.report\n"
        "heavy = [m for m in ('langchain_core', 'tiktoken') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
