"""The next turn alone, many times: for comparing two checkouts of ctxpolicy (A/B).

``make bench`` measures each next turn right after a cold compose and ``trim_messages``
(a few turns per repetition), which is what a user's process sees but leaves a change of a
few µs inside the noise. This runs only next turns on one engine (``bench_compose``'s
policy and workload): per turn the next turn (2 new messages) and encoding those 2
messages, interleaved, and prints the median of (next turn - 1.5 x encoding them), the
figure issue 16 targets. ``--mode copy`` appends like LangGraph's ``add_messages`` (a new
list), ``--mode in-place`` extends one list, ``--mode flushed`` extends one list and evicts
the CPU caches before each timed call, the next turn's and the encoding's alike (one
write per cache line over a buffer larger than the last-level cache): it shows what a
next turn costs when nothing it reads is cached, whatever N.

Compare two checkouts by running it under each, alternating (the machine drifts)::

    PYTHONPATH=/path/to/old/checkout .venv/bin/python benchmarks/next_turn.py -n 1000
    .venv/bin/python benchmarks/next_turn.py -n 1000

(``PYTHONPATH`` puts the other checkout's ``ctxpolicy`` before the installed one.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_compose import ENGINE_POLICY, WARM_FACTOR, _encode_all, _timed
from workload import make_history, make_next_turn

import ctxpolicy
from ctxpolicy.engine import PolicyEngine
from ctxpolicy.policy import Policy
from ctxpolicy.tokens import get_tokenizer

SYSTEM_PROMPT = "You are a careful data engineer."


#: Larger than the last-level cache of the machines this runs on (35.8 MiB L3 here).
EVICTION_BYTES = 64 << 20


def _evictor(mode: str) -> Callable[[], None]:
    """What runs before each timed call: for ``flushed``, a write to every cache line of a
    buffer larger than the caches (made here, only for that mode); else nothing."""
    if mode != "flushed":
        return lambda: None
    buffer = bytearray(EVICTION_BYTES)
    lines = bytes(len(buffer[::64]))

    def evict() -> None:
        buffer[::64] = lines

    return evict


def run(n: int, *, turns: int, mode: str) -> dict[str, float]:
    """Medians (µs) of the next turn, of encoding its 2 new messages, and of their paired
    difference ``next turn - WARM_FACTOR x encoding``."""
    engine = PolicyEngine(Policy.model_validate(ENGINE_POLICY))
    tok = get_tokenizer("cl100k_base")
    history = make_history(n)
    engine.compose(system_prompt=SYSTEM_PROMPT, checkpoint_messages=history)
    current = list(history)
    evict = _evictor(mode)
    warm: list[float] = []
    encode: list[float] = []
    for turn in range(turns):
        new = make_next_turn(n, turn=20_000 + turn)
        if mode == "copy":
            current = current + new
        else:
            current.extend(new)

        def next_turn(messages: list[Any] = current) -> Any:
            return engine.compose(system_prompt=SYSTEM_PROMPT, checkpoint_messages=messages)

        def encode_new(messages: list[Any] = new) -> int:
            return _encode_all(tok, messages)

        cases = [(warm, next_turn), (encode, encode_new)]
        for samples, fn in cases if turn % 2 == 0 else reversed(cases):
            evict()
            samples.append(1000 * _timed(fn)[0])  # µs
    return {
        "next_turn_us": statistics.median(warm),
        "encode_new_us": statistics.median(encode),
        "over_target_us": statistics.median(
            w - WARM_FACTOR * e for w, e in zip(warm, encode, strict=True)
        ),
    }


#: ``--record``: every history length of ``make bench`` in every mode.
RECORD_SIZES = (100, 1_000, 10_000, 100_000)
MODES = ("copy", "in-place", "flushed")


def record(*, turns: int) -> dict[str, Any]:
    """Every size in every mode, with the machine, as ``results/next_turn.json`` holds it."""
    from run import machine  # benchmarks/ is this script's own folder

    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rows = []
    for n in RECORD_SIZES:
        for mode in MODES:  # each cell in a fresh process: no cache or heap of another
            argv = [sys.executable, __file__, "-n", str(n), "--mode", mode, "--turns", str(turns)]
            done = subprocess.run([*argv, "--json"], capture_output=True, text=True, check=True)
            rows.append({"n": n, "mode": mode, **json.loads(done.stdout)})
    return {"started": started, "machine": machine(), "turns": turns, "rows": rows}


def record_table(result: dict[str, Any]) -> str:
    """``results/next_turn.md``: next turn - 1.5 x encoding the 2 new messages, per N and mode."""
    over = {(r["n"], r["mode"]): r["over_target_us"] for r in result["rows"]}
    machine = result["machine"]
    lines = [
        "# The next turn by cache state (`benchmarks/next_turn.py --record`)",
        "",
        (
            f"Machine: {machine['platform']}, {machine['cpus']} CPUs, Python {machine['python']}; "
            f"run {result['started']}, {result['turns']} next turns per cell."
        ),
        "",
        (
            f"Median of (next turn - {WARM_FACTOR} x encoding its 2 new messages), µs; "
            "`copy`: a new list per turn (LangGraph's `add_messages`), "
            "`in-place`: one list extended, `flushed`: one list extended and the CPU caches "
            "evicted before each timed call."
        ),
        "",
        "| N | " + " | ".join(MODES) + " |",
        "|---:|" + "---:|" * len(MODES),
    ]
    for n in RECORD_SIZES:
        cells = " | ".join(f"{over[n, mode]:+.1f}" for mode in MODES)
        lines.append(f"| {n:,} | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("-n", type=int, default=1000, help="history length (default 1000)")
    parser.add_argument("--turns", type=int, default=600, help="next turns (default 600)")
    parser.add_argument("--mode", choices=MODES, default="copy")
    parser.add_argument(
        "--record",
        action="store_true",
        help="every N of make bench in every mode; writes results/next_turn.json and .md",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.record:
        result = record(turns=args.turns)
        results = Path(__file__).resolve().parent / "results"
        (results / "next_turn.json").write_text(json.dumps(result, indent=2) + "\n", "utf-8")
        table = record_table(result)
        (results / "next_turn.md").write_text(table, "utf-8")
        print(table)
        return 0
    figures = run(args.n, turns=args.turns, mode=args.mode)
    if args.json:
        print(json.dumps(figures))
        return 0
    print(
        f"{Path(ctxpolicy.__file__).parent.parent}: N={args.n:,} {args.mode}: "
        f"next turn {figures['next_turn_us']:.1f} us, encode 2 new "
        f"{figures['encode_new_us']:.1f} us, next turn - {WARM_FACTOR} x encode "
        f"{figures['over_target_us']:+.1f} us"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
