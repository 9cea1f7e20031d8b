"""The note of the leading units dropped so that a history starts on a HumanMessage: the
number of messages it names is every dropped unit's (a case found by mutation testing:
`ctxpolicy.history._lead_note` has a shortcut for the one-message case of most turns)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from ctxpolicy.history import fit_history, repair_history


def _note(removed: int, kinds: str) -> str:
    return (
        f"removed {removed} message(s) from index 0 ({kinds}): "
        "the history must start on a HumanMessage"
    )


def test_one_leading_answer_is_noted_as_one_message() -> None:
    history = [AIMessage("a"), HumanMessage("q")]
    assert repair_history(history) == ((history[1],), (_note(1, "AIMessage"),))


def test_two_leading_answers_are_noted_as_two_messages() -> None:
    """Two units of one message each: both are named, not only the first."""
    history = [AIMessage("a"), AIMessage("b"), HumanMessage("q")]
    assert repair_history(history) == ((history[2],), (_note(2, "AIMessage, AIMessage"),))
    fit = fit_history(history, max_tokens=100, count=lambda message: len(message.content))
    assert fit.kept == (history[2],)
    assert fit.repairs == (_note(2, "AIMessage, AIMessage"),)
