"""Integrations with agent frameworks.

- `ctxpolicy.integrations.langgraph`: LangGraph nodes (``agent_node``, the MapReduce
  planner/worker/reducer) that compose prompts with a `PolicyEngine` and write the
  Blackboard through `ctxpolicy.state.StateBuilder`, one patch per node. Needs the
  ``langgraph`` extra (``pip install ctxpolicy[langgraph]``).

This package imports nothing heavy; each integration module is imported explicitly.
"""

from __future__ import annotations

__all__: list[str] = []
