"""Hostile templates: sandbox escapes, undefined names and resource exhaustion.

Every attempt ends in a clear error — from `render_template` directly, and through
the engine as a `CollectorError` naming the layer (``on_error: fail``) or a recorded
skip with the other layers still composed (``on_error: skip``) — never a crash, a
hang or a leak of Python internals.
"""

from __future__ import annotations

from typing import Any

import jinja2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage

from ctxpolicy.collectors.template import readonly_view
from ctxpolicy.engine import PolicyEngine
from ctxpolicy.errors import CollectorError
from ctxpolicy.policy import Policy
from ctxpolicy.templates import (
    MAX_RANGE,
    MAX_RENDERED_CHARS,
    TemplateOutputTooLargeError,
    render_template,
)
from ctxpolicy.testing import assert_composed_valid

from .conftest import policy_data, watchdog

#: Attribute and format-string escapes: each must be refused by the sandbox.
ESCAPES: dict[str, str] = {
    "dunder_class": "{{ ''.__class__ }}",
    "mro": "{{ ''.__class__.__mro__ }}",
    "subclasses": "{{ ().__class__.__base__.__subclasses__() }}",
    "subclasses_via_getitem": "{{ ()['__class__']['__base__']['__subclasses__']() }}",
    "globals_of_cycler": "{{ cycler.__init__.__globals__ }}",
    "globals_of_joiner": "{{ joiner.__init__.__globals__.os }}",
    "globals_of_namespace": "{{ namespace.__init__.__globals__ }}",
    "globals_of_lipsum": "{{ lipsum.__globals__['os'] }}",
    "lipsum_builtins": "{{ lipsum.__globals__.__builtins__.__import__('os') }}",
    "range_class": "{{ range.__class__ }}",
    "builtins_name": "{{ __builtins__ }}",
    "import_name": "{{ __import__('os') }}",
    "template_reference_context": "{{ self._TemplateReference__context }}",
    "self_dunder_dict": "{{ self.__dict__ }}",
    "format_attr": "{{ '{0.__class__}'.format(query) }}",
    "format_globals": "{{ '{0.__globals__}'.format(lipsum) }}",
    "format_map_attr": "{{ '{a.__class__.__mro__}'.format_map({'a': query}) }}",
    "format_filter_percent": "{{ '%s'|format(query.__class__) }}",
    "attr_filter_class": "{{ query|attr('__class__') }}",
    "attr_filter_chain": "{{ query|attr('__class__')|attr('__mro__') }}",
    "attr_filter_init": "{{ cycler|attr('__init__')|attr('__globals__') }}",
    "state_view_internals": "{{ state._data }}",
    "state_view_class": "{{ state.__class__ }}",
    "vars_mapping_dict": "{{ vars.__dict__ }}",
    "func_code": "{{ lipsum.__code__ }}",
    "gi_frame": "{% set g = range(3)|map('string') %}{{ g.gi_frame }}",
    "loop_internals": "{% for i in range(1) %}{{ loop._iterator }}{% endfor %}",
    "mutate_state": "{{ state['items'].append(1) }}",
    "mutate_literal_list": "{% set l = [] %}{{ l.append(l) }}",
    "mutate_dict": "{% set d = {} %}{{ d.update({'a': 1}) }}",
    "str_mod_format_attr": "{{ '%(a)s' % {'a': query.__class__} }}",
}

#: Resource exhaustion: each must stop with a clear error, quickly and without memory blow-up.
EXHAUSTION: dict[str, str] = {
    "huge_range": "{{ range(10**9)|list|length }}",
    "range_just_over": f"{{{{ range({MAX_RANGE + 1})|list|length }}}}",
    "nested_loops": (
        "{% for i in range(10000) %}{% for j in range(10000) %}{% for k in range(10000) %}"
        "{% endfor %}{% endfor %}{% endfor %}"
    ),
    "infinite_macro_recursion": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "exponential_macro": (
        "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}"
    ),
    "doubling_macro_output": (
        "{% macro d(n) %}{% if n %}{% set c = d(n - 1) %}{{ c }}{{ c }}"
        "{% else %}x{% endif %}{% endmacro %}{{ d(64) }}"
    ),
    "doubling_namespace": (
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}"
        "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}"
    ),
    "doubling_top_level_sets": "{% set s = 'x' %}" + "{% set s = s ~ s %}" * 64 + "{{ s }}",
    "doubling_plus": "{% set s = 'x' %}" + "{% set s = s + s %}" * 64 + "{{ s }}",
    "string_times_big": "{{ 'x' * 10**10 }}",
    "list_times_big": "{{ [1] * 10**10 }}",
    "power_tower": "{{ 9 ** (9 ** 9) }}",
    "repeated_squaring": "{% set ns = namespace(n=3) %}{% for i in range(64) %}"
    "{% set ns.n = ns.n * ns.n %}{% endfor %}{{ ns.n }}",
    "center_filter": "{{ 'x'|center(10**10) }}",
    "center_method": "{{ 'x'.center(10**10) }}",
    "ljust_method": "{{ 'x'.ljust(10**10) }}",
    "zfill_method": "{{ '1'.zfill(10**10) }}",
    "format_width": "{{ '{:>10000000000}'.format(1) }}",
    "format_nested_width": "{{ '{:>{w}}'.format(1, w=10**10) }}",
    "percent_width": "{{ '%10000000000s' % 1 }}",
    "percent_star_width": "{{ '%*s' % (10**10, 'x') }}",
    "format_filter_width": "{{ '%10000000000s'|format(1) }}",
    "replace_amplification": "{% set s = 'x' * 5000 %}{{ s|replace('x', s)|replace('x', s) }}",
    "replace_method_amplification": "{% set s = 'x' * 5000 %}{{ s.replace('x', s) }}",
    "join_amplification": "{% set s = 'x' * 100000 %}{{ range(10000)|join(s) }}",
    "join_method_amplification": (
        "{% set s = 'x' * 100000 %}{{ s.join(range(10000)|map('string')) }}"
    ),
    "repr_of_big_list": "{% set s = 'x' * 100000 %}{{ [s] * 10 ~ [s] * 10 }}",
    "indent_amplification": "{{ ('a\n' * 400000)|indent(100) }}",
    "expandtabs": "{{ ('\t' * 100000).expandtabs(1000) }}",
    "lipsum_huge": "{{ lipsum(10**6) }}",
    "batch_fill": "{{ [1]|batch(10**10, 'x')|list }}",
    "slice_huge": "{{ [1]|slice(10**10)|list }}",
    "tojson_indent": "{{ {'a': [1, 2, 3]}|tojson(indent=10**9) }}",
    "output_cap": "{% for i in range(10000) %}{{ 'y' * 1000 }}{% endfor %}",
    "recursive_loop": ("{% for x in [[[]]] recursive %}{{ loop([[[x]]]) }}{% endfor %}"),
}

_REFUSALS = ("unsafe", "undefined", "no attribute", "not safely callable", "modify")
_EXPECTED = (jinja2.TemplateError, TemplateOutputTooLargeError, RecursionError)


def _state() -> dict[str, Any]:
    return {"items": [1, 2, 3], "messages": [HumanMessage("hello")]}


@pytest.mark.parametrize("source", ESCAPES.values(), ids=ESCAPES.keys())
def test_escape_is_refused(source: str) -> None:
    state = _state()
    variables = {"state": readonly_view(state), "query": "q", "vars": readonly_view({})}
    with pytest.raises(jinja2.TemplateError) as caught:
        render_template(source, variables)
    message = str(caught.value)
    assert any(reason in message for reason in _REFUSALS), message
    assert state["items"] == [1, 2, 3]  # nothing mutated


@pytest.mark.parametrize("source", EXHAUSTION.values(), ids=EXHAUSTION.keys())
def test_exhaustion_stops_with_a_clear_error(source: str) -> None:
    with pytest.raises(_EXPECTED) as caught:
        watchdog(lambda: render_template(source, {"state": {}, "query": "q", "vars": {}}))
    assert str(caught.value) or isinstance(caught.value, RecursionError)


@pytest.mark.parametrize(
    "source",
    [
        "{{ missing }}",
        "{{ state.nope }}",
        "{{ state['nope'] }}",
        "{{ vars.product.x }}",
        "{% for t in state.todo %}{{ t.title }}{% endfor %}",
        "{{ query.upper() ~ nothing }}",
    ],
)
def test_missing_variables_are_errors_not_empty_text(source: str) -> None:
    with pytest.raises(jinja2.UndefinedError):
        render_template(source, {"state": {}, "query": "q", "vars": {"product": "p"}})


def test_a_big_state_list_renders_in_full() -> None:
    """Legit work close to the limits is not refused: 20,000 items, a filter each."""
    items = [{"title": f"task {i}", "done": i % 2 == 0} for i in range(20_000)]
    source = "{% for t in value %}- [{{ 'x' if t.done else ' ' }}] {{ t.title|trim }}\n{% endfor %}"
    text = watchdog(lambda: render_template(source, {"value": items}))
    lines = text.splitlines()
    assert len(lines) == 20_000
    assert lines[0] == "- [x] task 0"
    assert lines[-1] == "- [ ] task 19999"


def test_legit_amplifying_operations_within_limits_still_work() -> None:
    source = (
        "{{ 'ab' * 3 }}|{{ '-'.join(['a', 'b']) }}|{{ 'x'|center(5) }}|{{ '{:>4}'.format(7) }}"
        "|{{ '%3d' % 5 }}|{{ 2 ** 10 }}|{{ [1, 2] + [3] }}|{{ 'a' ~ 1 }}|{{ range(3)|join(',') }}"
    )
    assert render_template(source, {}) == "ababab|a-b|  x  |   7|  5|1024|[1, 2, 3]|a1|0,1,2"


def test_large_numbers_are_data_not_widths() -> None:
    """Only widths and counts are bounded: a big number printed or passed on is fine."""
    source = (
        "{{ 5000000 }}|{{ '{}'.format(5000000) }}|{{ '%d' % 5000000 }}"
        "|{{ nothing|default(5000000) }}|{{ 12345678901|filesizeformat }}"
        "|{{ 'a b'.split(maxsplit=5000000)|length }}|{{ 10 ** 30 }}"
    )
    assert render_template(source, {"nothing": None}) == (
        "5000000|5000000|5000000|None|12.3 GB|2|1000000000000000000000000000000"
    )


def test_output_just_under_the_cap_renders_and_just_over_is_refused() -> None:
    under = "{{ 'y' * " + str(MAX_RENDERED_CHARS) + " }}"
    assert len(render_template(under, {})) == MAX_RENDERED_CHARS
    over = "{{ 'y' * " + str(MAX_RENDERED_CHARS) + " }}z"
    with pytest.raises(TemplateOutputTooLargeError):
        render_template(over, {})


# ------------------------------------------------------------------- through the engine

_ENGINE_CASES = {
    "escape": ESCAPES["subclasses"],
    "format_escape": ESCAPES["format_attr"],
    "undefined": "{{ state.nowhere }}",
    "huge_range": EXHAUSTION["huge_range"],
    "nested_loops": EXHAUSTION["nested_loops"],
    "macro_recursion": EXHAUSTION["infinite_macro_recursion"],
    "exponential_macro": EXHAUSTION["exponential_macro"],
    "output_cap": EXHAUSTION["output_cap"],
    "power_tower": EXHAUSTION["power_tower"],
}


def _engine(source: str, on_error: str) -> PolicyEngine:
    layers = {
        "knowledge__context": {
            "collector": {"type": "template", "template": source, "on_error": on_error}
        },
        "todo__context": {"collector": {"type": "state", "field": "todo"}},
    }
    return PolicyEngine(Policy.model_validate(policy_data(layers)))


def _history() -> list[Any]:
    return [HumanMessage("first"), AIMessage("answer"), HumanMessage("the query")]


@pytest.mark.parametrize("source", _ENGINE_CASES.values(), ids=_ENGINE_CASES.keys())
def test_engine_fail_raises_collector_error_naming_the_layer(source: str) -> None:
    engine = _engine(source, "fail")
    state = {"messages": _history(), "todo": "write tests"}
    with pytest.raises(CollectorError) as caught:
        watchdog(lambda: engine.compose(system_prompt="s", state=state))
    assert caught.value.layer == "knowledge__context"
    assert "knowledge__context" in str(caught.value)


@pytest.mark.parametrize("source", _ENGINE_CASES.values(), ids=_ENGINE_CASES.keys())
def test_engine_skip_records_the_error_and_keeps_every_other_layer(source: str) -> None:
    engine = _engine(source, "skip")
    state = {"messages": _history(), "todo": "write tests"}
    result = watchdog(lambda: engine.compose(system_prompt="s", state=state))
    assert_composed_valid(result, engine.plan())
    skipped = {s.layer: s for s in result.report.skipped}
    assert set(skipped) == {"knowledge__context"}
    assert skipped["knowledge__context"].error
    contents = [str(m.content) for m in result.messages]
    assert contents[0] == "s"
    assert "framework for the query" in contents
    assert "write tests" in contents
    assert contents[-3:] == ["first", "answer", "the query"]  # history untouched
    assert not any("class" in c and "<" in c for c in contents)  # no Python internals


def test_engine_skip_under_acompose_too() -> None:
    import asyncio

    engine = _engine(EXHAUSTION["exponential_macro"], "skip")
    state = {"messages": _history(), "todo": "write tests"}
    result = watchdog(lambda: asyncio.run(engine.acompose(system_prompt="s", state=state)))
    assert [s.layer for s in result.report.skipped] == ["knowledge__context"]
    assert_composed_valid(result, engine.plan())


# ------------------------------------------------------------------------------ fuzzing

_FRAGMENTS = [
    *ESCAPES.values(),
    *(EXHAUSTION[k] for k in ("huge_range", "string_times_big", "power_tower", "center_filter")),
    "{{ query }}",
    "{{ state.items|length }}",
    "{% for i in range(50) %}{{ i }}{% endfor %}",
    "{% set ns = namespace(s='ab') %}{% set ns.s = ns.s ~ ns.s %}{{ ns.s }}",
    "{{ '{}'.format(query) }}",
    "{{ 10 ** 100 }}",
    "{{ 'x' * 1000 }}",
    "{{ ",
    "{% if %}",
    "}}",
    "{% macro m(n) %}{{ n }}{% endmacro %}{{ m(3) }}",
    "{{ 1 / 0 }}",
    "{{ [1,2][5] }}",
    "{{ query|attr('upper')() }}",
    "{{ lipsum(2) }}",
    "{{ cycler(1, 2).next() }}",
    "text",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=6), st.text(max_size=20))
def test_any_mix_of_fragments_renders_bounded_or_fails_cleanly(
    parts: list[str], noise: str
) -> None:
    source = noise.join(parts)
    state = {"items": [1, 2, 3]}
    try:
        text = render_template(source, {"state": state, "query": "q", "vars": {}})
    except (jinja2.TemplateError, TemplateOutputTooLargeError, RecursionError):
        return
    except (ArithmeticError, LookupError, TypeError, ValueError):
        return  # ordinary template errors (1/0, index out of range): the engine wraps them
    assert len(text) <= MAX_RENDERED_CHARS
    assert "<class" not in text
    assert "<function" not in text
    assert state == {"items": [1, 2, 3]}
