"""Deadlines: a task still SUBMITTED/WORKING past its deadline fails ``timeout``, after one
last read of the agent's task.

The platform may only have missed the agent's end: a push lost with a killed web process
is found by a safety poll, which may come after the deadline; a poll due when the
deadline passed, a stream a killed worker was reading while its claim ran out. Failing
such a task ``timeout`` threw away work the agent had done. So a task that names its
agent task, at an agent that answers ``GetTask``, is read once
(:func:`read_before_timeout`) and the answer applied as a poll's would be: an end found
there stands (a COMPLETED's output validated), a question waits for a person; a task the
agent still works on fails ``timeout``, its error saying what the last read found.

The sweep waits for these reads, so they are bounded: they run at once on the batched
engine's threads, and one agent's first read decides for its other tasks of that pass. An
agent that does not answer costs one call's timeout per sweep, not one per task (its
other tasks fail unread, as before); one that answers slowly has them read in later
passes, one per pass.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from a2a import agent_reads, agent_registry, engine, follow_policy, overtaken_calls, transports
from a2a.agent_updates import apply_agent_reply, task_timeout
from a2a.exceptions import A2ACallError, A2APermanentError, A2AProtocolError
from a2a.hints import queue_processing
from a2a.models import Task
from a2a.observe import ids as log_ids
from a2a.states import ACTIVE_STATES, NextAction, Transport
from a2a.transports.base import AgentReply
from agent_profiles.interfaces import CallTarget

log = logging.getLogger(__name__)

# What a task's last read found, for its timeout's error: the agent's state, or the code
# of the error that kept it from being read; LATER for a task left for the next pass.
LastRead = dict[Any, str]
LATER = "(left for a later pass)"  # never a state nor an error code
# An agent whose first read took longer has its other overdue tasks read in later
# passes, one each: the sweep waits for these reads, and slow ones would hold it up.
PROMPT_SECONDS = 2.0


def expire_overdue() -> int:
    """Fail tasks still SUBMITTED/WORKING after their deadline, after one last read of
    those the agent may have finished (:func:`read_before_timeout`); how many failed.

    Offline tasks (held by the gateway) too when their agent never connected to the
    gateway and no operator set a longer ``offline_wait`` for it: never wait silently.
    """
    tasks = list(overdue(timezone.now())[: settings.A2A_POLL_BATCH])
    found = read_before_timeout(tasks)
    count = 0
    for task in tasks:
        if task.state in ACTIVE_STATES and found.get(task.pk) != LATER:
            count += int(fail_timeout(task, last_read=found.get(task.pk)))
    return count


def time_out(task: Task) -> bool:
    """Fail one overdue task (a worker claimed it past its deadline), after the last read
    of its agent task; whether it failed."""
    found = read_before_timeout([task])
    return task.state in ACTIVE_STATES and fail_timeout(task, last_read=found.get(task.pk))


def overdue(now: datetime) -> QuerySet[Task]:
    """The tasks :func:`expire_overdue` fails, the most overdue first. Read from the
    (state, deadline_at) index: only the overdue ones, however many tasks are in flight or
    finished (it read every task in flight, every sweep)."""
    waits = Q(agent__gateway_seen_at__isnull=False) | Q(agent__offline_wait__isnull=False)
    tasks = Task.objects.filter(state__in=ACTIVE_STATES, deadline_at__lt=now).exclude(
        Q(transport=Transport.OFFLINE) & waits
    )
    return tasks.order_by("deadline_at").select_related("skill", "agent")


# --- the last read ------------------------------------------------------------------------


def readable(task: Task) -> bool:
    """Whether the task's agent task can be read: it is named, the agent answers
    ``GetTask`` and took the platform's credential when last asked."""
    return (
        task.transport == Transport.A2A
        and task.state in ACTIVE_STATES
        and bool(task.remote_task_id)
        and task.agent.polling
        and not (task.metadata or {}).get("noPolling")
        and not follow_policy.auth_refused(task)  # GetTask would be refused the same way
    )


def read_before_timeout(tasks: list[Task]) -> LastRead:
    """Read the agent task of each of ``tasks`` that can be read (:func:`readable`) and
    apply the answer; what each read found (:data:`LATER`: left for the next pass). The
    tasks are updated in place: those the agent ended, or that now wait for a person, are
    no longer active.

    Each agent's first task is read first, all agents at once. The rest of an agent's
    tasks are read then where that read answered (a refusal is an answer: the agent is
    there) within :data:`PROMPT_SECONDS`; where it answered slower, they are left for
    the next passes; where it did not answer, they fail unread, with what kept the first
    from being read."""
    by_agent: dict[str, list[Task]] = defaultdict(list)
    for task in tasks:
        if readable(task):
            by_agent[task.agent_id].append(task)
    found: LastRead = {}
    if not by_agent:
        return found
    targets: dict[str, CallTarget] = {}
    for agent_id, each in list(by_agent.items()):
        try:
            targets[agent_id] = agent_registry.target_for(each[0].agent)
        except Exception:  # its credential unreadable, say: these tasks fail as before
            log.exception(
                "agent %s: cannot call it to read its overdue tasks",
                agent_id,
                extra={"agent_id": agent_id},
            )
            del by_agent[agent_id]
    firsts = [each[0] for each in by_agent.values()]
    unreached, slow = set(), set()
    for task, (answer, took) in zip(firsts, _read_all(firsts, targets), strict=True):
        found[task.pk] = _apply(task, answer)
        if isinstance(answer, A2ACallError) and not isinstance(answer, A2APermanentError):
            unreached.add(task.agent_id)
        elif took > PROMPT_SECONDS:
            slow.add(task.agent_id)
    rest = [
        task
        for agent_id, each in by_agent.items()
        if agent_id not in unreached and agent_id not in slow
        for task in each[1:]
    ]
    for task, (answer, _took) in zip(rest, _read_all(rest, targets), strict=True):
        found[task.pk] = _apply(task, answer)
    for agent_id in unreached | slow:
        first = by_agent[agent_id][0].pk
        for task in by_agent[agent_id][1:]:
            found[task.pk] = LATER if agent_id in slow else found[first]
    return found


Read = tuple[AgentReply | A2ACallError, float]  # the answer, and how long it took


def _read_all(tasks: list[Task], targets: dict[str, CallTarget]) -> list[Read]:
    """The reads, at once on the engine's threads (HTTP only: no database there)."""
    calls = [(targets[task.agent_id], task) for task in tasks]
    if len(calls) <= 1:
        return [_read(*call) for call in calls]
    return list(engine.executor().map(lambda call: _read(*call), calls))


def _read(target: CallTarget, task: Task) -> Read:
    began = time.monotonic()
    try:
        answer: AgentReply | A2ACallError = agent_reads.read_task(target, task.remote_task_id)
    except A2ACallError as exc:
        answer = exc
    except Exception as exc:  # a bug in a transport must not keep the others from failing
        log.exception("task %s: the read before its timeout failed", task.pk, extra=log_ids(task))
        answer = A2ACallError(f"internal error while reading the task: {type(exc).__name__}")
    return answer, time.monotonic() - began


def _apply(task: Task, answer: AgentReply | A2ACallError) -> str:
    """Apply what the read found, as a poll's answer; what it found, for the timeout."""
    if isinstance(answer, A2ACallError):
        log.info(
            "task %s: its agent task could not be read at its deadline (%s)",
            task.pk,
            answer.code,
            extra=log_ids(task),
        )
        return answer.code
    named = answer.task.get("id") if isinstance(answer.task, dict) else None
    if named not in (None, "", task.remote_task_id):
        # The task asked for, answered as another: never taken (remote_fields lets a task
        # whose send is due take a new id, for that send's own answer; this is none).
        log.info(
            "task %s: the read at its deadline answered another task",
            task.pk,
            extra=log_ids(task),
        )
        return A2AProtocolError.code
    try:
        # pending: news with no change of state is not written (the task fails anyway).
        # Only to the agent task read: a person may have reassigned or retried the task
        # while the read was on the wire (a2a.overtaken_calls); then nothing is applied,
        # and the timeout's own compare-and-set (on the deadline read) refuses too.
        with overtaken_calls.still_current(task) as still:
            if still:
                apply_agent_reply(task, task_json=answer.task, message=None, via="a2a", pending={})
        if not still:
            log.info(
                "task %s: started again while read at its deadline; left",
                task.pk,
                extra=log_ids(task),
            )
            return "overtaken"
    except A2ACallError as exc:  # not A2A, another agent task: the timeout stands
        log.info(
            "task %s: the read at its deadline was refused (%s)",
            task.pk,
            exc.code,
            extra=log_ids(task),
        )
        return exc.code
    except Exception:  # a bug must not keep the pass's other tasks from their timeouts
        log.exception(
            "task %s: could not apply the read at its deadline", task.pk, extra=log_ids(task)
        )
        return "internal_error"
    if task.state not in ACTIVE_STATES:
        log.info(
            "task %s: read at its deadline, the agent's task was %s",
            task.pk,
            task.state,
            extra=log_ids(task),
        )
    return str(answer.state or "no state")


# --- failing -------------------------------------------------------------------------------


def _timeout_text(task: Task) -> str:
    seconds, source = task_timeout(task)
    return f"{seconds:g} s ({source})"


def fail_timeout(task: Task, *, last_read: str | None = None) -> bool:
    """FAILED with code ``timeout``; the agent is asked to cancel its task (over A2A, or
    over the gateway for a socket task). An offline task
    fails with the agent's last answer (its code, e.g. ``agent_auth_failed``).
    ``last_read``: what the read before the timeout found (:func:`read_before_timeout`)."""
    if task.transport == Transport.OFFLINE:
        return _fail_offline(task)
    fields: dict[str, Any] = {}
    if task.remote_task_id and task.transport == Transport.A2A:
        fields = {"next_action": NextAction.CANCEL, "next_poll_at": timezone.now()}
    last = (task.error or {}).get("message") if isinstance(task.error, dict) else None
    sent = bool(task.attempts or task.remote_task_id) or task.transport != Transport.A2A
    seconds, source = task_timeout(task)
    if sent:
        message = (
            f"Timed out: agent '{task.agent_id}' gave no final answer within "
            f"{seconds:g} s ({source}); the task was {task.state}."
        )
    else:  # not the agent's doing: say where it waited
        message = (
            f"Timed out before it was sent: within {seconds:g} s ({source}) the task never "
            f"reached agent '{task.agent_id}'. It waited for one of the agent's send slots "
            "(A2A_AGENT_SENDS_IN_FLIGHT per worker process), for room for a long call "
            "(A2A_LONG_CALLS_PER_AGENT, A2A_LONG_CALLS), for the end of a pause the agent "
            "asked for (Retry-After: the console's Agent pauses) or for a worker "
            "(a2a_sweep_lag_seconds shows how far behind they are)."
        )
    if last_read:
        message += f" Read once more at the deadline, the agent's task was: {last_read}."
    if last:
        message += f" Last error: {last}"
    details: dict[str, Any] = {"timeoutSeconds": seconds, "lastState": task.state, "sent": sent}
    if last_read is not None:
        details["readAtDeadline"] = str(last_read)
    # Only the task read overdue: one a person reassigned or retried meanwhile is in the
    # same state (SUBMITTED) with a new deadline, a fresh attempt not to fail at once.
    with transaction.atomic():
        done = task.fail("timeout", message, details, if_deadline_at=task.deadline_at, **fields)
        if done and task.transport == Transport.WEBSOCKET:
            # The socket agent is told to stop, as a person's cancel tells it (the
            # gateway's task.cancel frame; an assignment it never got is withdrawn
            # instead). With the timeout, or neither: the next sweep tries again.
            transports.gateway().follow_up(task, "cancel", None)
    if done and fields:
        queue_processing(task.pk)
    return done


def _fail_offline(task: Task) -> bool:
    last = task.error if isinstance(task.error, dict) else {}
    code = str(last.get("code") or "offline_expired")
    answer = f" Its last answer over A2A: {last['message']}" if last.get("message") else ""
    message = (
        f"Agent '{task.agent_id}' did not take the task within {_timeout_text(task)}: it "
        f"has never connected to the gateway, so the task was not kept waiting offline.{answer}"
    )
    details = {"lastAnswer": last or None, "waitedOffline": True}
    return task.fail(code, message, details, if_deadline_at=task.deadline_at)
