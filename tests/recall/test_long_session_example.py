"""examples/long_session.py (run by `make demo`) shows what recall brings back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "long_session.py"


def test_the_example_recalls_the_buried_line_and_the_correction_after_the_old_value() -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, check=True, timeout=120
    )
    out = result.stdout
    assert "[#612 tool get_logs L42] 02:41 batch-300 ERROR connection pool exhausted" in out
    assert out.index("port 5432") < out.index("port 6432")
    assert "16319 new message(s) indexed" in out
