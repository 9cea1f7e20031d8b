"""The Jinja2 sandbox every policy template runs in.

One place decides what a template may do: `SandboxedEnvironment` (no attribute
escapes such as ``__class__``/``__subclasses__``), `StrictUndefined` (a missing
variable is an error, not an empty string), a cap on ``range()`` and on the size of
the rendered output. Validation compiles templates with the same environment that
renders them, so "it validated" means "it will compile".
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jinja2 import Template
    from jinja2.sandbox import SandboxedEnvironment

#: Largest ``range()`` a template may build.
MAX_RANGE = 10_000
#: Largest rendered output, in characters.
MAX_RENDERED_CHARS = 1_000_000


class TemplateOutputTooLargeError(ValueError):
    """A template rendered more than `MAX_RENDERED_CHARS` characters."""


@lru_cache(maxsize=1)
def sandbox() -> SandboxedEnvironment:
    """The shared sandboxed environment (created once per process)."""
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    class _PolicySandbox(SandboxedEnvironment):
        def call(
            __self,  # noqa: N805 - Jinja's own signature
            __context: Any,
            __obj: Any,
            *args: Any,
            **kwargs: Any,
        ) -> Any:
            if __obj is range and len(range(*args)) > MAX_RANGE:
                from jinja2.exceptions import SecurityError

                raise SecurityError(f"range() larger than {MAX_RANGE} items is not allowed")
            return super().call(__context, __obj, *args, **kwargs)

    env = _PolicySandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=False)
    env.globals["range"] = range
    return env


@lru_cache(maxsize=512)
def compile_template(source: str) -> Template:
    """Compile ``source`` in the sandbox (cached by source text).

    Raises:
        jinja2.TemplateSyntaxError: the template does not parse (``lineno`` is set).
    """
    return sandbox().from_string(source)


def render_template(source: str, variables: Mapping[str, Any]) -> str:
    """Render ``source`` with ``variables`` in the sandbox.

    Raises:
        jinja2.TemplateError: syntax error, undefined variable or a sandbox violation.
        TemplateOutputTooLargeError: the output exceeds `MAX_RENDERED_CHARS`.
    """
    template = compile_template(source)
    pieces: list[str] = []
    size = 0
    for chunk in template.generate(**variables):
        size += len(chunk)
        if size > MAX_RENDERED_CHARS:
            raise TemplateOutputTooLargeError(
                f"template output exceeds {MAX_RENDERED_CHARS} characters"
            )
        pieces.append(chunk)
    return "".join(pieces)
