"""What an agent pushed: its body read as an A2A ``StreamResponse`` (:func:`parse`).

The webhook (:mod:`a2a.agent_push_asgi`) and the listing (:mod:`a2a.agent_listing`)
read bodies here and apply them with :func:`a2a.agent_push.apply`. Accepted: a 1.0
``StreamResponse`` — ``task``, ``statusUpdate``, ``artifactUpdate`` or ``message`` — and
the bare Task and ``kind``-tagged events of A2A 0.3 (what a2a-sdk 0.3's push sender
posts: the pydantic Task, dumped), turned into 1.0 here with the transports' converters
(:mod:`a2a.transports.shapes`), so a 0.3 agent's question and artifacts are kept as a
poll of it keeps them; anything else, and one whose artifacts or messages are not A2A
1.0 (a field, or a part: :mod:`a2a.answer_parts`), is ``400 not_a2a``. An agent's value
is named in an error by an excerpt, never whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from a2a import answer_parts
from a2a.remote_ids import ID_LIMITS
from a2a.states import normalize_state
from a2a.transports import shapes
from a2a.transports.quoting import quoted
from platform_site.errors import ValidationFailed


class NotA2A(ValidationFailed):
    code = "not_a2a"


@dataclass
class Push:
    """What an agent pushed, in A2A 1.0 terms."""

    kind: str  # "task" | "status" | "artifact" | "message"
    remote_id: str = ""
    remote_context: str = ""
    status: dict[str, Any] | None = None
    artifacts: list[Any] | None = None
    artifact: dict[str, Any] | None = None
    append: bool = False
    message: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict)


def _obj(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise NotA2A(f"{what} must be an object.", {"field": what})
    return value


def _status(value: Any, what: str) -> dict[str, Any]:
    status = _obj(value, what)
    if normalize_state(status.get("state")) is None:
        raise NotA2A(
            f"{what}.state {quoted(status.get('state'))} is not an A2A task state.",
            {"field": f"{what}.state"},
        )
    return status


# The longest agent id the platform keeps (its task and context ids' columns).
ID_MAX = min(limit for limit in ID_LIMITS.values() if limit is not None)


def _text(value: Any, what: str, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise NotA2A(f"{what} must be a non-empty string.", {"field": what})
    if len(value) > ID_MAX:  # refused, never cut: a cut id names no task of the agent's
        raise NotA2A(f"{what} is longer than {ID_MAX} characters.", {"field": what})
    return value


def parse(body: Any) -> Push:
    """The push in ``body`` (a StreamResponse, or an A2A 0.3 Task / event); 400 otherwise,
    also when one of its artifacts or messages (or a part of them) is not A2A 1.0: kept, it
    would be served to the task's caller, whose client would fail on it."""
    if _bare_03(body):
        # Checked as sent first: an error names the agent's own field (file.bytes), not
        # the one the conversion made of it.
        _check(_read(body, convert=False))
    push = _read(body)
    _check(push)
    return push


def _check(push: Push) -> None:
    if push.kind == "artifact":
        bad = answer_parts.artifact_problem(push.artifact or {})
    elif push.kind == "message":
        bad = answer_parts.message_problem(push.message)
    else:
        bad = answer_parts.answer_problem(push.status, push.artifacts)
    if bad is not None:
        raise NotA2A(
            f"Not an A2A 1.0 artifact or message: {bad}; nothing of the push was applied.",
            {"part": bad.where, "problem": bad.what},
        )


WRAPPERS = ("task", "statusUpdate", "artifactUpdate", "message")
KINDS_03 = ("task", "status-update", "artifact-update", "message")


def _bare_03(body: Any) -> bool:
    """Whether ``body`` is read as A2A 0.3 (:func:`_read`): a bare object, kind-tagged or
    a Task in 0.3 spelling."""
    if not isinstance(body, dict) or any(key in body for key in WRAPPERS):
        return False
    return body.get("kind") in KINDS_03 or ("status" in body and "id" in body and _spelled_03(body))


def _spelled_03(task: dict[str, Any]) -> bool:
    """Whether a bare Task without a ``kind`` is in 0.3 spelling: a lowercase role or a
    ``kind``-tagged part in its question, history or artifacts. Told by the body, not by
    the agent's protocol version: the body is what is stored, and the converters leave
    1.0 shapes as they are, so a mixed one comes out all 1.0."""
    status = task.get("status")
    messages = [status.get("message")] if isinstance(status, dict) else []
    for key in ("history", "artifacts"):
        if isinstance(task.get(key), list):
            messages += task[key]
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if isinstance(role, str) and role in shapes.ROLES_03:  # a list or dict: not hashable
            return True
        parts = message.get("parts")
        if isinstance(parts, list) and any(isinstance(p, dict) and "kind" in p for p in parts):
            return True
    return False


def _read(body: Any, *, convert: bool = True) -> Push:
    """The push in ``body``, its parts not checked yet (:func:`parse`). A 0.3 body (its
    object ``kind``-tagged, or a bare Task in 0.3 spelling) is read in 1.0 shapes: past
    here, as past the transports, nothing sees a 0.3 spelling (``convert`` False: as
    sent, for its check)."""
    if not isinstance(body, dict):
        raise NotA2A("A push must be a JSON object: an A2A StreamResponse.")
    kind = body.get("kind")
    # Only a bare object is read as 0.3: a StreamResponse's wrapped one is checked as 1.0.
    if "task" in body or kind == "task" or ("status" in body and "id" in body):
        task = _obj(body.get("task", body), "task")
        if convert and "task" not in body and (kind == "task" or _spelled_03(task)):
            task = shapes.task_from_03(task, rest=False)
        artifacts = task.get("artifacts")
        if artifacts is not None and not isinstance(artifacts, list):
            raise NotA2A("task.artifacts must be a list.", {"field": "task.artifacts"})
        return Push(
            "task",
            remote_id=_text(task.get("id"), "task.id"),
            remote_context=_text(task.get("contextId"), "task.contextId", required=False),
            status=_status(task.get("status"), "task.status"),
            artifacts=artifacts,
            raw=task,
        )
    if "statusUpdate" in body or kind == "status-update":
        event = _obj(body.get("statusUpdate", body), "statusUpdate")
        if convert and "statusUpdate" not in body:
            event = {**event, "status": shapes.status_from_03(event.get("status"), rest=False)}
        return Push(
            "status",
            remote_id=_text(event.get("taskId"), "statusUpdate.taskId"),
            remote_context=_text(event.get("contextId"), "statusUpdate.contextId", required=False),
            status=_status(event.get("status"), "statusUpdate.status"),
            raw=event,
        )
    if "artifactUpdate" in body or kind == "artifact-update":
        event = _obj(body.get("artifactUpdate", body), "artifactUpdate")
        if convert and "artifactUpdate" not in body:
            artifact_03 = shapes.artifact_from_03(event.get("artifact"), rest=False)
            event = {**event, "artifact": artifact_03}
        artifact = _obj(event.get("artifact"), "artifactUpdate.artifact")
        if not isinstance(artifact.get("parts"), list):
            raise NotA2A("artifact.parts must be a list.", {"field": "artifactUpdate.artifact"})
        return Push(
            "artifact",
            remote_id=_text(event.get("taskId"), "artifactUpdate.taskId"),
            remote_context=_text(
                event.get("contextId"), "artifactUpdate.contextId", required=False
            ),
            artifact=artifact,
            append=bool(event.get("append")),
            raw=event,
        )
    if "message" in body or kind == "message":
        message = _obj(body.get("message", body), "message")
        if convert and "message" not in body:
            message = shapes.message_from_03(message, rest=False)
        if not isinstance(message.get("parts"), list):
            raise NotA2A("message.parts must be a list.", {"field": "message.parts"})
        return Push(
            "message",
            remote_id=_text(message.get("taskId"), "message.taskId", required=False),
            message=message,
            raw=message,
        )
    raise NotA2A(
        "Not an A2A StreamResponse: expected one of task, statusUpdate, artifactUpdate, message.",
        {"keys": sorted(str(k) for k in body)[:10]},
    )


def status_time(status: dict[str, Any] | None) -> datetime | None:
    """A TaskStatus's ``timestamp`` (in UTC), or None when missing, not ISO 8601, or not
    a time in UTC (``9999-12-31T23:59:59-05:00`` is past year 9999 there): one the
    platform could not compare, store or send back is no time at all."""
    raw = (status or {}).get("timestamp")
    if not isinstance(raw, str):
        return None
    try:
        stamp = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        return stamp.astimezone(UTC) if stamp.tzinfo is not None else None
    except (ValueError, OverflowError):
        return None
