"""The reference agent's default skill handler: output derived from the input, fitting the
skill's output schema; questions, failures and slowness on request."""

from __future__ import annotations

import asyncio
from typing import Any

from a2a.types.a2a_pb2 import TaskState
from reference_agent.messages import answer_of, input_of
from reference_agent.skill import Job, example_for_schema, handle_task, schema_errors

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "product": {"type": "string"},
        "verdict": {"type": "string", "enum": ["pass", "fail"]},
        "score": {"type": "integer", "minimum": 3, "maximum": 10},
        "issues": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "checkedAt": {"type": "string", "format": "date-time"},
        "answer": {"type": "string"},
    },
    "required": ["verdict", "score", "issues", "checkedAt"],
    "additionalProperties": False,
}
SKILL: dict[str, Any] = {"id": "ce-review", "output_schema": OUTPUT_SCHEMA}


def run(job: Job) -> Any:
    return asyncio.run(handle_task(SKILL, job))


def test_it_completes_with_output_that_fits_the_schema_and_echoes_the_input() -> None:
    outcome = run(Job(input={"product": "kettle", "market": "EU"}))
    assert outcome.state == TaskState.TASK_STATE_COMPLETED
    assert schema_errors(OUTPUT_SCHEMA, outcome.output) == []
    assert outcome.output["product"] == "kettle"
    assert "market" not in outcome.output  # not in the output schema


def test_it_keeps_an_input_value_only_when_it_fits_the_output_schema() -> None:
    outcome = run(Job(input={"verdict": "fail", "score": 99}))
    assert outcome.output["verdict"] == "fail"
    assert outcome.output["score"] == 3  # 99 is above the maximum: the simplest valid value


def test_it_asks_the_question_the_input_asks_for_then_completes_with_the_answer() -> None:
    job = Job(input={"product": "kettle", "demo": {"ask": "Which market?"}})
    first = run(job)
    assert first.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert first.text == "Which market?"
    job.answers.append("EU")
    second = run(job)
    assert second.state == TaskState.TASK_STATE_COMPLETED
    assert second.output["answer"] == "EU"


def test_it_asks_a_default_question_when_ask_is_true() -> None:
    outcome = run(Job(input={"demo": {"ask": True}}))
    assert outcome.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert outcome.text.endswith("?")


def test_it_fails_when_told_to() -> None:
    outcome = run(Job(input={"demo": {"fail": "no datasheet"}}))
    assert outcome.state == TaskState.TASK_STATE_FAILED
    assert "no datasheet" in outcome.text


def test_it_fails_clearly_when_no_valid_output_can_be_built() -> None:
    impossible = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 1}},
        "required": ["n"],
    }
    outcome = asyncio.run(handle_task({"id": "x", "output_schema": impossible}, Job(input={})))
    assert outcome.state == TaskState.TASK_STATE_FAILED
    assert "cannot build a valid output" in outcome.text


def test_example_for_schema_handles_nested_objects_consts_and_unions() -> None:
    schema = {
        "type": "object",
        "properties": {
            "kind": {"const": "review"},
            "detail": {
                "type": "object",
                "properties": {"ok": {"type": "boolean"}},
                "required": ["ok"],
            },
            "either": {"anyOf": [{"type": "number", "minimum": 1.5}, {"type": "null"}]},
        },
        "required": ["kind", "detail", "either"],
    }
    value = example_for_schema(schema)
    assert value == {"kind": "review", "detail": {"ok": True}, "either": 1.5}
    assert schema_errors(schema, value) == []


def test_input_of_reads_the_data_part_then_json_text_then_plain_text() -> None:
    assert input_of({"parts": [{"text": "hi"}, {"data": {"a": 1}}]}) == {"a": 1}
    assert input_of({"parts": [{"text": '{"a": 2}'}]}) == {"a": 2}
    assert input_of({"parts": [{"text": "plain words"}]}) == {"text": "plain words"}
    assert input_of({}) == {}


def test_answer_of_prefers_text_and_falls_back_to_data_as_json() -> None:
    assert answer_of({"parts": [{"text": "EU"}]}) == "EU"
    assert answer_of({"parts": [{"data": {"market": "EU"}}]}) == '{"market": "EU"}'
