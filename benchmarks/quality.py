"""Needle retention: does the composed prompt still hold the facts a query needs?

    .venv/bin/python benchmarks/quality.py [--quick] [--sizes 100,1000] [--methods ...]
    make bench-quality

A seeded long ReAct session of N interactions (N = 100 / 1,000 / 10,000; see
``needles.py``) with facts planted at four depths in four kinds. Every fact is asked
twice (own words, paraphrased), each time as the final HumanMessage of the history, and
every method composes the prompt of that call from the same input within the same
budget: 8,000 cl100k_base tokens available (`BUDGET`), the same system prompt.

Methods, side by side:

- ``trim_messages``: langchain-core ``trim_messages(strategy="last", max_tokens=8000,
  start_on="human", include_system=True)`` with an exact (uncached) tiktoken counter
  using ctxpolicy's per-message accounting. It recounts the whole history on every
  call, so at N >= 10,000 it is asked every k-th query (k odd, so that the wordings
  alternate; about `TRIM_SAMPLE` queries): said so in the tables.
- ``drop_oldest``: `PolicyEngine` on a minimal policy (system prompt, history with
  ``overflow: drop_oldest``, query from the checkpoint), window 8,000, no output reserve.
- ``memory:minimal|balanced|comprehensive``: the same plus a ``memory__context`` layer
  (``collector: {type: memory, strategy: ...}``, ratio 0.5, unused share redistributed
  to the history) over a `TieredMemory` fed with every session message
  (``add_message``); one memory per session shared by the three strategies.
- ``long-session``: ``policies/long-session.yaml`` as written, its window changed so
  that 8,000 tokens are available (``policy.model_copy``); one engine per session,
  warm after its first call. Until the file exists (or while it fails) the method is
  reported as an error and the run goes on.
- ``long-session+embeddings``: the same policy with ``embeddings: embed`` in its recall
  collector and ``WordLlamaEmbeddings`` (the ``embeddings`` extra, an offline model
  inside its wheel) as the ``embed`` service: bm25 and dense rankings fused (RRF).
- ``bm25``: a plain reference, rank-bm25 ``BM25Okapi`` over every session message, a
  message longer than 480 characters or 3 lines split into its lines, lower-case
  ``\\w+`` tokens. Half of the budget left after the system prompt goes to the newest
  messages (``fit_history``, as ``drop_oldest``), the rest to the top-scoring units of
  the older messages, shown chronologically in one system message. A floor to beat.

A prompt "contains the needed value" iff the fact's current value occurs in the text of
all prompt messages (content + tool-call arguments). ``stale-only``: a corrected fact
whose old value is in the prompt and the new one is not (rate over the corrected-fact
queries). Every prompt is counted with ``Tokenizer.count_messages`` and checked against
the budget. Compose time is per query, warm (the first call of each method at each N
is a separate warm-up call with a neutral query, never a fact query). Ingest per
message: long-session (first call - warm p50) / messages; memory: feeding the memory;
bm25: building the index.

Writes ``benchmarks/results/quality.json`` and ``quality.md`` (``--quick``:
``quality-quick.*``: N = 100 and 1,000, one fact per cell), atomically.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from needles import DEPTHS, KINDS, WORDINGS, Query, Session, make_session, message_text
from run import machine
from windows import budget_variant

from ctxpolicy.tokens import MESSAGE_OVERHEAD, get_tokenizer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
LONG_SESSION = ROOT / "policies" / "long-session.yaml"

BUDGET = 8_000
SIZES = (100, 1_000, 10_000)
QUICK_SIZES = (100, 1_000)
PER_CELL = 3  # facts per (kind, depth) cell (1 per kind at "recent"): 40 facts, 80 queries
QUICK_PER_CELL = 1
#: trim_messages recounts the whole history per call: at N >= TRIM_SAMPLE_FROM it is
#: asked about TRIM_SAMPLE queries, evenly spread (every k-th, k odd).
TRIM_SAMPLE_FROM = 10_000
TRIM_SAMPLE = 16
SYSTEM_PROMPT = (
    "You are the SRE assistant of Acme's platform team. Answer from this conversation; "
    "quote identifiers, ports, hosts and ticket numbers exactly as they were given."
)
WARMUP_QUERY = "Let's continue with the investigation where we left off."
METHODS = (
    "trim_messages",
    "drop_oldest",
    "memory:minimal",
    "memory:balanced",
    "memory:comprehensive",
    "long-session",
    "long-session+embeddings",
    "bm25",
)

# Targets of the issue, checked at the largest N of the run (10,000 in a full run).
TARGET_OWN = 95.0
TARGET_PARAPHRASED = 80.0
TARGET_OVERALL = 90.0
TARGET_BURIED = 90.0
TARGET_STALE = 2.0
TARGET_DRIFT = 5.0  # points between retention at N=10,000 and at N=100
TARGET_P50_MS = 15.0
TARGET_INGEST_MS = 1.0  # per message

_WORD = re.compile(r"\w+")


class MethodError(Exception):
    """A method cannot run (missing file, failing setup); recorded, the run goes on."""


def prompt_text(messages: Sequence[BaseMessage]) -> str:
    """The text a containment check reads: every message's content and tool-call args."""
    return "\n".join(message_text(m) for m in messages)


# ---------------------------------------------------------------------------- methods


class Method:
    """One way to compose the prompt of a call. ``prepare`` once per session."""

    name = ""
    #: Seconds spent preparing this session (what counts as ingest), or None.
    ingest_s: float | None = None
    #: Whether the first-call ingest is (first call - warm p50) (stateful engines).
    ingest_from_first_call = False
    note = ""

    def prepare(self, session: Session) -> None:
        self.ingest_s = None

    def compose(self, history: list[BaseMessage]) -> list[BaseMessage]:
        raise NotImplementedError

    def wants(self, session: Session) -> list[Query]:
        """The queries this method is asked (all of them unless it samples)."""
        return session.queries

    def close(self) -> None:
        """Release what ``prepare`` built."""


def _exact_counter() -> Callable[[list[BaseMessage]], int]:
    """Exact cl100k_base count of a message list, uncached (as a plain tiktoken user has)."""
    tok = get_tokenizer("cl100k_base")
    encode = tok._encoding.encode_ordinary

    def count_one(message: BaseMessage) -> int:
        content = message.content
        n = MESSAGE_OVERHEAD + len(encode(content if isinstance(content, str) else str(content)))
        if message.name:
            n += len(encode(message.name))
        for call in message.__dict__.get("tool_calls") or ():
            n += len(encode(call["name"]))
            n += len(encode(json.dumps(call["args"], ensure_ascii=False)))
        return n

    return lambda messages: sum(count_one(m) for m in messages)


class TrimMessages(Method):
    name = "trim_messages"

    def __init__(self) -> None:
        from langchain_core.messages import trim_messages

        self._trim = trim_messages
        self._counter = _exact_counter()
        self._system = SystemMessage(SYSTEM_PROMPT)

    def wants(self, session: Session) -> list[Query]:
        queries = session.queries
        if session.n < TRIM_SAMPLE_FROM or len(queries) <= TRIM_SAMPLE:
            self.note = ""
            return queries
        step = math.ceil(len(queries) / TRIM_SAMPLE)
        step += 1 - step % 2  # odd: the wordings alternate (queries come own, paraphrased)
        picked = queries[::step]
        self.note = (
            f"sampled {len(picked)}/{len(queries)} queries at N={session.n:,} (every "
            f"{step}th; it recounts the whole history on every call)"
        )
        return picked

    def compose(self, history: list[BaseMessage]) -> list[BaseMessage]:
        return self._trim(
            [self._system, *history],
            max_tokens=BUDGET,
            token_counter=self._counter,
            strategy="last",
            start_on="human",
            include_system=True,
            allow_partial=False,
        )


def _policy(name: str, *, strategy: str | None) -> Any:
    from ctxpolicy.policy import Policy

    order = ["system_prompt", "checkpoint_messages", "query"]
    layers: dict[str, Any] = {"checkpoint_messages": {"overflow": "drop_oldest"}}
    ratios: dict[str, float] = {}
    if strategy is not None:
        order.insert(1, "memory__context")
        layers["memory__context"] = {"collector": {"type": "memory", "strategy": strategy}}
        ratios["memory__context"] = 0.5
    return Policy.model_validate(
        {
            "version": 1,
            "name": name,
            "model": {"context_window": BUDGET, "tokenizer": "cl100k_base"},
            "budget": {"output_reserve": 0.0, "ratios": ratios, "redistribute": True},
            "order": order,
            "processes": {"react": {"checkpoint_messages": True, "query": "checkpoint"}},
            "default_process": "react",
            "layers": layers,
        }
    )


def _engine(policy: Any, services: dict[str, Any] | None = None) -> Any:
    from ctxpolicy.engine import PolicyEngine

    engine = PolicyEngine(policy, services=services)
    available = engine.plan("react").available_tokens
    if available != BUDGET:
        raise MethodError(f"available_tokens is {available}, not {BUDGET}")
    return engine


class DropOldest(Method):
    name = "drop_oldest"

    def prepare(self, session: Session) -> None:
        super().prepare(session)
        self._engine = _engine(_policy("quality-drop-oldest", strategy=None))

    def compose(self, history: list[BaseMessage]) -> list[BaseMessage]:
        result = self._engine.compose(
            process="react", system_prompt=SYSTEM_PROMPT, state={"messages": history}
        )
        return list(result.messages)


class _SharedMemory:
    """One `TieredMemory` per session, fed once, shared by the three strategies."""

    session: Session | None = None
    memory: Any = None
    seconds = 0.0
    error: str | None = None

    @classmethod
    def get(cls, session: Session) -> tuple[Any, float]:
        if cls.session is not session:
            cls.session, cls.memory, cls.error = session, None, None
            try:
                from ctxpolicy.memory import TieredMemory

                memory = TieredMemory()
                start = time.perf_counter()
                for message in session.messages:
                    memory.add_message(message)
                cls.seconds = time.perf_counter() - start
                cls.memory = memory
            except Exception as exc:
                cls.error = f"feeding TieredMemory failed: {type(exc).__name__}: {exc}"
        if cls.error is not None:
            raise MethodError(cls.error)
        return cls.memory, cls.seconds

    @classmethod
    def clear(cls) -> None:
        cls.session = cls.memory = cls.error = None


class MemoryStrategy(Method):
    def __init__(self, strategy: str) -> None:
        self.strategy = strategy
        self.name = f"memory:{strategy}"

    def prepare(self, session: Session) -> None:
        memory, seconds = _SharedMemory.get(session)
        self.ingest_s = seconds
        policy = _policy(f"quality-memory-{self.strategy}", strategy=self.strategy)
        self._engine = _engine(policy, services={"memory": memory})

    def compose(self, history: list[BaseMessage]) -> list[BaseMessage]:
        result = self._engine.compose(
            process="react", system_prompt=SYSTEM_PROMPT, state={"messages": history}
        )
        return list(result.messages)


class LongSession(Method):
    name = "long-session"
    ingest_from_first_call = True

    def __init__(self, path: Path = LONG_SESSION) -> None:
        self.path = path

    def prepare(self, session: Session) -> None:
        super().prepare(session)
        if not self.path.exists():
            raise MethodError(f"{self.path.relative_to(ROOT)} does not exist (yet)")
        from ctxpolicy.loading import load_policy

        try:
            policy = load_policy(self.path)
        except Exception as exc:
            raise MethodError(f"load_policy failed: {type(exc).__name__}: {exc}") from exc
        self._engine = _engine(budget_variant(policy, BUDGET))

    def compose(self, history: list[BaseMessage]) -> list[BaseMessage]:
        result = self._engine.compose(
            process="react", system_prompt=SYSTEM_PROMPT, state={"messages": history}
        )
        return list(result.messages)

    def close(self) -> None:
        self._engine = None


class LongSessionEmbeddings(LongSession):
    name = "long-session+embeddings"

    def prepare(self, session: Session) -> None:
        Method.prepare(self, session)
        try:
            from ctxpolicy.integrations.wordllama import WordLlamaEmbeddings
            from ctxpolicy.loading import load_policy

            policy = budget_variant(load_policy(self.path), BUDGET)
        except Exception as exc:
            raise MethodError(f"{type(exc).__name__}: {exc}") from exc
        layer = policy.layers["recall__context"]
        collector = layer.collector.model_copy(update={"embeddings": "embed"})
        layers = {
            **policy.layers,
            "recall__context": layer.model_copy(update={"collector": collector}),
        }
        policy = policy.model_copy(update={"layers": layers})
        self._engine = _engine(policy, {"embed": _embeddings(WordLlamaEmbeddings)})


_EMBEDDINGS: list[Any] = []


def _embeddings(factory: Callable[[], Any]) -> Any:
    """One embeddings object for the whole run (the model loads once)."""
    if not _EMBEDDINGS:
        _EMBEDDINGS.append(factory())
    return _EMBEDDINGS[0]


def _units(text: str) -> list[str]:
    if len(text) > 480 or text.count("\n") >= 3:
        return [line for line in text.split("\n") if line.strip()]
    return [text]


class BM25(Method):
    name = "bm25"
    #: Candidates looked at per query (best first) when packing the excerpts.
    LOOK_AT = 400
    HEADER = "Relevant excerpts from earlier in this session (oldest first):"

    def prepare(self, session: Session) -> None:
        from rank_bm25 import BM25Okapi

        start = time.perf_counter()
        texts: list[str] = []
        owners: list[int] = []
        for i, message in enumerate(session.messages):
            for unit in _units(message_text(message)):
                texts.append(unit)
                owners.append(i)
        self._bm25 = BM25Okapi([_WORD.findall(t.lower()) for t in texts])
        self.ingest_s = time.perf_counter() - start
        self._texts = texts
        self._owners = owners
        self._position = {m.id: i for i, m in enumerate(session.messages)}
        self._tok = get_tokenizer("cl100k_base")
        self._system = SystemMessage(SYSTEM_PROMPT)

    def compose(self, history: list[BaseMessage]) -> list[BaseMessage]:
        import numpy as np

        from ctxpolicy.history import fit_history

        tok = self._tok
        room = BUDGET - tok.count_message(self._system)
        kept = list(fit_history(history, max_tokens=room // 2, count=tok.count_message).kept)
        first_kept = min(
            (self._position.get(m.id, len(self._position)) for m in kept),
            default=len(self._position),
        )
        query = str(history[-1].content)
        scores = self._bm25.get_scores(_WORD.findall(query.lower()))
        left = room - tok.count_messages(kept) - tok.count_message(SystemMessage(self.HEADER))
        chosen: list[int] = []
        for best in np.argsort(-scores, kind="stable")[: self.LOOK_AT]:
            unit = int(best)
            if scores[unit] <= 0:
                break
            if self._owners[unit] >= first_kept:
                continue
            cost = tok.count(self._texts[unit]) + 1
            if cost <= left:
                chosen.append(unit)
                left -= cost
        chosen.sort()
        while True:
            body = "\n".join([self.HEADER, *(self._texts[u] for u in chosen)])
            prompt = [self._system, SystemMessage(body), *kept] if chosen else [self._system, *kept]
            if tok.count_messages(prompt) <= BUDGET or not chosen:
                return prompt
            chosen.pop()  # a token merge at a line join made it one too many

    def close(self) -> None:
        self._bm25 = None
        self._texts = []


def build_methods(names: Sequence[str]) -> list[Method]:
    made: dict[str, Callable[[], Method]] = {
        "trim_messages": TrimMessages,
        "drop_oldest": DropOldest,
        "memory:minimal": lambda: MemoryStrategy("minimal"),
        "memory:balanced": lambda: MemoryStrategy("balanced"),
        "memory:comprehensive": lambda: MemoryStrategy("comprehensive"),
        "long-session": LongSession,
        "long-session+embeddings": LongSessionEmbeddings,
        "bm25": BM25,
    }
    return [made[name]() for name in names]


# ---------------------------------------------------------------------------- running


def _pct(hits: int, total: int) -> float | None:
    return None if total == 0 else 100.0 * hits / total


def _rates(records: list[dict[str, Any]], key: str, values: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for value in values:
        group = [r for r in records if r[key] == value]
        out[value] = _pct(sum(r["hit"] for r in group), len(group))
    return out


def run_method(method: Method, session: Session) -> dict[str, Any]:
    """Every query of ``session`` through ``method``: retention figures and timings."""
    tok = get_tokenizer("cl100k_base")
    start = time.perf_counter()
    try:
        method.prepare(session)
    except MethodError as exc:
        return {"error": str(exc)}
    except Exception as exc:
        return {"error": f"setup failed: {type(exc).__name__}: {exc}"}
    setup_s = time.perf_counter() - start
    queries = method.wants(session)
    first_ms = None
    if not isinstance(method, TrimMessages):  # the others may keep state: warm them up
        warm = [*session.messages, HumanMessage(WARMUP_QUERY, id=f"s{session.n}-warmup")]
        t0 = time.perf_counter_ns()
        try:
            method.compose(warm)
        except Exception as exc:
            method.close()
            return {"error": f"first compose failed: {type(exc).__name__}: {exc}"}
        first_ms = (time.perf_counter_ns() - t0) / 1e6
    records: list[dict[str, Any]] = []
    errors: list[str] = []
    for query in queries:
        history = session.history_for(query)
        fact = query.fact
        record: dict[str, Any] = {
            "fact": fact.id,
            "kind": fact.kind,
            "depth": fact.depth,
            "wording": query.wording,
            "hit": False,
            "stale_only": False,
        }
        t0 = time.perf_counter_ns()
        try:
            prompt = method.compose(history)
        except Exception as exc:
            errors.append(f"{fact.id}/{query.wording}: {type(exc).__name__}: {exc}")
            record["error"] = True
            records.append(record)
            continue
        record["ms"] = (time.perf_counter_ns() - t0) / 1e6
        text = prompt_text(prompt)
        record["hit"] = fact.value in text
        record["stale_only"] = (
            fact.old_value is not None and fact.old_value in text and not record["hit"]
        )
        record["tokens"] = tok.count_messages(prompt)
        records.append(record)
    method.close()
    done = [r for r in records if "ms" in r]
    corrected = [r for r in records if r["kind"] == "corrected"]
    p50 = statistics.median(r["ms"] for r in done) if done else None
    ingest_ms = None
    if method.ingest_from_first_call and first_ms is not None and p50 is not None:
        ingest_ms = max(0.0, first_ms - p50) / len(session.messages)
    elif method.ingest_s is not None:
        ingest_ms = method.ingest_s * 1000 / len(session.messages)
    tokens = [r["tokens"] for r in done]
    return {
        "asked": len(records),
        "of": len(session.queries),
        "note": method.note,
        "retention": _pct(sum(r["hit"] for r in records), len(records)),
        "by_depth": _rates(records, "depth", DEPTHS),
        "by_wording": _rates(records, "wording", WORDINGS),
        "by_kind": _rates(records, "kind", KINDS),
        "stale_only": _pct(sum(r["stale_only"] for r in corrected), len(corrected)),
        "tokens_mean": statistics.fmean(tokens) if tokens else None,
        "tokens_max": max(tokens) if tokens else None,
        "over_budget": sum(t > BUDGET for t in tokens),
        "compose_p50_ms": p50,
        "first_call_ms": first_ms,
        "setup_s": setup_s,
        "ingest_ms_per_message": ingest_ms,
        "errors": len(errors),
        "first_errors": errors[:3],
        "misses": [f"{r['fact']}/{r['wording']}" for r in records if not r["hit"]],
    }


def lookalikes(session: Session) -> list[int]:
    """Per fact: units (as bm25 splits them) naming its noun and service, its own excluded."""
    units = [u for m in session.messages for u in _units(message_text(m))]
    return [sum(1 for u in units if f.service in u and f.noun in u) - 1 for f in session.facts]


def session_stats(session: Session, seconds: float) -> dict[str, Any]:
    tok = get_tokenizer("cl100k_base").fresh()  # private caches: the methods' stay cold
    tokens = tok.count_messages(session.messages)
    alike = lookalikes(session)
    return {
        "interactions": session.n,
        "messages": len(session.messages),
        "tokens": tokens,
        "tokens_per_interaction": tokens / session.n,
        "facts": len(session.facts),
        "queries": len(session.queries),
        "lookalikes_median": statistics.median(alike),
        "lookalikes_max": max(alike),
        "generate_s": seconds,
    }


def run(
    sizes: Sequence[int],
    method_names: Sequence[str],
    *,
    per_cell: int,
    seed: int = 0,
    progress: bool = True,
) -> dict[str, Any]:
    """The whole benchmark (see the module docstring): a JSON-ready dict."""
    started = time.time()
    out: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "machine": machine(("ctxpolicy", "langchain-core", "tiktoken", "rank-bm25")),
        "config": {
            "budget": BUDGET,
            "sizes": list(sizes),
            "methods": list(method_names),
            "facts_per_cell": per_cell,
            "seed": seed,
            "long_session_policy": str(LONG_SESSION.relative_to(ROOT)),
        },
        "sessions": {},
        "results": {},
    }
    for n in sizes:
        t0 = time.perf_counter()
        session = make_session(n, seed=seed, per_cell=per_cell)
        session.verify()
        stats = session_stats(session, time.perf_counter() - t0)
        out["sessions"][str(n)] = stats
        if progress:
            print(
                f"N={n:,}: {stats['messages']:,} messages, {stats['tokens_per_interaction']:.0f} "
                f"tokens/interaction, {stats['queries']} queries ({stats['generate_s']:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
        results: dict[str, Any] = {}
        for method in build_methods(method_names):
            gc.collect()
            gc.freeze()  # the session's objects: no collector passes over them while timing
            t1 = time.perf_counter()
            results[method.name] = run_method(method, session)
            gc.unfreeze()
            if progress:
                r = results[method.name]
                what = (
                    f"error: {r['error']}"
                    if "error" in r
                    else f"retention {r['retention']:.1f} %, p50 {r['compose_p50_ms'] or 0:.2f} ms"
                )
                print(
                    f"  {method.name}: {what} ({time.perf_counter() - t1:.1f} s)",
                    file=sys.stderr,
                    flush=True,
                )
        _SharedMemory.clear()
        out["results"][str(n)] = results
        del session
    out["targets"] = evaluate(out)
    out["elapsed_s"] = time.time() - started
    return out


# ---------------------------------------------------------------------------- targets


def _check(value: float | None, ok: Callable[[float], bool]) -> dict[str, Any]:
    if value is None:
        return {"value": None, "status": "n/a"}
    return {"value": value, "status": "PASS" if ok(value) else "MISS"}


def evaluate(report: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets at the largest N of the run, per method."""
    sizes = [int(n) for n in report["results"]]
    if not sizes:
        return {"n": None, "rows": []}
    top, bottom = max(sizes), min(sizes)
    rows: list[dict[str, Any]] = []
    specs: list[tuple[str, str, Callable[[dict[str, Any]], float | None], Callable]] = [
        ("own words", f">= {TARGET_OWN:.0f} %", lambda r: r["by_wording"]["own"],
         lambda v: v >= TARGET_OWN),
        ("paraphrased", f">= {TARGET_PARAPHRASED:.0f} %",
         lambda r: r["by_wording"]["paraphrased"], lambda v: v >= TARGET_PARAPHRASED),
        ("overall", f">= {TARGET_OVERALL:.0f} %", lambda r: r["retention"],
         lambda v: v >= TARGET_OVERALL),
        ("buried", f">= {TARGET_BURIED:.0f} %", lambda r: r["by_kind"]["buried"],
         lambda v: v >= TARGET_BURIED),
        ("stale-only", f"<= {TARGET_STALE:.0f} %", lambda r: r["stale_only"],
         lambda v: v <= TARGET_STALE),
        ("warm compose p50", f"<= {TARGET_P50_MS:.0f} ms", lambda r: r["compose_p50_ms"],
         lambda v: v <= TARGET_P50_MS),
        ("ingest per message", f"<= {TARGET_INGEST_MS:.0f} ms",
         lambda r: r["ingest_ms_per_message"], lambda v: v <= TARGET_INGEST_MS),
        ("prompts over budget", "0", lambda r: float(r["over_budget"]), lambda v: v == 0),
    ]  # fmt: skip
    for label, goal, get, ok in specs:
        row: dict[str, Any] = {"target": label, "goal": goal, "methods": {}}
        for name, result in report["results"][str(top)].items():
            row["methods"][name] = (
                {"value": None, "status": "error"} if "error" in result else _check(get(result), ok)
            )
        rows.append(row)
    drift: dict[str, Any] = {
        "target": f"retention N={top:,} vs N={bottom:,}",
        "goal": f"within {TARGET_DRIFT:.0f} points",
        "methods": {},
    }
    for name, result in report["results"][str(top)].items():
        low = report["results"][str(bottom)].get(name, {})
        if top == bottom or "error" in result or "error" in low or not low:
            drift["methods"][name] = {"value": None, "status": "n/a"}
        else:
            gap = result["retention"] - low["retention"]
            drift["methods"][name] = {
                "value": gap,
                "status": "PASS" if abs(gap) <= TARGET_DRIFT else "MISS",
            }
    rows.insert(5, drift)
    return {"n": top, "rows": rows}


# ---------------------------------------------------------------------------- output


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def results_table(n: int, results: dict[str, Any]) -> str:
    head = (
        "| method | overall | early | middle | late | recent | own | para | plain | corrected "
        "| decoy | buried | stale-only | tokens | p50 ms | ingest us/msg | over budget |"
    )
    lines = [head, "|---|" + "---:|" * 16]
    notes: list[str] = []
    for name, r in results.items():
        if "error" in r:
            lines.append(f"| {name} | error |" + " - |" * 15)
            notes.append(f"`{name}`: {r['error']}")
            continue
        label = name + (" *" if r["note"] else "")
        if r["note"]:
            notes.append(f"`{name}` *: {r['note']}")
        if r["errors"]:
            notes.append(f"`{name}`: {r['errors']} compose errors, e.g. {r['first_errors'][0]}")
        ingest = r["ingest_ms_per_message"]
        cells = [
            _p(r["retention"]),
            *(_p(r["by_depth"][d]) for d in DEPTHS),
            *(_p(r["by_wording"][w]) for w in WORDINGS),
            *(_p(r["by_kind"][k]) for k in KINDS),
            _p(r["stale_only"]),
            "-" if r["tokens_mean"] is None else f"{r['tokens_mean']:,.0f}",
            _ms(r["compose_p50_ms"]),
            "-" if ingest is None else f"{ingest * 1000:.1f}",
            str(r["over_budget"]),
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    if notes:
        text += "\n\n" + "\n".join(f"- {note}" for note in notes)
    return text


def targets_table(targets: dict[str, Any], methods: Sequence[str]) -> str:
    if not targets["rows"]:
        return "(no results)"
    lines = [
        "| target | goal | " + " | ".join(methods) + " |",
        "|---|---|" + ":---:|" * len(methods),
    ]
    for row in targets["rows"]:
        cells = []
        for name in methods:
            cell = row["methods"].get(name, {"value": None, "status": "n/a"})
            value = cell["value"]
            if value is None:
                cells.append(cell["status"])
                continue
            if "ms" in row["goal"]:
                shown = f"{value:.2f} ms" if "p50" in row["target"] else f"{value * 1000:.1f} us"
            elif row["target"] == "prompts over budget":
                shown = f"{value:.0f}"
            elif "points" in row["goal"]:
                shown = f"{value:+.1f}"
            else:
                shown = f"{value:.1f} %"
            cells.append(f"{shown} {cell['status']}")
        lines.append(f"| {row['target']} | {row['goal']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


README = ROOT / "README.md"
README_START = "<!-- bench-quality:start -->"
README_END = "<!-- bench-quality:end -->"


def readme_table(report: dict[str, Any]) -> str:
    """The README's summary: retention per N, and the N = 10,000 breakdown, per method."""
    sizes = sorted(int(n) for n in report["results"])
    largest = str(sizes[-1])
    methods = list(report["results"][largest])
    head = " | ".join(f"N={n:,}" for n in sizes)
    lines = [
        (
            f"| method | {head} | own (N={int(largest):,}) | paraphrased | buried | stale-only "
            "| p50 ms |"
        ),
        "|---|" + "---:|" * (len(sizes) + 5),
    ]
    for name in methods:
        cells = []
        for n in sizes:
            r = report["results"][str(n)].get(name, {})
            cells.append("error" if "error" in r else _p(r.get("retention")))
        r = report["results"][largest].get(name, {})
        if "error" in r:
            cells += ["-"] * 5
        else:
            cells += [
                _p(r["by_wording"]["own"]),
                _p(r["by_wording"]["paraphrased"]),
                _p(r["by_kind"]["buried"]),
                _p(r["stale_only"]),
                _ms(r["compose_p50_ms"]),
            ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def update_readme(report: dict[str, Any], path: Path = README) -> bool:
    """Replace the block between the README's bench-quality markers; False if absent."""
    text = path.read_text(encoding="utf-8")
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        return False
    block = f"{README_START}\n{readme_table(report)}\n{README_END}"
    write_atomic(path, text[:start] + block + text[end + len(README_END) :])
    return True


def markdown(report: dict[str, Any], *, quick: bool) -> str:
    m = report["machine"]
    config = report["config"]
    parts = [
        "# Needle retention (`benchmarks/quality.py`)" + (" - quick run" if quick else ""),
        (
            f"Machine: {m['platform']}, {m['cpus']} CPUs, Python {m['python']}; run "
            f"{report['started']}, {report['elapsed_s']:.0f} s. Budget {config['budget']:,} "
            f"cl100k_base tokens per prompt; {config['facts_per_cell']} fact(s) per kind x "
            f"depth cell, seed {config['seed']}."
        ),
        (
            "Retention in % of queries whose prompt contains the needed (current) value; "
            "stale-only in % of corrected-fact queries; tokens = mean prompt tokens; p50 = "
            "warm compose time per query; ingest = long-session (first call - warm p50) / "
            "messages, memory: feeding `TieredMemory`, bm25: building the index."
        ),
    ]
    for n, results in report["results"].items():
        s = report["sessions"][n]
        parts.append(
            f"## N = {int(n):,} interactions\n\n{s['messages']:,} messages, "
            f"{s['tokens']:,} tokens ({s['tokens_per_interaction']:.0f} per interaction), "
            f"{s['facts']} facts, {s['queries']} queries; look-alikes per fact (other lines or "
            f"short messages naming the same noun and service): median "
            f"{s['lookalikes_median']:.0f}, max {s['lookalikes_max']}.\n\n"
            + results_table(int(n), results)
        )
    targets = report["targets"]
    if targets["n"] is not None:
        title = f"## Targets at N = {targets['n']:,}"
        if targets["n"] < 10_000:
            title += " (N = 10,000 not measured in this run)"
        parts.append(title + "\n\n" + targets_table(targets, config["methods"]))
    return "\n\n".join(parts) + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder and os.replace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are ordinary repository files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _names(text: str) -> list[str]:
    names: list[str] = []
    for raw in text.split(","):
        name = raw.strip()
        if not name:
            continue
        expanded = [m for m in METHODS if m.startswith("memory:")] if name == "memory" else [name]
        for item in expanded:
            if item not in METHODS:
                raise SystemExit(f"--methods: unknown method {item!r} ({', '.join(METHODS)})")
            if item not in names:
                names.append(item)
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="N = 100 and 1,000, one fact per cell; writes results/quality-quick.*",
    )
    parser.add_argument("--sizes", help="comma-separated N (default 100,1000,10000)")
    parser.add_argument(
        "--methods", help=f"comma-separated, of {', '.join(METHODS)} (memory = all three)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-cell", type=int, help="facts per kind x depth cell")
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    sizes = (
        [int(s) for s in args.sizes.split(",") if s.strip()]
        if args.sizes
        else list(QUICK_SIZES if args.quick else SIZES)
    )
    methods = _names(args.methods) if args.methods else list(METHODS)
    per_cell = args.per_cell or (QUICK_PER_CELL if args.quick else PER_CELL)
    report = run(sizes, methods, per_cell=per_cell, seed=args.seed)
    text = markdown(report, quick=args.quick)
    stem = "quality-quick" if args.quick else "quality"
    write_atomic(args.out_dir / f"{stem}.json", json.dumps(report, indent=2) + "\n")
    write_atomic(args.out_dir / f"{stem}.md", text)
    published = not args.quick and args.out_dir == RESULTS and set(sizes) == set(SIZES)
    if published and update_readme(report):
        print(f"updated the table in {README.name}", file=sys.stderr)
    print(text)
    print(f"wrote {args.out_dir / stem}.json and {stem}.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
