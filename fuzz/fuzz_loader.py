"""Coverage-guided fuzz target for the policy loader and validator (atheris).

atheris is not a dependency of ctxpolicy and the test suite never imports this file.
See ``fuzz/README.md`` for how to run it; in short::

    pip install atheris
    python fuzz/fuzz_loader.py fuzz/corpus -max_total_time=3600

Every input is written as a ``.yaml`` and a ``.toml`` policy file and loaded; the
target fails (and atheris saves the input) on any exception other than
`PolicyValidationError`, on an issue without file/line/column, or when the loader
and `validate_paths` disagree about validity.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import atheris  # type: ignore[import-not-found]

with atheris.instrument_imports():
    from ctxpolicy.errors import PolicyValidationError
    from ctxpolicy.loading import load_policy, validate_paths

WORKDIR = Path(tempfile.mkdtemp(prefix="ctxpolicy-atheris-"))
(WORKDIR / "templates").mkdir()
(WORKDIR / "templates" / "todo.j2").write_text("{{ value }}\n")


def check(path: Path) -> None:
    issues = validate_paths([path])
    for issue in issues:
        if not issue.file or issue.line < 1 or issue.column < 1:
            raise AssertionError(f"issue without a location: {issue!r}")
    errors = [i for i in issues if i.severity == "error"]
    try:
        load_policy(path)
    except PolicyValidationError:
        if not errors:
            raise AssertionError("load_policy refused a file validate_paths accepts") from None
        return
    if errors:
        raise AssertionError("load_policy accepted a file validate_paths refuses")


def test_one_input(data: bytes) -> None:
    for suffix in (".yaml", ".toml"):
        path = WORKDIR / f"p{suffix}"
        path.write_bytes(data)
        check(path)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
