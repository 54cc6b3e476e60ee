"""The reference agent's default skill handler: the example skills by fixed rules, any
other skill by its output schema; questions, failures and slowness on request."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from a2a.types.a2a_pb2 import TaskState
from django.conf import settings
from reference_agent.messages import answer_of, input_of
from reference_agent.skill import (
    QUESTION,
    Job,
    Outcome,
    example_for_schema,
    handle_task,
    schema_errors,
)
from referencing.exceptions import Unresolvable

GENERIC_SCHEMA: dict[str, Any] = {
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
GENERIC: dict[str, Any] = {"id": "my-skill", "output_schema": GENERIC_SCHEMA}
KETTLE: dict[str, Any] = {
    "product_name": "Smart kettle K2",
    "category": "electrical_equipment",
    "target_markets": ["DE", "FR", "CH"],
    "intended_use": "Boiling water in households",
    "rated_voltage_v": 230,
    "has_radio": True,
    "documents_available": ["technical_file", "user_instructions"],
}


def example_skill(skill_id: str) -> dict[str, Any]:
    """The skill as the platform ships it (the registry's example skills file)."""
    path = settings.EXAMPLE_SKILLS_FILE
    if not path.exists():
        pytest.skip("the registry's example skills file has not landed yet")
    return next(s for s in json.loads(path.read_text()) if s["id"] == skill_id)


def run(skill: dict[str, Any], job: Job) -> Outcome:
    return asyncio.run(handle_task(skill, job))


def test_it_reviews_a_radio_kettle_by_the_ce_rules() -> None:
    skill = example_skill("ce-certification-review-v1")
    assert schema_errors(skill["input_schema"], {**KETTLE, "demo": {"ask": True}}) == []
    outcome = run(skill, Job(input=KETTLE))
    assert outcome.state == TaskState.TASK_STATE_COMPLETED
    output = outcome.output or {}
    assert schema_errors(skill["output_schema"], output) == []
    assert [d["code"] for d in output["applicable_directives"]] == ["2014/53/EU", "2011/65/EU"]
    assert output["verdict"] == "documents_missing"
    assert output["missing_documents"] == [
        "risk_assessment",
        "test_reports",
        "declaration_of_conformity",
    ]
    assert output["non_eea_markets"] == ["CH"]


def test_a_product_no_act_covers_needs_no_ce_marking() -> None:
    skill = example_skill("ce-certification-review-v1")
    job = Job(
        input={
            "product_name": "Chair",
            "category": "other",
            "target_markets": ["DE"],
            "intended_use": "Sitting",
        }
    )
    output = run(skill, job).output or {}
    assert output["verdict"] == "not_applicable"
    assert output["ce_marking_required"] is False
    assert output["required_documents"] == output["missing_documents"] == []


def test_a_low_voltage_toy_with_all_documents_is_ready() -> None:
    skill = example_skill("ce-certification-review-v1")
    toy = {
        "product_name": "Robot",
        "category": "toy",
        "target_markets": ["NO"],
        "intended_use": "Play",
        "rated_voltage_v": 4.5,
        "documents_available": [
            "technical_file",
            "risk_assessment",
            "test_reports",
            "declaration_of_conformity",
            "user_instructions",
        ],
    }
    output = run(skill, Job(input=toy)).output or {}
    assert [d["code"] for d in output["applicable_directives"]] == [
        "2009/48/EC",
        "2014/30/EU",
        "2011/65/EU",
    ]  # no LVD below 50 V
    assert output["verdict"] == "ready_for_ce_marking"
    assert schema_errors(skill["output_schema"], output) == []


def test_it_counts_text_stats() -> None:
    skill = example_skill("text-stats-v1")
    output = run(skill, Job(input={"text": "one two\nthree"})).output
    assert output == {"characters": 13, "words": 3, "lines": 2}
    assert run(skill, Job(input={"text": ""})).output == {"characters": 0, "words": 0, "lines": 0}


def test_it_summarises_by_keeping_the_first_sentences() -> None:
    skill = example_skill("summarize-text-v1")
    text = "First one. Second one! Third one? Fourth."
    output = run(skill, Job(input={"text": text, "max_sentences": 2})).output
    assert output == {"summary": "First one. Second one!", "sentences": 2}
    assert schema_errors(skill["output_schema"], output) == []


def test_any_other_skill_gets_output_that_fits_its_schema_and_echoes_the_input() -> None:
    outcome = run(GENERIC, Job(input={"product": "kettle", "market": "EU", "score": 99}))
    assert outcome.state == TaskState.TASK_STATE_COMPLETED
    assert schema_errors(GENERIC_SCHEMA, outcome.output) == []
    assert outcome.output["product"] == "kettle"
    assert outcome.output["score"] == 3  # 99 is above the maximum: the simplest valid value
    assert "market" not in outcome.output  # not in the output schema


def test_it_asks_when_the_input_says_so_then_completes_with_the_answer() -> None:
    job = Job(input={"product": "kettle", "demo": {"ask": True}})
    first = run(GENERIC, job)
    assert first.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert first.text == QUESTION
    job.answers.append("consumers")
    second = run(GENERIC, job)
    assert second.state == TaskState.TASK_STATE_COMPLETED
    assert second.output["answer"] == "consumers"


def test_it_notes_the_answer_in_a_ce_review() -> None:
    skill = example_skill("ce-certification-review-v1")
    output = run(
        skill, Job(input={**KETTLE, "demo": {"ask": "Who uses it?"}}, answers=["consumers"])
    ).output
    assert output["notes"] == "Users: consumers"


def test_it_fails_when_told_to() -> None:
    outcome = run(GENERIC, Job(input={"demo": {"fail": "no datasheet"}}))
    assert outcome.state == TaskState.TASK_STATE_FAILED
    assert outcome.text == "Failed: no datasheet"
    assert (
        run(GENERIC, Job(input={"demo": {"fail": False}})).state == TaskState.TASK_STATE_COMPLETED
    )


def test_it_works_slowly_when_told_to() -> None:
    job = Job(input={"demo": {"delaySeconds": 0.01}})
    assert run(GENERIC, job).state == TaskState.TASK_STATE_COMPLETED


def test_it_asks_its_own_question_when_ask_is_true() -> None:
    outcome = run(GENERIC, Job(input={"demo": {"ask": True}}))
    assert outcome.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert outcome.text == QUESTION


def test_it_fails_clearly_when_no_valid_output_can_be_built() -> None:
    impossible = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 1}},
        "required": ["n"],
    }
    outcome = run({"id": "x", "output_schema": impossible}, Job(input={}))
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


def test_schema_errors_never_reads_a_ref_outside_the_schema(tmp_path: Any) -> None:
    """jsonschema without a registry fetched a $ref's URL (file:// too): the agent read
    its own files at a schema's word. Now such a reference is unresolvable."""
    local = tmp_path / "s.json"
    local.write_text('{"type": "string"}')
    schema = {"type": "object", "properties": {"x": {"$ref": f"file://{local}"}}}
    with pytest.raises(Unresolvable):
        schema_errors(schema, {"x": 5})
    local_ref = {"$defs": {"s": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/s"}}}
    assert schema_errors(local_ref, {"x": 5}) == ["5 is not of type 'string'"]
