"""langgraph stays an optional extra: the core never imports it."""

from __future__ import annotations

import subprocess
import sys


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)


def test_core_and_integrations_package_do_not_import_langgraph() -> None:
    out = run(
        "import sys, ctxpolicy, ctxpolicy.integrations\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'langgraph'))"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_state_without_langgraph_says_which_extra_to_install() -> None:
    out = run("import sys\nsys.modules['langgraph'] = None\nimport ctxpolicy.state")
    assert out.returncode != 0
    assert "pip install 'ctxpolicy[langgraph]'" in out.stderr
