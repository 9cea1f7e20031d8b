"""Regenerate docs/preview.png: a real preview of policies/base.yaml, rendered by ctxpolicy.

    .venv/bin/python docs/make_preview.py [--html OUT.html] [--png OUT.png]

It composes a ReAct call of the bundled base policy (a small window, so the budget bar
has something to show: the history is trimmed to its cap), with a knowledge retriever
service and a Blackboard holding a tool-call exchange, builds exactly the data of
``ctxpolicy preview --format json``, renders the self-contained HTML page and takes a
screenshot with Debian's headless chromium.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere

from tests.support.chromium import run_chromium

if TYPE_CHECKING:
    from ctxpolicy.render.view import Preview

REPO = Path(__file__).resolve().parents[1]
SYSTEM_PROMPT = (
    "You are the SQL agent of Datapillar. Write correct, readable PostgreSQL and explain "
    "every query step by step."
)


def build_preview() -> Preview:
    from langchain_core.documents import Document
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.runnables import RunnableLambda

    from ctxpolicy import PolicyEngine, load_policy
    from ctxpolicy.render.view import Preview

    os.environ["CTXPOLICY_CONTEXT_WINDOW"] = "1400"
    try:
        policy = load_policy(REPO / "policies" / "base.yaml")
    finally:
        del os.environ["CTXPOLICY_CONTEXT_WINDOW"]
    docs = [
        Document(page_content="orders(id, region_id, total numeric, created_at timestamptz)"),
        Document(page_content="regions(id, name text); orders.region_id -> regions.id"),
        Document(
            page_content="Revenue = sum(orders.total) excluding refunds (status <> 'refunded')."
        ),
    ]
    knowledge = RunnableLambda(lambda _query: docs)
    history = []
    for week in range(1, 13):
        history += [
            HumanMessage(f"Week {week}: how many orders did the EU region have?"),
            AIMessage(
                "",
                tool_calls=[{"name": "run_sql", "args": {"week": week}, "id": f"c{week}"}],
            ),
            ToolMessage(f"{1000 + 37 * week} orders", tool_call_id=f"c{week}"),
            AIMessage(f"The EU region had {1000 + 37 * week} orders in week {week}."),
        ]
    history.append(
        HumanMessage("Now write weekly revenue by region for last quarter & explain it.")
    )
    state = {
        "messages": history,
        "todo": ["find the revenue tables", "write the query", "explain the query"],
        "compression__context": "Earlier: the user builds the Q3 finance dashboard; "
        "prefers PostgreSQL and ISO weeks.",
    }
    engine = PolicyEngine(policy, services={"knowledge": knowledge})
    plan = engine.plan("react")
    result = engine.compose(process="react", system_prompt=SYSTEM_PROMPT, state=state)
    return Preview.of(
        result, plan, policy=policy, source="policies/base.yaml (context_window 1400)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--html", type=Path, default=None)
    parser.add_argument("--png", type=Path, default=REPO / "docs" / "preview.png")
    args = parser.parse_args()

    from ctxpolicy.render.html import render_html

    page = render_html(build_preview())
    with tempfile.TemporaryDirectory(prefix="ctxpolicy-preview-") as folder:
        html_path = args.html or Path(folder) / "preview.html"
        html_path.write_text(page, encoding="utf-8")
        run_chromium(
            "chromium",
            f"{folder}/profile",
            [
                "--window-size=1100,1700",
                f"--screenshot={args.png.resolve()}",
                html_path.resolve().as_uri(),
            ],
            check=True,
        )
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
