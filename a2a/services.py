"""Platform tasks: create, follow, answer, cancel and retry (the dispatcher's business rules).

Views, the admin, Celery tasks, the gateway and the A2A face all call these functions;
none of them change a task any other way. The HTTP side of talking to agents lives in
:mod:`a2a.transports` (one transport per binding and version), the calls the worker makes
in :mod:`a2a.agent_calls`, the worker loop (claims, sweeps) in :mod:`a2a.worker`.

Seams other parts extend:

* :func:`deliver_followup` sends a reply or a cancel to the agent: over A2A when
  ``task.transport == "a2a"``, else through the gateway transport the ``gateway`` app
  registers at start (``a2a.transports.gateway()``).
* :func:`handle_send_failure` decides what a failed send means: retry with backoff for
  transient errors while attempts remain, then fall back to the gateway
  (the registered gateway transport: at once for 4xx, agents without an endpoint, or
  agents online on the socket); answers that are not A2A fail the task.
* :func:`apply_agent_reply` applies an agent's answer (Task or bare Message) from a poll,
  a stream, a blocking send or (later) a push; idempotent and order-safe.

Where the code lives (split by responsibility; always import from here):

* :mod:`a2a.creation` — :func:`create_task` (validation, agent choice, idempotency keys)
  and :func:`queue_processing`; :mod:`a2a.batch` — :func:`create_tasks` (many at once);
* :mod:`a2a.agent_updates` — :func:`apply_agent_update` (an agent's status and output)
  and :func:`record_message`;
* :mod:`a2a.reassign` — :func:`reassign_task` (another agent of the skill);
* :mod:`a2a.task_actions` — a person's reply, cancel and retry, :func:`deliver_followup`
  and the send-failure policy :func:`handle_send_failure`.
"""

from __future__ import annotations

from a2a.agent_updates import apply_agent_reply, apply_agent_update, record_message
from a2a.batch import Outcome, TaskRequest, create_tasks
from a2a.creation import create_task
from a2a.hints import queue_processing
from a2a.reassign import reassign_task
from a2a.task_actions import (
    cancel_task,
    deliver_followup,
    handle_send_failure,
    max_attempts,
    reply_to_task,
    retry_task,
)

__all__ = [
    "Outcome",
    "TaskRequest",
    "apply_agent_reply",
    "apply_agent_update",
    "cancel_task",
    "create_task",
    "create_tasks",
    "deliver_followup",
    "handle_send_failure",
    "max_attempts",
    "queue_processing",
    "reassign_task",
    "record_message",
    "reply_to_task",
    "retry_task",
]
