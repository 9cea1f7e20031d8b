"""Environment settings (DESIGN §3.2), read through pydantic-settings.

Precedence of every effective value: explicit argument > environment > policy file
(after ``extends``) > default. `CtxPolicySettings` holds only what the environment
says; `ctxpolicy.loading` applies it on top of the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "CTXPOLICY_"


class CtxPolicySettings(BaseSettings):
    """What the ``CTXPOLICY_*`` environment variables set (None = not set).

    Attributes:
        enable_share_context: ``CTXPOLICY_ENABLE_SHARE_CONTEXT`` (true/false/1/0/yes/no).
        policy: ``CTXPOLICY_POLICY``, the policy file used when none is given.
        tokenizer: ``CTXPOLICY_TOKENIZER``.
        context_window: ``CTXPOLICY_CONTEXT_WINDOW`` (tokens).
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="ignore", frozen=True, case_sensitive=False
    )

    enable_share_context: bool | None = None
    policy: Path | None = None
    tokenizer: Literal["cl100k_base", "o200k_base", "approximate"] | None = None
    context_window: int | None = Field(default=None, gt=0)


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

        try:
            return CtxPolicySettings(), []
        except ValidationError:
            environ = os.environ  # report each bad variable below
    values = {
        name: environ[var]
        for name in CtxPolicySettings.model_fields
        if (var := env_var(name)) in environ or (var := var.lower()) in environ
    }
    problems: list[tuple[str, str]] = []
    valid: dict[str, Any] = {}
    for name, raw in values.items():
        info = CtxPolicySettings.model_fields[name]
        form: Any = Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation
        adapter: TypeAdapter[Any] = TypeAdapter(form)
        try:
            valid[name] = adapter.validate_python(raw)
        except ValidationError as exc:
            message = exc.errors()[0]["msg"] if exc.errors() else str(exc)
            problems.append((env_var(name), f"{message} (got {raw!r})"))
    return CtxPolicySettings.model_construct(**valid), problems


__all__ = ["ENV_PREFIX", "SETTING_PATHS", "CtxPolicySettings", "env_var", "read_settings"]
