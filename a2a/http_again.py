"""Offline tasks of agents reached only over HTTP go back to HTTP when the agent answers.

A send that found the agent's endpoint down (a restart, an outage) is retried over HTTP
(``A2A_MAX_ATTEMPTS``), then handed to the gateway: an offline task. An agent that never
connected to the gateway (``AgentProfile.gateway_seen_at`` empty) will not take it there,
so it waited until its deadline and failed, although the agent was back seconds later.

The registry tells this module when such an agent answers again (a passing health check,
a call that succeeded: ``agent_profiles.health.register_recovery``, registered in
``a2a.apps``). Each of its offline tasks still active and within its deadline whose last
answer says the endpoint did not answer (:data:`UNANSWERED`) then has what waits for it
on the gateway withdrawn (its assignment, or a person's reply to the agent's question)
and goes back to A2A, sent at once with its HTTP retries there again
(:meth:`Task.back_to_http`): a first send, or the reply. Agents that use the gateway
keep their offline tasks waiting for it, as before.

A send refused for the platform's credential (401/403, ``agent_auth_failed``) went
offline too, and stayed there after the operator set the agent's new credential (the
documented rotation: at the agent, then at the platform), failing at the deadline.
Dispatch tells this module of a new credential (:func:`credential_changed`, from
:func:`a2a.follow_policy.credentials_changed`): those tasks go back to HTTP the same way,
to be sent with it.

A send that stopped before going out because the agent's stored credential could not be
decrypted (``credentials_unreadable``: ``CREDENTIALS_KEY`` changed) went offline too: it
goes back at the agent's next passing check once the credential reads again (the key put
back), or at once when a new credential is set.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from a2a import transports
from a2a.exceptions import A2AAuthError
from a2a.hints import queue_processing
from a2a.models import Task
from a2a.states import ACTIVE_STATES, Transport
from a2a.transports.credentials import CREDENTIALS_UNREADABLE, TOKEN_ENDPOINT_UNAVAILABLE
from agent_profiles.credentials import CredentialsUnreadable, decrypt
from agent_profiles.models import AgentProfile

log = logging.getLogger("a2a.lifecycle")

# The last answers of an endpoint that did not take the message (connection refused, 5xx,
# 429; the agent's OAuth2 token endpoint so down): a passing check says it answers now.
# Not a refusal (4xx, credentials): that one would be refused again, and the task go
# offline again, at every check until its deadline (a new credential sends those again:
# REFUSED_CREDENTIAL). Not a timeout either: the agent got the message and may be working
# on it, only slower than A2A_HTTP_TIMEOUT; sent again at every passing check, it was made
# to start the work over and over (its HTTP retries there again each time) until the
# deadline. With them, a send that went nowhere because the platform could not decrypt the
# agent's stored credential (``CREDENTIALS_KEY`` changed): the operator puts the key back
# and saves nothing, so no new credential tells dispatch; sent again at a passing check
# only once the credential reads (:func:`_unreadable_still`).
UNANSWERED = frozenset(
    {
        "agent_unreachable",
        "agent_http_error",
        "agent_busy",
        TOKEN_ENDPOINT_UNAVAILABLE,
        CREDENTIALS_UNREADABLE,
    }
)
# The last answers a new credential may change: the agent refused the old one, its token
# endpoint gave none (the new one may name another), or the old one could not be read.
REFUSED_CREDENTIAL = frozenset(
    {A2AAuthError.code, TOKEN_ENDPOINT_UNAVAILABLE, CREDENTIALS_UNREADABLE}
)

WITHDRAWN_REASON = "withdrawn: the agent answers over HTTP again; sent to it over HTTP"
NEW_CREDENTIAL_REASON = "withdrawn: a new credential for the agent; sent to it over HTTP"
BACK_REASON = "the agent answers over HTTP again; it never connected to the gateway"
CREDENTIAL_BACK_REASON = "a new credential for the agent; it never connected to the gateway"


def send_again(agents: Iterable[AgentProfile]) -> int:
    """Give the offline tasks of these agents (found answering over HTTP) back to HTTP
    dispatch, when the agent never connected to the gateway; how many went back.

    One read of the active offline tasks of agents never seen on the gateway (the
    ``(state, deadline_at)`` index: not the agents' finished tasks) with such an answer,
    then one short transaction per task.
    """
    return _send_back({agent.pk for agent in agents}, UNANSWERED, WITHDRAWN_REASON, BACK_REASON)


def credential_changed(agent_id: str) -> int:
    """The agent's credential changed: its offline tasks whose send (or reply) it refused
    for the old one, or got no token for, go back to HTTP dispatch to be sent with the new
    one, when it never connected to the gateway; how many went back.

    Sent again once per change: refused again, a task goes offline again and waits for
    the next credential or its deadline, as before.
    """
    return _send_back({agent_id}, REFUSED_CREDENTIAL, NEW_CREDENTIAL_REASON, CREDENTIAL_BACK_REASON)


def credential_changed_for(pk: Any) -> bool:
    """:func:`credential_changed` for one task (its send refused with a credential replaced
    while the hand-over to the gateway was written: :mod:`a2a.sent_credentials`)."""
    return _send_again(pk, REFUSED_CREDENTIAL, NEW_CREDENTIAL_REASON, CREDENTIAL_BACK_REASON)


def _send_back(ids: set[Any], codes: frozenset[str], withdrawn: str, why: str) -> int:
    """The active offline tasks of the agents ``ids`` whose last answer is one of
    ``codes``, back to HTTP (:func:`_send_again`); how many went back."""
    if not ids:
        return 0
    waiting = Task.objects.filter(
        Q(deadline_at__isnull=True) | Q(deadline_at__gt=timezone.now()),
        state__in=ACTIVE_STATES,
        transport=Transport.OFFLINE,
        agent_id__in=ids,
        agent__gateway_seen_at__isnull=True,
        error__code__in=sorted(codes),  # checked again under the row's lock
    ).values_list("pk", flat=True)
    sent = 0
    for pk in waiting.order_by():
        try:
            sent += int(_send_again(pk, codes, withdrawn, why))
        except Exception:  # one task's trouble must not keep the others waiting
            log.exception("task %s: could not send it again over HTTP", pk)
    return sent


def _send_again(pk: Any, codes: frozenset[str], withdrawn: str, why: str) -> bool:
    """One offline task whose last answer is one of ``codes`` back to HTTP, under its row
    lock (the gateway's hand-over and a connection's claim of its assignment wait for it,
    or it for them). ``withdrawn``: the closing reason of what the gateway held; ``why``:
    the way back's reason in ``metadata.fallbacks``."""
    with transaction.atomic():
        task = Task.objects.select_for_update().filter(pk=pk).first()
        if (
            task is None
            or task.state not in ACTIVE_STATES
            or task.transport != Transport.OFFLINE
            or task.agent.gateway_seen_at is not None
            or (task.error or {}).get("code") not in codes
            or _unreadable_still(task)
        ):
            return False
        # What the gateway holds for the agent (the assignment, or a reply to its
        # question) is withdrawn, so a later connection of the agent does not get it as
        # well. Nothing to withdraw means a connection took it meanwhile: the task stays.
        if not transports.gateway().withdraw(task, withdrawn):
            transaction.set_rollback(True)
            return False
        if not task.back_to_http(metadata=_way_back(task, why)):
            transaction.set_rollback(True)
            return False
        queue_processing(task.pk)  # after commit, as a new task is started
    log.info(
        "task %s of agent %s: %s; the task is sent again over HTTP",
        task.pk,
        task.agent_id,
        why,
        extra={"task_id": str(task.pk), "agent_id": task.agent_id},
    )
    return True


def _unreadable_still(task: Task) -> bool:
    """Whether the task stopped for an unreadable credential that still cannot be read
    (the key is still wrong): sent again, it would only stop again, and its way back be
    recorded at every passing check until its deadline."""
    if (task.error or {}).get("code") != CREDENTIALS_UNREADABLE or not task.agent.auth_encrypted:
        return False
    try:
        decrypt(task.agent.auth_encrypted)
    except CredentialsUnreadable:
        return True
    return False


def _way_back(task: Task, why: str) -> dict[str, Any]:
    """The task's metadata with its HTTP retries there again (``sendFailures``) and the
    way back recorded in ``fallbacks`` (shown with the others in the admin and the API)."""
    metadata = dict(task.metadata or {})
    metadata["sendFailures"] = 0
    step = {
        "at": timezone.now().isoformat(),
        "from": str(Transport.OFFLINE),
        "to": str(Transport.A2A),
        "reason": why,
    }
    metadata["fallbacks"] = [*metadata.get("fallbacks", []), step]
    return metadata
