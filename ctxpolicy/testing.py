"""Helpers for testing code that uses ctxpolicy (importable from users' test suites).

- `assert_history_valid`: the structural rules of a history (docs/design.md,
  'Invariants of a composition').
- `assert_composed_valid`: every invariant of a `ComposeResult` for its plan.
- `ScriptedSummarizer`: a deterministic ``summarizer`` service that records its calls.
- `ListRetriever`: a LangChain retriever over a fixed list of documents.

This module imports langchain-core; ``import ctxpolicy`` does not import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from ctxpolicy.history import check_history
from ctxpolicy.tokens import get_tokenizer

if TYPE_CHECKING:
    from ctxpolicy.engine import ComposeResult
    from ctxpolicy.plan import LayerPlan


def assert_history_valid(messages: Sequence[BaseMessage]) -> None:
    """Fail unless ``messages`` is a structurally valid history.

    Valid: empty, or starts on a HumanMessage; every ToolMessage answers a tool call of
    the AIMessage before it; every tool call has its ToolMessage(s); no SystemMessage.

    Raises:
        AssertionError: listing every problem found.
    """
    problems = check_history(messages)
    if problems:
        raise AssertionError("history is not structurally valid:\n- " + "\n- ".join(problems))


def assert_composed_valid(result: ComposeResult, plan: LayerPlan) -> None:
    """Fail unless ``result`` keeps every invariant for ``plan``.

    See docs/design.md, 'Invariants of a composition'.

    Checks: total tokens ≤ available; messages grouped by layer in plan order; the
    system prompt (when sent) only first; a runtime query exactly once and last of the
    query layer; the history part structurally valid; only ``persist: true`` layers in
    ``result.persist``.

    Raises:
        AssertionError: naming the broken invariant.
    """
    tok = get_tokenizer(plan.tokenizer)
    total = tok.count_messages(result.messages)
    assert total <= plan.available_tokens, f"total {total} > available {plan.available_tokens}"
    assert total == result.report.total_tokens, "report total differs from the messages"
    _assert_layers_valid(result, plan)
    persistent = {layer.name for layer in plan.layers if layer.persist}
    stray = set(result.persist) - persistent
    assert not stray, f"runtime-only layers in persist: {sorted(stray)}"


def _assert_layers_valid(result: ComposeResult, plan: LayerPlan) -> None:
    """The messages grouped by layer in plan order; system prompt first; history valid."""
    layers = [layer for layer in result.report.layers if layer.included]
    assert sum(layer.messages for layer in layers) == len(result.messages), "layer counts"
    assert [layer.name for layer in layers] == list(plan.names), "layer order"
    position = 0
    for layer in layers:
        part = result.messages[position : position + layer.messages]
        position += layer.messages
        if layer.name == "system_prompt" and part:
            assert position == 1, "system prompt must be the first message"
        if layer.kind == "history":
            assert_history_valid(part)


@dataclass
class ScriptedSummarizer:
    """A ``summarizer`` service: ``(messages, previous_summary) -> str``, deterministic.

    Each call returns the next of ``responses`` when given, else a summary naming how
    many messages it folded and the previous summary. ``calls`` records every call.
    """

    responses: Sequence[str] = ()
    calls: list[tuple[tuple[BaseMessage, ...], str | None]] = field(default_factory=list)

    def __call__(self, messages: Sequence[BaseMessage], previous_summary: str | None) -> str:
        """Summarize ``messages`` on top of ``previous_summary``."""
        self.calls.append((tuple(messages), previous_summary))
        index = len(self.calls) - 1
        if index < len(self.responses):
            return self.responses[index]
        firsts = "; ".join(_first_words(m) for m in messages[:3])
        before = f"{previous_summary} | " if previous_summary else ""
        return f"{before}summary #{index + 1} of {len(messages)} message(s): {firsts}"


def _first_words(message: BaseMessage, words: int = 4) -> str:
    return f"{message.type}: {' '.join(message.text.split()[:words])}"


class ListRetriever(BaseRetriever):
    """A retriever over a fixed list of documents (or strings).

    Returns the documents that share a word with the query, in list order (all of them
    when ``match_all`` is true). ``queries`` records every query.
    """

    documents: list[Document] = Field(default_factory=list)
    match_all: bool = True
    queries: list[str] = Field(default_factory=list)

    def __init__(self, documents: Iterable[Document | str] = (), **kwargs: Any) -> None:
        """Build from documents or plain strings."""
        docs = [d if isinstance(d, Document) else Document(page_content=d) for d in documents]
        super().__init__(documents=docs, **kwargs)  # type: ignore[call-arg]

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,  # noqa: ARG002 - LangChain's signature
    ) -> list[Document]:
        self.queries.append(query)
        if self.match_all:
            return list(self.documents)
        words = {w.lower() for w in query.split()}
        return [d for d in self.documents if words & {w.lower() for w in d.page_content.split()}]


__all__ = [
    "ListRetriever",
    "ScriptedSummarizer",
    "assert_composed_valid",
    "assert_history_valid",
]
