"""`ctxpolicy set` killed with SIGKILL at random moments: the policy file is always
byte-identical to the old or the new content; stale temporary files of a killed run
are inert and the next `set` works.

Decision on stale temporary files: the next ``set`` does not delete them. Their names
do not say which policy they belong to, so deleting ``.ctxpolicy-*`` files could remove
the in-flight temporary file of a concurrent ``set`` on a sibling policy. Instead they
are inert: hidden, never a policy target, and skipped when ``ctxpolicy validate``
scans a folder. `ctxpolicy set` leaves none behind when it is not killed.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from ctxpolicy.loading import load_policy, validate_paths
from tests.filesafety.support import ROOT, copy_policies, run_set, temp_files, text_after

KEY = "budget.ratios.query"
OLD, NEW = "0.12", "0.07"
#: Kills of a warm process that sets the value back and forth in a loop.
WARM_KILLS = 30
#: Kills of a cold ``ctxpolicy set`` process (start-up included).
COLD_KILLS = 8


def start_loop(base: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.filesafety.driver", "loop", str(base), KEY, NEW, OLD],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n", proc.stderr.read() if proc.stderr else b""
    return proc


def kill(proc: subprocess.Popen[bytes]) -> bool:
    """SIGKILL ``proc``; True when it was still running (a cold run may have finished)."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode in (0, -signal.SIGKILL)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    return proc.returncode == -signal.SIGKILL


def test_sigkill_at_random_moments_leaves_old_or_new_file(tmp_path: Path) -> None:
    folder = copy_policies(tmp_path)
    base = folder / "base.yaml"
    old = base.read_bytes()
    new = text_after(base, tmp_path, [(KEY, NEW)])
    assert text_after(base, tmp_path, [(KEY, NEW), (KEY, OLD)]) == old  # the loop's states
    candidates = {old, new}
    rnd = random.Random(8)
    seen: set[bytes] = set()
    for _ in range(WARM_KILLS):
        proc = start_loop(base)
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        time.sleep(rnd.uniform(0.0, 0.35))
        assert kill(proc)
        content = base.read_bytes()
        assert content in candidates
        seen.add(content)
    for _ in range(COLD_KILLS):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from ctxpolicy.cli import console_main; console_main()",
                "set",
                str(base),
                KEY,
                NEW if base.read_bytes() == old else OLD,
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rnd.uniform(0.05, 1.2))
        kill(proc)
        assert base.read_bytes() in candidates
    assert seen == candidates  # the kills landed at different points of the loop

    # whatever a kill left behind, the next set works and adds no temporary file
    stale = temp_files(folder)
    code, out = run_set(str(base), KEY, "0.05")
    assert code == 0, out
    assert load_policy(base).budget.ratios["query"] == 0.05
    assert temp_files(folder) == stale
    # and stale temporary files never count as policies of the folder
    assert [i for i in validate_paths([folder]) if i.severity == "error"] == []


def test_stale_temporary_files_are_skipped_by_folder_validation(tmp_path: Path) -> None:
    folder = copy_policies(tmp_path)
    # what a set killed mid-way may leave: a half-written candidate and a half-written .tmp
    (folder / ".ctxpolicy-k1l2m3.yaml").write_bytes((folder / "base.yaml").read_bytes()[:300])
    (folder / ".ctxpolicy-n4o5p6.yaml.tmp").write_bytes(b"version: 1\nna")
    assert [i for i in validate_paths([folder]) if i.severity == "error"] == []
    # named explicitly, such a file is still validated (and here is invalid)
    assert validate_paths([folder / ".ctxpolicy-k1l2m3.yaml"])
