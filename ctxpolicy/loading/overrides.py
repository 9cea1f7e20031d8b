"""Apply environment variables and explicit arguments on top of the merged file.

Precedence (see docs/design.md, 'Which layers a call gets'): explicit argument >
environment > file (after ``extends``) > default. An overridden value's source-map entry
names the variable or argument, so a bad value is reported against it and
``show --explain`` can say where it came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxpolicy.issues import PolicyIssue
from ctxpolicy.loading.sourcemap import JsonPath, Location, SourceMap, format_path
from ctxpolicy.settings import SETTING_PATHS, env_var, read_settings


def env_source(variable: str) -> str:
    """The pseudo-file name of an environment variable in locations and issues."""
    return f"<env {variable}>"


def argument_source(name: str) -> str:
    """The pseudo-file name of an explicit argument in locations and issues."""
    return f"<argument {name}>"


def _set(data: dict[str, Any], path: JsonPath, value: Any) -> bool:
    node = data
    for key in path[:-1]:
        child = node.get(str(key))
        if child is None:
            child = node[str(key)] = {}
        elif not isinstance(child, dict):
            return False  # the file's own type error stays visible
        node = child
    node[str(path[-1])] = value
    return True


def apply_overrides(
    data: dict[str, Any],
    sourcemap: SourceMap,
    *,
    arguments: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], SourceMap, list[PolicyIssue]]:
    """Environment, then explicit arguments, over ``data`` (neither input is changed).

    Args:
        data: The merged policy data.
        sourcemap: Its source map.
        arguments: Explicit values by settings name (None entries are ignored).
        environ: Environment to read instead of ``os.environ``.

    Returns:
        The new data, the new source map and one issue per invalid variable.
    """
    import copy

    out = copy.deepcopy(data)
    smap = dict(sourcemap)
    settings, problems = read_settings(environ)
    issues = []
    for variable, message in problems:
        field = variable.removeprefix("CTXPOLICY_").lower()
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
    for field, path in SETTING_PATHS.items():
        value = getattr(settings, field)
        if value is not None and _set(out, path, value):
            smap[path] = Location(env_source(env_var(field)))
    for name, value in arguments.items():
        if value is None:
            continue
        path = SETTING_PATHS[name]
        if _set(out, path, value):
            smap[path] = Location(argument_source(name))
    return out, smap, issues


__all__ = ["apply_overrides", "argument_source", "env_source"]
