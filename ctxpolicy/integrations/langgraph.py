"""LangGraph nodes that compose prompts with a `PolicyEngine` (see docs/design.md, 'State rules').

Every node here does the same thing in one place::

    StateBuilder(state, policy)      read the Blackboard through modules
    engine.compose(...)              the policy decides the input messages
    model.invoke(messages)           the only call that may fail
    memory / mapreduce / contexts    record the delta, the result, the new summary
    return sb.patch()                one patch per node

If the model (or the engine) raises, the exception propagates before anything was
written, so LangGraph does not checkpoint the node and ``graph.invoke(None, config)``
re-runs it on the same state: the input HumanMessage is already in the history and
is never appended again.

The application loads its policy once at start-up with `init_context_engine` and
hands the engine to the nodes::

    engine = init_context_engine("policies/teams/data-platform.yaml",
                                 enable_share_context=False, services={...})
    graph = StateGraph(state_schema(engine))      # the Blackboard (+ persisted team layers)
    graph.add_node("analyst", agent_node(engine, name="analyst",
                                         system_prompt="You analyse data.", model=llm))

See ``docs/state.md`` for the state rules.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Send

from ctxpolicy.blocks.tools import policy_file_tools
from ctxpolicy.compose import check_contexts
from ctxpolicy.engine import PolicyEngine
from ctxpolicy.errors import QueryPathError
from ctxpolicy.memory.sessions import SessionInactiveError
from ctxpolicy.policy import Policy
from ctxpolicy.settings import policy_path
from ctxpolicy.state import (
    Blackboard,
    MapReduceSnapshot,
    StateBuilder,
    blackboard_schema,
    persisted_layers,
)
from ctxpolicy.state.blackboard import check_schema_keys
from ctxpolicy.state.modules import policy_state_fields

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage
    from langgraph.graph import StateGraph

    from ctxpolicy.engine import ComposeResult


class Node(Protocol):
    """A LangGraph node function: ``(state, config) -> patch`` (one update dict)."""

    def __call__(self, state: Any, config: RunnableConfig) -> dict[str, Any]: ...


class AsyncNode(Protocol):
    """An async LangGraph node function: ``async (state, config) -> patch``."""

    async def __call__(self, state: Any, config: RunnableConfig) -> dict[str, Any]: ...


#: Called with ``(agent name, ComposeResult)`` after each composition (logging, tests).
ComposeHook = Callable[[str, "ComposeResult"], None]
#: Parses a planner reply into ``(understanding, tasks)``.
PlanParser = Callable[[str], tuple[str | None, Sequence[str | Mapping[str, Any]]]]
#: Renders the reducer's runtime query from the MapReduce snapshot.
ReduceQuery = Callable[[MapReduceSnapshot], str]
#: ``agent_node(contexts=...)``: runtime values of ``__context`` layers for each call, as a
#: mapping or as a function of the graph state returning one (None: no override).
ContextsArg = Mapping[str, str | None] | Callable[[Any], Mapping[str, str | None] | None]

_SESSION_FIELDS = ("namespace", "session_id")


# --------------------------------------------------------------------------- app init


def init_context_engine(
    policy: str | os.PathLike[str] | Policy | None = None,
    *,
    enable_share_context: bool | None = None,
    services: Mapping[str, Any] | None = None,
) -> PolicyEngine:
    """Load the context policy once, at application start-up (Datapillar's init).

    Args:
        policy: A policy file, an already loaded `Policy`, or None to use the file
            named by ``CTXPOLICY_POLICY``.
        enable_share_context: The central switch; None keeps the environment's
            ``CTXPOLICY_ENABLE_SHARE_CONTEXT`` or the file's value.
        services: Runtime services by name (retrievers, ``summarizer``, memory, ...).

    Returns:
        The `PolicyEngine` to hand to every node of the app.

    Raises:
        PolicyNotGivenError: no policy given and ``CTXPOLICY_POLICY`` is not set (a
            ``ValueError``).
        PolicyValidationError: the file is invalid.
        MissingServiceError: the policy needs a service ``services`` lacks (a retriever,
            memory, skills or aggregate layer with ``on_error: fail``, the ``summarizer`` of a
            ``summarize`` overflow), named with its layer, key and ``file:line:col``.
    """
    if isinstance(policy, Policy):
        if enable_share_context is not None:
            policy = policy.with_share_context(enable_share_context)
        engine = PolicyEngine(policy, services=services)
        engine.check_services()
        return engine
    if policy is None:
        policy = policy_path()
    return PolicyEngine.from_file(
        Path(policy), enable_share_context=enable_share_context, services=services
    )


# --------------------------------------------------------------------------- helpers


def _bind(model: BaseChatModel, tools: Sequence[Any] | None) -> Any:
    if not tools:
        return model
    return model.bind_tools(list(tools))


#: ``agent_node(tools=POLICY_TOOLS)`` (the default): the file tools the policy declares.
POLICY_TOOLS = "policy"


def policy_tools(engine: PolicyEngine, process: str = "react") -> list[Any]:
    """The file tools ``engine``'s policy gives the agents of ``process`` (docs/files.md).

    The same tools `agent_node` binds by default; hand them to the graph's ``ToolNode``.

    Raises:
        UnknownProcessError: ``process`` is not declared.
        PathEscapeError: the tools root leaves the policy's folder.
        FileAccessError: the tools root is missing.
    """
    return policy_file_tools(engine.policy, process)


def _agent_tools(
    engine: PolicyEngine, process: str, tools: Sequence[Any] | str | None
) -> Sequence[Any] | None:
    if isinstance(tools, str):
        if tools != POLICY_TOOLS:
            raise ValueError(f"tools: a list of tools, None or {POLICY_TOOLS!r}; got {tools!r}")
        return policy_tools(engine, process) or None
    return tools


def _strategy_state(state: Any, config: RunnableConfig) -> Any:
    """``state`` with the call's ``context_strategy`` (``config["configurable"]``) when the
    state has none: a per-call override of the memory layers' strategy."""
    chosen = (config.get("configurable") or {}).get("context_strategy")
    if chosen is None or not isinstance(state, Mapping) or state.get("context_strategy"):
        return state
    return {**state, "context_strategy": chosen}


def _reply(value: Any, *, node: str) -> AIMessage:
    if not isinstance(value, AIMessage):
        raise TypeError(
            f"node {node!r}: the model returned {type(value).__name__}, not an AIMessage"
        )
    # Model run ids are random per call; a stable id is derived from the history instead.
    return value.model_copy(update={"id": None})


def message_text(message: BaseMessage) -> str:
    """The text of a message (text parts of multi-part content joined)."""
    return str(message.text)


def _schema_of(engine: PolicyEngine, schema: type[Any] | None) -> type[Any]:
    layers, fields = persisted_layers(engine.policy), policy_state_fields(engine.policy)
    if schema is not None:  # a key it lacks would be dropped by LangGraph: an error now
        check_schema_keys(schema, (*layers, *fields), policy=engine.policy.name)
        return schema
    return blackboard_schema(layers, fields=fields)


def state_schema(engine: PolicyEngine) -> type[Any]:
    """The graph state schema for ``engine``'s policy.

    `Blackboard`, extended with a ``str`` field for each of the policy's own
    ``persist: true`` layers and a field for each state key its collectors read (a
    ``state`` collector's ``field``, an ``agent_outputs`` or ``skills`` collector's
    ``field``): LangGraph keeps only the fields its schema declares.
    """
    return _schema_of(engine, None)


def _compose_args(
    engine: PolicyEngine,
    sb: StateBuilder,
    state: Mapping[str, Any],
    *,
    process: str,
    system_prompt: str,
    query: str | None,
    tools: Sequence[Any] | None,
    thread_id: str | None = None,
    contexts: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    rule = engine.policy.process(process)
    history: Sequence[BaseMessage] | None = None
    if rule.checkpoint_messages:
        history = sb.memory.snapshot()
        held = None if query is None else _held_input(history, query)
        if held is not None:  # the turn's question is shown once: by the query layer
            history = (*history[:held], *history[held + 1 :])
    return {
        "process": process,
        "system_prompt": system_prompt,
        "state": state,
        "query": query,
        "contexts": contexts,
        "checkpoint_messages": history,
        "services": {"tools": list(tools)} if tools else None,
        "thread_id": thread_id,
    }


def _check_contexts_arg(engine: PolicyEngine, process: str, contexts: Any) -> None:
    """Check ``agent_node(contexts=...)`` when the node is built (a mapping's keys: now).

    Raises:
        TypeError: neither a mapping, a callable nor None; a value not a str or None.
        ValueError: a key that is no ``__context`` layer of the policy.
    """
    if contexts is None or callable(contexts):
        return
    if not isinstance(contexts, Mapping):
        raise TypeError(
            "contexts must be a mapping {layer: text}, a callable (state) -> mapping, or "
            f"None; got {type(contexts).__name__}"
        )
    check_contexts(engine.plan(process), contexts)


def _call_contexts(contexts: ContextsArg | None, state: Any) -> Mapping[str, str | None] | None:
    """This call's ``contexts``: the mapping, or what the callable returns for ``state``.

    Raises:
        TypeError: the callable returned neither a mapping nor None.
    """
    if contexts is None or isinstance(contexts, Mapping):
        return contexts
    found = contexts(state)
    if found is not None and not isinstance(found, Mapping):
        raise TypeError(
            f"contexts: the callable returned {type(found).__name__}, not a mapping or None"
        )
    return found


def _compose(
    engine: PolicyEngine,
    sb: StateBuilder,
    state: Mapping[str, Any],
    *,
    name: str,
    process: str,
    system_prompt: str,
    query: str | None,
    tools: Sequence[Any] | None,
    on_compose: ComposeHook | None,
    thread_id: str | None = None,
    contexts: Mapping[str, str | None] | None = None,
) -> ComposeResult:
    result = engine.compose(
        **_compose_args(
            engine,
            sb,
            state,
            process=process,
            system_prompt=system_prompt,
            query=query,
            tools=tools,
            thread_id=thread_id,
            contexts=contexts,
        )
    )
    if on_compose is not None:
        on_compose(name, result)
    return result


# --------------------------------------------------------------------------- agent node


def agent_node(
    engine: PolicyEngine,
    *,
    name: str,
    system_prompt: str,
    model: BaseChatModel,
    process: str = "react",
    tools: Sequence[Any] | str | None = POLICY_TOOLS,
    schema: type[Any] | None = None,
    on_compose: ComposeHook | None = None,
    contexts: ContextsArg | None = None,
) -> Node:
    """A LangGraph node for one agent turn under ``process``'s rules.

    StateBuilder → ``engine.compose`` → ``model.invoke`` (tools bound when given) →
    ``memory.replace`` (when a summary compacted the history) → ``memory.append``
    (the reply only: on the ``checkpoint`` query path the input HumanMessage is
    already in the state) → ``contexts.persist(result.persist)`` →
    ``routing.finish_agent("completed")`` (on the final answer: a reply asking for
    tools leaves the turn open) → one patch.

    For a ``query: runtime`` process the query is ``routing.assigned_task``; the turn
    keeps it in the history as its HumanMessage (once per turn: not again when a ReAct
    loop comes back from its tools), so memory records the user's input on this path
    too. A pass back from the tools shows the question once, as the query (last): the
    history it composes leaves the turn's HumanMessage out.

    A turn of a paused or ended session (an agent's `MemorySessions` the policy reads)
    is refused before the model is called: its input HumanMessages leave the thread and
    the patch says ``last_agent_status: aborted`` with the reason in
    ``last_agent_error``.

    A turn this agent already answered (on the ``checkpoint`` path, a final reply
    named ``name`` follows the last HumanMessage: the same input was submitted again
    after the turn completed) returns an empty patch without calling the model.

    Args:
        engine: The app's `PolicyEngine` (see `init_context_engine`).
        name: The agent's name (``AIMessage.name`` of its replies, hook argument).
        system_prompt: The agent's private prompt (never shared, never persisted).
        model: Any LangChain chat model.
        process: The policy process of this agent (default ``react``).
        tools: LangChain tools to bind to the model; also the ``tools`` service. The
            default ``"policy"`` binds the file tools the policy declares for
            ``process`` (its ``tools`` key, docs/files.md; none when it declares none);
            a list replaces them, ``None`` binds none.
        schema: The graph state schema (default: `state_schema(engine)`).
        on_compose: Called with ``(name, ComposeResult)`` after composing.
        contexts: Per-call runtime values of ``__context`` layers (the composer's
            ``contexts``): a mapping ``{layer: text or None}``, or a function of the
            graph state returning one (or None). A value replaces that layer's
            collector for the call (`PolicyEngine.compose`'s ``contexts``); None or
            ``""`` leaves the layer empty.

    A ``context_strategy`` in the state (or in ``config["configurable"]``) overrides the
    memory layers' strategy for the call (``minimal | balanced | comprehensive``). After
    the model answered, the turn is recorded into the policy's memory
    (`PolicyEngine.record`): each tool call answered by a ToolMessage becomes a task
    record (``ctxpolicy.memory.tasks``).

    Raises:
        UnknownProcessError: ``process`` is not declared by the policy (at build time).
        PathEscapeError: the policy's tools root leaves its folder (at build time).
        ValueError, TypeError: a ``contexts`` mapping names no ``__context`` layer of the
            policy or holds a value that is not text (at build time).
        DroppedStateKeyError: ``schema`` lacks a state key the policy reads or persists
            (LangGraph would drop it; at build time).
    """
    turn = _AgentTurn.build(
        engine,
        name=name,
        system_prompt=system_prompt,
        process=process,
        tools=tools,
        schema=schema,
        contexts=contexts,
    )
    runnable = _bind(model, turn.tools)

    def node(state: Any, config: RunnableConfig) -> dict[str, Any]:
        sb, started = turn.start(state, config)
        if not isinstance(started, _Compose):
            return started  # a completed turn submitted again: nothing to add
        try:
            result = turn.engine.compose(**started.kwargs)
        except SessionInactiveError as refused:
            return _refuse_turn(sb, refused)
        if on_compose is not None:
            on_compose(name, result)
        raw = runnable.invoke(result.messages, config)
        return turn.record(sb, result, raw, config=config, query=started.query)

    node.__name__ = f"agent_{name}"
    return node


def aagent_node(
    engine: PolicyEngine,
    *,
    name: str,
    system_prompt: str,
    model: BaseChatModel,
    process: str = "react",
    tools: Sequence[Any] | str | None = POLICY_TOOLS,
    schema: type[Any] | None = None,
    on_compose: ComposeHook | None = None,
    contexts: ContextsArg | None = None,
) -> AsyncNode:
    """Async `agent_node`: ``engine.acompose`` (collectors run concurrently) and ``ainvoke``.

    Same arguments, steps and guarantees as `agent_node`; use it with ``graph.ainvoke``.
    """
    turn = _AgentTurn.build(
        engine,
        name=name,
        system_prompt=system_prompt,
        process=process,
        tools=tools,
        schema=schema,
        contexts=contexts,
    )
    runnable = _bind(model, turn.tools)

    async def node(state: Any, config: RunnableConfig) -> dict[str, Any]:
        sb, started = turn.start(state, config)
        if not isinstance(started, _Compose):
            return started  # a completed turn submitted again: nothing to add
        try:
            result = await turn.engine.acompose(**started.kwargs)
        except SessionInactiveError as refused:
            return _refuse_turn(sb, refused)
        if on_compose is not None:
            on_compose(name, result)
        raw = await runnable.ainvoke(result.messages, config)
        return turn.record(sb, result, raw, config=config, query=started.query)

    node.__name__ = f"agent_{name}"
    return node


class _Compose(NamedTuple):
    """What an agent turn composes with: `PolicyEngine.compose`'s arguments, its query."""

    kwargs: dict[str, Any]
    query: str | None


@dataclass(frozen=True)
class _AgentTurn:
    """One `agent_node`'s (or `aagent_node`'s) settings, worked out when it is built: the
    steps before and after the model call both share."""

    engine: PolicyEngine
    name: str
    system_prompt: str
    process: str
    tools: Sequence[Any] | None
    graph_schema: type[Any]
    contexts: ContextsArg | None
    #: whether the process takes its query at runtime (``routing.assigned_task``)
    runtime: bool

    @classmethod
    def build(
        cls,
        engine: PolicyEngine,
        *,
        name: str,
        system_prompt: str,
        process: str,
        tools: Sequence[Any] | str | None,
        schema: type[Any] | None,
        contexts: ContextsArg | None,
    ) -> _AgentTurn:
        """Check the node's arguments (see `agent_node`'s Raises) and settle them."""
        engine.policy.process(process)
        _check_contexts_arg(engine, process, contexts)
        engine = engine.for_model_host()  # system_messages auto: one SystemMessage
        return cls(
            engine=engine,
            name=name,
            system_prompt=system_prompt,
            process=process,
            tools=_agent_tools(engine, process, tools),
            graph_schema=_schema_of(engine, schema),
            contexts=contexts,
            runtime=engine.plan(process).query_path == "runtime",
        )

    def start(
        self, state: Any, config: RunnableConfig
    ) -> tuple[StateBuilder, _Compose | dict[str, Any]]:
        """The turn's `StateBuilder`, and either its compose arguments or the patch it ends
        with before composing (a completed turn submitted again: empty)."""
        sb = StateBuilder(state, self.engine.policy, schema=self.graph_schema)
        if not self.runtime and _turn_answered(sb, name=self.name):
            return sb, {}
        query = _agent_query(sb, name=self.name, process=self.process) if self.runtime else None
        kwargs = _compose_args(
            self.engine,
            sb,
            _strategy_state(state, config),
            process=self.process,
            system_prompt=self.system_prompt,
            query=query,
            tools=self.tools,
            thread_id=_thread_id(config),
            contexts=_call_contexts(self.contexts, state),
        )
        return sb, _Compose(kwargs, query)

    def record(
        self,
        sb: StateBuilder,
        result: ComposeResult,
        raw: Any,
        *,
        config: RunnableConfig,
        query: str | None,
    ) -> dict[str, Any]:
        """The turn's patch after the model answered (`_record_turn`)."""
        return _record_turn(
            self.engine, sb, result, raw, name=self.name, config=config, user_input=query
        )


def _turn_answered(sb: StateBuilder, *, name: str) -> bool:
    """Whether agent ``name`` already gave its final answer to the history's last turn.

    The turn is the last HumanMessage of the history (its id is the turn id: `user_turn`
    derives it from the client's ``turn_id``). When a final answer of this agent (an
    AIMessage named ``name`` without tool calls) already follows it, the turn completed
    earlier and its input was submitted again: calling the model would add a second
    answer. A turn whose model call failed has no answer yet and runs; a ReAct loop
    whose last answer asked for tools runs again. The one guard of `agent_node` (on the
    ``checkpoint`` query path) and of the MapReduce planner and reducer (when their goal
    is that HumanMessage).
    """
    for message in reversed(sb.memory.snapshot()):
        if message.type == "human":
            return False
        if (
            message.type == "ai"
            and message.name == name
            and not getattr(message, "tool_calls", None)
        ):
            return True
    return False


def _user_goal(sb: StateBuilder) -> bool:
    """Whether a MapReduce run works on the user's turn (no ``routing.assigned_task``)."""
    return not sb.routing.snapshot().assigned_task


def _agent_query(sb: StateBuilder, *, name: str, process: str) -> str:
    """The runtime query of an agent turn: ``routing.assigned_task``.

    Raises:
        QueryPathError: no task is assigned.
    """
    query = sb.routing.snapshot().assigned_task
    if not query:
        raise QueryPathError(
            f"agent {name!r}: process {process!r} takes a runtime query, but "
            "routing.assigned_task is empty (use sb.routing.assign_task(text) first)"
        )
    return query


def _refuse_turn(sb: StateBuilder, refused: SessionInactiveError) -> dict[str, Any]:
    """The patch of a turn of a paused or ended session, refused before the model call:
    the turn's input (the HumanMessages after the last answer) leaves the thread, and the
    run is ``aborted`` with the reason (``last_agent_error``): nothing is added."""
    history = sb.memory.snapshot()
    kept = len(history)
    while kept > 0 and history[kept - 1].type == "human":
        kept -= 1
    if kept < len(history):
        sb.memory.replace(history[:kept])
    sb.routing.finish_agent("aborted", failure_kind="session_inactive", error=str(refused))
    return sb.patch()


def _held_input(history: Sequence[BaseMessage], query: str) -> int | None:
    """Where the history holds the user's input of a ``query: runtime`` turn, or None.

    The turn holds it when the newest HumanMessage says ``query`` and no final answer
    (an AIMessage without tool calls) follows it: a ReAct loop back from its tools. A
    call of that turn leaves it out of the history it composes (the query layer shows
    it), and the turn does not append it again.
    """
    for position in range(len(history) - 1, -1, -1):
        message = history[position]
        if message.type == "ai" and not getattr(message, "tool_calls", None):
            return None
        if message.type == "human":
            return position if message_text(message) == query else None
    return None


def _with_held(
    compacted: Sequence[BaseMessage], history: Sequence[BaseMessage], held: int
) -> tuple[BaseMessage, ...]:
    """``compacted`` (a summary's history, composed without the turn's held input) with
    that input back in place: before the first kept message of its turn (else last)."""

    def key(message: BaseMessage) -> object:
        return message.id if message.id is not None else id(message)

    turn = {key(m) for m in history[held + 1 :]}
    at = next((i for i, m in enumerate(compacted) if key(m) in turn), len(compacted))
    return (*compacted[:at], history[held], *compacted[at:])


def _thread_id(config: RunnableConfig) -> str | None:
    found = (config.get("configurable") or {}).get("thread_id")
    return None if found is None else str(found)


def _record_turn(
    engine: PolicyEngine,
    sb: StateBuilder,
    result: ComposeResult,
    raw: Any,
    *,
    name: str,
    config: RunnableConfig,
    user_input: str | None = None,
) -> dict[str, Any]:
    """The writes of one agent turn, all after the model call, as one patch.

    The turn (the last HumanMessage, the tool calls and results after it, the reply) is
    also recorded into the policy's recall indexes and memory (`PolicyEngine.record`),
    by message id, so a resumed run records nothing twice. ``user_input``: the runtime
    query of an agent turn, kept in the history as its HumanMessage (once per turn,
    `_runtime_input`) so memory records it as the user's (importance 0.9).
    """
    reply = _reply(raw, node=name)
    if reply.name is None:
        reply = reply.model_copy(update={"name": name})
    history = list(sb.memory.snapshot())  # nothing appended yet: no merge to pay for
    held = None if user_input is None else _held_input(history, user_input)
    if result.compacted_history is not None:
        compacted = result.compacted_history
        if held is not None:  # composed without the turn's input: it stays in the thread
            compacted = _with_held(compacted, history, held)
        sb.memory.replace(compacted)
        history = list(sb.memory.snapshot())
    if user_input is not None and held is None:
        sb.memory.append([HumanMessage(user_input)])
        history.append(sb.memory.delta()[-1])
    sb.memory.append([reply])
    history.append(sb.memory.delta()[-1])  # the reply, with the stable id it is stored under
    turn = max((i for i, m in enumerate(history) if m.type == "human"), default=len(history) - 1)
    engine.record(history, thread_id=_thread_id(config), since=turn)
    sb.contexts.persist(result.persist)
    if not reply.tool_calls:  # a reply asking for tools: the turn (and its task) goes on
        sb.routing.finish_agent("completed")
    return sb.patch()


# --------------------------------------------------------------------------- mapreduce

_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s*")


def parse_plan(text: str) -> tuple[str | None, list[str | Mapping[str, Any]]]:
    """Parse a planner reply into ``(understanding, tasks)``.

    Accepts a JSON object ``{"understanding": ..., "tasks": [...]}``, a JSON list of
    tasks (strings or ``{"id", "description"}`` objects), or plain text with one task
    per line (bullets and numbering removed; lines ending in ``:`` are headings).

    Raises:
        ValueError: the reply holds no task.
    """
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`").removeprefix("json").strip()
    understanding, data = _plan_data(stripped)
    if isinstance(data, list):
        tasks: list[str | Mapping[str, Any]] = [t for t in data if isinstance(t, str | Mapping)]
    elif data is None:
        tasks = _plan_lines(stripped)
    else:
        tasks = []
    if not tasks:
        raise ValueError(f"the planner's reply holds no task: {text[:200]!r}")
    return understanding, tasks


def _plan_data(text: str) -> tuple[str | None, Any]:
    """``(understanding, tasks data)`` of a JSON reply (``(None, None)``: not JSON)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None, None
    if not isinstance(data, Mapping):
        return None, data
    raw = data.get("understanding")
    return (raw if isinstance(raw, str) else None), data.get("tasks")


def _plan_lines(text: str) -> list[str | Mapping[str, Any]]:
    """One task per line (bullets and numbering removed; lines ending in ``:`` skipped)."""
    tasks: list[str | Mapping[str, Any]] = []
    for line in text.splitlines():
        item = _BULLET.sub("", line).strip()
        if item and not item.endswith(":"):
            tasks.append(item)
    return tasks


def _goal(sb: StateBuilder, *, node: str) -> str:
    assigned = sb.routing.snapshot().assigned_task
    if assigned:
        return assigned
    for message in reversed(sb.memory.snapshot()):
        if message.type == "human":
            return message_text(message)
    raise QueryPathError(
        f"planner {node!r} needs a goal: routing.assigned_task or a HumanMessage in the history"
    )


def mapreduce_planner_node(
    engine: PolicyEngine,
    *,
    name: str,
    system_prompt: str,
    model: BaseChatModel,
    process: str = "mapreduce_planner",
    parse: PlanParser = parse_plan,
    schema: type[Any] | None = None,
    on_compose: ComposeHook | None = None,
    reducer: str | None = None,
) -> Node:
    """The MapReduce planner: splits the goal into tasks (``mapreduce.init_plan``).

    The goal (runtime query) is ``routing.assigned_task``, else the last
    HumanMessage. A new plan resets ``mapreduce_results`` (``Overwrite([])``).

    Args:
        reducer: The name of the reducer whose answer ends this MapReduce. A user turn
            it already answered (the same input submitted again, e.g. `user_turn` with
            the same ``turn_id``) is not planned again: the node returns an empty patch
            without calling the model, and `fan_out_tasks` then sends no worker (every
            task has its result). Without it the turn is planned and mapped again, and
            only the reducer's own guard keeps a second answer out of the history.
    """
    engine.policy.process(process)
    engine = engine.for_model_host()  # system_messages auto: one SystemMessage
    graph_schema = _schema_of(engine, schema)

    def node(state: Any, config: RunnableConfig) -> dict[str, Any]:
        sb = StateBuilder(state, engine.policy, schema=graph_schema)
        if reducer is not None and _user_goal(sb) and _turn_answered(sb, name=reducer):
            return {}  # a completed turn submitted again: its plan and results stand
        goal = _goal(sb, node=name)
        result = _compose(
            engine,
            sb,
            state,
            name=name,
            process=process,
            system_prompt=system_prompt,
            query=goal,
            tools=None,
            on_compose=on_compose,
        )
        reply = _reply(model.invoke(result.messages, config), node=name)
        understanding, tasks = parse(message_text(reply))
        sb.mapreduce.init_plan(goal, understanding, tasks)
        sb.contexts.persist(result.persist)
        return sb.patch()

    node.__name__ = f"planner_{name}"
    return node


def fan_out_tasks(worker: str) -> Callable[[Mapping[str, Any]], list[Send]]:
    """A conditional-edge function sending each task of the plan without a result to ``worker``.

    Each worker gets only its task, the goal and the session identity: no history. A new
    plan has no result yet (the planner resets them), so every task is sent; when every
    task already has its result (the planner kept a completed turn's plan, see
    `mapreduce_planner_node`'s ``reducer``), nothing is sent and the run ends there.

    Raises:
        ValueError: (when run) the plan has no task.
    """

    def route(state: Mapping[str, Any]) -> list[Send]:
        snapshot = StateBuilder(
            {k: v for k, v in state.items() if k.startswith("mapreduce_")}
        ).mapreduce.snapshot()
        if not snapshot.tasks:
            raise ValueError("fan_out_tasks: the MapReduce plan has no task")
        base = {k: state[k] for k in _SESSION_FIELDS if k in state}
        return [
            Send(worker, {**base, "mapreduce_goal": snapshot.goal, "mapreduce_task": task})
            for task in snapshot.missing_tasks()
        ]

    route.__name__ = f"fan_out_to_{worker}"
    return route


def mapreduce_worker_node(
    engine: PolicyEngine,
    *,
    name: str,
    system_prompt: str,
    model: BaseChatModel,
    process: str = "mapreduce_worker",
    tools: Sequence[Any] | None = None,
    schema: type[Any] | None = None,
    on_compose: ComposeHook | None = None,
) -> Node:
    """A MapReduce worker: runtime query = its task; no history; appends one result.

    Its patch holds only ``mapreduce_results`` (parallel workers never write the
    same plain field); the result's ``task_id`` makes a re-run replace, not add.
    """
    engine.policy.process(process)
    engine = engine.for_model_host()  # system_messages auto: one SystemMessage
    graph_schema = _schema_of(engine, schema)
    runnable = _bind(model, tools)

    def node(state: Any, config: RunnableConfig) -> dict[str, Any]:
        sb = StateBuilder(state, engine.policy, schema=graph_schema)
        task = sb.mapreduce.snapshot().task
        if task is None:
            raise QueryPathError(
                f"worker {name!r} has no mapreduce_task: send it with fan_out_tasks(...)"
            )
        result = _compose(
            engine,
            sb,
            state,
            name=name,
            process=process,
            system_prompt=system_prompt,
            query=task["description"],
            tools=tools,
            on_compose=on_compose,
        )
        reply = _reply(runnable.invoke(result.messages, config), node=name)
        sb.mapreduce.append_result(
            {
                "task_id": task["id"],
                "output": message_text(reply),
                "status": "completed",
                "agent": name,
            }
        )
        return sb.patch()

    node.__name__ = f"worker_{name}"
    return node


def render_reduce_query(snapshot: MapReduceSnapshot) -> str:
    """The reducer's default runtime query: the goal and every task's result."""
    descriptions = {t["id"]: t["description"] for t in snapshot.tasks}
    parts = [f"Goal: {snapshot.goal or ''}", "", "Results:"]
    for result in snapshot.results:
        task_id = result["task_id"]
        parts.append(f"## {task_id}: {descriptions.get(task_id, '')}".rstrip())
        parts.append(result.get("output", ""))
    return "\n".join(parts)


def mapreduce_reducer_node(
    engine: PolicyEngine,
    *,
    name: str,
    system_prompt: str,
    model: BaseChatModel,
    process: str = "mapreduce_reducer",
    render_query: ReduceQuery = render_reduce_query,
    schema: type[Any] | None = None,
    on_compose: ComposeHook | None = None,
) -> Node:
    """The MapReduce reducer: merges the results into the final answer.

    Runtime query = ``render_query(snapshot)``; the answer is appended to the
    history (the conversation continues from it) and the agent is finished. A user turn
    this reducer already answered (its input submitted again) returns an empty patch
    without calling the model: `agent_node`'s guard.

    Raises:
        ValueError: (when run) a task of the plan has no result.
    """
    engine.policy.process(process)
    engine = engine.for_model_host()  # system_messages auto: one SystemMessage
    graph_schema = _schema_of(engine, schema)

    def node(state: Any, config: RunnableConfig) -> dict[str, Any]:
        sb = StateBuilder(state, engine.policy, schema=graph_schema)
        if _user_goal(sb) and _turn_answered(sb, name=name):
            return {}  # a completed turn submitted again: nothing to add
        snapshot = sb.mapreduce.snapshot()
        missing = snapshot.missing_tasks()
        if missing:
            ids = ", ".join(t["id"] for t in missing)
            raise ValueError(f"reducer {name!r}: tasks without a result: {ids}")
        result = _compose(
            engine,
            sb,
            state,
            name=name,
            process=process,
            system_prompt=system_prompt,
            query=render_query(snapshot),
            tools=None,
            on_compose=on_compose,
        )
        raw = model.invoke(result.messages, config)
        return _record_turn(engine, sb, result, raw, name=name, config=config)

    node.__name__ = f"reducer_{name}"
    return node


def add_mapreduce(
    graph: StateGraph[Any],
    *,
    planner: Node,
    worker: Node,
    reducer: Node,
    prefix: str = "mapreduce",
) -> tuple[str, str]:
    """Add planner → workers (``Send`` fan-out) → reducer to ``graph``.

    Returns:
        ``(entry, exit)``: the planner's and the reducer's node names, to connect.
    """
    planner_name, worker_name, reducer_name = (
        f"{prefix}_planner",
        f"{prefix}_worker",
        f"{prefix}_reducer",
    )
    graph.add_node(planner_name, planner)
    graph.add_node(worker_name, worker)
    graph.add_node(reducer_name, reducer)
    graph.add_conditional_edges(planner_name, fan_out_tasks(worker_name), [worker_name])
    graph.add_edge(worker_name, reducer_name)
    return planner_name, reducer_name


__all__ = [
    "POLICY_TOOLS",
    "AsyncNode",
    "Blackboard",
    "ComposeHook",
    "ContextsArg",
    "Node",
    "PlanParser",
    "ReduceQuery",
    "aagent_node",
    "add_mapreduce",
    "agent_node",
    "fan_out_tasks",
    "init_context_engine",
    "mapreduce_planner_node",
    "mapreduce_reducer_node",
    "mapreduce_worker_node",
    "message_text",
    "parse_plan",
    "policy_tools",
    "render_reduce_query",
    "state_schema",
]
