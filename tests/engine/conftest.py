"""Fixtures of the engine tests: the policy of DESIGN §3, built in code."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ctxpolicy.policy import Policy

DESIGN_POLICY: dict[str, Any] = {
    "version": 1,
    "name": "data-platform",
    "enable_share_context": True,
    "model": {"context_window": 128000, "tokenizer": "cl100k_base"},
    "budget": {
        "output_reserve": 0.10,
        "ratios": {
            "system_prompt": 0.12,
            "framework__context": 0.05,
            "experience__context": 0.06,
            "knowledge__context": 0.10,
            "todo__context": 0.05,
            "compression__context": 0.08,
            "checkpoint_messages": 0.36,
            "query": 0.12,
        },
        "redistribute": True,
    },
    "order": [
        "system_prompt",
        "framework__context",
        "experience__context",
        "knowledge__context",
        "todo__context",
        "compression__context",
        "checkpoint_messages",
        "query",
    ],
    "vars": {"product": "Datapillar"},
    "layers": {
        "framework__context": {
            "shared": True,
            "persist": False,
            "role": "system",
            "overflow": "truncate_tail",
            "collector": {
                "type": "template",
                "template": "You run inside {{ vars.product }}. Answer in JSON.",
            },
        },
        "knowledge__context": {
            "collector": {
                "type": "retriever",
                "service": "knowledge",
                "top_k": 5,
                "on_error": "skip",
            }
        },
        "todo__context": {
            "collector": {
                "type": "state",
                "field": "todo",
                "template": (
                    "{% for t in value %}- [{{ 'x' if t.done else ' ' }}] {{ t.title }}\n"
                    "{% endfor %}"
                ),
            }
        },
        "compression__context": {
            "persist": True,
            "collector": {"type": "state", "field": "compression__context"},
        },
        "checkpoint_messages": {"overflow": "drop_oldest"},
        "query": {"overflow": "error"},
    },
    "processes": {
        "react": {"checkpoint_messages": True, "share_context": True, "query": "checkpoint"},
        "sequential": {"checkpoint_messages": True, "share_context": True, "query": "checkpoint"},
        "dynamic": {"checkpoint_messages": True, "share_context": True, "query": "checkpoint"},
        "hierarchical": {"checkpoint_messages": True, "share_context": True, "query": "checkpoint"},
        "mapreduce_planner": {
            "checkpoint_messages": False,
            "share_context": False,
            "query": "runtime",
            "include": ["framework__context", "experience__context", "knowledge__context"],
        },
        "mapreduce_worker": {
            "checkpoint_messages": False,
            "share_context": False,
            "query": "runtime",
            "include": ["framework__context", "knowledge__context"],
        },
        "mapreduce_reducer": {
            "checkpoint_messages": False,
            "share_context": False,
            "query": "runtime",
            "include": ["framework__context", "experience__context", "knowledge__context"],
        },
    },
    "default_process": "react",
}


def design_data(**changes: Any) -> dict[str, Any]:
    """A deep copy of the DESIGN §3 policy data with top-level ``changes`` applied."""
    data = copy.deepcopy(DESIGN_POLICY)
    data.update(changes)
    return data


def make_policy(data: dict[str, Any] | None = None, **changes: Any) -> Policy:
    """``Policy.model_validate`` of the DESIGN policy (or ``data``) with ``changes``."""
    base = copy.deepcopy(data) if data is not None else design_data()
    base.update(changes)
    return Policy.model_validate(base)


@pytest.fixture
def design_policy() -> Policy:
    return make_policy()
