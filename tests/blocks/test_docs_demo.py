"""The bundled demo: policies/docs-demo.yaml reads policies/docs/ through a files layer."""

from __future__ import annotations

from pathlib import Path

from ctxpolicy.policy import FilesCollectorSpec

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "policies" / "docs-demo.yaml"


def test_demo_policy_validates_and_its_root_stays_beside_it():
    from ctxpolicy.loading import load_policy, validate_paths

    assert [i for i in validate_paths([DEMO]) if i.severity == "error"] == []
    policy = load_policy(DEMO)
    spec = policy.layer("knowledge__context").collector
    assert isinstance(spec, FilesCollectorSpec)
    base = policy.layer_base_dir("knowledge__context")
    assert base is not None
    assert (base / spec.root).resolve() == (REPO / "policies" / "docs").resolve()


def test_demo_policy_composes_labelled_file_pieces():
    from ctxpolicy.engine import PolicyEngine

    engine = PolicyEngine.from_file(DEMO)
    result = engine.compose(
        process="mapreduce_worker",
        system_prompt="You are the SQL worker.",
        query="Which schema should a revenue query use?",
    )
    knowledge = [m.content for m in result.messages if "[handbook.md" in str(m.content)]
    assert len(knowledge) == 1
    text = str(knowledge[0])
    assert "[handbook.md#Datapillar handbook/Goals (lines 6-8)]" in text
    assert "[handbook.md#Datapillar handbook/数据规范/时区 (lines 22-23)]" in text
    assert "[warehouse.json#warehouse/schemas (lines 4-7)]" in text
    assert "# not a heading: this line is inside a code fence" in text
    assert str(result.messages[-1].content) == "Which schema should a revenue query use?"
