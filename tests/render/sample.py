"""Realistic preview data (the JSON shape of `ctxpolicy.render.view`)."""

from __future__ import annotations

from typing import Any


def sample_preview() -> dict[str, Any]:
    """A ReAct call of the Datapillar base policy, with a truncated knowledge layer."""
    return {
        "policy": "datapillar-base",
        "source": "policies/base.yaml",
        "process": "react",
        "query_path": "checkpoint",
        "tokenizer": "cl100k_base",
        "available_tokens": 2000,
        "total_tokens": 1210,
        "layers": [
            {
                "name": "system_prompt",
                "kind": "system_prompt",
                "included": True,
                "reason": "always included",
                "tokens": 120,
                "cap": 240,
                "messages": 1,
                "cuts": [],
            },
            {
                "name": "framework__context",
                "kind": "block",
                "included": True,
                "reason": (
                    "shared layer; enable_share_context true and process react: share_context true"
                ),
                "tokens": 40,
                "cap": 100,
                "messages": 1,
                "cuts": [],
            },
            {
                "name": "experience__context",
                "kind": "block",
                "included": True,
                "reason": "shared layer",
                "tokens": 0,
                "cap": 120,
                "messages": 0,
                "notes": ["no value: no collector and not in contexts="],
            },
            {
                "name": "knowledge__context",
                "kind": "block",
                "included": True,
                "reason": "shared layer",
                "tokens": 200,
                "cap": 200,
                "messages": 1,
                "cuts": [
                    {
                        "action": "truncated",
                        "tokens": 310,
                        "messages": 0,
                        "cap": 200,
                        "rule": "truncate_tail",
                    }
                ],
            },
            {
                "name": "todo__context",
                "kind": "block",
                "included": False,
                "reason": "process react: in exclude",
                "tokens": 0,
                "cap": None,
                "messages": 0,
            },
            {
                "name": "compression__context",
                "kind": "block",
                "included": True,
                "reason": "shared layer",
                "tokens": 90,
                "cap": 160,
                "messages": 1,
                "error": None,
            },
            {
                "name": "checkpoint_messages",
                "kind": "history",
                "included": True,
                "reason": "process react: checkpoint_messages true",
                "tokens": 700,
                "cap": 720,
                "messages": 3,
                "cuts": [
                    {
                        "action": "dropped_oldest",
                        "tokens": 900,
                        "messages": 4,
                        "cap": 720,
                        "rule": "drop_oldest",
                    }
                ],
            },
            {
                "name": "query",
                "kind": "query",
                "included": True,
                "reason": "always included",
                "tokens": 60,
                "cap": 240,
                "messages": 0,
            },
        ],
        "messages": [
            {"type": "system", "content": "You are the SQL agent of Datapillar."},
            {"type": "system", "content": "You run inside Datapillar. Answer in JSON."},
            {
                "type": "system",
                "content": "Table orders(id, customer_id, total) ... [… 310 tokens cut …]",
            },
            {
                "type": "system",
                "content": "Summary: the user wants weekly revenue <b>by region</b>.",
            },
            {"type": "human", "content": "Which tables hold revenue?"},
            {"type": "ai", "content": [{"type": "text", "text": "orders and regions."}]},
            {"type": "human", "content": "Write the query & explain it."},
        ],
        "warnings": ["knowledge__context (retriever) changes with every query"],
    }
