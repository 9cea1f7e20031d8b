"""The layer vocabulary of DESIGN §2 is a contract: pin it literally, once."""

from __future__ import annotations

from typing import get_args

import pytest

from ctxpolicy.layers import (
    COLLECTOR_TYPES,
    DEFAULT_ORDER,
    DEFAULT_OVERFLOW,
    OVERFLOW_RULES,
    TOKENIZER_NAMES,
    is_block_layer,
    layer_kind,
)
from ctxpolicy.policy import CollectorSpec


def test_default_order_is_the_design_table() -> None:
    assert DEFAULT_ORDER == (
        "system_prompt",
        "framework__context",
        "experience__context",
        "knowledge__context",
        "todo__context",
        "compression__context",
        "checkpoint_messages",
        "query",
    )


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("system_prompt", "system_prompt"),
        ("checkpoint_messages", "history"),
        ("query", "query"),
        ("warehouse__context", "block"),
    ],
)
def test_layer_kinds(name: str, kind: str) -> None:
    assert layer_kind(name) == kind


@pytest.mark.parametrize(
    "name", ["Knowledge__context", "knowledge_context", "__context", "9a__context"]
)
def test_bad_block_names_are_not_layers(name: str) -> None:
    assert not is_block_layer(name)
    with pytest.raises(ValueError, match="not a layer name"):
        layer_kind(name)


def test_overflow_rules_are_the_design_table_default_first() -> None:
    assert OVERFLOW_RULES == {
        "block": ("truncate_tail", "truncate_head", "drop", "error"),
        "history": ("drop_oldest", "summarize", "error"),
        "query": ("error", "truncate_tail"),
        "system_prompt": ("error", "truncate_tail"),
    }
    assert DEFAULT_OVERFLOW == {
        "block": "truncate_tail",
        "history": "drop_oldest",
        "query": "error",
        "system_prompt": "error",
    }


def test_tokenizer_names() -> None:
    assert TOKENIZER_NAMES == ("cl100k_base", "o200k_base", "approximate")


def test_each_collector_type_names_one_collector_model() -> None:
    assert COLLECTOR_TYPES == (
        "template",
        "state",
        "retriever",
        "callable",
        "memory",
        "files",
        "tools",
        "recall",
        "agent_outputs",
        "skills",
        "aggregate",
    )
    union, *_ = get_args(CollectorSpec.__value__)
    tags = [get_args(model.model_fields["type"].annotation) for model in get_args(union)]
    assert tags == [(name,) for name in COLLECTOR_TYPES]
