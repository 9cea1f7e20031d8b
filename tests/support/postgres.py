"""A throwaway PostgreSQL server started from the machine's own binaries.

Used by the scale-out tests (LangGraph's Postgres checkpointer across OS processes).
Runs ``initdb`` into a temp folder and ``pg_ctl start`` on a free loopback port; when
the tests run as root (CI containers do), the server runs as the ``postgres`` user,
because PostgreSQL refuses to run as root. Everything is removed at the end.

A test process killed before its end (a mutation-testing timeout sends SIGKILL) cannot
stop its server: each server's folder records the test process that owns it, and the
next start stops and removes the servers whose owner is gone (`sweep_orphans`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


def find_postgres_bindir() -> Path | None:
    """The folder holding ``initdb``/``pg_ctl``/``postgres``, or None when not installed."""
    candidates: list[Path] = []
    found = shutil.which("pg_ctl")
    if found:
        candidates.append(Path(found).resolve().parent)
    candidates.extend(sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True))
    for folder in candidates:
        if all((folder / tool).exists() for tool in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_server_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


PREFIX = "ctxpolicy-pg-"
#: The file in a server's folder naming the test process that started it.
OWNER = "owner.pid"


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    try:  # Linux: the state follows the command name in parentheses
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def stop_server(bindir: Path, base: Path) -> None:
    """Stop the server in ``base`` (if it has one) and remove the folder."""
    data = base / "data"
    if data.exists():
        subprocess.run(
            _as_server_user(
                [str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]
            ),
            check=False,
            capture_output=True,
            timeout=60,
        )
    shutil.rmtree(base, ignore_errors=True)


def sweep_orphans(bindir: Path, *, root: Path | None = None) -> list[Path]:
    """Stop and remove the servers whose owning test process is gone; returns their folders.

    A folder without an owner file (still being set up, or from an older suite) is left.
    """
    swept = []
    for base in sorted(Path(root or tempfile.gettempdir()).glob(f"{PREFIX}*")):
        try:
            owner = int((base / OWNER).read_text(encoding="ascii"))
        except (OSError, ValueError):
            continue
        if not alive(owner):
            stop_server(bindir, base)
            swept.append(base)
    return swept


@contextlib.contextmanager
def running_postgres(bindir: Path) -> Iterator[str]:
    """Start a server, yield its DSN, stop and delete it afterwards."""
    sweep_orphans(bindir)
    base = Path(tempfile.mkdtemp(prefix=PREFIX))
    (base / OWNER).write_text(str(os.getpid()), encoding="ascii")
    data = base / "data"
    sockets = base / "sock"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
        shutil.chown(sockets, "postgres")
        base.chmod(0o755)
    port = _free_port()
    log = base / "server.log"
    try:
        subprocess.run(
            _as_server_user(
                [
                    str(bindir / "initdb"),
                    "-D",
                    str(data),
                    "-A",
                    "trust",
                    "-U",
                    "ctxpolicy",
                    "--no-sync",
                    "-E",
                    "UTF8",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
        options = (
            f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=100"
        )
        subprocess.run(
            _as_server_user(
                [
                    str(bindir / "pg_ctl"),
                    "-D",
                    str(data),
                    "-o",
                    options,
                    "-l",
                    str(log),
                    "-w",
                    "-t",
                    "60",
                    "start",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
        yield f"postgresql://ctxpolicy@127.0.0.1:{port}/postgres"
    finally:
        stop_server(bindir, base)
