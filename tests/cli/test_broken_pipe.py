"""A closed output pipe (``ctxpolicy show ... | head -1``) ends the command quietly with
exit code 141 (128 + SIGPIPE, what ``cat`` and ``git`` exit with there), never
``[Errno 32]`` or a traceback. Real pipes, real processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXIT_BROKEN_PIPE = 141

COMMANDS = {
    "show-explain": ["show", "--explain", "policies/base.yaml"],
    "show": ["show", "policies/base.yaml"],
    "validate": ["validate", "policies"],
    "validate-json": ["validate", "policies", "--format", "json"],
    "preview": [
        "preview",
        "policies/base.yaml",
        "--process",
        "react",
        "--state",
        "examples/state.json",
    ],
    "schema": ["schema"],
    "diff": ["diff", "policies/base.yaml", "policies/teams/data-platform.yaml"],
    "completion": ["completion", "bash"],
}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXPOLICY_")}
    env["PYTHONPATH"] = str(REPO)
    return env


@pytest.mark.parametrize("name", COMMANDS)
def test_output_into_a_pipe_nobody_reads_ends_quietly(name: str) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone (as `head` has after its first line)
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "ctxpolicy", *COMMANDS[name]],
            cwd=REPO,
            env=_env(),
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        os.close(write_end)
    _, err = process.communicate(timeout=120)
    assert err == ""
    assert process.returncode == EXIT_BROKEN_PIPE


def test_head_one_in_a_shell_pipeline(tmp_path: Path) -> None:
    """More than a pipe buffer of output: the command is still writing when head exits."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    rows = "".join(f"  k{i:05d}: value number {i}\n" for i in range(6000))
    (tmp_path / "big.yaml").write_text(f"version: 1\nname: big\nvars:\n{rows}", encoding="utf-8")
    script = (
        f"{sys.executable} -m ctxpolicy show --explain big.yaml 2>err.txt | head -1\n"
        'echo "status=${PIPESTATUS[0]}"\n'
    )
    done = subprocess.run(
        [bash, "--norc", "--noprofile", "-c", script],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    first, status = done.stdout.splitlines()
    assert first == "$.version = 1  # big.yaml:1:1"
    assert status == f"status={EXIT_BROKEN_PIPE}"
    assert (tmp_path / "err.txt").read_text(encoding="utf-8") == ""
