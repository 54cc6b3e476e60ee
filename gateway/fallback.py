"""The gateway as a transport of the dispatcher: the fallback from A2A HTTP, and
follow-ups of tasks the gateway carries.

:data:`GATEWAY` implements ``a2a.transports.GatewayTransport``; ``gateway.apps`` registers
it at start, so ``a2a`` drives the gateway without importing it. The rule
(docs/gateway.md, "Fallback from A2A"):

* an agent without an ``a2aEndpoint`` is served through the gateway directly;
* a refused request (HTTP 4xx, an endpoint the URL guard refuses) goes to the gateway at
  once; so does any send failure while the agent holds a live gateway connection;
* transient failures (connection, timeout, 5xx, 429) are retried over HTTP first, and go
  to the gateway when the retries are used up (a 429/503 with Retry-After uses none: the
  agent is called again after it, until the deadline would pass);
* an answer that is not A2A (a 2xx the agent may have acted on) is NOT a fallback: the
  task fails as before, so the agent is never handed one attempt twice;
* once on the gateway, a task stays there: the dispatcher neither sends nor polls it over
  HTTP again, and its follow-ups go as ``task.message`` / ``task.cancel``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from a2a.exceptions import A2ACallError, A2AProtocolError
from a2a.models import Task
from a2a.states import Transport
from gateway import offline, presence, services
from gateway.models import OPEN_STATUSES, Delivery, DeliveryKind
from platform_site.env import FLOAT_MAX


def direct(task: Task) -> bool:
    """Whether the task's agent has no HTTP endpoint: the gateway is its only transport."""
    return not task.agent.a2a_endpoint


def applies(error: A2ACallError) -> bool:
    """Whether a failed send may go to the gateway at all."""
    return not isinstance(error, A2AProtocolError)


def now(task: Task, error: A2ACallError) -> bool:
    """Whether to fall back without further HTTP retries."""
    if direct(task):
        return True
    if not applies(error):
        return False
    return not error.transient or presence.is_online(task.agent_id)


def fall_back(task: Task, error: A2ACallError | None) -> Task:
    """Hand the task to the gateway, recording why in ``metadata.fallbacks``."""
    reason = "" if direct(task) or error is None else reason_of(error)
    message: dict[str, Any] = task.outbound_message or {}
    if message.get("taskId") and task.remote_task_id:
        # A reply on a task the agent accepted over HTTP: the reply goes as task.message.
        services.switch_to_gateway(task, reason=reason)
        services.send_followup(task, "message", message)
    elif services.push_task(task, reason=reason) == Transport.OFFLINE:
        _bound_offline_wait(task)
    task.refresh_from_db()
    return task


def _bound_offline_wait(task: Task) -> None:
    """Never wait silently: for an agent that never connected to the gateway, an offline
    task waits the operator's ``offline_wait`` if one is set (else the dispatcher fails it
    at its deadline, with the agent's last answer; see ``a2a.deadlines.expire_overdue``)."""
    agent = task.agent
    if agent.gateway_seen_at is None and agent.offline_wait:
        # Bounded as the settings are: a huge one (the editor took any) overflowed the date.
        until = timezone.now() + timedelta(seconds=min(agent.offline_wait, FLOAT_MAX))
        Delivery.objects.filter(
            task=task, kind=DeliveryKind.ASSIGN, status__in=OPEN_STATUSES
        ).update(expires_at=until)


def reason_of(error: A2ACallError) -> str:
    """The agent's last answer, as recorded in a fallback (``agent_refused (HTTP 404): …``)."""
    status = f" (HTTP {error.status})" if error.status else ""
    return f"{error.code}{status}: {error.message}"


class GatewayFallback:
    """``a2a.transports.GatewayTransport`` over this app's services."""

    def takes_over_now(self, task: Task, error: A2ACallError) -> bool:
        return now(task, error)

    def may_take_over(self, error: A2ACallError) -> bool:
        return applies(error)

    def hand_over(self, task: Task, error: A2ACallError | None) -> Task:
        return fall_back(task, error)

    def follow_up(self, task: Task, kind: str, message: dict[str, Any] | None) -> str:
        return services.send_followup(task, "message" if kind == "reply" else kind, message)

    def withdraw(self, task: Task, reason: str) -> bool:
        return offline.withdraw_unsent(task, reason)


GATEWAY = GatewayFallback()
