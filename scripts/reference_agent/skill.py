"""The skill handler: THE part to replace with your agent's real work."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import jsonschema
from a2a.types.a2a_pb2 import TaskState


@dataclass
class Job:
    """One task as the handler sees it: the input, and the answers to its questions."""

    input: dict[str, Any]
    answers: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Outcome:
    """What one turn of the handler produced."""

    state: int  # a TaskState: COMPLETED, INPUT_REQUIRED, FAILED or REJECTED
    text: str
    output: dict[str, Any] | None = None  # COMPLETED: the artifact data


def controls_of(task_input: dict[str, Any]) -> dict[str, Any]:
    """The demo controls an input may carry (``{"demo": {"ask": ..., ...}}``).

    ``ask``: a question (or ``true``) to ask before answering; ``fail``: a reason (or
    ``true``) to fail with; ``delaySeconds``: how long to work before answering.
    """
    demo = task_input.get("demo")
    return demo if isinstance(demo, dict) else {}


async def handle_task(skill: dict[str, Any], job: Job) -> Outcome:
    """The skill itself. Called once per message the agent receives for a task.

    It is stateless on purpose: everything it needs is in ``job`` (the input and the
    answers so far), so the same function serves the HTTP side and the WebSocket side.
    """
    controls = controls_of(job.input)
    delay = float(controls.get("delaySeconds") or 0)
    if delay > 0:
        await asyncio.sleep(delay)  # "slow": the platform keeps polling, WORKING
    if controls.get("fail"):
        reason = controls["fail"] if isinstance(controls["fail"], str) else "asked to fail"
        return Outcome(TaskState.TASK_STATE_FAILED, f"Review failed: {reason}")
    question = controls.get("ask")
    if question and not job.answers:
        text = question if isinstance(question, str) else "Which market is this product for?"
        return Outcome(TaskState.TASK_STATE_INPUT_REQUIRED, text)
    hints = {**job.input, **({"answer": job.answers[-1]} if job.answers else {})}
    output = example_for_schema(skill.get("output_schema") or {}, hints)
    errors = schema_errors(skill.get("output_schema") or {}, output)
    if errors:  # tell the developer why instead of sending something the platform refuses
        return Outcome(TaskState.TASK_STATE_FAILED, f"cannot build a valid output: {errors[0]}")
    return Outcome(TaskState.TASK_STATE_COMPLETED, "Review complete.", output)


def schema_errors(schema: dict[str, Any], value: Any) -> list[str]:
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [e.message for e in validator.iter_errors(value)]


def example_for_schema(schema: dict[str, Any], hint: Any = None) -> Any:
    """A value that fits ``schema``, taken from ``hint`` wherever the hint already fits.

    So the output is derived from the input: a field the input and output share is
    copied, the rest is filled with the simplest valid value.
    """
    if hint is not None and not isinstance(hint, dict) and not schema_errors(schema, hint):
        return hint
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("oneOf", "anyOf"):
        if schema.get(key):
            return example_for_schema(schema[key][0], hint)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        hints = hint if isinstance(hint, dict) else {}
        props: dict[str, Any] = schema.get("properties", {})
        wanted = [k for k in props if k in schema.get("required", []) or k in hints]
        return {k: example_for_schema(props[k], hints.get(k)) for k in wanted}
    if kind == "array":
        item = example_for_schema(schema.get("items") or {})
        return [item] * int(schema.get("minItems", 0))
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    if schema.get("format") == "date-time":
        return datetime.now(UTC).isoformat()
    return "x" * int(schema.get("minLength", 0)) or "ok"
