"""A throwaway PostgreSQL server started from the machine's own binaries.

Used by the scale-out tests (LangGraph's Postgres checkpointer across OS processes).
Runs ``initdb`` into a temp folder and ``pg_ctl start`` on a free loopback port; when
the tests run as root (CI containers do), the server runs as the ``postgres`` user,
because PostgreSQL refuses to run as root. Everything is removed at the end.
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


@contextlib.contextmanager
def running_postgres(bindir: Path) -> Iterator[str]:
    """Start a server, yield its DSN, stop and delete it afterwards."""
    base = Path(tempfile.mkdtemp(prefix="ctxpolicy-pg-"))
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
