"""The throwaway PostgreSQL server of the suite cleans up after a test process killed mid-run.

A mutation-testing timeout kills the test process with SIGKILL: its ``finally`` never
runs, and its server kept running until the next start found it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.postgres import (
    OWNER,
    PREFIX,
    alive,
    find_postgres_bindir,
    stop_server,
    sweep_orphans,
)

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import sys, time
from pathlib import Path
from tests.support.postgres import running_postgres
with running_postgres(Path(sys.argv[1])) as dsn:
    print(dsn, flush=True)
    time.sleep(600)
"""


@pytest.fixture
def bindir() -> Path:
    found = find_postgres_bindir()
    if found is None:
        reason = "PostgreSQL server binaries not installed (apt-get install postgresql)"
        if os.environ.get("CTXPOLICY_REQUIRE_POSTGRES"):
            pytest.fail(f"{reason}; CTXPOLICY_REQUIRE_POSTGRES is set")
        pytest.skip(reason)
    return found


@pytest.fixture
def root(bindir: Path) -> Iterator[Path]:
    """A temp folder of this test's own that the server's user can enter (its servers
    are stopped at the end, whatever the test did)."""
    folder = Path(tempfile.mkdtemp(prefix="ctxpolicy-sweep-"))
    folder.chmod(0o755)
    yield folder
    for base in servers(folder):
        stop_server(bindir, base)
    shutil.rmtree(folder, ignore_errors=True)


def servers(root: Path) -> list[Path]:
    return sorted(root.glob(f"{PREFIX}*"))


def server_pid(base: Path) -> int:
    """The process id of the server in ``base`` (from its ``postmaster.pid``)."""
    return int((base / "data" / "postmaster.pid").read_text().split()[0])


def test_a_server_left_by_a_killed_test_process_is_stopped_and_removed(
    bindir: Path, root: Path
) -> None:
    env = {**os.environ, "TMPDIR": str(root), "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(bindir)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().startswith("postgresql://")
        (base,) = servers(root)
        assert (base / OWNER).read_text() == str(child.pid)
        assert sweep_orphans(bindir, root=root) == []  # its owner is alive: left alone
        server = server_pid(base)
        assert alive(server)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert alive(server)  # nothing stopped it
    assert sweep_orphans(bindir, root=root) == [base]
    assert servers(root) == []
    assert not alive(server)


def test_a_folder_without_an_owner_is_left_alone(bindir: Path, root: Path) -> None:
    (root / f"{PREFIX}setting-up").mkdir()
    (root / f"{PREFIX}garbled").mkdir()
    (root / f"{PREFIX}garbled" / OWNER).write_text("not a pid")
    assert sweep_orphans(bindir, root=root) == []
    assert len(servers(root)) == 2
