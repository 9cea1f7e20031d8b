"""Renderers of a composed call for people and programs: text, JSON, a self-contained page.

`ctxpolicy.render.formats` chooses a renderer by name (``text``, ``json``, ``html``);
each takes a `ctxpolicy.render.view.Preview` (the typed result of one call) and returns
a string. `ctxpolicy.render.terminal` holds the colour helpers and token bars. This
package's ``__init__`` imports nothing, so the light commands (``diff``, ``validate``)
can use the terminal helpers without loading the HTML templates or langchain-core.
"""

#: Version of every ``--format json`` output of the CLI (validate, preview, compile, diff).
#: It changes only when a key is removed or changes meaning; new keys may appear within one.
FORMAT_VERSION = 1

__all__ = ["FORMAT_VERSION"]
