"""Shared fixtures for the whole suite."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.postgres import find_postgres_bindir, running_postgres


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """DSN of a real, throwaway PostgreSQL server (skips when the binaries are missing).

    ``make test`` installs Debian's ``postgresql`` package when it is missing and sets
    ``CTXPOLICY_REQUIRE_POSTGRES=1``, so there a missing server fails instead of skipping.
    """
    bindir = find_postgres_bindir()
    if bindir is None:
        reason = "PostgreSQL server binaries not installed (apt-get install postgresql)"
        if os.environ.get("CTXPOLICY_REQUIRE_POSTGRES"):  # set by `make test`
            pytest.fail(f"{reason}; CTXPOLICY_REQUIRE_POSTGRES is set")
        pytest.skip(reason)
    with running_postgres(bindir) as dsn:
        yield dsn
