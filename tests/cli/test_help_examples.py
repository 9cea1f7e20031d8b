"""Every ``--help`` example runs, as printed, from an empty folder (issue 33, finding 3).

Each verb's examples run in order in a fresh folder with the console script first on
``PATH``; they use only ``builtin:NAME`` and the files an earlier example wrote.
``tests/clients/test_wheel_install.py`` runs the same examples from an installed wheel.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.help_examples import DIFFER_OK, all_examples

BIN = Path(sys.executable).parent
CASES = all_examples()


def run_examples(verb: str | None, commands: list[str], folder: Path, env: dict[str, str]) -> None:
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        allowed = (0, 1) if verb in DIFFER_OK and " diff " in f" {command} " else (0,)
        assert done.returncode in allowed, (
            f"ctxpolicy {verb or ''} --help example failed: {command}\n"
            f"exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
        assert "Traceback" not in done.stderr, command


@pytest.mark.parametrize(("verb", "commands"), CASES, ids=[v or "top" for v, _ in CASES])
def test_every_help_example_runs_from_an_empty_folder(
    verb: str | None, commands: list[str], tmp_path: Path
) -> None:
    assert shutil.which("ctxpolicy", path=str(BIN)), "the console script is not installed"
    assert commands, f"{verb}: no example"
    folder = tmp_path / "empty"
    folder.mkdir()
    env = {
        "PATH": f"{BIN}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
    }
    run_examples(verb, commands, folder, env)
