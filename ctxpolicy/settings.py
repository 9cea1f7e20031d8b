"""Environment settings, and applying them (and explicit arguments) over a policy file.

See docs/design.md, 'Which layers a call gets' (the share switch).

Precedence of every effective value: explicit argument > environment > policy file
(after ``extends``) > default. `CtxPolicySettings` holds only what the ``CTXPOLICY_*``
environment variables say; `apply_overrides` puts it and the explicit arguments on top
of the merged file, and `policy_path` is the one place that falls back to
``CTXPOLICY_POLICY`` when no policy file is given. An empty variable counts as unset.

The variables are read with pydantic rather than pydantic-settings, whose import would be
a noticeable part of ``ctxpolicy validate``'s start-up; the rules are those of a
pydantic-settings class with the ``CTXPOLICY_`` prefix, case-insensitive names, extra
variables ignored and empty values unset. The model (`ctxpolicy.settings_model`) and
pydantic with it are imported only when a ``CTXPOLICY_*`` variable is set:
``ctxpolicy validate`` reads ordinary policy files without pydantic (docs/design.md,
'Validation without the models').
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ctxpolicy.builtin import resolve_ref
from ctxpolicy.diagnostics import JsonPath, Location, PolicyIssue, SourceMap, format_path
from ctxpolicy.errors import PolicyNotGivenError

if TYPE_CHECKING:
    from ctxpolicy.settings_model import CtxPolicySettings

ENV_PREFIX = "CTXPOLICY_"


#: The settings fields, in the order of `CtxPolicySettings` (each read from
#: ``CTXPOLICY_<FIELD>``).
SETTING_FIELDS: tuple[str, ...] = ("enable_share_context", "policy", "tokenizer", "context_window")


def _settings_model() -> ModuleType:
    """`ctxpolicy.settings_model` (and pydantic), imported the first time it is needed."""
    from ctxpolicy import settings_model  # declared lazy import (docs/design.md)

    return settings_model


def __getattr__(name: str) -> Any:
    """``CtxPolicySettings``, imported when first asked for (PEP 562)."""
    if name == "CtxPolicySettings":
        return _settings_model().CtxPolicySettings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Effective-policy paths the settings override, by settings field.
SETTING_PATHS: Mapping[str, tuple[str, ...]] = {
    "enable_share_context": ("enable_share_context",),
    "tokenizer": ("model", "tokenizer"),
    "context_window": ("model", "context_window"),
}


def env_var(field: str) -> str:
    """The environment variable of settings field ``field``."""
    return f"{ENV_PREFIX}{field.upper()}"


def env_source(variable: str) -> str:
    """The pseudo-file name of an environment variable in locations and issues."""
    return f"<env {variable}>"


def argument_source(name: str) -> str:
    """The pseudo-file name of an explicit argument in locations and issues."""
    return f"<argument {name}>"


def _set_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """``{field: raw value}`` of every settings variable with a non-empty value.

    Names are matched case-insensitively; other variables are ignored.
    """
    fields = SETTING_FIELDS
    found: dict[str, str] = {}
    width = len(ENV_PREFIX)
    for variable in environ:  # the names only: most values are never read
        if variable[:width].upper() != ENV_PREFIX:
            continue
        name = variable[width:].lower()
        if name in fields and (raw := environ[variable]) != "":
            found[name] = raw
    return found


def read_settings(
    environ: Mapping[str, str] | None = None,
) -> tuple[CtxPolicySettings, list[tuple[str, str]]]:
    """Read the settings; invalid variables are reported, not raised.

    Args:
        environ: Variables to read instead of ``os.environ`` (tests, embedding).

    Returns:
        The settings (invalid variables left unset) and ``(variable, message)`` pairs
        for every variable whose value is invalid.
    """
    values = _set_variables(os.environ if environ is None else environ)
    module = _settings_model()
    model: type[CtxPolicySettings] = module.CtxPolicySettings
    valid: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    for name, raw in values.items():
        value, message = module.read_setting(name, raw)
        if message is None:
            valid[name] = value
        else:
            problems.append((env_var(name), f"{message} (got {raw!r})"))
    return model.model_construct(**valid), problems


def policy_path(
    path: str | os.PathLike[str] | None = None, *, environ: Mapping[str, str] | None = None
) -> Path:
    """The policy file to use: ``path`` when given, else ``CTXPOLICY_POLICY``; either may
    be ``builtin:NAME``, a policy bundled with the package (`ctxpolicy.builtin`).

    The one place the ``CTXPOLICY_POLICY`` fallback is resolved (`load_policy`,
    ``ctxpolicy show``, `create_engine`, `ContextPolicyMiddleware`).

    Args:
        path: The policy file given explicitly, or None.
        environ: Variables to read instead of ``os.environ``.

    Raises:
        PolicyNotGivenError: ``path`` is None and ``CTXPOLICY_POLICY`` is not set (a
            `PolicyValidationError` with one ``env.missing`` issue, and a ``ValueError``).
    """
    if path is not None:
        return resolve_ref(path)
    settings, _ = read_settings(environ)
    if settings.policy is None:
        raise PolicyNotGivenError
    return resolve_ref(settings.policy)


def _set(data: dict[str, Any], path: JsonPath, value: Any) -> bool:
    """Set ``path`` in ``data``, copying each mapping on the way (shared with the input)."""
    node = data
    for key in path[:-1]:
        child = node.get(str(key))
        if child is None:
            child = {}
        elif not isinstance(child, dict):
            return False  # the file's own type error stays visible
        copied = dict(child)
        node[str(key)] = copied
        node = copied
    node[str(path[-1])] = value
    return True


def _variable_issues(
    problems: list[tuple[str, str]], arguments: Mapping[str, Any]
) -> list[PolicyIssue]:
    """One issue per invalid variable that no explicit argument overrides."""
    issues = []
    for variable, message in problems:
        field = variable.removeprefix(ENV_PREFIX).lower()
        if arguments.get(field) is not None:
            continue  # an explicit argument wins over the environment
        path = SETTING_PATHS.get(field, ())
        issues.append(
            PolicyIssue(
                env_source(variable),
                0,
                0,
                format_path(path),
                f"invalid value of {variable}: {message}",
                "env.invalid",
            )
        )
    return issues


def apply_overrides(
    data: dict[str, Any],
    sourcemap: SourceMap,
    *,
    arguments: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], SourceMap, list[PolicyIssue]]:
    """Environment, then explicit arguments, over ``data`` (neither input is changed).

    An overridden value's source-map entry names the variable or argument, so a bad value
    is reported against it and ``show --explain`` can say where it came from.

    Args:
        data: The merged policy data.
        sourcemap: Its source map.
        arguments: Explicit values by settings name (None entries are ignored).
        environ: Environment to read instead of ``os.environ``.

    Returns:
        The new data, the new source map and one issue per invalid variable.
    """
    out = dict(data)  # `_set` copies what it changes: ``data`` itself is never changed
    smap = dict(sourcemap)
    problems: list[tuple[str, str]] = []
    if _set_variables(os.environ if environ is None else environ):  # else: no pydantic
        settings, problems = read_settings(environ)
        for field, path in SETTING_PATHS.items():
            value = getattr(settings, field)
            if value is not None and _set(out, path, value):
                smap[path] = Location(env_source(env_var(field)))
    for name, value in arguments.items():
        if value is not None and _set(out, SETTING_PATHS[name], value):
            smap[SETTING_PATHS[name]] = Location(argument_source(name))
    return out, smap, _variable_issues(problems, arguments)


__all__ = [
    "ENV_PREFIX",
    "SETTING_PATHS",
    "CtxPolicySettings",
    "apply_overrides",
    "argument_source",
    "env_source",
    "env_var",
    "policy_path",
    "read_settings",
]
