"""Task rows as A2A 1.0 JSON (camelCase, enum names, UTC timestamps ending in ``Z``).

Messages stored in a task's conversation may carry the remote agent's own ``taskId``,
``contextId`` and ``referenceTaskIds``; the face's clients only ever see the platform's
task ids and their own context and message ids (see :mod:`a2a.face.ids`), so these are
rewritten.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from a2a.face.ids import for_caller, references_for_caller
from a2a.models import Direction, Task, TaskMessage
from a2a.states import INTERRUPTED_STATES, TaskState
from a2a.transports.shapes import part_from_03
from a2a.wire import data_as_text
from agent_profiles.negotiation import admits_json, admits_text

ROLE_USER = "ROLE_USER"
ROLE_AGENT = "ROLE_AGENT"


def iso_z(value: datetime | None) -> str | None:
    """``2025-01-02T03:04:05.678Z``: UTC, millisecond precision, ``Z`` suffix."""
    if value is None:
        return None
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


_LEGACY_ROLES = {"user": ROLE_USER, "agent": ROLE_AGENT}


def part_json(part: Any) -> Any:
    """A 1.0 Part from what an agent sent: 0.3 parts (``kind``, ``file``) are rewritten,
    by the transports' own reader (:func:`a2a.transports.shapes.part_from_03`)."""
    if not isinstance(part, dict) or ("kind" not in part and "file" not in part):
        return part
    return part_from_03(part, rest=False)


# Where a task keeps the output modes its caller accepts (``acceptedOutputModes`` of the
# send that created it, or of its caller's latest message).
OUTPUT_MODES = "acceptedOutputModes"


def text_only(task: Task) -> bool:
    """Whether the task's caller accepts text output and no JSON (``acceptedOutputModes``
    such as ``["text"]`` or ``["text/plain"]``): its agent's data parts are then shown to
    it as JSON in text parts, as a client that renders text alone would show nothing of
    them."""
    modes = (task.metadata or {}).get(OUTPUT_MODES)
    return bool(modes) and admits_json(modes) is False and bool(admits_text(modes))


def _parts(parts: Any, text: bool = False) -> Any:
    if not isinstance(parts, list):
        return parts
    out = [part_json(p) for p in parts]
    return data_as_text({"parts": out})["parts"] if text else out


def caller_context(task: Task) -> str:
    """The task's context id as its caller knows it."""
    return str(for_caller(task.context_id or ""))


def _as_ours(message: dict[str, Any], task: Task, role: str) -> dict[str, Any]:
    """A copy of ``message`` in 1.0 shape carrying our task id and the caller's context and
    message ids (an agent's own ids never reach the face's clients; a 0.3 agent's ``kind``
    and roles are mapped)."""
    out = {k: v for k, v in message.items() if k not in ("kind", "final")}
    out["taskId"] = str(task.id)
    context = caller_context(task)
    if context:
        out["contextId"] = context
    else:
        out.pop("contextId", None)
    if role == ROLE_USER and "messageId" in out:  # what went to the agent, in our namespace
        out["messageId"] = for_caller(out["messageId"])
    if role == ROLE_USER and "referenceTaskIds" in out:  # went as the agent's own task ids
        out["referenceTaskIds"] = references_for_caller(out["referenceTaskIds"], task.metadata)
    out["role"] = _LEGACY_ROLES.get(out.get("role"), out.get("role") or role)
    if "parts" in out:
        out["parts"] = _parts(out["parts"], role == ROLE_AGENT and text_only(task))
    return out


def status_message(task: Task) -> dict[str, Any] | None:
    """The message a client sees in ``status.message``: the agent's question while
    interrupted, else its latest status message, else the error of a failed task."""
    raw = task.question if task.state in INTERRUPTED_STATES else task.status_message
    if isinstance(raw, dict) and raw.get("parts"):
        return _as_ours(raw, task, ROLE_AGENT)
    if task.state in (TaskState.FAILED, TaskState.REJECTED) and task.error:
        text = str(task.error.get("message") or task.error.get("code") or "failed")
        return _as_ours(
            {"messageId": f"{task.id}-status", "role": ROLE_AGENT, "parts": [{"text": text}]},
            task,
            ROLE_AGENT,
        )
    return None


def task_status(task: Task) -> dict[str, Any]:
    status: dict[str, Any] = {"state": task.state}
    message = status_message(task)
    if message is not None:
        status["message"] = message
    status["timestamp"] = iso_z(task.state_changed_at)
    return status


def _clean_artifact(artifact: Any, text: bool) -> dict[str, Any] | None:
    if not isinstance(artifact, dict):
        return None
    out = {k: v for k, v in artifact.items() if k != "kind"}
    if "parts" in out:
        out["parts"] = _parts(out["parts"], text)
    return out


def task_artifacts(task: Task) -> list[dict[str, Any]]:
    text = text_only(task)
    return [a for a in (_clean_artifact(x, text) for x in task.artifacts or []) if a is not None]


def history_messages(task: Task, rows: Iterable[TaskMessage]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        if not isinstance(row.message, dict):
            continue
        role = ROLE_USER if row.direction == Direction.TO_AGENT else ROLE_AGENT
        out.append(_as_ours(row.message, task, role))
    return out


def agent_message(task: Task, message: dict[str, Any]) -> dict[str, Any]:
    """An agent's bare Message answer as the caller sees it."""
    return _as_ours(message, task, ROLE_AGENT)


def task_metadata(task: Task) -> dict[str, Any]:
    """What a client may see of the task's metadata: which skill and agent serve it."""
    meta: dict[str, Any] = {"skillId": task.skill_id, "agentId": task.agent_id}
    if task.error:
        meta["error"] = task.error
    return meta


def task_json(
    task: Task,
    *,
    history: list[TaskMessage] | None = None,
    history_length: int | None = None,
    include_artifacts: bool = True,
) -> dict[str, Any]:
    """The A2A ``Task`` object of ``task``.

    ``history`` holds the conversation rows (oldest first) or None to omit history;
    ``history_length`` keeps the last N of them, and 0 omits the field.
    """
    out: dict[str, Any] = {"id": str(task.id)}
    context = caller_context(task)
    if context:
        out["contextId"] = context
    out["status"] = task_status(task)
    if include_artifacts:
        artifacts = task_artifacts(task)
        if artifacts:
            out["artifacts"] = artifacts
    if history is not None and history_length != 0:
        messages = history_messages(task, history)
        if history_length is not None:
            messages = messages[-history_length:]
        if messages:
            out["history"] = messages
    out["metadata"] = task_metadata(task)
    return out
