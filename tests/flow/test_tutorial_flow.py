"""The tutorial's flow (docs/tutorial.md, step 1) is the one examples/credit_transfer.py builds."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from flowsched.flow import FlowDefinition

ROOT = Path(__file__).resolve().parents[2]


def _shape(definition: FlowDefinition) -> dict[str, Any]:
    """Everything but the identity of the event classes (the tutorial declares its own)."""
    return {
        "name": definition.name,
        "initial": definition.initial,
        "states": sorted(definition.states.values(), key=lambda s: s.name),
        "transitions": sorted(
            (t.source, t.event_type.__name__, t.target, t.action or "", t.destination or "")
            for t in definition.transitions
        ),
        "responses": sorted(
            (r.event_type.__name__, r.action, r.completing) for r in definition.responses
        ),
    }


def test_the_tutorial_flow_is_the_credit_transfer_example() -> None:
    tutorial = (ROOT / "docs" / "tutorial.md").read_text(encoding="utf-8")
    section = tutorial[tutorial.index("## 1. Define the flow") : tutorial.index("## 2. ")]
    assert "examples/credit_transfer.py" in section and "credit_transfer_flow()" in section
    snippet = re.search(r"```python\n(.*?)```", section, re.S)
    assert snippet is not None
    namespace: dict[str, Any] = {"__name__": "docs_tutorial"}
    exec(compile(snippet.group(1), "docs/tutorial.md#1", "exec"), namespace)
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import credit_transfer
    finally:
        sys.path.remove(str(ROOT / "examples"))

    tutorial_flow = namespace["credit_transfer"].build()
    example_flow = credit_transfer.credit_transfer_flow().build()

    assert _shape(tutorial_flow) == _shape(example_flow)
