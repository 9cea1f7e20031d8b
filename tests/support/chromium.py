"""The one headless-Chromium command line of the project (tests and the docs screenshot).

The flags keep Chromium off the network (this machine has none) and out of the user's
profile; see the machine notes on running Debian's chromium headless as root.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

HEADLESS_FLAGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
)


def run_chromium(
    binary: str, profile: str, args: Sequence[str], *, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run ``binary`` headless with a fresh ``profile`` folder and ``args``."""
    command = [binary, *HEADLESS_FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=check)
