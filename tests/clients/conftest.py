"""Real third-party clients (pre-commit, yaml-language-server, check-jsonschema, pip)
driven against this repository.

``tools/clients.sh`` (``make clients``) installs them, idempotently, into the clients
folder: ``$CTXPOLICY_CLIENTS_DIR``, default ``.venv/clients`` (ignored by git, removed by
``make clean``). The same folder keeps pre-commit's store (``PRE_COMMIT_HOME``) and a
stable clone of this repository used as the hook repository, so only the first run
builds the hook environment.

A client that is missing skips its tests with the reason; with
``CTXPOLICY_REQUIRE_CLIENTS=1`` it fails them instead (set that in CI, after
``tools/clients.sh``).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[2]
CLIENTS_DIR = Path(os.environ.get("CTXPOLICY_CLIENTS_DIR") or REPO / ".venv" / "clients")
YAML_LANGUAGE_SERVER = (
    CLIENTS_DIR / "node_modules" / "yaml-language-server" / "bin" / "yaml-language-server"
)


def missing_client(reason: str) -> NoReturn:
    """Skip (or, with ``CTXPOLICY_REQUIRE_CLIENTS`` set, fail) for a missing client."""
    reason = f"{reason} (tools/clients.sh installs it)"
    if os.environ.get("CTXPOLICY_REQUIRE_CLIENTS"):
        pytest.fail(f"{reason}; CTXPOLICY_REQUIRE_CLIENTS is set")
    pytest.skip(reason)


def python_client(module: str) -> list[str]:
    """``[python, -m, module]`` for a client installed in this interpreter's environment."""
    try:
        __import__(module)
    except ImportError:
        missing_client(f"{module} is not installed in {sys.prefix}")
    return [sys.executable, "-m", module]


@pytest.fixture(scope="session")
def yaml_language_server() -> list[str]:
    """The command line of yaml-language-server over stdio."""
    node = shutil.which("node")
    if node is None:
        missing_client("node is not installed (Debian: nodejs)")
    if not YAML_LANGUAGE_SERVER.is_file():
        missing_client(f"yaml-language-server is not installed in {CLIENTS_DIR}")
    return [node, str(YAML_LANGUAGE_SERVER), "--stdio"]
