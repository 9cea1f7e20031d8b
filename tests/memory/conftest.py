"""Helpers for the memory tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from ctxpolicy.collectors.base import CollectRequest
from ctxpolicy.policy import Policy
from ctxpolicy.tokens import get_tokenizer


def count_cl100k(text: str) -> int:
    """The real tiktoken-backed counter of the engine's default tokenizer."""
    return get_tokenizer("cl100k_base").count(text)


def make_request(
    collector: Mapping[str, Any],
    *,
    services: Mapping[str, Any] | None = None,
    state: Mapping[str, Any] | None = None,
    cap: int = 10_000,
    count: Callable[[str], int] = count_cl100k,
    query: str | None = None,
    layer: str = "memory__context",
) -> CollectRequest:
    policy = Policy.model_validate(
        {"version": 1, "name": "memory-test", "layers": {layer: {"collector": dict(collector)}}}
    )
    return CollectRequest(
        layer=layer,
        spec=policy.layer(layer).collector,  # type: ignore[arg-type]
        policy=policy,
        process="react",
        state=state or {},
        query=query,
        services=services or {},
        cap_tokens=cap,
        count_tokens=count,
    )


@pytest.fixture
def counter() -> Callable[[str], int]:
    return count_cl100k
