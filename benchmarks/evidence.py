"""Evidence coverage on real conversations: does the prompt keep the turns a question needs?

    .venv/bin/python benchmarks/evidence.py DATA_DIR [--tokens 2000,4000] [--methods ...]
        [--limit-questions N] [--chats 1,2] [--dense minilm|wordllama] [--no-write]

``DATA_DIR`` holds REALTALK's ``Chat_*.json`` (Lee et al. 2025, the ``data/`` folder of
the public ``danny911kr/REALTALK`` repository: 10 real 21-day chats between two people,
questions annotated with the ids of the turns holding their evidence). The data is not
committed (no licence given); only the ``Chat_*.json`` files directly in ``DATA_DIR`` are
read, no subfolder (the repository's subfolders hold a held-out set: docs/recall.md,
"Measured").

Every turn becomes one message ``"(<session date>) <speaker>: <text>"`` (a shared
photo adds ``[shares a photo: <caption>]``), speaker 1 as ``HumanMessage``, speaker 2
as ``AIMessage``, the turn's ``dia_id`` as message id. For each question every method
composes the prompt from the **whole conversation plus the question** (a final
``HumanMessage``) within ``--tokens`` cl100k_base tokens, the same system prompt for all.

Score: the share of a question's evidence turns present in the prompt, a turn counting
when at least half of its sentences occur verbatim in the prompt's text; the table gives
the mean over questions (questions whose evidence ids name no turn are left out).

Methods, side by side in one run:

- ``trim_messages``: langchain-core ``trim_messages(strategy="last")``: the newest turns.
- ``drop_oldest``: `PolicyEngine` on a policy of system prompt, history (drop_oldest), query.
- ``long-session``: ``builtin:long-session`` as shipped (window set so that
  ``--tokens`` are available), nothing wired.
- ``long-session+dense``: the same with the builtin dense model (``embeddings: NAME``).
- ``bm25-turns``: rank-bm25 ``BM25Okapi`` over whole turns, best first until full.
- ``dense-turns``: cosine of the dense model over whole turns, best first.
- ``bm25+dense-turns``: the two rankings fused by reciprocal rank (k = 60).

Writes ``benchmarks/results/evidence.json`` and ``evidence.md`` (atomically) unless
``--no-write``; ``--readme`` also rewrites the table between the README's markers.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from windows import budget_variant

from ctxpolicy.tokens import get_tokenizer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
README = ROOT / "README.md"
SYSTEM_PROMPT = (
    "You are a friendly assistant that remembers this long chat. Answer the last "
    "question from the conversation."
)
METHODS = (
    "trim_messages",
    "drop_oldest",
    "long-session",
    "long-session+dense",
    "bm25-turns",
    "dense-turns",
    "bm25+dense-turns",
)
RRF_K = 60
_WORD = re.compile(r"\w+")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+")
_SPACE = re.compile(r"\s+")


# ------------------------------------------------------------------------------ data


@dataclass(frozen=True)
class Question:
    text: str
    evidence: tuple[str, ...]  # message ids
    category: int


@dataclass(frozen=True)
class Conversation:
    name: str
    messages: tuple[BaseMessage, ...]
    sentences: dict[str, tuple[str, ...]]  # message id -> its sentences (normalised)
    questions: tuple[Question, ...]


def _normal(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _turn_text(turn: dict[str, Any], date: str) -> str:
    text = f"({date}) {turn['speaker']}: {_normal(str(turn.get('clean_text') or ''))}"
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shares a photo: {caption}]"
    return text


def load_conversation(path: Path) -> Conversation:
    """One REALTALK chat as messages and questions."""
    data = json.loads(path.read_text(encoding="utf-8"))
    first = data["name"]["speaker_1"]
    numbers = sorted(
        int(key.split("_")[1])
        for key, value in data.items()
        if re.fullmatch(r"session_\d+", key) and isinstance(value, list)
    )
    messages: list[BaseMessage] = []
    sentences: dict[str, tuple[str, ...]] = {}
    for number in numbers:
        date = str(data.get(f"session_{number}_date_time", "")).split(",")[0]
        for turn in data[f"session_{number}"]:
            message_id = str(turn["dia_id"])
            if message_id in sentences:
                continue  # a repeated id keeps its first turn
            text = _turn_text(turn, date)
            kind = HumanMessage if turn["speaker"] == first else AIMessage
            messages.append(kind(text, id=message_id))
            parts = [_normal(s) for s in _SENTENCE.split(str(turn.get("clean_text") or ""))]
            sentences[message_id] = tuple(p for p in parts if p)
    questions = []
    for qa in data.get("qa", []):
        evidence = tuple(e for e in qa.get("evidence") or () if sentences.get(e))
        if evidence:
            questions.append(Question(str(qa["question"]), evidence, int(qa.get("category", 0))))
    return Conversation(path.stem, tuple(messages), sentences, tuple(questions))


def load_realtalk(folder: Path, *, chats: Sequence[int] | None = None) -> list[Conversation]:
    """The ``Chat_*.json`` files directly in ``folder`` (no subfolder is read)."""
    files = sorted(folder.glob("Chat_*.json"), key=lambda p: int(p.stem.split("_")[1]))
    if not files:
        raise SystemExit(f"evidence.py: no Chat_*.json in {folder}")
    picked = [p for p in files if chats is None or int(p.stem.split("_")[1]) in chats]
    return [load_conversation(p) for p in picked]


def prompt_text(messages: Sequence[BaseMessage]) -> str:
    return _normal("\n".join(str(m.content) for m in messages))


def coverage(conversation: Conversation, question: Question, text: str) -> float:
    """Share of ``question``'s evidence turns present (half their sentences verbatim)."""
    present = 0
    for message_id in question.evidence:
        parts = conversation.sentences[message_id]
        found = sum(1 for s in parts if s in text)
        present += found * 2 >= len(parts)
    return present / len(question.evidence)


# --------------------------------------------------------------------------- methods


class Method:
    name = ""

    def prepare(self, conversation: Conversation, budget: int) -> None:
        self.budget = budget

    def compose(self, history: list[BaseMessage]) -> list[BaseMessage]:
        raise NotImplementedError


class TrimMessages(Method):
    name = "trim_messages"

    def prepare(self, conversation: Conversation, budget: int) -> None:
        super().prepare(conversation, budget)
        tok = get_tokenizer("cl100k_base")
        self._count = tok.count_messages

    def compose(self, history: list[BaseMessage]) -> list[BaseMessage]:
        from langchain_core.messages import trim_messages

        return trim_messages(
            [SystemMessage(SYSTEM_PROMPT), *history],
            max_tokens=self.budget,
            token_counter=self._count,
            strategy="last",
            include_system=True,
            allow_partial=False,
        )


class EngineMethod(Method):
    """A `PolicyEngine` composing ``process="react"`` with the history only."""

    def policy(self) -> Any:
        raise NotImplementedError

    def prepare(self, conversation: Conversation, budget: int) -> None:
        from ctxpolicy.engine import PolicyEngine

        super().prepare(conversation, budget)
        self._engine = PolicyEngine(budget_variant(self.policy(), budget))
        self.warnings: list[str] = []

    def compose(self, history: list[BaseMessage]) -> list[BaseMessage]:
        result = self._engine.compose(
            process="react", system_prompt=SYSTEM_PROMPT, state={"messages": history}
        )
        self.warnings = list(result.report.warnings)
        return list(result.messages)


class DropOldest(EngineMethod):
    name = "drop_oldest"

    def policy(self) -> Any:
        from ctxpolicy.policy import Policy

        return Policy.model_validate(
            {
                "version": 1,
                "name": "evidence-drop-oldest",
                "model": {"context_window": 8000, "tokenizer": "cl100k_base"},
                "budget": {"output_reserve": 0.0, "ratios": {}, "redistribute": True},
                "order": ["system_prompt", "checkpoint_messages", "query"],
                "processes": {"react": {"checkpoint_messages": True, "query": "checkpoint"}},
                "default_process": "react",
                "layers": {"checkpoint_messages": {"overflow": "drop_oldest"}},
            }
        )


def long_session_policy(embeddings: str | None = None) -> Any:
    from ctxpolicy.loading import load_policy

    policy = load_policy("builtin:long-session")
    if embeddings is None:
        return policy
    layer = policy.layers["recall__context"]
    collector = layer.collector.model_copy(update={"embeddings": embeddings})
    layers = {**policy.layers, "recall__context": layer.model_copy(update={"collector": collector})}
    return policy.model_copy(update={"layers": layers})


class LongSession(EngineMethod):
    name = "long-session"

    def policy(self) -> Any:
        return long_session_policy()


class LongSessionDense(EngineMethod):
    name = "long-session+dense"

    def __init__(self, dense: str) -> None:
        self.dense = dense

    def policy(self) -> Any:
        return long_session_policy(self.dense)


class TurnRanking(Method):
    """A reference: whole turns, ranked, packed best first, shown in session order."""

    HEADER = "Relevant turns from earlier in this chat (oldest first):"

    def rank(self, query: str) -> list[int]:
        raise NotImplementedError

    def prepare(self, conversation: Conversation, budget: int) -> None:
        super().prepare(conversation, budget)
        self._texts = [str(m.content) for m in conversation.messages]
        self._tok = get_tokenizer("cl100k_base")

    def compose(self, history: list[BaseMessage]) -> list[BaseMessage]:
        tok = self._tok
        query = history[-1]
        fixed = [SystemMessage(SYSTEM_PROMPT), SystemMessage(self.HEADER), query]
        left = self.budget - tok.count_messages(fixed)
        chosen: list[int] = []
        for turn in self.rank(str(query.content)):
            cost = tok.count(self._texts[turn]) + 1
            if cost <= left:
                chosen.append(turn)
                left -= cost
        chosen.sort()
        while True:
            body = "\n".join([self.HEADER, *(self._texts[t] for t in chosen)])
            prompt = [SystemMessage(SYSTEM_PROMPT), SystemMessage(body), query]
            if tok.count_messages(prompt) <= self.budget or not chosen:
                return prompt
            chosen.pop()


class BM25Turns(TurnRanking):
    name = "bm25-turns"

    def prepare(self, conversation: Conversation, budget: int) -> None:
        from rank_bm25 import BM25Okapi

        super().prepare(conversation, budget)
        self._bm25 = BM25Okapi([_WORD.findall(t.lower()) for t in self._texts])

    def rank(self, query: str) -> list[int]:
        scores = self._bm25.get_scores(_WORD.findall(query.lower()))
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        return [i for i in order if scores[i] > 0]


_DENSE_CACHE: dict[tuple[str, str], Any] = {}


def dense_model(name: str) -> Any:
    from ctxpolicy.recall.minilm import load_builtin_embeddings

    return load_builtin_embeddings(name)


class DenseTurns(TurnRanking):
    name = "dense-turns"

    def __init__(self, dense: str) -> None:
        self.dense = dense

    def prepare(self, conversation: Conversation, budget: int) -> None:
        import numpy as np

        super().prepare(conversation, budget)
        self._model = dense_model(self.dense)
        key = (self.dense, conversation.name)
        if key not in _DENSE_CACHE:
            _DENSE_CACHE[key] = np.asarray(self._model.embed_documents(self._texts))
        self._vectors = _DENSE_CACHE[key]

    def scores(self, query: str) -> Any:
        import numpy as np

        return self._vectors @ np.asarray(self._model.embed_query(query))

    def rank(self, query: str) -> list[int]:
        scores = self.scores(query)
        return sorted(range(len(scores)), key=lambda i: -scores[i])


class FusedTurns(DenseTurns):
    name = "bm25+dense-turns"

    def prepare(self, conversation: Conversation, budget: int) -> None:
        super().prepare(conversation, budget)
        self._lexical = BM25Turns()
        self._lexical.prepare(conversation, budget)

    def rank(self, query: str) -> list[int]:
        fused: dict[int, float] = {}
        for ranking in (self._lexical.rank(query), DenseTurns.rank(self, query)):
            for rank, turn in enumerate(ranking):
                fused[turn] = fused.get(turn, 0.0) + 1.0 / (RRF_K + rank + 1)
        return sorted(fused, key=lambda t: -fused[t])


def build_method(name: str, dense: str) -> Method:
    makers: dict[str, Callable[[], Method]] = {
        "trim_messages": TrimMessages,
        "drop_oldest": DropOldest,
        "long-session": LongSession,
        "long-session+dense": lambda: LongSessionDense(dense),
        "bm25-turns": BM25Turns,
        "dense-turns": lambda: DenseTurns(dense),
        "bm25+dense-turns": lambda: FusedTurns(dense),
    }
    return makers[name]()


# ------------------------------------------------------------------------------ run


def run_method(
    method: Method, conversations: Sequence[Conversation], budget: int, limit: int | None
) -> dict[str, Any]:
    tok = get_tokenizer("cl100k_base")
    scores: list[float] = []
    by_category: dict[int, list[float]] = {}
    times: list[float] = []
    over = 0
    warnings: set[str] = set()
    try:
        for conversation in conversations:
            method.prepare(conversation, budget)
            history = list(conversation.messages)
            questions = conversation.questions[:limit] if limit else conversation.questions
            for i, question in enumerate(questions):
                ask = HumanMessage(question.text, id=f"q{i}")
                start = time.perf_counter()
                prompt = method.compose([*history, ask])
                times.append(time.perf_counter() - start)
                over += tok.count_messages(prompt) > budget
                score = coverage(conversation, question, prompt_text(prompt))
                scores.append(score)
                by_category.setdefault(question.category, []).append(score)
                warnings.update(getattr(method, "warnings", ()))
    except (ImportError, OSError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    # the first question of each conversation pays the ingest: p50 is the warm figure
    return {
        "coverage": 100 * statistics.fmean(scores),
        "by_category": {str(k): 100 * statistics.fmean(v) for k, v in sorted(by_category.items())},
        "questions": len(scores),
        "p50_ms": 1000 * statistics.median(times),
        "over_budget": over,
        "warnings": sorted(warnings)[:5],
    }


def markdown(report: dict[str, Any]) -> str:
    budgets = report["budgets"]
    lines = [
        (
            f"REALTALK, {report['questions']} questions, {report['conversations']} chats; "
            f"dense model: {report['dense']}"
        ),
        "",
        "| method | " + " | ".join(f"{b:,} tokens" for b in budgets) + " | p50 ms |",
        "|---|" + "---:|" * (len(budgets) + 1),
    ]
    for name in report["methods"]:
        cells = []
        for b in budgets:
            row = report["results"][str(b)][name]
            cells.append(
                row.get("error", f"{row['coverage']:.1f} %")
                if "error" in row
                else f"{row['coverage']:.1f} %"
            )
        last = report["results"][str(budgets[0])][name]
        cells.append("—" if "error" in last else f"{last['p50_ms']:.1f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


START, END = "<!-- bench-evidence:start -->", "<!-- bench-evidence:end -->"


def update_readme(table: str, path: Path = README) -> None:
    """Replace the text between the README's evidence markers with ``table``."""
    text = path.read_text(encoding="utf-8")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    write_atomic(path, f"{head}{START}\n{table}{END}{tail}")


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(path.suffix + ".tmp")
    temp.write_text(text, encoding="utf-8")
    temp.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="folder with REALTALK's Chat_*.json")
    parser.add_argument("--tokens", default="2000,4000")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--chats", default=None, help="chat numbers, e.g. 1,2")
    parser.add_argument("--limit-questions", type=int, default=None)
    parser.add_argument("--dense", default="minilm")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--readme", action="store_true", help="rewrite the README's table")
    args = parser.parse_args(argv)
    chats = [int(c) for c in args.chats.split(",")] if args.chats else None
    conversations = load_realtalk(args.data, chats=chats)
    budgets = [int(b) for b in args.tokens.split(",")]
    names = [n for n in args.methods.split(",") if n]
    results: dict[str, dict[str, Any]] = {}
    for budget in budgets:
        results[str(budget)] = {}
        for name in names:
            row = run_method(
                build_method(name, args.dense), conversations, budget, args.limit_questions
            )
            results[str(budget)][name] = row
            shown = (
                row.get("error")
                or f"{row['coverage']:.1f} % p50 {row['p50_ms']:.1f} ms over {row['over_budget']}"
            )
            print(f"{budget:>6} {name:<20} {shown}", flush=True)
    report = {
        "budgets": budgets,
        "methods": names,
        "dense": args.dense,
        "conversations": len(conversations),
        "questions": sum(
            len(c.questions[: args.limit_questions] if args.limit_questions else c.questions)
            for c in conversations
        ),
        "results": results,
    }
    table = markdown(report)
    print(table)
    if not args.no_write:
        write_atomic(RESULTS / "evidence.json", json.dumps(report, indent=2) + "\n")
        write_atomic(RESULTS / "evidence.md", table)
    if args.readme:
        update_readme(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
