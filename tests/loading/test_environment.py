"""Precedence: explicit argument > environment > file (after extends) > default."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxpolicy.errors import PolicyNotGivenError, PolicyValidationError
from ctxpolicy.loading import explain_policy, load_policy, resolve_policy
from ctxpolicy.settings import policy_path, read_settings

FILE = "version: 1\nname: t\nenable_share_context: true\nmodel: {tokenizer: o200k_base}\n"


def test_file_beats_default_and_default_fills_the_rest(write) -> None:
    write("p.yaml", FILE)
    policy = load_policy("p.yaml")
    assert policy.model.tokenizer == "o200k_base"
    assert policy.model.context_window == 128_000


def test_environment_beats_file(write, monkeypatch: pytest.MonkeyPatch) -> None:
    write("p.yaml", FILE)
    monkeypatch.setenv("CTXPOLICY_ENABLE_SHARE_CONTEXT", "false")
    monkeypatch.setenv("CTXPOLICY_TOKENIZER", "approximate")
    monkeypatch.setenv("CTXPOLICY_CONTEXT_WINDOW", "32000")
    policy = load_policy("p.yaml")
    assert policy.enable_share_context is False
    assert policy.model.tokenizer == "approximate"
    assert policy.model.context_window == 32000


def test_argument_beats_environment(write, monkeypatch: pytest.MonkeyPatch) -> None:
    write("p.yaml", "version: 1\nname: t\nenable_share_context: false\n")
    monkeypatch.setenv("CTXPOLICY_ENABLE_SHARE_CONTEXT", "false")
    assert load_policy("p.yaml", enable_share_context=True).enable_share_context is True
    monkeypatch.setenv("CTXPOLICY_ENABLE_SHARE_CONTEXT", "true")
    assert load_policy("p.yaml", enable_share_context=False).enable_share_context is False
    assert load_policy("p.yaml").enable_share_context is True


def test_environment_beats_a_value_inherited_through_extends(write, monkeypatch) -> None:
    write("base.yaml", "version: 1\nname: base\nenable_share_context: true\n")
    write("a.yaml", "version: 1\nname: a\nextends: base.yaml\n")
    monkeypatch.setenv("CTXPOLICY_ENABLE_SHARE_CONTEXT", "0")
    assert load_policy("a.yaml").enable_share_context is False


def test_invalid_environment_value_names_the_variable(write, monkeypatch) -> None:
    write("p.yaml", FILE)
    monkeypatch.setenv("CTXPOLICY_CONTEXT_WINDOW", "lots")
    with pytest.raises(PolicyValidationError) as caught:
        load_policy("p.yaml")
    (issue,) = caught.value.issues
    assert issue.rule == "env.invalid"
    assert issue.file == "<env CTXPOLICY_CONTEXT_WINDOW>"
    assert issue.path == "$.model.context_window"
    assert "lots" in issue.message


def test_out_of_range_environment_value_is_reported_against_the_variable(write, monkeypatch):
    write("p.yaml", FILE)
    monkeypatch.setenv("CTXPOLICY_CONTEXT_WINDOW", "0")
    issues = resolve_policy("p.yaml").issues
    assert [i.file for i in issues] == ["<env CTXPOLICY_CONTEXT_WINDOW>"]


def test_policy_path_from_environment(write, monkeypatch) -> None:
    write("p.yaml", FILE)
    monkeypatch.setenv("CTXPOLICY_POLICY", "p.yaml")
    assert load_policy().name == "t"
    monkeypatch.delenv("CTXPOLICY_POLICY")
    with pytest.raises(PolicyValidationError, match="CTXPOLICY_POLICY"):
        load_policy()


def test_explicit_argument_type_is_checked(write) -> None:
    write("p.yaml", FILE)
    with pytest.raises(TypeError, match="enable_share_context"):
        load_policy("p.yaml", enable_share_context="no")  # type: ignore[arg-type]


def test_explain_names_the_source_of_each_value(write, monkeypatch) -> None:
    write("base.yaml", "version: 1\nname: base\nbudget:\n  output_reserve: 0.2\n")
    write("a.yaml", "version: 1\nname: a\nextends: base.yaml\n")
    monkeypatch.setenv("CTXPOLICY_TOKENIZER", "approximate")
    rows = {row.path: row for row in explain_policy("a.yaml", enable_share_context=False)}
    assert rows["$.budget.output_reserve"].source == "base.yaml:4:3"
    assert rows["$.name"].source == "a.yaml:2:1"
    assert rows["$.model.tokenizer"].source == "<env CTXPOLICY_TOKENIZER>"
    assert rows["$.model.tokenizer"].value == "approximate"
    assert rows["$.enable_share_context"].source == "<argument enable_share_context>"
    assert rows["$.model.context_window"].source == "default"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("CTXPOLICY_ENABLE_SHARE_CONTEXT", "perhaps"),
        ("CTXPOLICY_TOKENIZER", "gpt2"),
        ("CTXPOLICY_CONTEXT_WINDOW", "-5"),
    ],
)
def test_every_invalid_variable_is_one_issue(write, monkeypatch, variable, value) -> None:
    write("p.yaml", FILE)
    monkeypatch.setenv(variable, value)
    monkeypatch.setenv(
        "CTXPOLICY_TOKENIZER" if "TOKENIZER" not in variable else "CTXPOLICY_CONTEXT_WINDOW",
        "1000" if "TOKENIZER" in variable else "approximate",
    )
    issues = resolve_policy("p.yaml").issues
    assert [(i.file, i.rule) for i in issues] == [(f"<env {variable}>", "env.invalid")]


def test_an_argument_overrides_even_an_invalid_environment_value(write, monkeypatch) -> None:
    write("p.yaml", FILE)
    monkeypatch.setenv("CTXPOLICY_ENABLE_SHARE_CONTEXT", "bogus")
    assert load_policy("p.yaml", enable_share_context=False).enable_share_context is False
    with pytest.raises(PolicyValidationError) as info:
        load_policy("p.yaml")  # no argument: the bad variable is reported, named
    assert [i.rule for i in info.value.issues] == ["env.invalid"]
    assert "CTXPOLICY_ENABLE_SHARE_CONTEXT" in info.value.issues[0].file


@pytest.mark.parametrize("variable", ["ENABLE_SHARE_CONTEXT", "TOKENIZER", "CONTEXT_WINDOW"])
def test_an_empty_environment_variable_is_unset_not_invalid(write, monkeypatch, variable) -> None:
    write("p.yaml", FILE)
    monkeypatch.setenv(f"CTXPOLICY_{variable}", "")
    policy = load_policy("p.yaml")
    assert policy.enable_share_context is True
    assert policy.model.tokenizer == "o200k_base"
    assert policy.model.context_window == 128_000


def test_one_resolver_for_the_policy_path(write, monkeypatch) -> None:
    assert policy_path("given.yaml") == Path("given.yaml")
    monkeypatch.setenv("CTXPOLICY_POLICY", "from-env.yaml")
    assert policy_path() == Path("from-env.yaml")
    assert policy_path("given.yaml") == Path("given.yaml")  # an argument wins
    assert policy_path(environ={"CTXPOLICY_POLICY": "other.yaml"}) == Path("other.yaml")
    monkeypatch.setenv("CTXPOLICY_POLICY", "")  # empty counts as unset
    with pytest.raises(PolicyNotGivenError) as caught:
        policy_path()
    # one error for every caller: an invalid-policy error with one issue, and a ValueError
    assert isinstance(caught.value, PolicyValidationError)
    assert isinstance(caught.value, ValueError)
    assert [(i.file, i.rule) for i in caught.value.issues] == [
        ("<env CTXPOLICY_POLICY>", "env.missing")
    ]


def test_variable_names_are_case_insensitive_and_others_ignored() -> None:
    settings, problems = read_settings(
        {"ctxpolicy_tokenizer": "approximate", "CTXPOLICY_UNKNOWN": "x", "HOME": "/root"}
    )
    assert settings.tokenizer == "approximate" and problems == []
    settings, problems = read_settings({"CTXPOLICY_CONTEXT_WINDOW": "0", "CTXPOLICY_POLICY": "p"})
    assert settings.context_window is None and settings.policy == Path("p")
    assert [variable for variable, _ in problems] == ["CTXPOLICY_CONTEXT_WINDOW"]
