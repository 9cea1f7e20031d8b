"""LangChain 1.x ``create_agent`` middleware: every model call composed under a policy.

One line puts a policy in front of every model call of an agent and replaces the
built-in summarization and trimming middleware::

    from langchain.agents import create_agent
    from ctxpolicy.integrations.langchain import ContextPolicyMiddleware

    agent = create_agent(model, tools,
                         middleware=[ContextPolicyMiddleware("policies/long-session.yaml")])

On every model call (`ContextPolicyMiddleware.wrap_model_call` and its async twin) the
request is composed with `PolicyEngine.compose` (see docs/design.md, 'Invariants of a
composition'):

- the agent's system prompt is the ``system_prompt`` layer; the request's messages are
  the history (``checkpoint_messages``), so the input is the last HumanMessage
  (the process must take ``query: checkpoint`` and receive the history);
- the bound tools' schemas (``convert_to_openai_tool``, as JSON, counted with the
  policy's tokenizer) are taken off the budget before the layers share it;
- the model receives exactly the composed messages: the first one (the system prompt
  layer) as the request's ``system_message``, the rest as its ``messages``, so the
  system prompt is sent once and middleware listed after this one (inner) that append
  to the system message still work;
- ``persist: true`` layers the call produced (a new ``compression__context`` summary)
  are written to the agent's state with the model's answer (an
  ``ExtendedModelResponse`` command) and the history prefix a summary folded is
  removed from ``messages`` by id (docs/design.md, 'State rules'); the composed
  prompt is never written back;
- after the model answered, the turn is recorded into the policy's recall indexes and
  memory (`PolicyEngine.record`).

Needs ``langchain>=1.0`` (the ``langchain`` extra); ``import ctxpolicy`` does not import
this module. See ``docs/langchain-agents.md``.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
import typing
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NotRequired

try:
    import langchain.agents.middleware  # noqa: F401  (LangChain 1.x agents)
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "ctxpolicy.integrations.langchain needs the langchain extra (LangChain >= 1.0): "
        "pip install 'ctxpolicy[langchain]'"
    ) from exc

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    RemoveMessage,
    SystemMessage,
)
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_config
from langgraph.types import Command
from typing_extensions import TypedDict

from ctxpolicy.engine import ComposeResult, PolicyEngine
from ctxpolicy.errors import BudgetExceededError
from ctxpolicy.integrations.langgraph import init_context_engine
from ctxpolicy.layers import CHECKPOINT_MESSAGES, COMPRESSION, SYSTEM_PROMPT
from ctxpolicy.tokens import get_tokenizer

if TYPE_CHECKING:
    from ctxpolicy.policy import Policy

#: Called with ``(middleware name, ComposeResult)`` after each composition (logging, tests).
ComposeHook = Callable[[str, ComposeResult], None]

#: Budget-reduced engines kept per tool-token count (see `ContextPolicyMiddleware`).
MAX_TOOL_BUDGETS = 8
#: Tool objects whose schema JSON is kept between calls.
MAX_CACHED_TOOLS = 512
#: The pseudo-layer named when the bound tools alone exceed the input budget.
TOOLS_BUDGET = "tools"


class ContextPolicyState(AgentState[Any]):
    """`AgentState` plus the persisted ``compression__context`` summary.

    A policy that persists more block layers gets a schema with one ``str`` field per
    such layer (`context_policy_state_schema`); LangGraph keeps only declared fields.
    """

    compression__context: NotRequired[str]


_SCHEMAS: dict[tuple[str, ...], type[Any]] = {}
_SCHEMAS_LOCK = threading.Lock()


def persisted_layer_names(policy: Policy) -> tuple[str, ...]:
    """The ``persist: true`` block layers of ``policy``, in policy order."""
    return tuple(name for name in policy.block_layers if policy.layer(name).persist)


def context_policy_state_schema(policy: Policy) -> type[Any]:
    """The agent state schema for ``policy``: `ContextPolicyState` plus persisted layers.

    The same set of layers always yields the same class.
    """
    extra = tuple(sorted(set(persisted_layer_names(policy)) - {COMPRESSION}))
    if not extra:
        return ContextPolicyState
    with _SCHEMAS_LOCK:
        found = _SCHEMAS.get(extra)
        if found is None:
            hints = typing.get_type_hints(ContextPolicyState, include_extras=True)
            fields = {**hints, **dict.fromkeys(extra, NotRequired[str])}
            created: type[Any] = TypedDict("ContextPolicyLayersState", fields)  # type: ignore[misc]
            found = _SCHEMAS.setdefault(extra, created)
    return found


def _thread_id(request: ModelRequest[Any]) -> str | None:
    """The ``thread_id`` of the run: the runnable config, else the runtime's execution info."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # not inside a runnable
        configurable = {}
    found = configurable.get("thread_id")
    if found is None:
        info = getattr(request.runtime, "execution_info", None)
        found = getattr(info, "thread_id", None)
    return None if found is None else str(found)


def _window_for(policy: Policy, available: int) -> int:
    """The largest ``context_window`` whose input budget is at most ``available`` tokens."""
    keep = 1 - policy.budget.output_reserve
    window = max(1, math.ceil(available / keep))
    while window > 1 and int(window * keep) > available:
        window -= 1
    while int((window + 1) * keep) <= available:
        window += 1
    return window


def _last_human(messages: Sequence[BaseMessage]) -> int:
    return max(
        (i for i, m in enumerate(messages) if m.type == "human"), default=max(len(messages) - 1, 0)
    )


class ContextPolicyMiddleware(AgentMiddleware[ContextPolicyState, Any, Any]):
    """Compose every model call of a LangChain 1.x agent under a context policy.

    Replaces ``SummarizationMiddleware``, ``ContextEditingMiddleware`` and
    ``trim_messages``/``pre_model_hook`` trimming: the policy decides layer order,
    budgets, what survives a restore and how an overflowing history is cut
    (``drop_oldest``) or folded into ``compression__context`` (``summarize``, through
    the ``summarizer`` service).

    **Tools and the budget.** The bound tools' schemas (each converted with
    ``convert_to_openai_tool``, the list dumped as JSON and counted with the policy's
    tokenizer) are sent to the model beside the messages, so the layers share what
    they leave: the call is composed under a copy of the policy whose
    ``model.context_window`` is lowered until ``context_window * (1 - output_reserve)``
    is the policy's input budget minus the tool tokens (every ratio then applies to
    that smaller budget). One engine is kept per tool-token count (at most
    `MAX_TOOL_BUDGETS`, least recently used first out); an agent with a fixed tool set
    uses one. Each such engine keeps its own recall index, so a ``memory`` recall
    backend indexes the history once more when the tool set changes.

    **State.** Declared through ``state_schema``: ``compression__context`` and any
    other ``persist: true`` layer of the policy. The answer of a call that produced a
    new persisted value carries it as a state update, together with a ``RemoveMessage``
    per history message a summary folded (removed by id, so the model's answer is
    never touched). Nothing is written when the model call fails.

    **Order.** The middleware composes the request it receives: middleware listed
    before it (outer) shape what it composes; middleware listed after it (inner) see the
    composed request, and what they add (e.g. to the system message) is outside the
    policy's budget. Retry middleware works on either side (outer: each attempt is
    composed again; inner: one composition, several attempts).

    Args:
        policy_or_path: A policy file, a loaded `Policy`, a `PolicyEngine` (shared,
            with its recall indexes), or None for the file named by
            ``CTXPOLICY_POLICY``.
        process: The policy process of this agent (default ``react``); it must
            receive the history and take ``query: checkpoint``, because the agent's
            input is the last HumanMessage of its messages.
        services: Runtime services by name (retrievers, ``summarizer``, memory, ...).
            Unless they name ``tools``, the request's bound tools are the ``tools``
            service of each call (for a ``tools`` collector layer).
        enable_share_context: The central switch; None keeps the environment's
            ``CTXPOLICY_ENABLE_SHARE_CONTEXT`` or the file's value.
        on_compose: Called with ``(name, ComposeResult)`` after each composition.
        name: The middleware's name in the agent (default
            ``ContextPolicyMiddleware``); e.g. ``SummarizationMiddleware`` to take the
            place of deepagents' summarization middleware.

    Raises:
        UnknownProcessError: ``process`` is not declared by the policy.
        ValueError: ``process`` does not receive the history on the checkpoint query
            path, or no policy was given and ``CTXPOLICY_POLICY`` is not set.
        PolicyValidationError: the policy file is invalid.
    """

    state_schema = ContextPolicyState

    def __init__(
        self,
        policy_or_path: str | os.PathLike[str] | Policy | PolicyEngine | None,
        *,
        process: str = "react",
        services: Mapping[str, Any] | None = None,
        enable_share_context: bool | None = None,
        on_compose: ComposeHook | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__()
        self._engine = _build_engine(
            policy_or_path, services=services, enable_share_context=enable_share_context
        ).for_model_host()  # model.system_messages auto: one SystemMessage per call
        plan = self._engine.plan(process)  # raises UnknownProcessError
        if plan.query_path != "checkpoint" or not plan.includes(CHECKPOINT_MESSAGES):
            raise ValueError(
                f"process {process!r}: an agent's input is the last HumanMessage of its "
                "messages, so the process must receive the history (checkpoint_messages: "
                f"true) and take query: checkpoint (it has query: {plan.query_path}, "
                f"checkpoint_messages: {plan.includes(CHECKPOINT_MESSAGES)})"
            )
        self._process = process
        self._on_compose = on_compose
        self._name = name or type(self).__name__
        self.state_schema = context_policy_state_schema(self._engine.policy)
        self._lock = threading.Lock()
        self._budgets: OrderedDict[int, PolicyEngine] = OrderedDict()
        self._tool_json: OrderedDict[int, tuple[Any, str]] = OrderedDict()

    # ------------------------------------------------------------------ properties

    @property
    def name(self) -> str:
        """The middleware's name in the agent (unique per agent)."""
        return self._name

    @property
    def engine(self) -> PolicyEngine:
        """The engine of the policy (full budget, no tools deducted)."""
        return self._engine

    @property
    def process(self) -> str:
        """The policy process every call is composed under."""
        return self._process

    # ------------------------------------------------------------------ tools and budget

    def _tool_schema_json(self, tool: Any) -> str:
        if isinstance(tool, Mapping):  # a provider tool dict: mutable, never cached
            try:
                return json.dumps(convert_to_openai_tool(dict(tool)), ensure_ascii=False)
            except (ValueError, TypeError):
                return json.dumps(tool, ensure_ascii=False, default=str)
        key = id(tool)
        with self._lock:
            found = self._tool_json.get(key)
            if found is not None and found[0] is tool:
                self._tool_json.move_to_end(key)
                return found[1]
        text = json.dumps(convert_to_openai_tool(tool), ensure_ascii=False, default=str)
        with self._lock:
            self._tool_json[key] = (tool, text)  # holds the tool: its id stays unique
            while len(self._tool_json) > MAX_CACHED_TOOLS:
                self._tool_json.popitem(last=False)
        return text

    def tool_tokens(self, tools: Sequence[Any]) -> int:
        """Tokens the schemas of ``tools`` take, counted with the policy's tokenizer.

        The tools are converted with ``convert_to_openai_tool`` and the list is
        dumped as JSON; 0 without tools.
        """
        if not tools:
            return 0
        text = "[" + ", ".join(self._tool_schema_json(tool) for tool in tools) + "]"
        return get_tokenizer(self._engine.plan(self._process).tokenizer).count(text)

    def engine_for(self, tool_tokens: int) -> PolicyEngine:
        """The engine whose input budget is the policy's less ``tool_tokens``.

        Raises:
            BudgetExceededError: the tools alone take the whole input budget.
        """
        if tool_tokens <= 0:
            return self._engine
        with self._lock:
            found = self._budgets.get(tool_tokens)
            if found is not None:
                self._budgets.move_to_end(tool_tokens)
                return found
        policy = self._engine.policy
        available = policy.available_tokens - tool_tokens
        if available <= 0:
            raise BudgetExceededError(
                TOOLS_BUDGET,
                tool_tokens,
                policy.available_tokens,
                detail="the bound tools' schemas alone take the policy's whole input budget",
            )
        engine = self._engine.with_context_window(_window_for(policy, available))
        with self._lock:
            found = self._budgets.setdefault(tool_tokens, engine)
            self._budgets.move_to_end(tool_tokens)
            while len(self._budgets) > MAX_TOOL_BUDGETS:
                self._budgets.popitem(last=False)
        return found

    # ------------------------------------------------------------------ one call

    def _compose_args(self, request: ModelRequest[Any]) -> dict[str, Any]:
        system = request.system_message
        services = None
        if request.tools and "tools" not in self._engine.services:
            services = {"tools": list(request.tools)}
        return {
            "process": self._process,
            "system_prompt": "" if system is None else str(system.text),
            "state": request.state,
            "checkpoint_messages": request.messages,
            "services": services,
            "thread_id": _thread_id(request),
        }

    def _composed(self, request: ModelRequest[Any], result: ComposeResult) -> ModelRequest[Any]:
        """``request`` carrying exactly the composed messages (system prompt once)."""
        if self._on_compose is not None:
            self._on_compose(self._name, result)
        messages = list(result.messages)
        system: SystemMessage | None = None
        first = messages[0] if messages else None
        if result.report.layer(SYSTEM_PROMPT).messages and isinstance(first, SystemMessage):
            messages.pop(0)
            original = request.system_message
            # an untruncated prompt keeps the agent's own message (cache_control blocks, ...)
            same = original is not None and original.text == first.text
            system = original if same else first
        return request.override(
            system_message=system, messages=typing.cast("list[AnyMessage]", messages)
        )

    def _finish(
        self,
        request: ModelRequest[Any],
        result: ComposeResult,
        response: ModelResponse[Any],
    ) -> tuple[list[BaseMessage], ModelResponse[Any] | ExtendedModelResponse[Any]]:
        """The messages to record and the response with this call's state update.

        Recorded is the history the state holds after this call (less a folded
        prefix) and the answer.
        """
        cut = _folded_prefix(request, result)
        recorded = [*request.messages[cut:], *response.result]
        update: dict[str, Any] = dict(result.persist)
        in_state = {m.id for m in request.state.get("messages", ()) if getattr(m, "id", None)}
        removals = [
            RemoveMessage(id=m.id)
            for m in request.messages[:cut]
            if m.id is not None and m.id in in_state  # removing an unknown id would raise
        ]
        if removals:
            update["messages"] = removals
        if not update:
            return recorded, response
        return recorded, ExtendedModelResponse(
            model_response=response, command=Command(update=update)
        )

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Compose the request under the policy, call the model, record the turn.

        Raises:
            BudgetExceededError: a layer with overflow ``error`` (or the tools) does not fit.
            QueryPathError: the messages hold no HumanMessage.
            CollectorError: a collector with ``on_error: fail`` or the summarizer failed.
        """
        engine = self.engine_for(self.tool_tokens(request.tools))
        args = self._compose_args(request)
        result = engine.compose(**args)
        response = handler(self._composed(request, result))
        recorded, out = self._finish(request, result, response)
        engine.record(recorded, thread_id=args["thread_id"], since=_last_human(recorded))
        return out

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Async `wrap_model_call`: ``acompose`` (collectors run concurrently).

        Same steps, results and errors as `wrap_model_call`; recording runs in a
        worker thread.
        """
        engine = self.engine_for(self.tool_tokens(request.tools))
        args = self._compose_args(request)
        result = await engine.acompose(**args)
        response = await handler(self._composed(request, result))
        recorded, out = self._finish(request, result, response)
        await asyncio.to_thread(
            engine.record, recorded, thread_id=args["thread_id"], since=_last_human(recorded)
        )
        return out


def _folded_prefix(request: ModelRequest[Any], result: ComposeResult) -> int:
    """How many leading messages of the request a new summary folded (0: none).

    The summary covers exactly the history before the first message the compaction
    kept (docs/design.md, 'Budget and overflow').
    """
    kept = result.compacted_history
    if not kept or COMPRESSION not in result.persist:
        return 0
    messages = request.messages
    first = kept[0]
    cut = next((i for i, m in enumerate(messages) if m is first), None)
    if cut is None and first.id is not None:
        cut = next((i for i, m in enumerate(messages) if m.id == first.id), None)
    return cut or 0


def _build_engine(
    policy_or_path: str | os.PathLike[str] | Policy | PolicyEngine | None,
    *,
    services: Mapping[str, Any] | None,
    enable_share_context: bool | None,
) -> PolicyEngine:
    if isinstance(policy_or_path, PolicyEngine):
        engine = policy_or_path
        if enable_share_context is None and not services:
            return engine
        policy = engine.policy
        if enable_share_context is not None:
            policy = policy.with_share_context(enable_share_context)
        return PolicyEngine(policy, services={**engine.services, **(services or {})})
    return init_context_engine(
        policy_or_path, enable_share_context=enable_share_context, services=services
    )


__all__ = [
    "MAX_TOOL_BUDGETS",
    "ComposeHook",
    "ContextPolicyMiddleware",
    "ContextPolicyState",
    "context_policy_state_schema",
    "persisted_layer_names",
]
