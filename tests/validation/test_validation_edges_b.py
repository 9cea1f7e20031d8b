"""Exact findings of the schema explanations, the order rules and `BrokenSections`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from ctxpolicy.diagnostics import Finding
from ctxpolicy.loading import resolve_policy
from ctxpolicy.policy import Policy
from ctxpolicy.validation.schema_check import check_schema, explain_error
from ctxpolicy.validation.sections import WHOLE_POLICY, BrokenSections
from ctxpolicy.validation.semantic import (
    check_budget,
    check_cache_order,
    check_layers_in_order,
    check_order,
    check_persistence,
    check_processes,
    check_state_persistence,
)

ROOT = Path(__file__).resolve().parents[2]
BASE: dict[str, Any] = {"version": 1, "name": "t"}
LAYER_PATTERN = "^(system_prompt|checkpoint_messages|query|[a-z][a-z0-9_]*__context)$"
COLLECTORS = (
    "'template', 'state', 'retriever', 'callable', 'memory', 'files', 'tools', 'recall', "
    "'agent_outputs', 'skills', 'aggregate'"
)
LAYER_HINT = "(a layer is system_prompt, checkpoint_messages, query or *__context)"
COLL = ("layers", "a__context", "collector")


def _collector(**spec: Any) -> dict[str, Any]:
    return {**BASE, "layers": {"a__context": {"collector": spec}}}


def _found(data: Any) -> list[tuple[Any, ...]]:
    return [(f.path, f.message, f.rule, f.severity) for f in check_schema(data)]


SCHEMA_CASES: list[tuple[str, Any, list[tuple[Any, ...]]]] = [
    (
        "template-missing",
        _collector(type="template"),
        [(COLL, "needs 'template' or 'template_file'", "schema.required", "error")],
    ),
    (
        "template-both",
        _collector(type="template", template="x", template_file="y"),
        [
            (
                COLL,
                "give either 'template' or 'template_file', not both",
                "schema.exclusive",
                "error",
            )
        ],
    ),
    (
        "memory-strategy-tier",
        _collector(type="memory", tier="l1", strategy="minimal"),
        [(COLL, "give either 'strategy' or 'tier', not both", "schema.exclusive", "error")],
    ),
    (
        "memory-shares-tier",
        _collector(type="memory", tier="l1", shares={"search": 1}),
        [(COLL, "give either 'shares' or 'tier', not both", "schema.exclusive", "error")],
    ),
    (
        "memory-two-exclusions-one-finding",
        _collector(type="memory", tier="l1", strategy="minimal", shares={"search": 1}),
        [(COLL, "give either 'strategy' or 'tier', not both", "schema.exclusive", "error")],
    ),
    (
        "collector-type",
        _collector(type="sql"),
        [((*COLL, "type"), f"'sql' is not one of {COLLECTORS}", "schema.enum", "error")],
    ),
    (
        "collector-type-close",
        _collector(type="templat"),
        [
            (
                (*COLL, "type"),
                f"'templat' is not one of {COLLECTORS} (did you mean 'template'?)",
                "schema.enum",
                "error",
            )
        ],
    ),
    (
        "retriever-top-k",
        _collector(type="retriever", service="s", top_k=0),
        [((*COLL, "top_k"), "0 is less than the minimum of 1", "schema.range", "error")],
    ),
    (
        "collector-no-type",
        _collector(template="x"),
        [(COLL, "missing required key 'type'", "schema.required", "error")],
    ),
    (
        "extends-int",
        {**BASE, "extends": 5},
        [
            (
                ("extends",),
                "5 is not a file path or a non-empty list of file paths",
                "schema.type",
                "error",
            )
        ],
    ),
    (
        "extends-mapping",
        {**BASE, "extends": {"a": 1}},
        [
            (
                ("extends",),
                "{'a': 1} is not a file path or a non-empty list of file paths",
                "schema.type",
                "error",
            )
        ],
    ),
    (
        "ratio-name",
        {**BASE, "budget": {"ratios": {"Bad": 0.1}}},
        [
            (
                ("budget", "ratios", "Bad"),
                f"'Bad' is not a valid layer name (must match {LAYER_PATTERN})",
                "schema.pattern",
                "error",
            )
        ],
    ),
    (
        "process-name",
        {**BASE, "processes": {"Bad": {}}},
        [
            (
                ("processes", "Bad"),
                "'Bad' is not a valid process name (must match ^[a-z][a-z0-9_]*$)",
                "schema.pattern",
                "error",
            )
        ],
    ),
    (
        "missing-both",
        {},
        [
            ((), "missing required key 'version'", "schema.required", "error"),
            ((), "missing required key 'name'", "schema.required", "error"),
        ],
    ),
    (
        "top-unknown",
        {**BASE, "nmae": "x", "zzzz": 1},
        [
            (
                ("nmae",),
                "unknown key 'nmae' in the policy (did you mean 'name'?)",
                "schema.unknown-key",
                "error",
            ),
            (("zzzz",), "unknown key 'zzzz' in the policy", "schema.unknown-key", "error"),
        ],
    ),
    (
        "budget-unknown",
        {**BASE, "budget": {"ratio": {}}},
        [
            (
                ("budget", "ratio"),
                "unknown key 'ratio' in budget (did you mean 'ratios'?)",
                "schema.unknown-key",
                "error",
            )
        ],
    ),
    (
        "layers-unknown",
        {**BASE, "layers": {"quer": {}, "zzzz": {}, "a__context": {"persist": True, "persit": 1}}},
        [
            (
                ("layers", "quer"),
                "unknown key 'quer' in layers (did you mean 'query'?)",
                "schema.unknown-key",
                "error",
            ),
            (
                ("layers", "zzzz"),
                f"unknown key 'zzzz' in layers {LAYER_HINT}",
                "schema.unknown-key",
                "error",
            ),
            (
                ("layers", "a__context", "persit"),
                "unknown key 'persit' in a__context (did you mean 'persist'?)",
                "schema.unknown-key",
                "error",
            ),
        ],
    ),
    (
        "name-pattern",
        {**BASE, "name": "Bad Name"},
        [(("name",), "'Bad Name' does not match ^[a-z0-9][a-z0-9_-]*$", "schema.pattern", "error")],
    ),
    (
        "version-2",
        {**BASE, "version": 2},
        [(("version",), "2 is not one of 1", "schema.enum", "error")],
    ),
    (
        "window-string",
        {**BASE, "model": {"context_window": "x"}},
        [(("model", "context_window"), "'x' is not of type 'integer'", "schema.type", "error")],
    ),
    (
        "window-zero",
        {**BASE, "model": {"context_window": 0}},
        [
            (
                ("model", "context_window"),
                "0 is less than or equal to the minimum of 0",
                "schema.range",
                "error",
            )
        ],
    ),
    (
        "files-empty-select",
        _collector(type="files", root="r", select=[]),
        [((*COLL, "select"), "[] should be non-empty", "schema.length", "error")],
    ),
    (
        "tokenizer-enum",
        {**BASE, "model": {"tokenizer": "cl100"}},
        [
            (
                ("model", "tokenizer"),
                (
                    "'cl100' is not one of 'cl100k_base', 'o200k_base', 'approximate' "
                    "(did you mean 'cl100k_base'?)"
                ),
                "schema.enum",
                "error",
            )
        ],
    ),
    ("not-a-mapping", 5, [((), "5 is not of type 'object'", "schema.type", "error")]),
]


@pytest.mark.parametrize(
    ("data", "expected"), [c[1:] for c in SCHEMA_CASES], ids=[c[0] for c in SCHEMA_CASES]
)
def test_schema_findings_are_exact(data: Any, expected: list[tuple[Any, ...]]) -> None:
    assert _found(data) == expected


def test_a_collector_that_is_not_a_mapping_is_reported_as_not_an_object() -> None:
    # once: not also with the message of `extends`, the format's one plain union
    found = _found(_collector_value(5))
    assert found == [(COLL, "5 is not of type 'object'", "schema.type", "error")]


def _collector_value(value: Any) -> dict[str, Any]:
    return {**BASE, "layers": {"a__context": {"collector": value}}}


def _explain(schema: dict[str, Any], instance: Any) -> list[Finding]:
    errors = list(Draft202012Validator(schema).iter_errors(instance))
    assert len(errors) == 1
    return list(explain_error(errors[0]))


def test_any_of_without_a_type_is_jsonschema_s_message() -> None:
    schema = {"anyOf": [{"required": ["a"]}, {"required": ["b"]}]}
    assert _explain(schema, {}) == [
        Finding((), "{} is not valid under any of the given schemas", "schema.anyOf")
    ]
    assert _explain({"anyOf": [{"type": "string"}, {"type": "integer"}]}, []) == [
        Finding((), "[] is not valid under any of the given schemas", "schema.anyOf")
    ]


def test_not_with_exactly_a_known_pair_or_another_pair() -> None:
    pair = {"not": {"required": ["template", "template_file"]}}
    assert _explain(pair, {"template": 1, "template_file": 2}) == [
        Finding((), "give either 'template' or 'template_file', not both", "schema.exclusive")
    ]
    other = _explain({"not": {"required": ["a", "b"]}}, {"a": 1, "b": 2})
    assert [(f.path, f.rule) for f in other] == [((), "schema.exclusive")]
    assert other[0].message.endswith("should not be valid under {'required': ['a', 'b']}")
    scalar = _explain({"not": {"type": "integer"}}, 5)
    assert scalar == [
        Finding((), "5 should not be valid under {'type': 'integer'}", "schema.exclusive")
    ]


def test_a_union_of_three_explains_only_branches_whose_type_matches() -> None:
    schema = {
        "oneOf": [
            {"properties": {"type": {"const": "a"}, "x": {"const": 1}}},
            {"properties": {"type": {"const": "b"}}},
            {"properties": {"type": {"const": "c"}}},
        ]
    }
    assert _explain(schema, {"type": "a", "x": 2}) == [
        Finding(("x",), "2 is not one of 1", "schema.enum")
    ]
    every = {"oneOf": [{"type": "object"}, {"type": "object"}, {"type": "object"}]}
    assert _explain(every, {"type": "a"}) == []


def test_unknown_keys_of_a_schema_without_properties() -> None:
    assert _explain({"additionalProperties": False}, {"ab": 1}) == [
        Finding(("ab",), "unknown key 'ab' in the policy", "schema.unknown-key")
    ]


def test_required_key_whose_name_has_a_quote() -> None:
    assert _explain({"required": ["it's"]}, {}) == [
        Finding((), "missing required key '?'", "schema.required")
    ]


def test_plain_errors_keep_jsonschema_s_message_and_validator() -> None:
    assert _explain({"properties": {"n": {"multipleOf": 2}}}, {"n": 3}) == [
        Finding(("n",), "3 is not a multiple of 2", "schema.multipleOf")
    ]


def test_enum_of_a_number_has_no_hint() -> None:
    assert _explain({"enum": [1, 2]}, 3) == [Finding((), "3 is not one of 1, 2", "schema.enum")]


def _policy(**extra: Any) -> Policy:
    return Policy.model_validate({**BASE, **extra})


def test_order_findings_of_an_empty_order() -> None:
    assert list(check_order(_policy(order=[]))) == [
        Finding(
            ("order",), "order must start with 'system_prompt'", "order.starts-with-system-prompt"
        ),
        Finding(("order",), "order must end with 'query'", "order.ends-with-query"),
        Finding(
            ("order",),
            "order must contain 'checkpoint_messages'",
            "order.missing-checkpoint-messages",
        ),
    ]


def test_order_findings_of_a_wrong_order() -> None:
    policy = _policy(order=["query", "query", "system_prompt"])
    assert list(check_order(policy)) == [
        Finding(("order", 1), "'query' appears more than once in order", "order.duplicate"),
        Finding(
            ("order", 0), "order must start with 'system_prompt'", "order.starts-with-system-prompt"
        ),
        Finding(("order", 2), "order must end with 'query'", "order.ends-with-query"),
        Finding(
            ("order",),
            "order must contain 'checkpoint_messages'",
            "order.missing-checkpoint-messages",
        ),
    ]


def test_cache_order_warning_is_reported_once_for_all_processes() -> None:
    policy = resolve_policy(ROOT / "tests/corpus/valid/memory-tier.toml").policy
    assert policy is not None
    assert len(policy.processes) > 1
    assert list(check_cache_order(policy)) == [
        Finding(
            ("order", 1),
            "recent__context (memory) changes with every query but is ordered before stable "
            "layers checkpoint_messages: their prompt-cache prefix is lost on every call of "
            "policy mem; order per-query layers after stable ones or set "
            "layers.recent__context.cache: volatile-ok",
            "order.cache-breaker",
            severity="warning",
        )
    ]


def _at(*paths: tuple[Any, ...]) -> list[Finding]:
    return [Finding(p, "m", "r") for p in paths]


def test_broken_sections_of_findings() -> None:
    assert BrokenSections.of([]) == BrokenSections(False, frozenset(), frozenset())
    assert BrokenSections.of(_at(("layers", "a__context"), ("order", 0))) == BrokenSections(
        False, frozenset({"order"}), frozenset({("layers", "a__context")})
    )
    assert BrokenSections.of(_at(())) == BrokenSections(True, frozenset(), frozenset())


def test_broken_sections_allow_rules() -> None:
    known = frozenset({"order", "layers", "budget"})
    whole = frozenset({WHOLE_POLICY})
    clean = BrokenSections(False, frozenset(), frozenset())
    assert clean.allows(whole, known=known) is True
    order = BrokenSections(False, frozenset({"order"}), frozenset())
    assert order.allows(whole, known=known) is False
    unknown = BrokenSections(False, frozenset({"zzz"}), frozenset())
    assert unknown.allows(whole, known=known) is True
    entry = BrokenSections(False, frozenset(), frozenset({("layers", "a__context")}))
    assert entry.allows(whole, known=known) is False
    assert entry.allows(frozenset({"layers.*"}), known=known) is True
    assert entry.allows(frozenset({"layers"}), known=known) is False
    layers = BrokenSections(False, frozenset({"layers"}), frozenset())
    assert layers.allows(frozenset({"layers.*"}), known=known) is False


def test_unknown_keys_of_a_mapping_with_name_patterns_are_in_layers() -> None:
    schema = {"patternProperties": {"^x": {}}, "additionalProperties": False}
    assert _explain(schema, {"y": 1}) == [
        Finding(("y",), f"unknown key 'y' in layers {LAYER_HINT}", "schema.unknown-key")
    ]


def _rule_findings(rule: Any, data: dict[str, Any]) -> list[tuple[Any, ...]]:
    policy = Policy.model_validate({**BASE, **data})
    return [(f.path, f.message, f.rule, f.severity) for f in rule(policy)]


#: A volatile memory layer after a stable template layer, both before the history.
_TWO_BLOCKS: dict[str, Any] = {
    "order": [
        "system_prompt",
        "other__context",
        "recent__context",
        "checkpoint_messages",
        "query",
    ],
    "layers": {
        "recent__context": {"collector": {"type": "memory", "tier": "l1"}},
        "other__context": {"collector": {"type": "template", "template": "hi"}},
    },
}


def test_cache_warning_shared_by_two_distinct_plans_is_reported_once() -> None:
    policy = _policy(
        name="mem",
        **_TWO_BLOCKS,
        processes={"a": {}, "b": {"exclude": ["other__context"]}},
        default_process="a",
    )
    assert list(check_cache_order(policy)) == [
        Finding(
            ("order", 2),
            "recent__context (memory) changes with every query but is ordered before stable "
            "layers checkpoint_messages: their prompt-cache prefix is lost on every call of "
            "policy mem; order per-query layers after stable ones or set "
            "layers.recent__context.cache: volatile-ok",
            "order.cache-breaker",
            severity="warning",
        )
    ]


def test_layers_ratios_and_process_rules_not_in_order() -> None:
    data = {
        "order": ["system_prompt", "lonely__context", "checkpoint_messages", "query"],
        "layers": {"gone__context": {"collector": {"type": "template", "template": "x"}}},
        "budget": {"ratios": {"away__context": 0.1}},
        "processes": {"react": {"include": ["inc__context"], "exclude": ["exc__context"]}},
    }
    assert _rule_findings(check_layers_in_order, data) == [
        (
            ("layers", "gone__context"),
            "layer 'gone__context' is configured but not in order",
            "order.layer-not-in-order",
            "error",
        ),
        (
            ("budget", "ratios", "away__context"),
            "ratio for 'away__context', which is not a layer in order",
            "budget.ratio-not-in-order",
            "error",
        ),
        (
            ("processes", "react", "include", 0),
            "process 'react' includes 'inc__context', which is not in order",
            "process.include-unknown",
            "error",
        ),
        (
            ("processes", "react", "exclude", 0),
            "process 'react' excludes 'exc__context', which is not in order",
            "process.exclude-unknown",
            "error",
        ),
        (
            ("order", 1),
            (
                "block layer 'lonely__context' is in order but has no collector, ratio or "
                "process rule (its text can only come from contexts=)"
            ),
            "order.unused-layer",
            "warning",
        ),
    ]


def test_layers_that_may_never_persist_or_be_shared() -> None:
    data = {
        "layers": {
            "framework__context": {"persist": True},
            "system_prompt": {"persist": True, "shared": True},
            "query": {"persist": True},
        }
    }
    assert _rule_findings(check_persistence, data) == [
        (
            ("layers", "framework__context", "persist"),
            "framework__context may never be persisted",
            "persist.framework",
            "error",
        ),
        (
            ("layers", "system_prompt", "persist"),
            "system_prompt may never be persisted",
            "persist.system-prompt",
            "error",
        ),
        (("layers", "query", "persist"), "query may never be persisted", "persist.query", "error"),
        (
            ("layers", "system_prompt", "shared"),
            "system_prompt is private to its agent and may never be shared",
            "shared.system-prompt",
            "error",
        ),
    ]


def test_persisted_state_layers_reading_another_field() -> None:
    data = {
        "order": ["system_prompt", "s__context", "t__context", "checkpoint_messages", "query"],
        "layers": {
            "s__context": {"collector": {"type": "state", "field": "other"}},
            "t__context": {"persist": True, "collector": {"type": "state", "field": "f"}},
            "compression__context": {"collector": {"type": "state", "field": "other"}},
        },
    }
    why = (
        "layer {0!r} reads state[{1!r}] (state collector), which the graph state already "
        "keeps: persisting it would write state[{0!r}], which this layer never reads back, "
        "so its text is not persisted"
    )
    assert _rule_findings(check_state_persistence, data) == [
        (
            ("layers", "t__context", "persist"),
            why.format("t__context", "f")
            + "; remove persist: true or read the layer's own field (field: t__context)",
            "persist.state-field",
            "error",
        ),
        (
            ("layers", "compression__context", "collector", "field"),
            why.format("compression__context", "other")
            + "; compression__context is persisted by default: set persist: false or read "
            "the layer's own field (field: compression__context)",
            "persist.state-field",
            "error",
        ),
    ]


def test_process_rules_findings() -> None:
    data = {
        "default_process": "zz",
        "processes": {
            "mapreduce_x": {"checkpoint_messages": True},
            "b": {
                "include": ["todo__context", "knowledge__context"],
                "exclude": ["knowledge__context", "todo__context", "experience__context"],
                "query": "checkpoint",
                "checkpoint_messages": False,
            },
        },
    }
    assert _rule_findings(check_processes, data) == [
        (
            ("processes", "mapreduce_x", "checkpoint_messages"),
            (
                "process 'mapreduce_x' is a MapReduce process and must not receive "
                "checkpoint_messages (set checkpoint_messages: false)"
            ),
            "process.mapreduce-history",
            "error",
        ),
        (
            ("processes", "b", "exclude", 0),
            "'knowledge__context' is both included and excluded",
            "process.include-exclude",
            "error",
        ),
        (
            ("processes", "b", "exclude", 1),
            "'todo__context' is both included and excluded",
            "process.include-exclude",
            "error",
        ),
        (
            ("processes", "b", "query"),
            (
                "process 'b' takes its query from the checkpoint but receives no "
                "checkpoint_messages; use query: runtime"
            ),
            "process.query-path",
            "error",
        ),
        (
            ("default_process",),
            "default_process 'zz' is not a declared process (b, mapreduce_x)",
            "process.default-missing",
            "error",
        ),
    ]


def test_ratios_sum_above_one() -> None:
    data = {"budget": {"ratios": {"query": 0.75, "system_prompt": 0.5}}}
    assert _rule_findings(check_budget, data) == [
        (("budget", "ratios"), "ratios sum to 1.25, more than 1.0", "budget.ratios-sum", "error")
    ]


def test_a_layer_with_only_a_collector_or_only_a_ratio_is_used() -> None:
    data = {
        "order": ["system_prompt", "a__context", "b__context", "checkpoint_messages", "query"],
        "layers": {"a__context": {"collector": {"type": "template", "template": "x"}}},
        "budget": {"ratios": {"b__context": 0.1}},
    }
    assert _rule_findings(check_layers_in_order, data) == []


def test_state_rule_checks_every_layer_after_skipped_ones() -> None:
    data = {
        "order": [
            "system_prompt",
            "a__context",
            "own__context",
            "t__context",
            "checkpoint_messages",
            "query",
        ],
        "layers": {
            "a__context": {"collector": {"type": "template", "template": "x"}},
            "own__context": {
                "persist": True,
                "collector": {"type": "state", "field": "own__context"},
            },
            "t__context": {"persist": True, "collector": {"type": "state", "field": "f"}},
        },
    }
    assert [f[0] for f in _rule_findings(check_state_persistence, data)] == [
        ("layers", "t__context", "persist")
    ]


def test_cache_warning_of_a_later_process_when_an_earlier_one_cannot_be_planned() -> None:
    # process a gets both layers, whose ratios sum above 1 (no plan); b drops one
    policy = _policy(
        name="mem",
        **_TWO_BLOCKS,
        budget={"ratios": {"other__context": 0.6, "recent__context": 0.6}},
        processes={"a": {}, "b": {"exclude": ["other__context"]}},
        default_process="a",
    )
    assert [(f.path, f.rule) for f in check_cache_order(policy)] == [
        (("order", 2), "order.cache-breaker")
    ]
