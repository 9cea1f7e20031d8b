"""What a next turn costs in cache lines, counted by valgrind's callgrind (no timer).

Why: at N = 100,000 ``make bench`` times each next turn right after a LangGraph-style
append (a new list of every message, the old one freed). That copy passes over some
6 MB of message headers and evicts the 2 MiB L2 cache of the machines this runs on, so
the call that follows fetches every line it touches from further away. A next turn then
costs what it touches, not only what it executes, and a timer on a noisy machine cannot
say which. Callgrind simulates the caches instruction by instruction: the counts do not
depend on the machine's load or speed. With the worker's hash seed fixed, two runs of
the same checkout give the same counts; another checkout (its paths are other strings)
moves them by a few dozen lines, and so did a random seed (dict layouts).

For each contender (ctxpolicy's next turn through ``PolicyEngine.compose``; `FloorTurn`
from ``next_turn.py``, a next turn reduced to its essential steps; encoding the 2 new
messages, the reference of the target) a process under ``valgrind --tool=callgrind
--cache-sim=yes`` with a 2 MiB last-level cache builds the history untraced (valgrind
starts with instrumentation off; ``callgrind_control`` turns it on once the history is
made), runs `WARMUP` next turns, then `TURNS` traced ones, each right after an equal copy
of the list as in ``bench_compose``. Only the call is traced: it is made through
``operator.call``, whose C function (``_operator_call``) toggles collection.

Per turn it prints instructions, and the misses of the 2 MiB last level: instruction
fetches, data reads, data writes (each a 64-byte line fetched from L3 or memory).

    .venv/bin/python benchmarks/cache_footprint.py            # N = 30,000, ~3 minutes
    .venv/bin/python benchmarks/cache_footprint.py --record   # also results/cache_footprint.md

Needs valgrind (``apt-get install valgrind``); not run by ``run.py``.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: History length: its copy (messages and both lists) is larger than `LL_BYTES`.
DEFAULT_N = 30_000
#: Untraced next turns first: the interpreter specializes a function after some calls.
WARMUP = 20
TURNS = 10
#: The simulated last-level cache: 2 MiB, 16-way, 64-byte lines (the L2 of this machine).
LL_BYTES = 2 << 20
LL_OPTION = f"--LL={LL_BYTES},16,64"
CONTENDERS = ("ctxpolicy", "floor", "encode")
#: callgrind's event names -> ours (per turn)
EVENTS = {
    "Ir": "instructions",
    "ILmr": "code lines",
    "DLmr": "data lines read",
    "DLmw": "data lines written",
}


def worker(contender: str, n: int) -> None:
    """Run under callgrind: make the history, wait to be instrumented, run the turns."""
    from bench_compose import ENGINE_POLICY, MAX_TOKENS, _encode_all
    from next_turn import SYSTEM_PROMPT, FloorTurn
    from workload import make_history, make_next_turn

    from ctxpolicy.engine import PolicyEngine
    from ctxpolicy.policy import Policy
    from ctxpolicy.tokens import get_tokenizer

    engine = PolicyEngine(Policy.model_validate(ENGINE_POLICY))
    tok = get_tokenizer("cl100k_base")
    history = make_history(n)
    reference = engine.compose(system_prompt=SYSTEM_PROMPT, checkpoint_messages=history)
    floor = FloorTurn(history, reference.messages[1:], max_tokens=MAX_TOKENS)
    news = [make_next_turn(n, turn=20_000 + turn) for turn in range(WARMUP + TURNS)]
    print("ready", flush=True)
    sys.stdin.readline()  # instrumentation is on
    current = history
    for turn, new in enumerate(news):
        current = current + new  # the application appends
        current = list(current)  # the equal copy every timed call follows (bench_compose)
        if contender == "ctxpolicy":
            args: tuple[Any, ...] = ()
            kwargs = {"system_prompt": SYSTEM_PROMPT, "checkpoint_messages": current}
            fn: Any = engine.compose
        elif contender == "floor":
            fn, args, kwargs = floor, (current,), {}
        else:
            fn, args, kwargs = _encode_all, (tok, new), {}
        if turn < WARMUP:
            fn(*args, **kwargs)
        else:
            operator.call(fn, *args, **kwargs)  # traced: _operator_call toggles collection


def _totals(path: Path) -> dict[str, int]:
    """The event totals of a callgrind output file."""
    names: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("events:"):
            names = line.split()[1:]
        elif line.startswith("totals:"):
            return dict(zip(names, map(int, line.split()[1:]), strict=True))
    raise RuntimeError(f"{path}: no totals line (did valgrind fail?)")


def trace(contender: str, n: int, folder: Path) -> dict[str, float]:
    """Per-turn events of one contender (one process under callgrind)."""
    out = folder / f"{contender}.callgrind"
    argv = [
        "valgrind",
        "--tool=callgrind",
        "--cache-sim=yes",
        LL_OPTION,
        "--instr-atstart=no",
        "--collect-atstart=no",
        "--toggle-collect=_operator_call",
        f"--callgrind-out-file={out}",
        sys.executable,
        __file__,
        "--worker",
        contender,
        "-n",
        str(n),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # the same dict layouts every run
    with subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        if process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{contender}: the worker did not start")
        subprocess.run(
            ["callgrind_control", "--instr=on", str(process.pid)],
            check=True,
            capture_output=True,
        )
        process.stdin.write("go\n")
        process.stdin.close()
        if process.wait() != 0:
            raise RuntimeError(f"{contender}: valgrind exited {process.returncode}")
    totals = _totals(out)
    return {EVENTS[key]: totals[key] / TURNS for key in EVENTS}


def table(result: dict[str, Any]) -> str:
    """The per-turn figures of every contender, and ctxpolicy's excess over each other."""
    rows = result["contenders"]
    columns = list(EVENTS.values())
    lines = [
        "# A next turn in cache lines (`benchmarks/cache_footprint.py`)",
        "",
        (
            f"Callgrind, N = {result['n']:,}, {TURNS} traced turns after {WARMUP}, each "
            f"right after a copy of the list; simulated last level {LL_BYTES >> 20} MiB. "
            "Per turn: instructions, and lines missed at the last level (each fetched "
            f"from L3 or memory). Run {result['started']}."
        ),
        "",
        "| contender | " + " | ".join(columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for name in CONTENDERS:
        cells = " | ".join(f"{rows[name][c]:,.0f}" for c in columns)
        lines.append(f"| {name} | {cells} |")
    for other in ("encode", "floor"):
        cells = " | ".join(f"{rows['ctxpolicy'][c] - rows[other][c]:+,.0f}" for c in columns)
        lines.append(f"| ctxpolicy - {other} | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("-n", type=int, default=DEFAULT_N, help=f"history (default {DEFAULT_N})")
    parser.add_argument("--record", action="store_true", help="write results/cache_footprint.*")
    parser.add_argument("--worker", choices=CONTENDERS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.n)
        return 0
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("cache_footprint.py needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with tempfile.TemporaryDirectory() as folder:
        rows = {name: trace(name, args.n, Path(folder)) for name in CONTENDERS}
    result = {"started": started, "n": args.n, "turns": TURNS, "contenders": rows}
    text = table(result)
    print(text)
    if args.record:
        results = HERE / "results"
        (results / "cache_footprint.json").write_text(json.dumps(result, indent=2) + "\n", "utf-8")
        (results / "cache_footprint.md").write_text(text, "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
