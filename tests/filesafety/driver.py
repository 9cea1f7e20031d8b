"""A ``ctxpolicy set`` process for the file-safety tests (run with ``python -m``).

``loop FILE KEY V1 V2 ...``: import everything, print ``ready``, wait for one line on
stdin, then set KEY to V1, V2, V1, V2, ... forever (until the test kills it).

``burst GO FILE KEY V1 V2 ...``: import everything, print ``ready``, wait until the
file GO exists (a barrier shared by several processes), set KEY to each value in turn,
then print the exit codes as JSON.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import sys
import time
from pathlib import Path

from ctxpolicy.cli import main
from ctxpolicy.editing import set_policy_value  # noqa: F401  (import before "ready")
from ctxpolicy.loading import validate_paths  # noqa: F401


def _set(file: str, key: str, value: str) -> int:
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        return main(["set", file, key, value])


def run(argv: list[str]) -> int:
    mode = argv[0]
    print("ready", flush=True)
    if mode == "loop":
        file, key, *values = argv[1:]
        sys.stdin.readline()
        for value in itertools.cycle(values):
            _set(file, key, value)
    go, file, key, *values = argv[1:]
    while not Path(go).exists():
        time.sleep(0.001)
    codes = [_set(file, key, value) for value in values]
    print(json.dumps(codes), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
