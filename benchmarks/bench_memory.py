"""Benchmark: prompt size and compose time vs history length, full history vs memory.

Plain script (not a test)::

    .venv/bin/python benchmarks/bench_memory.py [--sizes 10,100,1000,10000] [--repeat 3]

For each history length n (interactions: user turn, tool call, tool result, answer) it
composes one call through `PolicyEngine` with

- ``full``: the whole history as ``checkpoint_messages`` (unbounded window);
- ``drop_oldest``: the history trimmed by ``fit_history`` into an 8k window;
- ``memory:<strategy>``: no history; a ``memory__context`` layer over a `TieredMemory`
  holding the same interactions (8k window).

It prints a table (prompt tokens, compose ms, collect ms for the memory layer) and
writes ``benchmarks/results/memory.json`` (plus ``memory.png`` when matplotlib is
installed). Times are medians of ``--repeat`` warm runs on this machine; compare ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxpolicy.collectors.base import CollectRequest
from ctxpolicy.collectors.memory import collect_memory
from ctxpolicy.engine import PolicyEngine
from ctxpolicy.memory import TieredMemory
from ctxpolicy.policy import Policy
from ctxpolicy.tokens import get_tokenizer

RESULTS = Path(__file__).parent / "results"
STRATEGIES = ("minimal", "balanced", "comprehensive")
WINDOW = 8_000
TOPICS = ("billing", "search index", "login flow", "payment retries", "image cache", "email queue")


def interaction(i: int) -> list[BaseMessage]:
    topic = TOPICS[i % len(TOPICS)]
    call_id = f"call_{i}"
    failed = i % 7 == 0
    return [
        HumanMessage(f"Turn {i}: please check the {topic} module, ticket T-{1000 + i}."),
        AIMessage(
            "",
            tool_calls=[
                {
                    "name": "read_logs",
                    "args": {"module": topic, "ticket": f"T-{1000 + i}"},
                    "id": call_id,
                }
            ],
        ),
        ToolMessage(
            f"error: {topic} timed out after 30s (attempt {i})"
            if failed
            else f"{topic}: 3 warnings, last deploy {i % 28 + 1} days ago, owner team-{i % 5}",
            tool_call_id=call_id,
            name="read_logs",
            status="error" if failed else "success",
        ),
        AIMessage(
            f"The {topic} module {'is failing' if failed else 'looks healthy'} for T-{1000 + i}."
        ),
    ]


def _policy(name: str, *, window: int, history: bool, strategy: str | None) -> Policy:
    layers: dict[str, object] = {}
    order = ["system_prompt", "checkpoint_messages", "query"]
    ratios: dict[str, float] = {}
    if strategy is not None:
        layers["memory__context"] = {"collector": {"type": "memory", "strategy": strategy}}
        order.insert(1, "memory__context")
        ratios["memory__context"] = 0.5
    return Policy.model_validate(
        {
            "version": 1,
            "name": name,
            "model": {"context_window": window},
            "order": order,
            "budget": {"ratios": ratios},
            "processes": {"react": {"query": "runtime", "checkpoint_messages": history}},
            "layers": layers,
        }
    )


def _median_ms(fn, repeat: int) -> tuple[float, object]:
    result = fn()  # warm-up (token counts get cached, as in a running agent)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), result


def run(sizes: list[int], repeat: int) -> list[dict[str, object]]:
    tokenizer = get_tokenizer("cl100k_base")
    engines = {
        "full": PolicyEngine(_policy("full", window=100_000_000, history=True, strategy=None)),
        "drop_oldest": PolicyEngine(_policy("drop", window=WINDOW, history=True, strategy=None)),
    }
    for strategy in STRATEGIES:
        engines[f"memory:{strategy}"] = PolicyEngine(
            _policy(f"mem-{strategy}", window=WINDOW, history=False, strategy=strategy)
        )
    memory = TieredMemory()
    history: list[BaseMessage] = []
    rows: list[dict[str, object]] = []
    add_seconds = 0.0
    done = 0
    query = "why does the payment retries module time out?"
    for n in sorted(sizes):
        for i in range(done, n):
            messages = interaction(i)
            history.extend(messages)
            start = time.perf_counter()
            for message in messages:
                memory.add_message(message)
            add_seconds += time.perf_counter() - start
        done = n
        for name, engine in engines.items():
            uses_history = not name.startswith("memory:")

            def compose(engine=engine, uses_history=uses_history):
                return engine.compose(
                    system_prompt="You are an SRE agent.",
                    query=query,
                    checkpoint_messages=history if uses_history else None,
                    services={"memory": memory},
                )

            compose_ms, result = _median_ms(compose, repeat)
            row: dict[str, object] = {
                "interactions": n,
                "messages": len(history),
                "variant": name,
                "prompt_tokens": tokenizer.count_messages(result.messages),  # type: ignore[attr-defined]
                "compose_ms": round(compose_ms, 3),
            }
            if not uses_history:
                policy = engine.policy
                spec = policy.layer("memory__context").collector
                request = CollectRequest(
                    layer="memory__context",
                    spec=spec,  # type: ignore[arg-type]
                    policy=policy,
                    process="react",
                    state={},
                    query=query,
                    services={"memory": memory},
                    cap_tokens=int(WINDOW * 0.9 * 0.5),
                    count_tokens=tokenizer.count,
                )
                collect_ms, _ = _median_ms(lambda request=request: collect_memory(request), repeat)
                row["collect_ms"] = round(collect_ms, 3)
            rows.append(row)
        rows.append(
            {
                "interactions": n,
                "messages": len(history),
                "variant": "memory.add (per message, amortized)",
                "add_us": round(add_seconds / len(history) * 1e6, 2),
            }
        )
    return rows


def print_table(rows: list[dict[str, object]]) -> None:
    header = f"{'n':>6} {'variant':<24} {'prompt tokens':>13} {'compose ms':>11} {'collect ms':>11}"
    print(header)
    print("-" * len(header))
    for row in rows:
        if "add_us" in row:
            print(f"{row['interactions']:>6} {'memory.add µs/message':<24} {row['add_us']:>13}")
            continue
        collect = row.get("collect_ms", "")
        print(
            f"{row['interactions']:>6} {row['variant']:<24} {row['prompt_tokens']:>13} "
            f"{row['compose_ms']:>11} {collect!s:>11}"
        )


def plot(rows: list[dict[str, object]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    variants = sorted({str(r["variant"]) for r in rows if "prompt_tokens" in r})
    for variant in variants:
        points = [r for r in rows if r.get("variant") == variant]
        xs = [r["interactions"] for r in points]
        left.plot(xs, [r["prompt_tokens"] for r in points], marker="o", label=variant)
        right.plot(xs, [r["compose_ms"] for r in points], marker="o", label=variant)
    for axis, label in ((left, "prompt tokens"), (right, "compose ms (median)")):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("interactions")
        axis.set_ylabel(label)
    left.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000,10000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--output", type=Path, default=RESULTS / "memory.json")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rows = run(sizes, args.repeat)
    print_table(rows)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = args.output
    out.write_text(
        json.dumps({"window": WINDOW, "repeat": args.repeat, "rows": rows}, indent=2) + "\n",
        encoding="utf-8",
    )
    print(f"\nwrote {out}")
    if plot(rows, RESULTS / "memory.png"):
        print(f"wrote {RESULTS / 'memory.png'}")
    else:
        print("matplotlib is not installed: skipped the plot (pip install matplotlib)")


if __name__ == "__main__":
    main()
