"""Every exception class of ctxpolicy is a `CtxPolicyError` (docs/design.md, errors)."""

from __future__ import annotations

import inspect

import ctxpolicy.blocks
import ctxpolicy.errors
from ctxpolicy.errors import CtxPolicyError, PolicyFileRefusedError
from ctxpolicy.loading.toml_reader import parse_toml
from ctxpolicy.loading.yaml_reader import parse_yaml


def test_every_error_class_is_a_ctxpolicy_error() -> None:
    classes = [
        value
        for _, value in inspect.getmembers(ctxpolicy.errors, inspect.isclass)
        if issubclass(value, BaseException)
    ]
    assert len(classes) > 10
    assert all(issubclass(c, CtxPolicyError) for c in classes), classes


def test_blocks_errors_are_the_same_classes_from_both_modules() -> None:
    for name in ("BlocksError", "PathEscapeError", "FileAccessError", "ManifestError"):
        assert getattr(ctxpolicy.blocks, name) is getattr(ctxpolicy.errors, name)


def test_a_refused_document_comes_back_as_its_issue_not_an_exception() -> None:
    assert issubclass(PolicyFileRefusedError, CtxPolicyError)
    _, _, issues = parse_yaml("a: !!python/tuple [1, 2]\n", "p.yaml")
    assert [i.rule for i in issues] == ["yaml.tag"]
    _, _, issues = parse_toml("a = nan\n", "p.toml")
    assert [i.rule for i in issues] == ["value.non-finite"]
