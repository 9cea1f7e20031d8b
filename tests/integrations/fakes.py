"""Scripted langchain-core fake chat models that also record what they were sent.

They subclass langchain-core's own fakes (no mock of LangGraph or of the engine): the
graph, the checkpointer and the composition are all real.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field, PrivateAttr


class ModelDown(RuntimeError):
    """The scripted failure of a fake model call."""


class RecordingChatModel(FakeMessagesListChatModel):
    """Replies from ``responses`` in order; records every input; fails on chosen calls.

    ``fail_on`` holds 0-based call numbers (counting failed calls too) that raise
    `ModelDown` instead of answering; a failed call does not consume a response.
    """

    fail_on: set[int] = Field(default_factory=set)
    seen: list[list[BaseMessage]] = Field(default_factory=list)
    calls: int = 0

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        call = self.calls
        self.calls += 1
        self.seen.append(list(messages))
        if call in self.fail_on:
            raise ModelDown(f"scripted failure on call {call}")
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


class EchoWorkerModel(FakeMessagesListChatModel):
    """Answers ``"result of <last human text>"``; fails once for queries containing any of
    ``fail_once``.

    Safe under LangGraph's parallel ``Send`` workers. ``before_failing`` runs (outside the
    lock) right before a scripted failure: a test makes it wait for what the failure must
    come after, so the order of parallel workers is not left to the scheduler.
    """

    responses: list[BaseMessage] = Field(default_factory=lambda: [AIMessage("unused")])
    fail_once: tuple[str, ...] = ()
    before_failing: Callable[[], None] | None = None
    seen: list[list[BaseMessage]] = Field(default_factory=list)
    _failed: set[str] = PrivateAttr(default_factory=set)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        query = str(messages[-1].content)
        with self._lock:
            self.seen.append(list(messages))
            fail = any(part in query for part in self.fail_once) and query not in self._failed
            if fail:
                self._failed.add(query)
        if fail:
            if self.before_failing is not None:
                self.before_failing()
            raise ModelDown(f"worker crashed on {query!r}")
        return ChatResult(generations=[ChatGeneration(message=AIMessage(f"result of {query}"))])


def replies(*texts: str) -> list[BaseMessage]:
    """AIMessages for ``responses=``."""
    return [AIMessage(t) for t in texts]
