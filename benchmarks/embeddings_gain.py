"""What does a WordLlama dense ranking add to the recall layer? (the ``embeddings`` extra)

    .venv/bin/python benchmarks/embeddings_gain.py [--sizes 100,1000] [--seeds 0,1,2]

The needle sessions of ``needles.py`` (the generator of ``quality.py``: N interactions,
40 facts at four depths in four kinds, each asked in its own words and paraphrased;
a small generator of this file's own when ``needles.py`` cannot be imported), and
``policies/long-session.yaml`` composed within the same budget as ``quality.py``
(8,000 cl100k_base tokens available), three ways:

- ``bm25``: the policy as written (SQLite FTS5 bm25 only);
- ``bm25+wordllama``: the same with ``embeddings: embed`` in its recall collector and
  ``services={"embed": WordLlamaEmbeddings()}``: bm25 and cosine rankings fused by
  reciprocal rank fusion with the default weights (1:1);
- ``wordllama only``: ``weights: {bm25: 0, dense: 1}``, a diagnostic of the dense ranking
  alone (not a configuration to ship).

A query is retained iff the fact's current value occurs in the composed prompt (content
and tool-call arguments). Ingest per message = (first call - warm p50) / messages, the
first call being a neutral warm-up query that indexes (and embeds) the whole session;
compose = warm time per fact query. One engine per method and session; the WordLlama
model is loaded once, before everything (its load time is shown apart).

Writes ``benchmarks/results/embeddings_gain.md`` atomically (temp file + os.replace).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage  # noqa: E402

from ctxpolicy.engine import PolicyEngine  # noqa: E402
from ctxpolicy.loading import load_policy  # noqa: E402
from ctxpolicy.tokens import get_tokenizer  # noqa: E402

RESULTS = HERE / "results"
OUTPUT = RESULTS / "embeddings_gain.md"
LONG_SESSION = ROOT / "policies" / "long-session.yaml"
BUDGET = 8_000
SYSTEM_PROMPT = (
    "You are the SRE assistant of Acme's platform team. Answer from this conversation; "
    "quote identifiers, ports, hosts and ticket numbers exactly as they were given."
)
WARMUP_QUERY = "Let's continue with the investigation where we left off."
WORDINGS = ("own", "paraphrased")
KINDS = ("plain", "corrected", "decoy", "buried")
#: method name -> extra keys of the recall collector (None: the policy as written)
METHODS: dict[str, str | None] = {
    "bm25": None,
    "bm25+wordllama": "embeddings: embed",
    "wordllama only": "embeddings: embed\nweights: {bm25: 0, dense: 1}",
}

# ------------------------------------------------------------------ session generator

try:
    from needles import make_session as _needles_session
    from needles import message_text
except ImportError:  # needles.py missing or broken: the small generator below
    _needles_session = None

    def message_text(message: BaseMessage) -> str:
        """Content plus tool-call arguments."""
        calls = getattr(message, "tool_calls", None) or []
        return str(message.content) + "".join(f"\n{c['name']} {c['args']}" for c in calls)


@dataclass(frozen=True)
class _Fact:
    id: str
    kind: str
    value: str
    old_value: str | None = None


@dataclass(frozen=True)
class _Query:
    fact: _Fact
    wording: str
    text: str
    id: str


@dataclass
class _Session:
    n: int
    messages: list[BaseMessage]
    queries: list[_Query] = field(default_factory=list)

    def history_for(self, query: _Query) -> list[BaseMessage]:
        return [*self.messages, HumanMessage(query.text, id=query.id)]


#: (own-words sentence, own-words query, paraphrased query); {svc} and {value} filled in
_OWN_FACTS = (
    ("the database port of {svc} is {value}", "What is the database port of {svc}?",
     "Which number do I connect to for the DB behind {svc}?"),
    ("the on-call owner of {svc} is {value}", "Who is the on-call owner of {svc}?",
     "Who gets paged when {svc} breaks?"),
    ("the backup bucket of {svc} is {value}", "What is the backup bucket of {svc}?",
     "Where are the snapshots of {svc} stored?"),
    ("the deployment region of {svc} is {value}", "What is the deployment region of {svc}?",
     "In which cloud zone is {svc} hosted?"),
)  # fmt: skip
_SERVICES = ("payments-api", "checkout-web", "ledger-writer", "auth-gateway", "orders-api")
_FILLER = (
    "Can you check why {svc} is slow since {h}:00? The database port looks fine.",
    "I looked at {svc}: the p99 latency is {h}0 ms, the backup bucket job ran at {h}:15.",
    "The on-call owner asked about the deployment region of {svc} in standup.",
    "Row counts of orders_daily dropped by {h} % today, checking {svc}.",
)


def _small_session(n: int, seed: int) -> _Session:
    """~40 facts in ``n`` interactions, each asked in its own words and paraphrased."""
    rng = random.Random(f"embeddings-gain-{seed}-{n}")
    slots = sorted(rng.sample(range(n - 1), min(40, n - 1)))
    facts: dict[int, tuple[_Fact, str, str, str]] = {}
    for k, at in enumerate(slots):
        sentence, own, para = _OWN_FACTS[k % len(_OWN_FACTS)]
        svc = _SERVICES[(k // len(_OWN_FACTS)) % len(_SERVICES)] + f"-{k}"
        value = f"v{rng.randint(10**5, 10**6 - 1)}x"
        fact = _Fact(f"f{k:02d}", "plain", value)
        facts[at] = (fact, sentence.format(svc=svc, value=value), own.format(svc=svc),
                     para.format(svc=svc))  # fmt: skip
    messages: list[BaseMessage] = []
    queries: list[_Query] = []
    for i in range(n):
        text = rng.choice(_FILLER).format(svc=rng.choice(_SERVICES), h=rng.randint(1, 23))
        answer = rng.choice(_FILLER).format(svc=rng.choice(_SERVICES), h=rng.randint(1, 23))
        if i in facts:
            fact, sentence, own, para = facts[i]
            text += f" For the record, {sentence}."
            queries += [_Query(fact, "own", own, f"q-{fact.id}-own"),
                        _Query(fact, "paraphrased", para, f"q-{fact.id}-para")]  # fmt: skip
        messages += [HumanMessage(text, id=f"{i}-u"), AIMessage(answer, id=f"{i}-a")]
    return _Session(n, messages, queries)


def make_session(n: int, seed: int) -> tuple[Any, str]:
    """The session of ``n`` interactions and the name of its generator."""
    if _needles_session is not None:
        return _needles_session(n, seed=seed), "benchmarks/needles.py"
    return _small_session(n, seed), "benchmarks/embeddings_gain.py (needles.py not importable)"


# ------------------------------------------------------------------ methods


def policy_variant(extra: str | None, tmp: Path) -> Any:
    """long-session.yaml with ``extra`` keys in its recall collector, 8,000 tokens available."""
    text = LONG_SESSION.read_text(encoding="utf-8")
    if extra is not None:
        match = re.search(r"^(\s*)type: recall\s*$", text, flags=re.MULTILINE)
        if match is None:
            raise SystemExit(f"no 'type: recall' collector in {LONG_SESSION}")
        indent = match.group(1)
        keys = "".join(f"\n{indent}{line}" for line in extra.splitlines())
        text = text[: match.end()] + keys + text[match.end() :]
    path = tmp / f"long-session-{len(list(tmp.iterdir()))}.yaml"
    path.write_text(text, encoding="utf-8")
    policy = load_policy(path)
    reserve = policy.budget.output_reserve
    window = int(BUDGET / (1 - reserve))
    while int(window * (1 - reserve)) < BUDGET:
        window += 1
    while int(window * (1 - reserve)) > BUDGET:
        window -= 1
    model = policy.model.model_copy(update={"context_window": window})
    return policy.model_copy(update={"model": model})


class TimedEmbeddings(Embeddings):
    """Delegates to an ``Embeddings`` and adds up the time spent in it (WordLlama's own cost)."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.reset()

    def reset(self) -> None:
        self.texts = self.queries = 0
        self.texts_s = self.queries_s = 0.0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        t0 = time.perf_counter()
        out = self.inner.embed_documents(texts)
        self.texts_s += time.perf_counter() - t0
        self.texts += len(texts)
        return out

    def embed_query(self, text: str) -> list[float]:
        t0 = time.perf_counter()
        out = self.inner.embed_query(text)
        self.queries_s += time.perf_counter() - t0
        self.queries += 1
        return out


def prompt_text(messages: Sequence[BaseMessage]) -> str:
    return "\n".join(message_text(m) for m in messages)


def run(
    engine: PolicyEngine,
    session: Any,
    count: Callable[[Any], int],
    timer: TimedEmbeddings | None = None,
) -> dict[str, Any]:
    """The warm-up call, then every query: hits, timings, tokens (and time in ``timer``)."""

    def compose(history: list[BaseMessage]) -> list[BaseMessage]:
        result = engine.compose(
            process="react", system_prompt=SYSTEM_PROMPT, state={"messages": history}
        )
        return list(result.messages)

    warm = [*session.messages, HumanMessage(WARMUP_QUERY, id=f"n{session.n}-warmup")]
    if timer is not None:
        timer.reset()
    t0 = time.perf_counter_ns()
    compose(warm)
    first_ms = (time.perf_counter_ns() - t0) / 1e6
    embedded = None
    if timer is not None:  # the session's units embedded by the first call
        embedded = {"units": timer.texts, "s": timer.texts_s}
        timer.reset()
    records = []
    for query in session.queries:
        t0 = time.perf_counter_ns()
        prompt = compose(session.history_for(query))
        ms = (time.perf_counter_ns() - t0) / 1e6
        text = prompt_text(prompt)
        hit = query.fact.value in text
        old = query.fact.old_value
        records.append(
            {
                "id": query.id,
                "wording": query.wording,
                "kind": query.fact.kind,
                "hit": hit,
                "stale_only": old is not None and old in text and not hit,
                "ms": ms,
                "tokens": count(prompt),
            }
        )
    p50 = statistics.median(r["ms"] for r in records)
    out = {
        "records": records,
        "first_ms": first_ms,
        "p50_ms": p50,
        "ingest_us": max(0.0, first_ms - p50) * 1000 / len(session.messages),
    }
    if timer is not None and embedded is not None:
        out["units_per_msg"] = embedded["units"] / len(session.messages)
        out["embed_ingest_us"] = embedded["s"] * 1e6 / len(session.messages)
        # per query: embed_query, plus the query message's own units (embed_documents)
        out["embed_query_ms"] = (timer.queries_s + timer.texts_s) * 1000 / len(records)
    return out


# ------------------------------------------------------------------ report


def pct(records: Sequence[dict[str, Any]], key: str = "hit") -> float | None:
    return 100.0 * sum(r[key] for r in records) / len(records) if records else None


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _median(data: dict[str, Any], key: str) -> float:
    return statistics.median(data[key])


def _wording(records: Sequence[dict[str, Any]], wording: str) -> list[dict[str, Any]]:
    return [r for r in records if r["wording"] == wording]


def _delta(records: Sequence[dict[str, Any]], base: dict[str, bool]) -> str:
    """Queries retained here and not by bm25 / retained by bm25 and not here."""
    gained = sum(r["hit"] and not base[r["id"]] for r in records)
    lost = sum(base[r["id"]] and not r["hit"] for r in records)
    return f"+{gained} / -{lost}"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _size_section(n: int, by_method: dict[str, Any], seeds: Sequence[int]) -> list[str]:
    info = by_method["_info"]
    half = info["queries"] // 2
    lines = [
        "",
        f"## N = {n:,} interactions",
        "",
        (
            f"{info['messages']:,} messages per session on average, {info['queries']} "
            f"queries per session ({half} own-words, {half} paraphrased)."
        ),
        "",
        _row(
            [
                "method",
                "overall",
                "own",
                "paraphrased",
                "gained / lost (para)",
                "gained / lost (own)",
                *KINDS,
                "stale-only",
                "tokens",
                "ingest us/msg",
                "compose p50 ms",
                "compose p90 ms",
            ]
        ),
        "|---|" + "---:|" * 14,
    ]
    base = {r["id"]: r["hit"] for r in by_method["bm25"]["records"]}
    for method in METHODS:
        data = by_method[method]
        records = data["records"]
        kinds = [pct([r for r in records if r["kind"] == k]) for k in KINDS]
        corrected = [r for r in records if r["kind"] == "corrected"]
        ms = sorted(r["ms"] for r in records)
        lines.append(
            _row(
                [
                    method,
                    fmt(pct(records)),
                    fmt(pct(_wording(records, "own"))),
                    fmt(pct(_wording(records, "paraphrased"))),
                    _delta(_wording(records, "paraphrased"), base),
                    _delta(_wording(records, "own"), base),
                    *(fmt(k) for k in kinds),
                    fmt(pct(corrected, "stale_only")),
                    fmt(statistics.mean(r["tokens"] for r in records), 0),
                    fmt(_median(data, "ingest_us")),
                    fmt(_median(data, "p50_ms"), 2),
                    fmt(ms[int(0.9 * (len(ms) - 1))], 2),
                ]
            )
        )
    lines += [
        "",
        (
            "Where the WordLlama methods' time goes (medians over the seeds): units embedded "
            "per session message; time inside `WordLlamaEmbeddings` during ingest (per "
            "message) and per query (`embed_query` + the query message's units); the rest "
            "of the extra time is ctxpolicy's dense store (`ctxpolicy/recall/dense.py`)."
        ),
        "",
        _row(
            [
                "method",
                "units / msg",
                "ingest us/msg",
                "of which WordLlama",
                "compose p50 ms",
                "of which WordLlama",
                "extra vs bm25: ingest us/msg",
                "extra vs bm25: compose ms",
            ]
        ),
        "|---|" + "---:|" * 7,
    ]
    base_ingest = _median(by_method["bm25"], "ingest_us")
    base_p50 = _median(by_method["bm25"], "p50_ms")
    for method in METHODS:
        data = by_method[method]
        if "units_per_msg" not in data:
            continue
        ingest, p50 = _median(data, "ingest_us"), _median(data, "p50_ms")
        lines.append(
            _row(
                [
                    method,
                    fmt(_median(data, "units_per_msg"), 2),
                    fmt(ingest),
                    fmt(_median(data, "embed_ingest_us")),
                    fmt(p50, 2),
                    fmt(_median(data, "embed_query_ms"), 2),
                    fmt(ingest - base_ingest),
                    fmt(p50 - base_p50, 2),
                ]
            )
        )
    lines += ["", "Paraphrased retention per seed:", ""]
    lines += [_row(["method", *(f"seed {s}" for s in seeds)]), "|---|" + "---:|" * len(seeds)]
    for method in METHODS:
        lines.append(_row([method, *(fmt(v) for v in by_method[method]["per_seed_para"])]))
    return lines


def _ratio(by_method: dict[str, Any], value: Callable[[dict[str, Any]], float | None]) -> str:
    a, b = value(by_method["bm25+wordllama"]), value(by_method["bm25"])
    return "-" if a is None or not b else f"{a / b:.2f}"


def report(results: dict[int, dict[str, Any]], meta: dict[str, Any]) -> str:
    """The markdown page: one section per N, then the ratios."""
    lines = [
        "# Dense recall with WordLlama (`benchmarks/embeddings_gain.py`)",
        "",
        (
            f"ctxpolicy {meta['code']}. "
            f"Machine: {meta['machine']}, {os.cpu_count()} CPUs, Python "
            f"{platform.python_version()}; run {meta['when']}, {meta['seconds']:.0f} s. "
            f"wordllama {meta['wordllama']}, model l2_supercat, dim {meta['dim']}, loaded in "
            f"{meta['load_ms']:.0f} ms (once per process). Sessions: {meta['generator']}, "
            f"seeds {', '.join(map(str, meta['seeds']))}; policy "
            f"`policies/long-session.yaml`, {BUDGET:,} cl100k_base tokens available per "
            "prompt."
        ),
        "",
        (
            "Retention = % of queries whose prompt contains the fact's current value, pooled "
            "over the seeds. Gained / lost = queries the method retains and `bm25` does not / "
            "that `bm25` retains and the method does not (same query). Ingest = (first call - "
            "warm p50) / messages: indexing, plus embedding for the WordLlama methods. "
            "Compose = warm time per query. `wordllama only` (bm25 weight 0) is a diagnostic "
            "of the dense ranking alone. Timings are medians over the seeds."
        ),
    ]
    for n, by_method in results.items():
        lines += _size_section(n, by_method, meta["seeds"])
    lines += [
        "",
        "## Ratios: bm25+wordllama / bm25",
        "",
        _row(
            [
                "N",
                "paraphrased retention",
                "own-words retention",
                "overall retention",
                "ingest per message",
                "warm compose p50",
            ]
        ),
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n, by_method in results.items():
        lines.append(
            _row(
                [
                    f"{n:,}",
                    _ratio(by_method, lambda d: pct(_wording(d["records"], "paraphrased"))),
                    _ratio(by_method, lambda d: pct(_wording(d["records"], "own"))),
                    _ratio(by_method, lambda d: pct(d["records"])),
                    _ratio(by_method, lambda d: _median(d, "ingest_us")),
                    _ratio(by_method, lambda d: _median(d, "p50_ms")),
                ]
            )
        )
    return "\n".join(lines) + "\n"


def code_state() -> str:
    """The commit of the code measured, and whether the measured files differ from it."""
    import subprocess

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
        )
        return done.stdout if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD").strip()
    if not commit:
        return "no git checkout"
    changed = git("status", "--porcelain", "--", "ctxpolicy", "policies", "benchmarks/needles.py")
    files = [line[3:] for line in changed.splitlines()]
    return commit + (f" + uncommitted changes in {', '.join(files)}" if files else "")


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; a results page is world-readable
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="100,1000", help="interactions per session")
    parser.add_argument("--seeds", default="0,1,2", help="one session per seed and size")
    parser.add_argument("--dim", type=int, default=256, help="WordLlama dimension (64/128/256)")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]

    from ctxpolicy.integrations.wordllama import WordLlamaEmbeddings

    started = time.perf_counter()
    code_before = code_state()
    embeddings = WordLlamaEmbeddings(dim=args.dim)
    t0 = time.perf_counter()
    embeddings.embed_query("load the model")
    load_ms = (time.perf_counter() - t0) * 1000
    tok = get_tokenizer("cl100k_base")
    results: dict[int, dict[str, Any]] = {}
    generator = ""
    with tempfile.TemporaryDirectory(prefix="embeddings-gain-") as tmp:
        policies = {m: policy_variant(extra, Path(tmp)) for m, extra in METHODS.items()}
        for n in sizes:
            by_method: dict[str, Any] = {
                m: {"records": [], "ingest_us": [], "p50_ms": [], "per_seed_para": []}
                for m in METHODS
            }
            messages = queries = 0
            for seed in seeds:
                session, generator = make_session(n, seed)
                messages += len(session.messages)
                queries = len(session.queries)
                for method, policy in policies.items():
                    timer = TimedEmbeddings(embeddings) if METHODS[method] else None
                    services = {"embed": timer} if timer is not None else None
                    engine = PolicyEngine(policy, services=services)
                    available = engine.plan("react").available_tokens
                    if available != BUDGET:
                        raise SystemExit(f"available_tokens is {available}, not {BUDGET}")
                    out = run(engine, session, tok.count_messages, timer)
                    data = by_method[method]
                    for key in ("units_per_msg", "embed_ingest_us", "embed_query_ms"):
                        if key in out:
                            data.setdefault(key, []).append(out[key])
                    for r in out["records"]:
                        r["id"] = f"{seed}:{r['id']}"
                    data["records"] += out["records"]
                    data["ingest_us"].append(out["ingest_us"])
                    data["p50_ms"].append(out["p50_ms"])
                    para = [r for r in out["records"] if r["wording"] == "paraphrased"]
                    data["per_seed_para"].append(pct(para))
                    print(
                        f"N={n:>6,} seed {seed} {method:<15} own "
                        f"{fmt(pct([r for r in out['records'] if r['wording'] == 'own'])):>5} "
                        f"para {fmt(pct(para)):>5}  ingest {out['ingest_us']:7.1f} us/msg  "
                        f"p50 {out['p50_ms']:6.2f} ms",
                        flush=True,
                    )
                    del engine
            by_method["_info"] = {"messages": messages // len(seeds), "queries": queries}
            results[n] = by_method
    code_after = code_state()
    meta = {
        "code": code_before
        if code_before == code_after
        else f"{code_before} at the start, {code_after} at the end (the code changed)",
        "machine": platform.platform(),
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "seconds": time.perf_counter() - started,
        "wordllama": metadata.version("wordllama"),
        "load_ms": load_ms,
        "dim": args.dim,
        "generator": generator,
        "seeds": seeds,
    }
    write_atomic(args.output, report(results, meta))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
