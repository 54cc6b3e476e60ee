"""A2A messages and artifacts in and out: one code path for HTTP and the WebSocket."""

from __future__ import annotations

import contextlib
import json
import uuid
from typing import Any

from a2a.helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import Artifact, Message, Role
from google.protobuf.json_format import MessageToDict

from reference_agent.skill import Outcome


def input_of(message: dict[str, Any]) -> dict[str, Any]:
    """The skill input in an A2A message (JSON form): its first object ``data`` part,
    else a text part holding JSON, else ``{"text": <the text>}``."""
    parts = message.get("parts") or []
    for part in parts:
        if isinstance(part.get("data"), dict):
            return part["data"]
    text = "\n".join(p["text"] for p in parts if isinstance(p.get("text"), str))
    with contextlib.suppress(ValueError):
        value = json.loads(text)
        if isinstance(value, dict):
            return value
    return {"text": text} if text else {}


def answer_of(message: dict[str, Any]) -> str:
    """A person's answer to a question: its text, or its data as JSON."""
    parts = message.get("parts") or []
    texts = [p["text"] for p in parts if isinstance(p.get("text"), str)]
    if texts:
        return "\n".join(texts)
    data = [p["data"] for p in parts if "data" in p]
    return json.dumps(data[0]) if data else ""


def text_message(text: str, task_id: str, context_id: str) -> Message:
    """An agent message (the text of a status: a question, a reason, a summary)."""
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_AGENT,
        task_id=task_id,
        context_id=context_id,
        parts=[new_text_part(text)],
    )


def artifacts_of(outcome: Outcome) -> list[Artifact]:
    if outcome.output is None:
        return []
    return [
        Artifact(
            artifact_id=str(uuid.uuid4()), name="result", parts=[new_data_part(outcome.output)]
        )
    ]


def to_json(proto: Any) -> dict[str, Any]:
    """A proto as A2A 1.0 JSON (camelCase, enum names): the same shape as over HTTP."""
    return MessageToDict(proto)
