"""The ``CTXPOLICY_*`` environment settings as a pydantic model (`ctxpolicy.settings`
reads the variables with it; imported only when one is set)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ctxpolicy.layers import TokenizerName


class CtxPolicySettings(BaseModel):
    """What the ``CTXPOLICY_*`` environment variables set (None = not set).

    Attributes:
        enable_share_context: ``CTXPOLICY_ENABLE_SHARE_CONTEXT`` (true/false/1/0/yes/no).
        policy: ``CTXPOLICY_POLICY``, the policy file used when none is given.
        tokenizer: ``CTXPOLICY_TOKENIZER``.
        context_window: ``CTXPOLICY_CONTEXT_WINDOW`` (tokens).
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    enable_share_context: bool | None = None
    policy: Path | None = None
    tokenizer: TokenizerName | None = None
    context_window: int | None = Field(default=None, gt=0)


#: Nothing set: what `read_settings` returns when no ``CTXPOLICY_*`` variable has a value.
_UNSET = CtxPolicySettings()


def read_setting(name: str, raw: str) -> tuple[Any, str | None]:
    """Setting ``name`` read from the variable's text ``raw``: ``(value, None)``, or
    ``(None, why)`` when it is invalid (pydantic's message)."""
    try:
        return getattr(CtxPolicySettings.model_validate({name: raw}), name), None
    except ValidationError as exc:
        return None, exc.errors()[0]["msg"] if exc.errors() else str(exc)


__all__ = ["CtxPolicySettings", "read_setting"]
