"""A realistic composed call as the renderers receive it: a typed `Preview`."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxpolicy.engine import ComposeResult
from ctxpolicy.plan import ExcludedLayer, LayerPlan
from ctxpolicy.render.view import Preview, PreviewView, build_view
from ctxpolicy.report import ComposeReport, LayerCut, LayerReport

SHARED = "shared layer; enable_share_context true and process react: share_context true"


def sample_layers() -> list[LayerReport]:
    """Every layer of the Datapillar order; knowledge truncated, the history trimmed."""
    return [
        LayerReport(
            "system_prompt",
            "system_prompt",
            True,
            "always included",
            tokens=120,
            cap=240,
            messages=1,
        ),
        LayerReport("framework__context", "block", True, SHARED, tokens=40, cap=100, messages=1),
        LayerReport(
            "experience__context",
            "block",
            True,
            "shared layer",
            tokens=0,
            cap=120,
            messages=0,
            notes=("no value: no collector and not in contexts=",),
        ),
        LayerReport(
            "knowledge__context",
            "block",
            True,
            "shared layer",
            tokens=200,
            cap=200,
            messages=1,
            cuts=(LayerCut("truncated", 310, 0, 200, "truncate_tail"),),
        ),
        LayerReport("todo__context", "block", False, "process react: in exclude"),
        LayerReport(
            "compression__context",
            "block",
            True,
            "shared layer",
            tokens=90,
            cap=160,
            messages=1,
        ),
        LayerReport(
            "checkpoint_messages",
            "history",
            True,
            "process react: checkpoint_messages true",
            tokens=700,
            cap=720,
            messages=3,
            cuts=(LayerCut("dropped_oldest", 900, 4, 720, "drop_oldest"),),
        ),
        LayerReport("query", "query", True, "always included", tokens=60, cap=240, messages=0),
    ]


def sample_messages() -> list[BaseMessage]:
    """The seven composed messages, in the order of the layers' message counts."""
    return [
        SystemMessage("You are the SQL agent of Datapillar."),
        SystemMessage("You run inside Datapillar. Answer in JSON."),
        SystemMessage("Table orders(id, customer_id, total) ... [… 310 tokens cut …]"),
        SystemMessage("Summary: the user wants weekly revenue <b>by region</b>."),
        HumanMessage("Which tables hold revenue?"),
        AIMessage([{"type": "text", "text": "orders and regions."}]),
        HumanMessage("Write the query & explain it."),
    ]


def sample_preview(
    *,
    messages: list[BaseMessage] | None = None,
    layers: list[LayerReport] | None = None,
    policy: str = "datapillar-base",
) -> Preview:
    """A ReAct call of the Datapillar base policy, with a truncated knowledge layer."""
    report = ComposeReport(
        process="react",
        query_path="checkpoint",
        tokenizer="cl100k_base",
        available_tokens=2000,
        total_tokens=1210,
        layers=tuple(sample_layers() if layers is None else layers),
        warnings=("knowledge__context (retriever) changes with every query",),
    )
    result = ComposeResult(
        messages=sample_messages() if messages is None else messages, report=report, persist={}
    )
    plan = LayerPlan(
        process="react",
        query_path="checkpoint",
        layers=(),
        excluded=(ExcludedLayer("todo__context", "process react: in exclude"),),
        available_tokens=2000,
        tokenizer="cl100k_base",
        redistribute=True,
        policy_name=policy,
    )
    return Preview(
        result=result,
        plan=plan,
        policy=policy,
        source="policies/base.yaml",
        context_window=2200,
        output_reserve=0.1,
    )


def sample_view() -> PreviewView:
    """The rows of `sample_preview`."""
    return build_view(sample_preview())
