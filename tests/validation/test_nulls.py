"""The policy format has no null: `Policy` refuses one, naming the first null's path."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ctxpolicy.policy import Policy, _find_null


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({"a": 1, "b": "x", "c": True, "d": 1.5}, None),
        ({"a": None}, ("a",)),
        ({"a": [1, {"b": None}]}, ("a", 1, "b")),
        ({"a": [1, None]}, ("a", 1)),
        ({"a": (1, None)}, ("a", 1)),
        # depth first, in the document's order: a's whole subtree before b
        ({"a": {"x": 1, "y": {"z": None}}, "b": None}, ("a", "y", "z")),
        ({"a": {"x": 1}, "b": None, "c": {"d": None}}, ("b",)),
        # the top-level vars are free-form (a null is a value there); nowhere else
        ({"vars": {"k": None, "l": [None]}}, None),
        ({"vars": None}, ("vars",)),
        ({"layers": {"vars": None}}, ("layers", "vars")),
        ({"layers": {"x": {"vars": {"k": None}}}}, ("layers", "x", "vars", "k")),
    ],
)
def test_find_null_gives_the_first_null_path(data: dict[str, object], where: object) -> None:
    assert _find_null(data) == where


def test_a_null_in_a_policy_is_refused_with_its_path() -> None:
    data = {"version": 1, "name": "p", "model": {"context_window": 8000, "tokenizer": None}}
    with pytest.raises(ValidationError, match=r"model\.tokenizer: null is not allowed; leave"):
        Policy.model_validate(data)
    assert Policy.model_validate({"version": 1, "name": "p", "vars": {"team": None}}).vars
