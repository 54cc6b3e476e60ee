"""Following an agent's polled tasks by listing them: one ``ListTasks`` per agent and interval.

Polling asks for each task on its own, so its cost grows with the tasks in flight: 10,000
tasks polled every 10 s are 1,000 ``GetTask`` calls a second. A2A 1.0's ``ListTasks``
answers for all of an agent's tasks at once, filtered to those whose status changed at or
after a time (``statusTimestampAfter``) and newest first. So while an agent has tasks in
flight, the sweep asks it (:func:`list_due`) every ``A2A_LIST_INTERVAL`` for what changed
since the last listing, and applies each changed task through the rules pushes use
(:func:`a2a.agent_push.apply`: order-safe, idempotent, a COMPLETED's output validated).
The cost follows the changes, not the tasks; a task that waits costs nothing.

The cursor (:class:`~a2a.listing_models.AgentListing`) is kept in the agent's clock: after
each listing, ``since`` moves to the newest status time seen, less an overlap (``OVERLAP``
at first, widened per agent up to ``WIDEST`` when a task's own poll finds a change the
listings passed: a loaded a2a-sdk agent stores a change seconds after the time it gives
it, so a listing can pass that time before the change is there to see). A task
listed before the platform recorded its send's answer (so before it knew the agent's task
id) is listed again: the answer moves the cursor back to before the agent took the send
(:func:`cover_send`, from the answer's ``Date``). A cursor without a place (new, or
resting since its agent's last task ended) takes it from the next such answer, or from a
probe if a listing comes first: the agent's newest dated task.

Such tasks (``metadata.followedBy`` ``"list"``) are still polled one by one, from
``A2A_LIST_POLL_INTERVAL`` seconds on (backing off, see
:func:`a2a.follow_policy.next_poll`), as the safety net: a listing that missed a change
only delays it. An agent that does not answer ``ListTasks`` (HTTP 404/405/501, JSON-RPC
-32601, UnsupportedOperation, A2A 0.3), answers it with something that is not A2A, whose
changed statuses carry no time (a poll finds a change the filter cannot show), or whose
listings skip changes (``MISSES`` of them at the widest overlap) is marked
"no listing" in the registry, and its tasks are polled at once and from then on.

A hostile or broken agent must not cost more than that. A listing has a time budget of
its own from when its fetch starts, capped so that it ends within its row's lease from
the claim (:func:`~a2a.listing_fetch.budget`: the lease less one whole call and a
second), so no second sweep lists the agent while the first still pages; the sweep
applies each agent's listing as it comes, not after the slowest. A page with more tasks
than asked, or a ``nextPageToken`` given again, is not A2A (no listing); a page bringing
no task not already read ends the listing (endless: the cursor stays), and
``TRUNCATIONS`` such listings in a row send the agent's tasks back to polling: a listing
that never ends costs at most that many budgets, not 50 requests every interval forever.

A listing cut by its pages (``MAX_PAGES``: an honest agent with a burst of changes) or
its budget (slow pages, or a sweep busy with other agents) is not the agent's fault and
is not counted. No change is skipped for it, though the cursor moves on to the newest
status time read, less the overlap (under the same rules as any listing's), so the
next listing does not read the same burst again: first the agent's polled tasks are made
due now (:meth:`~a2a.models.Task.poll_agent_soon`), and what the cut left unread (older
changes, its pages being newest first) is found by their polls. (An agent that fills
every page with tasks never seen costs that too, at each listing: it is what an honest
burst costs while it lasts.) A failed listing breaks a run of endless ones.

A status time that cannot be told in UTC is no time. The cursor moves only to a time the
agent has reached: the newest status time of the platform's own tasks listed, or of any
task if no later than the platform's clock plus ``AHEAD`` (a task the platform never sent,
stamped in the far future, would move the cursor past every real change). ``FAILURES``
failed listings in a row (a ``ListTasks`` that answers 500 or 401 while ``GetTask``
works) and each further failed listing makes the agent's polled tasks due at once: while
the listing is broken they are polled at the listing's retry cadence, not the safety
net's minutes; once one listing goes through, the count starts again. Not marked "no
listing" for that: a 503 for a minute is not a reason to poll every task one by one from
then on.
"""

from __future__ import annotations

import logging
from concurrent.futures import as_completed
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from a2a import agent_pauses, agent_push, agent_push_body, agent_registry, listing_fetch
from a2a.exceptions import A2AProtocolError, A2AUnsupportedOperation
from a2a.listing_fetch import EPOCH, Listing, back, fetch, stamp
from a2a.listing_models import AgentListing
from a2a.models import Task
from a2a.pause_models import AgentPause
from a2a.states import TERMINAL_STATES, NextAction, Transport
from a2a.transports.base import AgentReply
from agent_profiles.interfaces import V1_0, CallTarget
from agent_profiles.models import AgentProfile
from platform_site.errors import PlatformError
from platform_site.text import find_bad_text

log = logging.getLogger(__name__)

LIST = "list"  # metadata.followedBy
# Each listing starts this far before the newest status time the last one saw.
OVERLAP = timedelta(seconds=5)  # the first overlap (AgentListing.overlap's default)
WIDEST = 60.0  # seconds: the widest overlap
# A listing that failed for a transient reason is tried again after this (or Retry-After).
RETRY_SECONDS = 5.0
# Endless listings in a row (a page bringing nothing new) before the agent's tasks go
# back to polling: its listing never gets through. A listing cut by MAX_PAGES or its
# budget is not counted: an honest agent's pages end.
TRUNCATIONS = 3
ENDLESS = "its ListTasks never got to the end of its pages"
# Failed listings in a row (transient errors) from which the agent's tasks are polled
# at once after each one, at the listing's retry cadence.
FAILURES = 3
UNDATED = (
    "its tasks' statuses carry no timestamp, so ListTasks (statusTimestampAfter) cannot "
    "tell what changed"
)
# Changes the listings skipped at the widest overlap (found by the tasks' own polls) before
# the agent's tasks go back to polling.
MISSES = 3
SKIPPED = "its ListTasks left out changes that its GetTask showed"


def enabled() -> bool:
    return settings.A2A_LIST_INTERVAL > 0


def lists(target: CallTarget) -> bool:
    """Whether a polled task at this agent is followed by listing."""
    return enabled() and target.listing and target.version == V1_0


def follows(task: Task, target: CallTarget) -> bool:
    """Whether ``task`` is followed by its agent's listings (so its own polls are spaced)."""
    return (task.metadata or {}).get(agent_push.FOLLOWED_BY) == LIST and lists(target)


def stopped(task: Task) -> bool:
    """Whether the task's agent is no longer followed by listing, as the database says now
    (a call's target was read before it)."""
    return not AgentProfile.objects.filter(pk=task.agent_id, listing=True).exists()


# --- applying (the sweep's thread) ------------------------------------------------------------


def _apply(listing: Listing) -> int:
    """Apply the listed tasks that are the agent's in-flight platform tasks and changed;
    how many changed."""
    from a2a.engine import is_quiet

    listed: dict[str, dict[str, Any]] = {}
    for remote in listing.tasks:
        if not _storable(remote["id"]):
            continue  # names no task of the platform's (it never keeps such an id)
        # A task listed twice (it changed between two pages) keeps its latest view. Not
        # the first one: an agent need not list newest first, and an older view would
        # be applied after the newer one was passed, for good.
        held = listed.get(remote["id"])
        if held is None or (stamp(remote) or EPOCH) > (stamp(held) or EPOCH):
            listed[remote["id"]] = remote
    changed = 0
    ids = list(listed)
    for start in range(0, len(ids), 500):
        rows = Task.objects.filter(
            agent_id=listing.target.agent_id, remote_task_id__in=ids[start : start + 500]
        ).exclude(state__in=TERMINAL_STATES)
        rows = rows.only(
            "state", "attempts", "remote_task_id", "transport", "status_message", "artifacts"
        )
        for task in rows:
            remote = listed[task.remote_task_id]
            when = stamp(remote)
            if when is not None and (listing.own_newest is None or when > listing.own_newest):
                listing.own_newest = when
            if task.transport != Transport.A2A or is_quiet(task, AgentReply(task=remote)):
                continue
            try:
                push = agent_push_body.parse({"task": remote})
                attempt = max(1, int(task.attempts or 0))
                # Its agent and agent task checked again under the row's lock: a person
                # may have reassigned or retried the task since these rows were read.
                agent_push.apply(task.pk, attempt, push, via=LIST, agent_id=listing.target.agent_id)
                changed += 1
            except PlatformError:
                continue  # older than what was applied, or the task ended meanwhile
            except Exception:
                # The rows' agent_id is not loaded (only()): the listing's is the same.
                log.exception(
                    "task %s: internal error applying a listed task",
                    task.pk,
                    extra={"task_id": str(task.pk), "agent_id": listing.target.agent_id},
                )
    return changed


def _storable(remote_id: str) -> bool:
    """Whether the platform could hold ``remote_id`` as a task's agent-side id. One with a
    NUL or a lone surrogate, or too long, cannot even be looked for: PostgreSQL refuses
    it in the query, and the whole listing failed with it, at every listing."""
    return len(remote_id) <= agent_push_body.ID_MAX and find_bad_text(remote_id) is None


def _after(listing: Listing, began: datetime) -> None:
    row, target, error = listing.row, listing.target, listing.error
    now = timezone.now()
    if isinstance(error, A2AUnsupportedOperation | A2AProtocolError):
        _give_up_held(row, error.message)
        return
    if not listing.started:  # the sweep's load spent its budget, not the agent
        row.put_off(now, failed=False)
        return
    if error is not None:
        log.info(
            "agent %s: listing failed, tried again later: %s",
            target.agent_id,
            error,
            extra={"agent_id": target.agent_id},
        )
        wait = max(RETRY_SECONDS, error.retry_after or 0.0)
        agent_pauses.pause_if_asked(target.agent_id, error)  # its polls and sends wait too
        if row.put_off(now + timedelta(seconds=wait)) and row.failures + 1 >= FAILURES:
            # Its tasks' polls are spaced for a listing that does not come: due now, at
            # each failed listing (every RETRY_SECONDS, or the agent's Retry-After).
            Task.poll_agent_soon(target.agent_id)
        return
    if listing.endless and row.truncations + 1 >= TRUNCATIONS:
        _give_up_held(row, f"Agent '{target.agent_id}': {ENDLESS}.")
        return
    since = listing.since
    newests = [listing.newest, listing.own_newest]
    newest = None if listing.endless else max(filter(None, newests), default=None)
    if newest is not None and (since is None or back(newest, row.overlap) > since):
        since = back(newest, row.overlap)
    if listing.cut:
        # Before the cursor moves past what the cut left unread: the polls cover it.
        Task.poll_agent_soon(target.agent_id)
    if in_flight(target.agent_id) or not row.rest(began):
        next_at = next_listing_at(began, now)
        row.listed(since, next_at, endless=listing.endless, cut=listing.cut)


def in_flight(agent_id: str) -> bool:
    """Whether the agent has tasks in flight over A2A (to be sent, or polled)."""
    return Task.objects.filter(
        agent_id=agent_id,
        transport=Transport.A2A,
        next_action__in=(NextAction.SEND, NextAction.POLL),
    ).exists()


def next_listing_at(began: datetime, ended: datetime) -> datetime:
    """When an agent listed in a pass that began at ``began`` is due again.

    ``A2A_LIST_INTERVAL`` after the pass began, less a quarter of a sweep: the sweep that
    comes one interval later must find it due. Counted from the listing's end (its calls
    took some milliseconds) the next sweep, at the same point of its own pass, came a hair
    too early, and the one after listed the agent: a listing every two seconds, not every
    second, and ends noticed a second later. An agent whose listing took most of an
    interval (``ended``) still gets half an interval's rest before the next.
    """
    interval = settings.A2A_LIST_INTERVAL
    slack = min(interval, settings.A2A_SWEEP_INTERVAL) / 4
    return max(began + timedelta(seconds=interval - slack), ended + timedelta(seconds=interval / 2))


def give_up(agent: Any, reason: str) -> None:
    """The agent's tasks cannot be followed by listing: mark it, poll its tasks now."""
    agent_registry.mark_no_listing(agent, reason)
    AgentListing.stop(agent.pk)
    Task.poll_agent_soon(agent.pk)


def _give_up_held(row: AgentListing, reason: str) -> None:
    """:func:`give_up` on what a listing found, only while its sweep still holds the row's
    lease: one whose lease ran out while it paged (another sweep lists the agent now)
    gives no verdict on the agent."""
    if row.stop_held():
        agent_registry.mark_no_listing(row.agent, reason)
        Task.poll_agent_soon(row.pk)


def listing_again(agent_id: str) -> None:
    """The agent's "no listing" mark was cleared (``agent_profiles.health.listing_again``,
    a hook registered at start): its tasks in flight still say ``followedBy`` ``"list"``,
    so their polls are spaced as listed tasks' (the safety net's minutes). A listing starts
    again now if it has any; else the next send starts it."""
    if enabled() and in_flight(agent_id):
        AgentListing.follow(agent_id)


def list_due() -> int:
    """List every agent whose listing is due (the HTTP calls at once), apply what changed;
    how many agents were listed."""
    if not enabled():
        return 0
    from a2a.engine import executor

    began = timezone.now()
    # Read before the claim: each listing's budget is capped from here, so it ends within
    # its row's lease however long it waits for a pool thread (fetch adds its own).
    deadline = listing_fetch.deadline()
    # Not an agent that asked for a pause (Retry-After): listed when it ends.
    paused = AgentPause.paused(began)
    rows = AgentListing.claim_due(began, began + timedelta(seconds=listing_fetch.lease()), paused)
    listings = []
    for row in rows:
        target = agent_registry.target_for(row.agent)
        if not lists(target):  # its card now says 0.3, or it was marked meanwhile
            AgentListing.stop(row.pk)
            Task.poll_agent_soon(row.pk)
            continue
        listings.append(Listing(row, target, deadline))
    # Each as it comes: an agent that answers in milliseconds is not held back by one that
    # takes its whole budget.
    fetching = [executor().submit(fetch, listing) for listing in listings]
    for done in as_completed(fetching):
        listing = done.result()
        try:
            _apply(listing)
            _after(listing, began)
        except Exception:
            log.exception(
                "agent %s: internal error applying a listing",
                listing.target.agent_id,
                extra={"agent_id": listing.target.agent_id},
            )
    return len(listings)


def cover_send(task: Task, target: CallTarget, reply: AgentReply, seconds: float) -> None:
    """The answer to a send of a listed task is recorded. If the agent is no longer
    listed (:func:`stopped`), the task is polled at once. Else, if the agent changed the task
    while that answer was on its way (under load, for longer than ``OVERLAP``), a listing
    may already have passed the change without knowing the task. The cursor goes back to
    before the agent could have taken the send: its ``Date`` (whole seconds) less the
    call's duration. Not for a task the answer ended: no later change is left to list."""
    if task.state in TERMINAL_STATES or not follows(task, target):
        return
    if stopped(task):
        # ``target`` was read before the send. A listing that gave up on the agent while
        # the send was out moved its tasks' polls to now, but not this one's (leased
        # then), which the answer just spaced as a listed task's: a minute's wait. Read
        # after that write, so either the give-up's move or this one finds it.
        Task.poll_agent_soon(task.agent_id)
        return
    if reply.agent_time is not None:
        AgentListing.cover(task.agent_id, reply.agent_time - timedelta(seconds=seconds + 1.0))


def check_poll(task: Task, target: CallTarget, reply: AgentReply) -> None:
    """A task's own poll found a change the listings had not applied. If its status carries
    no time, the listing's filter could never show it: the agent's tasks go back to
    polling. If the listings had already passed its time, the agent showed it late: the
    cursor goes back and the overlap widens; at the widest, ``MISSES`` more (an agent whose
    ``ListTasks`` leaves tasks out) send its tasks back to polling."""
    if not follows(task, target) or reply.state in (None, task.state):
        return  # a new artifact alone does not move the status time: no listing shows it
    when = stamp(reply.task)
    if when is None:
        give_up(task.agent, f"Agent '{target.agent_id}': {UNDATED}.")
        return
    misses = AgentListing.missed(task.agent_id, when, WIDEST)
    if misses is not None and misses >= MISSES:
        give_up(task.agent, f"Agent '{target.agent_id}': {SKIPPED}.")
