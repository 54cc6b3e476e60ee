"""Reading single params (already in canonical ProtoJSON names, see
:mod:`a2a.face.protojson`); each raises :class:`~a2a.face.errors.InvalidParams` naming the
field when it is out of range."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from a2a.face.errors import InvalidParams


def opt_int(params: dict[str, Any], name: str, *, low: int, high: int | None = None) -> int | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise InvalidParams(
            f"{name} must be an integer.", violations=[(name, "not an integer")]
        ) from None
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise InvalidParams(
            f"{name} must be {bound}, got {value}", violations=[(name, f"must be {bound}")]
        )
    return value


def opt_bool(params: dict[str, Any], name: str) -> bool | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    if isinstance(raw, bool):
        return raw
    raise InvalidParams(f"{name} must be true or false.", violations=[(name, "bool")])


def opt_timestamp(params: dict[str, Any], name: str) -> datetime | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    text = str(raw).strip()
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidParams(
            f"{name} must be an RFC 3339 timestamp.",
            violations=[(name, "not an RFC 3339 timestamp")],
        ) from None
    if timezone.is_naive(value):
        value = timezone.make_aware(value, timezone.UTC)
    return value


def opt_str(params: dict[str, Any], name: str) -> str:
    """A string param ("" when absent); a non-string is refused."""
    raw = params.get(name)
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise InvalidParams(f"{name} must be a string.", violations=[(name, "not a string")])
    return raw


def required_str(params: dict[str, Any], name: str) -> str:
    """A string param the request message marks REQUIRED (a task id, a config id): absent
    or empty is INVALID_PARAMS naming the field. Read as optional, a missing task id was
    looked up as the task "None" (TASK_NOT_FOUND) and a missing config id deleted nothing,
    answering success."""
    value = opt_str(params, name)
    if not value:
        raise InvalidParams(f"{name} is required.", violations=[(name, "required")])
    return value


def opt_str_list(
    params: dict[str, Any], name: str, *, items: int = 50, length: int = 200
) -> list[str]:
    """A list of strings ([] when absent): at most ``items``, each at most ``length``
    characters."""
    raw = params.get(name)
    if raw is None:
        return []
    if (
        not isinstance(raw, list)
        or len(raw) > items
        or not all(isinstance(v, str) and len(v) <= length for v in raw)
    ):
        bound = f"a list of at most {items} strings of at most {length} characters"
        raise InvalidParams(f"{name} must be {bound}.", violations=[(name, bound)])
    return raw
