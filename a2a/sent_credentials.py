"""A send refused for a credential that was replaced while it was on the wire.

The operator saves the agent's new credential (the admin, a re-registration) after the
worker put the old one on a send and before the agent's 401 comes back. The save's
:func:`a2a.follow_policy.credentials_changed` runs at its commit and finds nothing to do:
the task is still on A2A, claimed by the worker. Handed to the gateway then (offline,
``agent_auth_failed``), the task waited for a connection an HTTP agent never makes and
failed at its deadline, although the credential it needed was stored.

So the worker notes the stored credential (as written, encrypted) each call target is
built from (:func:`note`, from :func:`a2a.agent_answers.target_of`), and a send so
refused compares it with the one stored now:

* changed, before the hand-over (under the task row's lock the caller holds): the send
  is due again at once over HTTP (:func:`send_again`), with the new credential;
* changed only while the hand-over was being written (the save's own check read the task
  before that committed): once it has, the task goes back to HTTP as the save's check
  would have sent it (:func:`check_after_hand_over`, by :mod:`a2a.http_again`).

A send refused with the credential stored now is handed over as before: it waits for the
next credential, or its deadline.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from a2a import http_again
from a2a.exceptions import A2AAuthError, A2ACallError
from a2a.hints import queue_processing
from a2a.models import Task
from a2a.states import NextAction
from agent_profiles.models import AgentProfile

log = logging.getLogger(__name__)

# Where the worker's copy of a task keeps the stored credential its call target carries.
_SENT = "_a2a_sent_credential"


def note(task: Task, stored: str) -> None:
    """The call about to go out for ``task`` carries the credential stored as ``stored``."""
    task.__dict__[_SENT] = stored


def replaced(task: Task, error: A2ACallError) -> bool:
    """Whether ``error`` refused the platform's credential (``agent_auth_failed``) and
    the agent's stored credential is no longer the one the call carried. False when the
    call's credential is not known (a path that noted none)."""
    if error.code != A2AAuthError.code or _SENT not in task.__dict__:
        return False
    rows = AgentProfile.objects.filter(pk=task.agent_id).values_list("auth_encrypted", flat=True)
    return rows.first() != task.__dict__[_SENT]


def send_again(task: Task, error: A2ACallError, metadata: dict[str, Any] | None) -> Task:
    """Send the refused message again at once over HTTP, with the credential stored now
    (the worker's lease let go). Under the row lock of the caller's check: the task is as
    the worker read it."""
    fields: dict[str, Any] = {"error": error.as_error()}
    if metadata is not None:
        fields["metadata"] = metadata
    if task.schedule(NextAction.SEND, 0.0, if_state=task.state, **fields):
        queue_processing(task.pk)  # after commit
        log.info(
            "task %s: agent %s refused the credential it was sent with, replaced since; "
            "sent again with the new one",
            task.pk,
            task.agent_id,
            extra={"task_id": str(task.pk), "agent_id": task.agent_id},
        )
    return task


def check_after_hand_over(task: Task, error: A2ACallError) -> None:
    """Once the hand-over committed: a credential replaced meanwhile sends the task back
    to HTTP (:func:`a2a.http_again.credential_changed_for`). Harmless when the save's own
    check took it back already: the task is then no longer offline."""
    if error.code != A2AAuthError.code or _SENT not in task.__dict__:
        return
    pk = task.pk

    def check() -> None:
        try:
            if replaced(task, error):
                http_again.credential_changed_for(pk)
        except Exception:  # the worker's failure handling must not fail for it
            log.exception("task %s: could not check for a credential replaced meanwhile", pk)

    transaction.on_commit(check)
