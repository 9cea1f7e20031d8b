"""Shared fixtures for the whole suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.postgres import find_postgres_bindir, running_postgres


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """DSN of a real, throwaway PostgreSQL server (skips when the binaries are missing).

    ``.ci/run`` (through ``make test``) installs Debian's ``postgresql`` package when it is
    missing, so in CI these tests always run.
    """
    bindir = find_postgres_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries not installed (apt-get install postgresql)")
    with running_postgres(bindir) as dsn:
        yield dsn
