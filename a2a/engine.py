"""The batched poll engine: many due polls per claim, their HTTP calls at once, few writes.

One Celery message and a handful of transactions per poll do not scale to thousands of
long tasks. The sweep hands due polls to :func:`poll_due`, which

1. **claims a batch** fairly (:mod:`a2a.engine_claims`): longest unseen first, at most
   ``A2A_AGENT_POLL_RATE`` per agent per second, round-robin between agents, none of an
   agent that asked for a pause. An agent that answers ``429``/``503`` with
   ``Retry-After`` is paused (:meth:`~a2a.models.Task.pause_polls`): every worker obeys;
2. **calls the agents concurrently** on a thread pool (``A2A_POLL_CONCURRENCY`` threads)
   over the transports' shared connection pool, each agent at most its share of the
   threads at once (:func:`calls`), and each answer applied as it comes;
3. **applies the answers in few transactions**: the usual answer of a long task is "still
   WORKING, nothing new" — those are re-scheduled together, one UPDATE per batch and
   state, conditional on the state the worker saw and on the batch's own lease (a person's
   cancel meanwhile wins). Anything else (a new state, a question, artifacts, an error)
   goes through the one agent-update mapping task by task, as a single poll would.

Guarantees kept: the row is the truth (a killed worker's lease runs out and a later sweep
claims the tasks again: work is delayed, never lost), a transition is a compare-and-set
(nothing is applied twice), and two workers never hold one task: a call that could end
after its batch's claim is not made (:func:`calls`; a call's longest, within a claim set
shorter than it, less that claim's margin).
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict, deque
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from a2a import (
    agent_answers,
    agent_listing,
    agent_pauses,
    agent_polls,
    agent_reads,
    agent_registry,
    follow_policy,
    overtaken_calls,
    remote_ids,
)
from a2a.agent_updates import apply_agent_reply
from a2a.claims import lease_seconds
from a2a.engine_claims import claim_polls
from a2a.exceptions import A2ACallError, A2AUnsupportedOperation
from a2a.models import Task
from a2a.observe import ids as log_ids
from a2a.states import normalize_state
from a2a.transports.base import AgentReply
from a2a.transports.redaction import describe_failure
from agent_profiles.deadlines import whole_answer_seconds
from agent_profiles.interfaces import CallTarget
from platform_site.metrics import cpu_stage

log = logging.getLogger(__name__)

_pool: ThreadPoolExecutor | None = None


def executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        width = max(1, settings.A2A_POLL_CONCURRENCY)
        _pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="a2a-poll")
    return _pool


# --- the calls -------------------------------------------------------------------------------


@dataclass
class Polled:
    """One poll of a batch: its task and agent, then the answer or the failure; or, with
    ``put_back`` (why: :data:`STOPPED`, :data:`SHORT_CLAIM`), a poll not made
    (:func:`calls`)."""

    task: Task
    target: CallTarget
    reply: AgentReply | None = None
    error: A2ACallError | None = None
    put_back: str | None = None


@cpu_stage("poll")
def _call(polled: Polled) -> Polled:
    try:
        polled.reply = agent_reads.read_task(polled.target, polled.task.remote_task_id)
    except A2ACallError as exc:
        polled.error = exc
    except Exception as exc:  # a bug in a transport must not sink the batch
        log.exception("task %s: poll failed", polled.task.pk, extra=log_ids(polled.task))
        # Not its repr: an encoding error's quotes the header it failed on (a credential).
        said = describe_failure(exc, polled.target)
        polled.error = A2ACallError(f"internal error while polling: {said}")
    return polled


STOPPED = "stopped"  # its agent hangs, or asked for a pause, in this batch
SHORT_CLAIM = "short claim"  # the batch's claim could run out before its answer


def _hangs(error: A2ACallError | None) -> bool:
    """The call ran out of time (the agent took it and did not answer, or never did: both
    :class:`~a2a.exceptions.A2AAnswerLate` and a connect timeout say ``agent_timeout``)."""
    return error is not None and error.code == "agent_timeout"


def _longest_call() -> float:
    """How long a poll may take in all (connect, read, the rest of the body:
    :func:`~agent_profiles.deadlines.whole_answer_seconds`), but never so long that a
    claim (:func:`~a2a.claims.lease_seconds`, at least a connect and a read and 2 s) would
    leave no time to start a call in: where the lease is set that short, its own margin."""
    whole = whole_answer_seconds(settings.A2A_CONNECT_TIMEOUT, settings.A2A_HTTP_TIMEOUT)
    return min(whole, lease_seconds() - 2.0)


def calls(batch: list[Polled]) -> Iterator[Polled]:
    """Make the batch's calls on the pool; yield each as it ends, and each poll put back.

    An agent has at most its share of the pool's threads at once: the pool's width over
    the agents whose calls wait (all of it, alone). Before, calls went to the pool in the
    batch's order and their answers were taken in that order: an agent that hangs held
    every thread for its timeout, call after call, and a healthy agent's answer waited
    behind them (a task noticed ended 25 s late at a 3 s cap). Not made, but yielded with
    ``put_back``: the calls left of an agent whose call here ran out of time (it hangs:
    each would hold a thread, and the batch, the whole timeout) or asked for a pause, and
    a call that could end after its batch's claim (a later sweep may have claimed the
    task by then, and both would poll it).
    """
    width = max(1, settings.A2A_POLL_CONCURRENCY)
    call_time = timedelta(seconds=_longest_call())
    waiting: dict[str, deque[Polled]] = defaultdict(deque)
    for polled in batch:
        waiting[polled.task.agent_id].append(polled)
    running: dict[Future[Polled], Polled] = {}
    busy: Counter[str] = Counter()
    stopped: set[str] = set()  # agents that hang or asked for a pause

    def start() -> Iterator[Polled]:
        while len(running) < width and waiting:
            share = -(-width // len(waiting))
            started = False
            for agent_id in list(waiting):
                queue = waiting[agent_id]
                if agent_id in stopped:
                    for polled in queue:
                        polled.put_back = STOPPED
                        yield polled
                    queue.clear()
                elif busy[agent_id] < share and len(running) < width:
                    polled = queue.popleft()
                    if polled.task.lease_until - timezone.now() < call_time:
                        polled.put_back = SHORT_CLAIM
                        yield polled
                    else:
                        running[executor().submit(_call, polled)] = polled
                        busy[agent_id] += 1
                    started = True
                    # To the back of the line: with more agents than threads, a freed
                    # thread went to the first agent in the batch's order, every time,
                    # and the last ones waited until their claim was too short.
                    waiting[agent_id] = waiting.pop(agent_id)
                if not queue:
                    del waiting[agent_id]
            if not started:
                return  # every agent with calls left has its share out

    yield from start()
    while running:
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        for future in done:
            polled = running.pop(future)
            busy[polled.task.agent_id] -= 1
            if _hangs(polled.error) or (polled.error is not None and polled.error.retry_after):
                stopped.add(polled.task.agent_id)
            yield polled
        yield from start()


# --- applying --------------------------------------------------------------------------------


def _message_id(message: Any) -> Any:
    return message.get("messageId") if isinstance(message, dict) else None


def is_quiet(task: Task, reply: AgentReply) -> bool:
    """Whether the answer says nothing new: same state, same status message, no new
    artifacts, same agent task, and no error of an earlier poll on the task (an answer
    clears it, and a refused credential's in the agent's health: :func:`_apply_one`)."""
    remote = reply.task
    if not isinstance(remote, dict) or reply.message is not None or task.error:
        return False
    status = remote.get("status") or {}
    if normalize_state(status.get("state")) != task.state:
        return False
    if _message_id(status.get("message")) != _message_id(task.status_message):
        return False
    if remote.get("artifacts") and remote.get("artifacts") != task.artifacts:
        return False
    return not (remote.get("id") and remote.get("id") != task.remote_task_id)


def reschedule_quiet(
    quiet: list[Polled], lease: Any, paused: dict[str, datetime] | None = None
) -> int:
    """Re-schedule the quiet polls of a batch, and those put back, together (see
    :meth:`Task.poll_later`). A quiet answer's ``Retry-After`` delays its next poll, as
    after a single poll; a poll put back as its agent hangs is due again as if it had found
    nothing new (its backoff grows: polled again at once, each batch of the sweep would
    wait for the agent once more), one put back as its claim was short at once (for a
    batch with a new claim); none before the end of a pause its agent asked for in the
    batch (``paused``: the agent's id → when it ends)."""
    now = timezone.now()
    paused = paused or {}
    rows: list[tuple[Task, datetime, float]] = []
    for polled in quiet:
        task, target = polled.task, polled.target
        if polled.put_back == SHORT_CLAIM:
            delay, interval = 0.0, task.poll_interval
        elif polled.put_back == STOPPED:
            delay, interval = follow_policy.next_poll(task, target, grow=True)
        else:
            assert polled.reply is not None
            pause = polled.reply.retry_after
            delay, interval = follow_policy.next_poll(task, target, grow=True, retry_after=pause)
        due = now + timedelta(seconds=delay)
        rows.append((task, max(due, paused.get(task.agent_id, due)), interval))
    return Task.poll_later(rows, lease)


def _apply_one(polled: Polled) -> datetime | None:
    """Apply one poll's answer (or failure), only to the agent task it read: a person may
    have reassigned or retried the task while the batch was on the wire
    (:mod:`a2a.overtaken_calls`). What concerns the agent (its health, its listing's
    cursor, a pause it asked for) is written outside the task row's lock. When the pause
    the agent asked for ends, if it asked for one."""
    task, target = polled.task, polled.target
    if polled.error is None and polled.reply is not None:
        if task.error and follow_policy.auth_refused(task):
            # The credential works again: the agent's health says so too, as after a
            # single poll (agent_polls.poll); else it stayed unhealthy (unreachable in
            # matching, no "agent back") until some other call succeeded.
            agent_answers.outcome(task, None)
        try:
            # An answer about another agent task is refused before its status time is
            # taken for a change the listings missed (which moves the agent's cursor).
            remote_ids.remote_fields(task, polled.reply.task)
            agent_listing.check_poll(task, target, polled.reply)
        except A2ACallError as exc:
            polled.error = exc
    error = polled.error
    pause = agent_pauses.pause_if_asked(task.agent_id, error) if error is not None else None
    with overtaken_calls.still_current(task) as still:
        if still:
            _apply_current(polled)
    if not still:
        overtaken_calls.drop(task, target, polled.reply, "poll")
    return pause


def _apply_current(polled: Polled) -> None:
    """:func:`_apply_one` for a task still at the agent task polled, under its row's lock."""
    task, target = polled.task, polled.target
    state_before, held = task.state, task.lease_until
    news: dict[str, Any] = {}  # written with the next poll's schedule
    try:
        if polled.error is not None:
            _failed(polled)
            return
        assert polled.reply is not None
        if task.error:  # an earlier poll error: the agent answers again
            task.note(error=None, if_state=task.state)
        apply_agent_reply(task, task_json=polled.reply.task, message=None, via="a2a", pending=news)
    except A2ACallError as exc:
        polled.error = exc
        _failed(polled)
        return
    agent_answers.after_answer(
        task, target, polled.reply, state_before, follow_policy.POLL, news, held=held
    )


def _failed(polled: Polled) -> None:
    task, target, exc = polled.task, polled.target, polled.error
    assert exc is not None
    if isinstance(exc, A2AUnsupportedOperation):
        agent_polls.no_polling(task, target, exc)
        return
    agent_polls.poll_failed(task, target, exc)


def poll_due(limit: int, spent: Counter[str] | None = None) -> int:
    """Claim up to ``limit`` due polls, poll them at once, apply; how many were claimed.
    ``spent``: the sweep's polls per agent so far (see :func:`claim_polls`)."""
    from a2a.worker import _internal_error

    tasks, lease = claim_polls(limit, spent)
    if not tasks:
        return 0
    targets: dict[str, CallTarget] = {}
    batch = []
    for task in tasks:
        if task.agent_id not in targets:
            targets[task.agent_id] = agent_registry.target_for(task.agent)
        batch.append(Polled(task, targets[task.agent_id]))
    quiet = []
    # News is applied as its answer comes, while the batch's other calls are still out: an
    # end found by the batch's first call is not held back for the others (a loaded batch
    # of 200 takes a second). Quiet answers, and the polls put back, are re-scheduled
    # together at the end, in one statement.
    paused: dict[str, datetime] = {}  # the pauses the batch's agents asked for
    for polled in calls(batch):
        if polled.put_back is not None:
            quiet.append(polled)
            continue
        calm = polled.error is None and polled.reply and is_quiet(polled.task, polled.reply)
        if calm and not settings.A2A_POLL_MESSAGES:  # else each schedules its own message
            quiet.append(polled)
            continue
        try:
            until = _apply_one(polled)
        except Exception as exc:
            log.exception(
                "task %s: internal error applying a poll",
                polled.task.pk,
                extra=log_ids(polled.task),
            )
            _internal_error(polled.task, exc)
            continue
        if until is not None:
            agent_id = polled.task.agent_id
            paused[agent_id] = max(until, paused.get(agent_id, until))
    if quiet:
        try:
            reschedule_quiet(quiet, lease, paused)
        except Exception:
            log.exception("could not re-schedule %d quiet polls; their leases run out", len(quiet))
    return len(tasks)
