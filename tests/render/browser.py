"""Drive Debian's headless chromium: dump the DOM of a page, or take a screenshot.

``make test`` installs the ``chromium`` package when it is missing; the tests that need
it are marked ``browser`` and skip only when no chromium binary exists at all (set
``CTXPOLICY_REQUIRE_BROWSER=1`` to turn that skip into a failure, as CI does).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support.chromium import run_chromium


def chromium_binary() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and Path("/usr/bin/chromium").exists():
        found = "/usr/bin/chromium"
    if found is None:
        if os.environ.get("CTXPOLICY_REQUIRE_BROWSER"):
            pytest.fail("chromium is required (CTXPOLICY_REQUIRE_BROWSER) but not installed")
        pytest.skip("headless chromium not installed (apt-get install chromium)")
    return found


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="ctxpolicy-chromium-") as profile:
        return run_chromium(chromium_binary(), profile, args)


def dump_dom(page: Path) -> str:
    """The serialized DOM chromium builds for ``page`` (after parsing and layout)."""
    result = _run(["--virtual-time-budget=2000", "--dump-dom", page.resolve().as_uri()])
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def screenshot(page: Path, png: Path, *, width: int = 1200, height: int = 1500) -> None:
    """Save a PNG screenshot of ``page``."""
    result = _run(
        [
            f"--window-size={width},{height}",
            f"--screenshot={png.resolve()}",
            page.resolve().as_uri(),
        ]
    )
    assert png.exists(), result.stderr[-2000:]
