"""The gateway's wire frames (DESIGN.md, "Agent gateway (WebSocket)"): parsing what agents
send and building what the platform sends. Nothing here touches the database."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from a2a.models import Task
from platform_site.text import (
    MAX_JSON_DEPTH,
    find_bad_text,
    json_bytes,
    json_depth_exceeds,
    parse_json,
)


class FrameError(Exception):
    """A frame the platform cannot use; answered with an ``error`` frame."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Frame:
    """A parsed, shape-checked frame from an agent."""

    type: str
    data: dict[str, Any]


def _require_str(data: dict[str, Any], name: str, frame_type: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value.strip():
        raise FrameError(
            "missing_field", f"A {frame_type} frame needs a non-empty string {name!r}."
        )
    return value


def _check_ack(data: dict[str, Any]) -> None:
    raw = _require_str(data, "deliveryId", "task.ack")
    try:
        uuid.UUID(raw)
    except ValueError:
        raise FrameError(
            "unknown_delivery", f"No delivery {raw!r} is waiting for an ack."
        ) from None


def _check_update(data: dict[str, Any]) -> None:
    _require_str(data, "taskId", "task.update")
    status = data.get("status")
    if not isinstance(status, dict) or not isinstance(status.get("state"), str):
        raise FrameError(
            "missing_field", "A task.update frame needs 'status', an A2A TaskStatus with 'state'."
        )
    artifacts = data.get("artifacts")
    if artifacts is not None and not (
        isinstance(artifacts, list) and all(isinstance(a, dict) for a in artifacts)
    ):
        raise FrameError("invalid_frame", "'artifacts' must be a list of A2A Artifact objects.")


_CHECKS = {
    "auth": lambda data: _require_str(data, "apiKey", "auth"),
    "ping": lambda data: None,
    "task.ack": _check_ack,
    "task.update": _check_update,
}


def parse(raw: str | bytes | None) -> Frame:
    """Parse and shape-check one frame; raises :class:`FrameError` with a code."""
    if raw is None:
        raise FrameError("invalid_frame", "Empty frame.")
    size = len(raw.encode() if isinstance(raw, str) else raw)
    if size > settings.GATEWAY_MAX_FRAME_BYTES:
        raise FrameError(
            "frame_too_large",
            f"Frame of {size} bytes exceeds the limit of {settings.GATEWAY_MAX_FRAME_BYTES}.",
        )
    # Bounded: a frame nested 100,000 levels deep must not crash the handler.
    if json_depth_exceeds(raw):
        message = f"JSON nested deeper than {MAX_JSON_DEPTH} levels is not accepted."
        raise FrameError("json_too_deep", message)
    try:
        # NaN, Infinity and 1e400 are refused: PostgreSQL's jsonb would refuse them later.
        data = parse_json(raw)
    except (ValueError, UnicodeDecodeError):
        raise FrameError("invalid_json", "The frame is not valid JSON.") from None
    if not isinstance(data, dict):
        raise FrameError("invalid_frame", "A frame must be a JSON object with a 'type'.")
    # One text rule at every boundary: NUL and lone surrogates cannot be stored
    # (PostgreSQL) or sent on; the error names the field. The answer inside a task.update
    # (status, artifacts) is the agent's work: it fails the task as ``output_invalid``
    # instead (a2a.agent_updates), as the same answer would over HTTP.
    envelope = data
    if data.get("type") == "task.update":
        envelope = {k: v for k, v in data.items() if k not in ("status", "artifacts")}
    bad = find_bad_text(envelope)
    if bad is not None:
        raise FrameError("invalid_text", str(bad))
    frame_type = data.get("type")
    check = _CHECKS.get(frame_type) if isinstance(frame_type, str) else None
    if check is None:
        known = ", ".join(sorted(_CHECKS))
        raise FrameError(
            "unknown_type", f"Unknown frame type {frame_type!r}; expected one of {known}."
        )
    check(data)
    return Frame(type=frame_type, data=data)


# --- platform → agent ----------------------------------------------------------------

# The largest message daphne sends on a WebSocket (its --websocket-max-message-size, left
# at its default by `make run` and the deployment): a larger frame is refused by the
# server and never reaches the agent.
MAX_SENT_BYTES = 1024 * 1024


def encode(frame: dict[str, Any]) -> tuple[str, int]:
    """A frame's text (:func:`json_bytes`: non-ASCII text as itself) and its size in bytes."""
    data = json_bytes(frame)
    return data.decode(), len(data)


def task_summary(task: Task) -> dict[str, Any]:
    """The ``task`` object of ``task.assign``: id, contextId and the A2A TaskStatus."""
    return {
        "id": str(task.id),
        "contextId": task.context_id or str(task.id),
        "status": {"state": task.state, "timestamp": task.state_changed_at.isoformat()},
    }


def assign(delivery_id: uuid.UUID, task: Task, message: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "task.assign",
        "deliveryId": str(delivery_id),
        "skillId": task.skill_id,
        "task": task_summary(task),
        "message": message,
    }


def task_message(delivery_id: uuid.UUID, task: Task, message: dict[str, Any]) -> dict[str, Any]:
    # deliveryId is an addition to the fixed shape: agents may ack it (optional).
    return {
        "type": "task.message",
        "taskId": str(task.id),
        "message": message,
        "deliveryId": str(delivery_id),
    }


def task_cancel(delivery_id: uuid.UUID, task: Task) -> dict[str, Any]:
    return {"type": "task.cancel", "taskId": str(task.id), "deliveryId": str(delivery_id)}


def error(code: str, message: str) -> dict[str, Any]:
    return {"type": "error", "code": code, "message": message}


PONG: dict[str, Any] = {"type": "pong"}
