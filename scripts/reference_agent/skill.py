"""The skill handler: THE part to replace with your agent's real work.

:func:`handle_task` is called once for the first message of a task and once more for each
answer to a question it asked. Everything it needs is in the :class:`Job` (the input and
the answers so far), so it keeps no state and serves the HTTP and WebSocket sides alike.

The default implementation knows the platform's example skills (``agent_profiles/
fixtures/example_skills.json``) and computes their output from the input by fixed rules,
so a result can be checked; for any other skill it builds the simplest output that fits
the skill's ``output_schema``, copying the input's fields where they fit.

An input may carry demo controls (the example CE skill declares them), so a demo can show
every path: ``"demo": {"ask": "a question?" | true, "fail": "a reason" | true,
"delaySeconds": 5}`` asks first (INPUT_REQUIRED), fails, or works slowly (WORKING).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import jsonschema
from a2a.types.a2a_pb2 import TaskState
from referencing import Registry

QUESTION = "Who will use the product: consumers, professionals, or both?"


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


def demo_controls(task_input: dict[str, Any]) -> dict[str, Any]:
    demo = task_input.get("demo")
    return demo if isinstance(demo, dict) else {}


async def handle_task(skill: dict[str, Any], job: Job) -> Outcome:
    """Do the skill's work for one turn of a task."""
    demo = demo_controls(job.input)
    delay = float(demo.get("delaySeconds") or 0)
    if delay > 0:  # the platform keeps polling a WORKING task meanwhile
        await asyncio.sleep(delay)
    if demo.get("fail"):
        reason = demo["fail"] if isinstance(demo["fail"], str) else "asked to fail (demo.fail)"
        return Outcome(TaskState.TASK_STATE_FAILED, f"Failed: {reason}")
    if demo.get("ask") and not job.answers:
        return Outcome(
            TaskState.TASK_STATE_INPUT_REQUIRED,
            demo["ask"] if isinstance(demo["ask"], str) else QUESTION,
        )
    work = SKILLS.get(skill.get("id", ""), schema_example)
    output = work(job.input, job.answers, skill)
    schema = skill.get("output_schema") or {}
    errors = schema_errors(schema, output)
    if errors:  # tell the developer why, rather than send what the platform refuses
        return Outcome(TaskState.TASK_STATE_FAILED, f"cannot build a valid output: {errors[0]}")
    return Outcome(TaskState.TASK_STATE_COMPLETED, "Done.", output)


# --------------------------------------------------------------------------------------
# The example skills, by fixed rules
# --------------------------------------------------------------------------------------

# The EU member states plus Iceland, Liechtenstein and Norway: where CE marking is enough.
EEA = frozenset(
    "AT BE BG HR CY CZ DK EE FI FR DE GR HU IE IT LV LT LU MT NL PL PT RO SK SI ES SE "  # noqa: SIM905
    "IS LI NO".split()
)
CE_DOCUMENTS = [
    "technical_file",
    "risk_assessment",
    "test_reports",
    "declaration_of_conformity",
    "user_instructions",
]
DIRECTIVES = {
    "machinery": ("2006/42/EC", "Machinery Directive", ["EN ISO 12100"]),
    "lvd": ("2014/35/EU", "Low Voltage Directive", ["EN 62368-1"]),
    "emc": ("2014/30/EU", "Electromagnetic Compatibility Directive", ["EN 55032", "EN 55035"]),
    "red": ("2014/53/EU", "Radio Equipment Directive", ["EN 300 328", "EN 301 489-1"]),
    "rohs": ("2011/65/EU", "RoHS Directive", ["EN IEC 63000"]),
    "toy": ("2009/48/EC", "Toy Safety Directive", ["EN 71-1", "EN 71-2", "EN 71-3"]),
    "medical_device": ("(EU) 2017/745", "Medical Devices Regulation", ["EN ISO 14971"]),
    "personal_protective_equipment": ("(EU) 2016/425", "PPE Regulation", ["EN ISO 13688"]),
    "construction_product": ("(EU) No 305/2011", "Construction Products Regulation", []),
}


def ce_review(task_input: dict[str, Any], answers: list[str], skill: dict[str, Any]) -> dict:
    """ce-certification-review-v1: which EU rules apply and which documents are missing.

    Rules: the category picks the main act; radio (``has_radio`` or the category) adds the
    RED, which covers electrical safety and EMC; other electrical products between 50 and
    1000 V come under the LVD, and all electrical ones under EMC and RoHS; products for
    children under 14 are toys too. CE marking is required when any act applies, and then
    all five conformity documents are; missing = required - available; markets outside the
    EEA are listed because CE marking alone is not enough there.
    """
    category = task_input.get("category", "other")
    keys: list[str] = []
    if category in (
        "machinery",
        "toy",
        "medical_device",
        "personal_protective_equipment",
        "construction_product",
    ):
        keys.append(category)
    radio = category == "radio_equipment" or bool(task_input.get("has_radio"))
    electrical = radio or category == "electrical_equipment" or "rated_voltage_v" in task_input
    if radio:
        keys.append("red")
    elif electrical:
        if 50 <= float(task_input.get("rated_voltage_v", 230)) <= 1000:
            keys.append("lvd")
        keys.append("emc")
    if electrical:
        keys.append("rohs")
    if task_input.get("for_children_under_14") and "toy" not in keys:
        keys.append("toy")
    directives = [{"code": DIRECTIVES[k][0], "title": DIRECTIVES[k][1]} for k in keys]
    standards = [s for k in keys for s in DIRECTIVES[k][2]]
    required = list(CE_DOCUMENTS) if keys else []
    available = set(task_input.get("documents_available") or [])
    missing = [d for d in required if d not in available]
    verdict = (
        "not_applicable" if not keys else "documents_missing" if missing else "ready_for_ce_marking"
    )
    output: dict[str, Any] = {
        "product_name": task_input.get("product_name", ""),
        "verdict": verdict,
        "ce_marking_required": bool(keys),
        "applicable_directives": directives,
        "required_standards": standards,
        "required_documents": required,
        "missing_documents": missing,
        "non_eea_markets": [m for m in task_input.get("target_markets") or [] if m not in EEA],
    }
    if answers:
        output["notes"] = f"Users: {answers[-1]}"
    return output


def text_stats(task_input: dict[str, Any], answers: list[str], skill: dict[str, Any]) -> dict:
    """text-stats-v1: characters, whitespace-separated words, newline-separated lines."""
    text = str(task_input.get("text", ""))
    lines = len(text.split("\n")) if text else 0
    return {"characters": len(text), "words": len(text.split()), "lines": lines}


def summarize_text(task_input: dict[str, Any], answers: list[str], skill: dict[str, Any]) -> dict:
    """summarize-text-v1: the first ``max_sentences`` sentences (an honest placeholder)."""
    text = " ".join(str(task_input.get("text", "")).split())
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", text) if s]
    kept = sentences[: int(task_input.get("max_sentences", 3))]
    return {"summary": " ".join(kept), "sentences": len(kept)}


def schema_example(task_input: dict[str, Any], answers: list[str], skill: dict[str, Any]) -> Any:
    """Any other skill: the simplest output that fits its schema, copying input fields."""
    hints = {**task_input, **({"answer": answers[-1], "notes": answers[-1]} if answers else {})}
    return example_for_schema(skill.get("output_schema") or {}, hints)


SKILLS: dict[str, Callable[[dict[str, Any], list[str], dict[str, Any]], Any]] = {
    "ce-certification-review-v1": ce_review,
    "text-stats-v1": text_stats,
    "summarize-text-v1": summarize_text,
}


# --------------------------------------------------------------------------------------
# JSON Schema helpers
# --------------------------------------------------------------------------------------


def schema_errors(schema: dict[str, Any], value: Any) -> list[str]:
    # An empty registry: without one, jsonschema fetches a $ref's URL (urlopen, no
    # timeout, file:// too); a skill's schema must not make the agent read or call out.
    validator = jsonschema.validators.validator_for(schema)(schema, registry=Registry())
    return [e.message for e in validator.iter_errors(value)]


def example_for_schema(schema: dict[str, Any], hint: Any = None) -> Any:
    """A value that fits ``schema``, taken from ``hint`` wherever the hint already fits."""
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
