"""Parsing and checking of A2A operation params, shared by the face's operations.

Each helper reads one param from the operation's JSON params and raises
:class:`~a2a.face.errors.InvalidParams` (or :class:`~a2a.face.errors.TaskNotFound` for an
id that cannot name a task) when it is malformed.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.utils import timezone
from google.protobuf.json_format import ParseDict, ParseError

from a2a.face.errors import InvalidParams, TaskNotFound


def _proto_check(params: dict[str, Any], proto_cls: type, label: str) -> None:
    """Validate ``params`` against the A2A proto message shape (unknown fields ignored)."""
    try:
        ParseDict(params, proto_cls(), ignore_unknown_fields=True)
    except (ParseError, TypeError, ValueError) as exc:
        raise InvalidParams(f"Invalid {label}: {exc}") from None


def _opt_int(params: dict[str, Any], name: str, *, low: int, high: int | None = None) -> int | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise InvalidParams(
            f"{name} must be an integer, got {raw!r}", violations=[(name, "not an integer")]
        ) from None
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise InvalidParams(
            f"{name} must be {bound}, got {value}", violations=[(name, f"must be {bound}")]
        )
    return value


def _opt_bool(params: dict[str, Any], name: str) -> bool | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    if isinstance(raw, bool):
        return raw
    if str(raw).lower() in {"true", "1"}:
        return True
    if str(raw).lower() in {"false", "0"}:
        return False
    raise InvalidParams(f"{name} must be true or false, got {raw!r}", violations=[(name, "bool")])


def _opt_timestamp(params: dict[str, Any], name: str) -> datetime | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    text = str(raw).strip()
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidParams(
            f"{name} must be an ISO 8601 timestamp, got {raw!r}",
            violations=[(name, "not an ISO 8601 timestamp")],
        ) from None
    if timezone.is_naive(value):
        value = timezone.make_aware(value, timezone.UTC)
    return value


def _task_id(raw: Any) -> uuid.UUID:
    try:
        return uuid.UUID(str(raw))
    except (TypeError, ValueError):
        raise TaskNotFound(
            f"Task {str(raw)[:100]!r} not found.", metadata={"taskId": str(raw)[:100]}
        ) from None
