"""The shipped example skills work with the shipped reference agent."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from django.conf import settings

SCRIPTS = Path(settings.BASE_DIR) / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

from a2a.types.a2a_pb2 import TaskState  # noqa: E402
from reference_agent.skill import Job, handle_task  # noqa: E402

EXAMPLES: list[dict[str, Any]] = json.loads(settings.EXAMPLE_SKILLS_FILE.read_text())


@pytest.mark.parametrize("skill", EXAMPLES, ids=[s["id"] for s in EXAMPLES])
def test_the_reference_agent_answers_each_example_with_valid_output(skill: dict[str, Any]) -> None:
    task_input = json.loads(skill["examples"][0])
    jsonschema.validate(task_input, skill["input_schema"])
    outcome = asyncio.run(handle_task(skill, Job(input=task_input)))
    assert outcome.state == TaskState.TASK_STATE_COMPLETED, outcome.text
    jsonschema.validate(outcome.output, skill["output_schema"])


def test_the_ce_review_echoes_the_product_and_honours_demo_controls() -> None:
    ce = next(s for s in EXAMPLES if s["id"] == "ce-certification-review-v1")
    task_input = {**json.loads(ce["examples"][0]), "demo": {"ask": "Which voltage?"}}
    jsonschema.validate(task_input, ce["input_schema"])
    asked = asyncio.run(handle_task(ce, Job(input=task_input)))
    assert asked.state == TaskState.TASK_STATE_INPUT_REQUIRED
    done = asyncio.run(handle_task(ce, Job(input=task_input, answers=["230 V"])))
    assert done.state == TaskState.TASK_STATE_COMPLETED
    assert done.output["product_name"] == task_input["product_name"]
