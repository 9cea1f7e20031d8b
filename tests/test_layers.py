"""The layer vocabulary of DESIGN §2 is a contract: pin it literally, once."""

from __future__ import annotations

import pytest

from ctxpolicy.layers import DEFAULT_ORDER, is_block_layer, layer_kind


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
