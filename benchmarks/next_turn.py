"""The next turn alone, many times: for comparing two checkouts of ctxpolicy (A/B).

``make bench`` measures each next turn right after a cold compose and ``trim_messages``
(a few turns per repetition), which is what a user's process sees but leaves a change of a
few µs inside the noise. This runs only next turns on one engine (``bench_compose``'s
policy and workload): per turn the next turn (2 new messages) and encoding those 2
messages, interleaved, and prints the median of (next turn - 1.5 x encoding them), the
figure issue 16 targets. ``--mode copy`` appends like LangGraph's ``add_messages`` (a new
list; the second call of each pair runs after an equal copy, as in ``make bench``),
``--mode in-place`` extends one list, ``--mode flushed`` extends one list and evicts
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
from bisect import bisect_left
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_compose import ENGINE_POLICY, MAX_TOKENS, WARM_FACTOR, _encode_all, _timed
from langchain_core.messages import SystemMessage
from workload import make_history, make_next_turn

import ctxpolicy
from ctxpolicy.engine import PolicyEngine
from ctxpolicy.history import fit_history
from ctxpolicy.policy import Policy
from ctxpolicy.tokens import get_tokenizer

SYSTEM_PROMPT = "You are a careful data engineer."


#: ``--floor``: how often (in turns) `FloorTurn`'s window is checked against a fresh fit.
FLOOR_CHECK_EVERY = 50

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


class FloorTurn:
    """A yardstick, not ctxpolicy: a next turn reduced to its essential steps, in one
    function over one conversation's state, for ``--floor``.

    It does what the engine's next turn must do for `ENGINE_POLICY` on this workload
    (cutting between messages, then starting on a HumanMessage, which keeps what whole
    units keep on this workload: `run` checks it every `FLOOR_CHECK_EVERY` turns against
    a fresh ``fit_history``): find the input (the newest HumanMessage), check that the
    kept window is unchanged (the same messages, the same contents), count the new
    messages with the tokenizer (``count_message``, cached), drop the oldest units that no
    longer fit by a binary search over running sums, start on a HumanMessage, and return
    the system message and the kept messages. No report, no other layer, no general case:
    what a next turn would cost if the engine's structure cost nothing.
    """

    def __init__(self, messages: list[Any], kept: Sequence[Any], *, max_tokens: int) -> None:
        """The state after a call on ``messages`` that kept ``kept`` (their newest ones)."""
        self.tok = get_tokenizer("cl100k_base")
        self.system = SystemMessage(SYSTEM_PROMPT)
        self.max_tokens = max_tokens
        self.end = len(messages)
        self.start = self.end - len(kept)
        self.sums = [0]  # running token sums of messages[start:end]
        for message in kept:
            self.sums.append(self.sums[-1] + self.tok.count_message(message))
        self.window = tuple(kept)
        self.contents = tuple(m.content for m in kept)

    def __call__(self, messages: list[Any]) -> list[Any]:
        if not isinstance(messages, list):
            raise TypeError("messages must be a list")
        for message in reversed(messages):
            if message.type == "human":
                break
        else:
            raise ValueError("no HumanMessage")
        window = tuple(messages[self.start : self.end])
        if window != self.window or tuple(m.content for m in window) != self.contents:
            raise AssertionError("the floor handles appends only")
        sums = self.sums
        for new in messages[self.end :]:
            sums.append(sums[-1] + self.tok.count_message(new))
        first = bisect_left(sums, sums[-1] - self.max_tokens)
        cut = self.start + first
        while messages[cut].type != "human":
            cut += 1
        self.sums = sums[cut - self.start :]
        self.start, self.end = cut, len(messages)
        self.window = kept = tuple(messages[cut:])
        self.contents = tuple(m.content for m in kept)
        return [self.system, *kept]


#: ``--full-cache``: messages counted before the turns, more than the tokenizer's count
#: cache holds (32,768 by default): the state of a process that has run for a while.
FULL_CACHE_MESSAGES = 40_000


def run(
    n: int, *, turns: int, mode: str, floor: bool = False, full_cache: bool = False
) -> dict[str, float]:
    """Medians (µs) of the next turn, of encoding its 2 new messages, and of their paired
    difference ``next turn - WARM_FACTOR x encoding`` (``floor``: of `FloorTurn`'s;
    ``full_cache``: with the tokenizer's message cache full, so every new count evicts)."""
    engine = PolicyEngine(Policy.model_validate(ENGINE_POLICY))
    tok = get_tokenizer("cl100k_base")
    if full_cache:
        for index in range(FULL_CACHE_MESSAGES):
            tok.count_message(SystemMessage(f"an earlier conversation's message {index}"))
    history = make_history(n)
    reference = engine.compose(system_prompt=SYSTEM_PROMPT, checkpoint_messages=history)
    floor_turn = None
    if floor:
        floor_turn = FloorTurn(history, reference.messages[1:], max_tokens=MAX_TOKENS)
    current = [list(history)]  # the application's list of messages
    evict = _evictor(mode)
    warm: list[float] = []
    encode: list[float] = []
    for turn in range(turns):
        new = make_next_turn(n, turn=20_000 + turn)
        if mode == "copy":
            current[0] = current[0] + new
        else:
            current[0].extend(new)

        def next_turn(messages: list[list[Any]] = current) -> Any:
            if floor_turn is not None:
                return floor_turn(messages[0])
            return engine.compose(system_prompt=SYSTEM_PROMPT, checkpoint_messages=messages[0])

        def encode_new(messages: list[Any] = new) -> int:
            return _encode_all(tok, messages)

        cases = [(warm, next_turn), (encode, encode_new)]
        for index, (samples, fn) in enumerate(cases if turn % 2 == 0 else cases[::-1]):
            if index and mode == "copy":  # the second runs after an equal copy (bench_compose)
                current[0] = list(current[0])
            evict()
            samples.append(1000 * _timed(fn)[0])  # µs
        if floor_turn is not None and (turn % FLOOR_CHECK_EVERY == 0 or turn == turns - 1):
            # untimed: the yardstick keeps what a fresh fit of this history keeps
            fresh = fit_history(current[0], max_tokens=MAX_TOKENS, count=tok.count_message)
            if floor_turn.window != fresh.kept:
                raise AssertionError(f"turn {turn}: the floor kept other messages than a fit")
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
#: ``--record``: the column of ``--mode in-place --full-cache``.
FULL_CACHE_COLUMN = "in-place, full cache"
#: ``--record``: the modes `FloorTurn` is timed in too (columns ``floor <mode>``).
FLOOR_MODES = ("copy", "in-place", "flushed")


def record(*, turns: int) -> dict[str, Any]:
    """Every size in every mode, with the machine, as ``results/next_turn.json`` holds it."""
    from run import machine  # benchmarks/ is this script's own folder

    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rows = []
    for n in RECORD_SIZES:
        cells = [(mode, mode, ()) for mode in MODES]
        cells.append((FULL_CACHE_COLUMN, "in-place", ("--full-cache",)))
        cells += [(f"floor {mode}", mode, ("--floor",)) for mode in FLOOR_MODES]
        for name, mode, flags in cells:  # each in a fresh process: no cache or heap of another
            argv = [sys.executable, __file__, "-n", str(n), "--mode", mode, "--turns", str(turns)]
            argv += ["--json", *flags]
            done = subprocess.run(argv, capture_output=True, text=True, check=True)
            rows.append({"n": n, "mode": name, **json.loads(done.stdout)})
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
            "evicted before each timed call; `in-place, full cache`: one list extended, "
            "the tokenizer's message cache filled first (a process that has run for a "
            "while: every new count evicts); `floor ...`: the same for `FloorTurn`, a next "
            "turn reduced to its essential steps in one function (a yardstick, not ctxpolicy)."
        ),
        "",
    ]
    columns = [*MODES, FULL_CACHE_COLUMN, *(f"floor {mode}" for mode in FLOOR_MODES)]
    lines += ["| N | " + " | ".join(columns) + " |", "|---:|" + "---:|" * len(columns)]
    for n in RECORD_SIZES:
        cells = " | ".join(f"{over[n, mode]:+.1f}" for mode in columns)
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
    parser.add_argument(
        "--full-cache",
        action="store_true",
        help="fill the tokenizer's message cache first (a process that has run for a while)",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="time FloorTurn (a next turn reduced to its essential steps) instead of ctxpolicy",
    )
    args = parser.parse_args(argv)
    if args.record:
        result = record(turns=args.turns)
        results = Path(__file__).resolve().parent / "results"
        (results / "next_turn.json").write_text(json.dumps(result, indent=2) + "\n", "utf-8")
        table = record_table(result)
        (results / "next_turn.md").write_text(table, "utf-8")
        print(table)
        return 0
    figures = run(
        args.n, turns=args.turns, mode=args.mode, floor=args.floor, full_cache=args.full_cache
    )
    if args.json:
        print(json.dumps(figures))
        return 0
    print(
        f"{'FloorTurn' if args.floor else Path(ctxpolicy.__file__).parent.parent}: "
        f"N={args.n:,} {args.mode}: "
        f"next turn {figures['next_turn_us']:.1f} us, encode 2 new "
        f"{figures['encode_new_us']:.1f} us, next turn - {WARM_FACTOR} x encode "
        f"{figures['over_target_us']:+.1f} us"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
