"""Environment settings, read through pydantic-settings.

See docs/design.md, 'Which layers a call gets' (the share switch).

Precedence of every effective value: explicit argument > environment > policy file
(after ``extends``) > default. `CtxPolicySettings` holds only what the environment
says; `ctxpolicy.loading` applies it on top of the file.

pydantic-settings is imported only when a ``CTXPOLICY_*`` variable is set (or the
class is asked for): ``ctxpolicy validate`` usually runs without any, and the import
would be a noticeable part of its start-up.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

ENV_PREFIX = "CTXPOLICY_"

if TYPE_CHECKING:
    from pydantic import Field
    from pydantic_settings import BaseSettings, SettingsConfigDict
else:  # the class is built on first use (`_settings_class`, module `__getattr__`)
    BaseSettings = object


class _CtxPolicySettings(BaseSettings):
    """What the ``CTXPOLICY_*`` environment variables set (None = not set).

    Attributes:
        enable_share_context: ``CTXPOLICY_ENABLE_SHARE_CONTEXT`` (true/false/1/0/yes/no).
        policy: ``CTXPOLICY_POLICY``, the policy file used when none is given.
        tokenizer: ``CTXPOLICY_TOKENIZER``.
        context_window: ``CTXPOLICY_CONTEXT_WINDOW`` (tokens).
    """

    if TYPE_CHECKING:  # the runtime class is built by `_settings_class`
        model_config = SettingsConfigDict(
            env_prefix=ENV_PREFIX,
            extra="ignore",
            frozen=True,
            case_sensitive=False,
            env_ignore_empty=True,  # `CTXPOLICY_X=` means unset, not invalid
        )
        enable_share_context: bool | None = None
        policy: Path | None = None
        tokenizer: Literal["cl100k_base", "o200k_base", "approximate"] | None = None
        context_window: int | None = Field(default=None, gt=0)


@functools.cache
def _settings_class() -> type[_CtxPolicySettings]:
    """Build `CtxPolicySettings` (imports pydantic-settings)."""
    from pydantic import Field
    from pydantic_settings import BaseSettings, SettingsConfigDict

    class CtxPolicySettings(BaseSettings):
        __doc__ = _CtxPolicySettings.__doc__
        model_config = SettingsConfigDict(
            env_prefix=ENV_PREFIX,
            extra="ignore",
            frozen=True,
            case_sensitive=False,
            env_ignore_empty=True,  # `CTXPOLICY_X=` means unset, not invalid
        )

        enable_share_context: bool | None = None
        policy: Path | None = None
        tokenizer: Literal["cl100k_base", "o200k_base", "approximate"] | None = None
        context_window: int | None = Field(default=None, gt=0)

    CtxPolicySettings.__module__ = __name__
    CtxPolicySettings.__qualname__ = "CtxPolicySettings"
    return CtxPolicySettings  # type: ignore[return-value]


if TYPE_CHECKING:
    CtxPolicySettings = _CtxPolicySettings
else:

    def __getattr__(name: str) -> Any:
        if name == "CtxPolicySettings":
            return _settings_class()
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
    if environ is None:
        import os

        if not any(key.upper().startswith(ENV_PREFIX) for key in os.environ):
            # nothing set: what CtxPolicySettings() reads then, without pydantic-settings
            return _empty_settings(), []
        from pydantic import ValidationError

        settings_class = _settings_class()
        try:
            return settings_class(), []
        except ValidationError:
            environ = os.environ  # report each bad variable below
    from pydantic import TypeAdapter, ValidationError

    settings_class = _settings_class()
    values = {
        name: environ[var]
        for name in settings_class.model_fields
        if ((var := env_var(name)) in environ or (var := var.lower()) in environ)
        and environ[var] != ""  # an empty variable is unset (env_ignore_empty)
    }
    problems: list[tuple[str, str]] = []
    valid: dict[str, Any] = {}
    for name, raw in values.items():
        info = settings_class.model_fields[name]
        form: Any = Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation
        adapter: TypeAdapter[Any] = TypeAdapter(form)
        try:
            valid[name] = adapter.validate_python(raw)
        except ValidationError as exc:
            message = exc.errors()[0]["msg"] if exc.errors() else str(exc)
            problems.append((env_var(name), f"{message} (got {raw!r})"))
    return settings_class.model_construct(**valid), problems


class _EmptySettings:
    """`CtxPolicySettings` with nothing set (every field None), frozen."""

    __slots__ = ()
    enable_share_context = None
    policy = None
    tokenizer = None
    context_window = None

    def __repr__(self) -> str:
        return "CtxPolicySettings()"


@functools.cache
def _empty_settings() -> CtxPolicySettings:
    return _EmptySettings()  # type: ignore[return-value]


__all__ = ["ENV_PREFIX", "SETTING_PATHS", "CtxPolicySettings", "env_var", "read_settings"]
