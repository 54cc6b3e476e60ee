"""How the platform follows a task at its agent, and when it asks again.

How an agent's task is followed (``follow_mode``):

* ``poll`` — ``returnImmediately`` send, then ``GetTask`` with backoff (the default);
* ``stream`` — the agent cannot be polled but streams: ``message:stream`` /
  ``SendStreamingMessage``, and ``SubscribeToTask`` to pick a task up again;
* ``blocking`` — it can do neither: one blocking send whose read timeout runs to the
  task's deadline.

An agent whose card offers push notifications (and ``AGENT_PUSH_ENABLED``) is polled
too, but its send carries ``configuration.taskPushNotificationConfig`` with the task's
own webhook and token (:mod:`a2a.agent_push`): it pushes every update, and polls are
only a safety net, from ``AGENT_PUSH_POLL_INTERVAL`` seconds on (:func:`next_poll`). The
polled tasks of other A2A 1.0 agents are followed by listing (:mod:`a2a.agent_listing`):
one ``ListTasks`` per agent and ``A2A_LIST_INTERVAL`` tells what changed, and each
task's own polls are the safety net, from ``A2A_LIST_POLL_INTERVAL`` seconds on. How a task is
followed — ``push``, ``list``, ``poll``, ``stream`` or ``blocking`` — is recorded in
``metadata.followedBy``.

A read while following (a poll, a subscribe) that the agent refuses for the platform's
credential (HTTP 401/403, ``agent_auth_failed``) is tried again with the same backoff
until the task's deadline; a new credential for the agent makes those reads due at once,
and sends its tasks whose send was so refused (offline) again over HTTP
(:func:`credentials_changed`); a send refused after the new one was saved while it was on
the wire is sent again by the worker itself (:mod:`a2a.sent_credentials`).
"""

from __future__ import annotations

import logging
import random
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_save, pre_save
from django.utils import timezone

from a2a import agent_listing, agent_push, http_again
from a2a.exceptions import A2AAuthError
from a2a.hints import queue_processing, queue_processing_many
from a2a.models import Task
from a2a.states import INTERRUPTED_STATES
from agent_profiles.interfaces import CallTarget
from agent_profiles.models import AgentProfile

log = logging.getLogger(__name__)

POLL, STREAM, BLOCKING, PUSH = "poll", "stream", "blocking", "push"


def follow_mode(task: Task, target: CallTarget) -> str:
    """How this task is followed at this agent (see the module docstring)."""
    if target.polling and not (task.metadata or {}).get("noPolling"):
        return POLL
    if target.streaming and not (task.metadata or {}).get("noStreaming"):
        return STREAM
    return BLOCKING


def can_subscribe(task: Task, target: CallTarget) -> bool:
    """Whether the agent's task can be followed with ``SubscribeToTask``: the agent
    streams (and did not refuse to), and its task id is known (a subscribe to no id is
    refused, or worse, taken as another route)."""
    metadata = task.metadata or {}
    return (
        bool(task.remote_task_id)
        and target.streaming
        and not metadata.get("noStreaming")
        and not metadata.get("noSubscribe")
    )


def base_interval(task: Task, target: CallTarget) -> float:
    """The first poll interval: the agent's ``pollIntervalMs``, else the setting."""
    base = target.poll_interval_seconds
    return float(base if base is not None and base > 0 else settings.A2A_POLL_INTERVAL)


def long_call_seconds(task: Task) -> float:
    """How long one stream or blocking send may run: up to the deadline, capped. A task
    waiting for a person has no deadline running (it was set before the wait, and starts
    again when the wait ends): a subscribe while it waits may run to the cap."""
    cap = settings.A2A_LONG_CALL_MAX
    if task.deadline_at is None or task.state in INTERRUPTED_STATES:
        return cap
    left = (task.deadline_at - timezone.now()).total_seconds()
    return max(1.0, min(cap, left))


def safety_interval(task: Task, target: CallTarget) -> float:
    """The least time between a task's own polls: pushes or listings tell us first."""
    if (task.metadata or {}).get(agent_push.FOLLOWED_BY) == PUSH:
        return settings.AGENT_PUSH_POLL_INTERVAL
    if agent_listing.follows(task, target):
        return settings.A2A_LIST_POLL_INTERVAL
    return 0.0


def next_poll(
    task: Task, target: CallTarget, *, grow: bool, retry_after: float | None = None
) -> tuple[float, float]:
    """(delay, interval) of the task's next poll; ``grow``: the last one found nothing new.

    Polled tasks start at the base interval, times ``A2A_POLL_BACKOFF`` while nothing
    changes (the time since the last poll, when this one came late: :func:`quiet_spell`),
    up to ``A2A_POLL_INTERVAL_MAX`` (the longest between two polls: :func:`within_the_cap`).
    A task its agent's pushes or listings follow is polled only as a safety net: from
    ``AGENT_PUSH_POLL_INTERVAL`` / ``A2A_LIST_POLL_INTERVAL``, times ``A2A_POLL_BACKOFF``
    while those polls find nothing new, up to ``A2A_SAFETY_POLL_INTERVAL_MAX``: a task
    that works for an hour costs nine polls, not sixty, and a lost push is still noticed
    within that cap (plus the jitter). Each safety-net poll waits its interval plus a
    random part of it, up to ``A2A_SAFETY_POLL_JITTER`` times it, so that tasks sent
    together are not polled together; the interval itself, from which the backoff
    grows, has no jitter.
    """
    safety = safety_interval(task, target)
    if safety > 0:
        previous = task.poll_interval if task.poll_interval >= safety else 0.0
        interval = safety
        if grow and previous:
            cap = max(safety, settings.A2A_SAFETY_POLL_INTERVAL_MAX)
            interval = min(previous * settings.A2A_POLL_BACKOFF, cap)
        delay = interval * (1.0 + settings.A2A_SAFETY_POLL_JITTER * random.random())
        return max(delay, retry_after or 0.0), interval
    base = base_interval(task, target)
    if not grow:
        return max(base, retry_after or 0.0), base
    interval = quiet_spell(task, task.poll_interval or base)
    interval = min(interval * settings.A2A_POLL_BACKOFF, settings.A2A_POLL_INTERVAL_MAX)
    interval = max(interval, base)
    return max(within_the_cap(interval, base, lateness(task)), retry_after or 0.0), interval


def within_the_cap(interval: float, base: float, late: float = 0.0) -> float:
    """The delay of the next poll: the ``interval``, but never more than
    ``A2A_POLL_INTERVAL_MAX`` less one sweep interval, and less the time this poll came
    late, up to one more.

    A due poll waits for the next sweep, up to ``A2A_SWEEP_INTERVAL``, and then for its
    turn among the sweep's polls; scheduled a whole cap after the last one was applied,
    polls at the cap came up to that much more than the cap apart, and an agent's end
    was noticed that much past one interval. Due a sweep earlier, and earlier by the
    time this poll waited past its due time (``late``: about the wait the next one will
    have under the same load), polls stay within the cap of each other; so do those of
    an interval just under the cap (9.75 s, grown from a late poll's quiet time). What
    is made up is at most one sweep interval, and nothing for a poll more than two sweep
    intervals late: the workers are behind, and polling sooner would only feed the
    backlog (below the cap, the interval grows instead, :func:`quiet_spell`). Never
    below the agent's own ``pollIntervalMs`` (``base``); the interval the backoff grows
    from is unchanged.
    """
    sweep = settings.A2A_SWEEP_INTERVAL
    made_up = min(late, sweep) if late <= 2 * sweep else 0.0
    longest = settings.A2A_POLL_INTERVAL_MAX - sweep - made_up
    return max(base, min(interval, longest))


def quiet_spell(task: Task, interval: float) -> float:
    """How long a polled task has been seen unchanged: the ``interval`` its last poll
    waited, and longer when this poll came late (:func:`lateness`).

    The backoff grows from this, so it follows the time a task has been quiet, not the
    number of its polls. When the workers fall behind (10,000 polled tasks on two CPUs),
    polls come seconds late; grown from the interval alone, the next ones stayed as
    frequent as if they had come on time, and the backlog fed itself. On time, this is
    the interval, as before.
    """
    return interval + lateness(task)


def lateness(task: Task) -> float:
    """How long past its due time (``next_poll_at``) this poll of ``task`` came: 0 when
    on time, early, or when no due time is known."""
    due = task.next_poll_at
    if due is None:
        return 0.0
    return max(0.0, (timezone.now() - due).total_seconds())


def schedule_poll(
    task: Task,
    target: CallTarget,
    *,
    grow: bool,
    retry_after: float | None = None,
    also: dict[str, Any] | None = None,
    polled: bool = False,
) -> bool:
    """Poll again later: from the base interval, times A2A_POLL_BACKOFF while nothing changes.

    Conditional on the state the worker saw, so a person's cancel or reply meanwhile wins;
    ``polled``: after a poll, also on no other action queued meanwhile (see
    :meth:`~a2a.scheduling.TaskScheduling.schedule_poll`). ``also``: more fields written in
    the same UPDATE.
    """
    delay, interval = next_poll(task, target, grow=grow, retry_after=retry_after)
    if not task.schedule_poll(delay, interval, polled=polled, **(also or {})):
        return False
    if settings.A2A_POLL_MESSAGES and delay < settings.A2A_SWEEP_INTERVAL * 2:
        queue_processing(task.pk, countdown=delay)
    return True


# --- a new credential ----------------------------------------------------------------------

# Tasks told at once of a new credential (a hint each); the sweep takes up the others,
# due as well.
CREDENTIAL_HINTS = 100
# Set on an agent instance by :func:`_credential_saving` for :func:`_credential_saved`.
_CHANGING = "_a2a_credential_changing"


def credentials_changed(agent_id: str) -> int:
    """The agent's credential changed: its tasks waiting on a refused one are taken up
    again now, with the new credential; how many.

    * followed (a poll or a subscribe answered 401/403, or its token endpoint down,
      backing off until the deadline): their reads are due at once;
    * offline after a send (or a reply) so refused, when the agent never connected to
      the gateway: back to HTTP and sent at once (:func:`a2a.http_again.credential_changed`).
      Before, they waited offline for a gateway connection that never came and failed at
      their deadline, although the docs promise a rotation "without losing work in flight".

    Called after the commit of every save of an agent that changes its stored
    credential (the admin's form, a registration's ``auth``, ``set_credentials`` and a
    save anywhere): the registry does not know dispatch, so dispatch watches the saves
    (:func:`watch_credentials`, from ``a2a.apps``).
    """
    ids = [
        pk
        for code in sorted(http_again.REFUSED_CREDENTIAL)
        for pk in Task.follow_again_now(agent_id, code)
    ]
    if ids:
        queue_processing_many(ids[:CREDENTIAL_HINTS])
        log.info(
            "agent %s: new credential; %d task(s) refused with the old one followed again now",
            agent_id,
            len(ids),
            extra={"agent_id": agent_id},
        )
    # Each hints a worker itself (after its commit), as a new task's send does.
    sent = http_again.credential_changed(agent_id)
    if sent:
        log.info(
            "agent %s: new credential; %d offline task(s) refused with the old one sent "
            "again over HTTP",
            agent_id,
            sent,
            extra={"agent_id": agent_id},
        )
    return len(ids) + sent


def watch_credentials() -> None:
    """Connect the receivers that notice an agent's credential change (at app start)."""
    pre_save.connect(_credential_saving, sender=AgentProfile, dispatch_uid="a2a.credential_saving")
    post_save.connect(_credential_saved, sender=AgentProfile, dispatch_uid="a2a.credential_saved")


def _credential_saving(
    sender: Any, instance: AgentProfile, raw: bool = False, update_fields: Any = None, **_: Any
) -> None:
    """Before an agent's save: note whether it writes another credential than the stored
    one (one read of it, only for saves that write the credential: the admin's, a
    registration's; a card refresh or the calls' health writes do not). The same
    credential set again is a change too: its token is encrypted anew, and an operator
    who sets it again means "try it again"."""
    if raw or instance._state.adding or "auth_encrypted" not in instance.__dict__:
        return  # a fixture, a new agent (no tasks yet), or a save without the credential
    if update_fields is not None and "auth_encrypted" not in update_fields:
        return
    rows = AgentProfile.objects.filter(pk=instance.pk).values_list("auth_encrypted", flat=True)
    stored = rows.first()
    if stored is not None and stored != instance.auth_encrypted:
        setattr(instance, _CHANGING, True)


def _credential_saved(sender: Any, instance: AgentProfile, **_: Any) -> None:
    """After an agent's save that changed its credential: once it is committed (the
    reads must use it), its tasks waiting on a refused credential are followed again."""
    if not instance.__dict__.pop(_CHANGING, False):
        return
    agent_id = instance.pk
    transaction.on_commit(lambda: _follow_again(agent_id))


def _follow_again(agent_id: str) -> None:
    """:func:`credentials_changed`, never raising into the admin's or the API's request:
    the tasks are polled again at their backoff anyway."""
    try:
        credentials_changed(agent_id)
    except Exception:
        log.exception("agent %s: could not follow its tasks again after a new credential", agent_id)


def auth_refused(task: Task) -> bool:
    """Whether the task's last read while following it was refused for the platform's
    credential (``agent_auth_failed`` in its ``error``): it waits for one that works."""
    return isinstance(task.error, dict) and task.error.get("code") == A2AAuthError.code
