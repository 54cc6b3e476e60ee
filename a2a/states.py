"""Task states: the A2A 1.0 enum names, defined once for the whole platform."""

from __future__ import annotations

from django.db import models


class TaskState(models.TextChoices):
    SUBMITTED = "TASK_STATE_SUBMITTED", "Submitted"
    WORKING = "TASK_STATE_WORKING", "Working"
    INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED", "Input required"
    AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED", "Auth required"
    COMPLETED = "TASK_STATE_COMPLETED", "Completed"
    FAILED = "TASK_STATE_FAILED", "Failed"
    CANCELED = "TASK_STATE_CANCELED", "Canceled"
    REJECTED = "TASK_STATE_REJECTED", "Rejected"


TERMINAL_STATES: frozenset[str] = frozenset(
    {TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED}
)
# The agent waits for a person: polling pauses until a reply is sent.
INTERRUPTED_STATES: frozenset[str] = frozenset({TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED})
ACTIVE_STATES: frozenset[str] = frozenset({TaskState.SUBMITTED, TaskState.WORKING})
# A person may retry these.
RETRYABLE_STATES: frozenset[str] = frozenset({TaskState.FAILED, TaskState.REJECTED})


class Transport(models.TextChoices):
    A2A = "a2a", "A2A over HTTP"
    WEBSOCKET = "websocket", "WebSocket gateway"
    OFFLINE = "offline", "Offline (waiting for the agent)"


class NextAction(models.TextChoices):
    """What a worker does with the task when ``next_poll_at`` is due."""

    NONE = "", "Nothing (waiting for a person or an event)"
    SEND = "send", "Send the message to the agent"
    POLL = "poll", "Poll the agent's task"
    CANCEL = "cancel", "Propagate a cancel to the agent"
    FOLLOW = "follow", "Follow the agent's task over a stream (it cannot be polled)"


# Django rebuilds ``TaskState.values`` (a list) at every access: normalize_state runs for
# every poll answer and push, where that list cost 2% of the server's CPU.
_STATE_NAMES: frozenset[str] = frozenset(TaskState.values)


def normalize_state(raw: object) -> str | None:
    """Map an agent's state spelling to ours: A2A 1.0 names, 0.3 lowercase, or None."""
    if not isinstance(raw, str):
        return None
    value = raw.strip()
    if value in _STATE_NAMES:
        return value
    name = value.upper().replace("-", "_").removeprefix("TASK_STATE_")
    legacy = "TASK_STATE_" + name  # 0.3 JSON-RPC "input-required", 0.3 proto "..._CANCELLED"
    if legacy == "TASK_STATE_CANCELLED":
        legacy = TaskState.CANCELED
    return legacy if legacy in _STATE_NAMES else None
