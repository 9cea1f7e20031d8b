"""Shared fixtures for the whole suite."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.support.postgres import find_postgres_bindir, running_postgres

# Property tests assert behaviour, never speed: no per-example deadline unless a test sets
# one on purpose (the hostile-input fuzzing bounds time that way). Under CI the examples
# are derandomized, so a CI run is reproducible from the commit alone.
settings.register_profile(
    "ctxpolicy",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=bool(os.environ.get("CI")),
)
settings.load_profile("ctxpolicy")


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
