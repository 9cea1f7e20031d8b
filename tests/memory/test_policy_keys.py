"""The memory collector's policy keys: the model and the JSON Schema agree on ``shares``."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from ctxpolicy.policy import MemoryCollectorSpec, Policy
from ctxpolicy.schema import load_schema

VALIDATOR = Draft202012Validator(load_schema())


def _policy(collector: dict[str, Any]) -> dict[str, Any]:
    return {"version": 1, "name": "x", "layers": {"m__context": {"collector": collector}}}


def _agree(collector: dict[str, Any]) -> bool:
    data = _policy(collector)
    schema_ok = not list(VALIDATOR.iter_errors(data))
    try:
        Policy.model_validate(data)
        model_ok = True
    except ValidationError:
        model_ok = False
    assert schema_ok == model_ok, (collector, list(VALIDATOR.iter_errors(data)))
    return model_ok


@pytest.mark.parametrize(
    ("collector", "valid"),
    [
        ({"type": "memory", "shares": {"search": 0.5, "l1": 0.2, "l2": 0.3}}, True),
        ({"type": "memory", "strategy": "comprehensive", "shares": {"l3": 1}}, True),
        ({"type": "memory", "shares": {"search": 1.0, "l1": 1.0}}, True),  # scaled at use
        ({"type": "memory", "shares": {}}, False),
        ({"type": "memory", "shares": {"l4": 0.5}}, False),
        ({"type": "memory", "shares": {"l1": 1.5}}, False),
        ({"type": "memory", "shares": {"l1": -0.1}}, False),
        ({"type": "memory", "shares": {"l1": True}}, False),
        ({"type": "memory", "shares": {"l1": "0.5"}}, False),
        ({"type": "memory", "shares": [0.5]}, False),
        ({"type": "memory", "tier": "l1", "shares": {"l1": 0.5}}, False),
    ],
)
def test_schema_and_model_agree_on_shares(collector, valid):
    assert _agree(collector) is valid


def test_every_shares_key_is_described_with_default_and_bounds():
    shares = load_schema()["$defs"]["memoryCollector"]["properties"]["shares"]
    assert shares["description"]
    for source in ("search", "l1", "l2", "l3"):
        prop = shares["properties"][source]
        assert prop["description"] and prop["default"] == 0
        assert (prop["minimum"], prop["maximum"]) == (0, 1)
    spec = MemoryCollectorSpec.model_validate({"type": "memory", "shares": {"l1": 1}})
    assert dict(spec.shares or {}) == {"l1": 1.0}
    assert MemoryCollectorSpec.model_validate({"type": "memory"}).shares is None


def test_shares_with_tier_reads_as_a_plain_message_at_its_line(tmp_path) -> None:
    from ctxpolicy import validate_paths

    path = tmp_path / "p.yaml"
    path.write_text(
        "version: 1\nname: x\norder: [system_prompt, m__context, checkpoint_messages, query]\n"
        "layers:\n  m__context:\n    collector:\n      type: memory\n      tier: l1\n"
        "      shares: {l1: 0.5}\n",
        encoding="utf-8",
    )
    issues = [i for i in validate_paths([path]) if i.severity == "error"]
    assert any("give either 'shares' or 'tier', not both" in i.message for i in issues), issues
    assert all(i.line > 0 for i in issues)
