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
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from a2a import agent_push, agent_push_body, agent_registry, transports
from a2a.claims import lease_seconds
from a2a.exceptions import A2ACallError, A2AProtocolError, A2AUnsupportedOperation
from a2a.listing_models import AgentListing
from a2a.models import Task
from a2a.states import TERMINAL_STATES, NextAction, Transport
from a2a.transports import AgentReply
from a2a.transports.redaction import describe_failure
from agent_profiles.interfaces import V1_0, CallTarget
from agent_profiles.models import AgentProfile
from platform_site.errors import PlatformError

log = logging.getLogger(__name__)

LIST = "list"  # metadata.followedBy
# Each listing starts this far before the newest status time the last one saw.
OVERLAP = timedelta(seconds=5)  # the first overlap (AgentListing.overlap's default)
WIDEST = 60.0  # seconds: the widest overlap
PAGE_SIZE = 100  # the most ListTasks allows
# Pages read per listing. Past them (a burst of changes, an agent ignoring the filter) the
# cursor stays where it was, so nothing is skipped; what was not read waits for the next
# listings or the safety polls.
MAX_PAGES = 50
# A listing that failed for a transient reason is tried again after this (or Retry-After).
RETRY_SECONDS = 5.0
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
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


# --- the listing (HTTP, on the poll engine's threads) ----------------------------------------


@dataclass
class Listing:
    row: AgentListing
    target: CallTarget
    since: datetime | None = None
    tasks: list[dict[str, Any]] = field(default_factory=list)
    newest: datetime | None = None
    truncated: bool = False
    error: A2ACallError | None = None


def _stamp(task: dict[str, Any]) -> datetime | None:
    return agent_push_body.status_time(task.get("status"))


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _fetch(listing: Listing) -> Listing:
    """Read every page of what changed since the cursor (probing a resting one first)."""
    try:
        transport = transports.transport_for(listing.target)
        since = listing.row.since
        if since is None:
            probe = transport.list_tasks(since=_iso(EPOCH), page_size=1)
            newest = max(filter(None, map(_stamp, probe.tasks)), default=None)
            since = newest - timedelta(seconds=listing.row.overlap) if newest else EPOCH
        listing.since = since
        token = ""
        for _ in range(MAX_PAGES):
            page = transport.list_tasks(since=_iso(since), page_size=PAGE_SIZE, page_token=token)
            listing.tasks += page.tasks
            token = page.next_page_token
            if not token:
                break
        else:
            listing.truncated = True
            log.warning(
                "agent %s: listing stopped after %d pages; its cursor stays",
                listing.target.agent_id,
                MAX_PAGES,
                extra={"agent_id": listing.target.agent_id},
            )
        listing.newest = max(filter(None, map(_stamp, listing.tasks)), default=None)
    except A2ACallError as exc:
        listing.error = exc
    except Exception as exc:  # a bug must not sink the other agents' listings
        log.exception(
            "agent %s: listing failed",
            listing.target.agent_id,
            extra={"agent_id": listing.target.agent_id},
        )
        # Not its repr: an encoding error's quotes the header it failed on (a credential).
        said = describe_failure(exc, listing.target)
        listing.error = A2ACallError(f"internal error while listing: {said}")
    return listing


# --- applying (the sweep's thread) ------------------------------------------------------------


def _apply(listing: Listing) -> int:
    """Apply the listed tasks that are the agent's in-flight platform tasks and changed;
    how many changed."""
    from a2a.engine import is_quiet

    listed: dict[str, dict[str, Any]] = {}
    for remote in listing.tasks:  # newest first: a task listed twice keeps its newest view
        listed.setdefault(remote["id"], remote)
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


def _after(listing: Listing, began: datetime) -> None:
    row, target, error = listing.row, listing.target, listing.error
    now = timezone.now()
    if isinstance(error, A2AUnsupportedOperation | A2AProtocolError):
        give_up(row.agent, error.message)
        return
    if error is not None:
        log.info(
            "agent %s: listing failed, tried again later: %s",
            target.agent_id,
            error,
            extra={"agent_id": target.agent_id},
        )
        wait = max(RETRY_SECONDS, error.retry_after or 0.0)
        row.put_off(now + timedelta(seconds=wait))
        return
    since = listing.since
    newest = None if listing.truncated else listing.newest
    reach = timedelta(seconds=row.overlap)
    if newest is not None and (since is None or newest - reach > since):
        since = newest - reach
    in_flight = Task.objects.filter(
        agent_id=target.agent_id,
        transport=Transport.A2A,
        next_action__in=(NextAction.SEND, NextAction.POLL),
    ).exists()
    if in_flight or not row.rest(began):
        row.listed(since, next_listing_at(began, now))


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


def list_due() -> int:
    """List every agent whose listing is due (the HTTP calls at once), apply what changed;
    how many agents were listed."""
    if not enabled():
        return 0
    from a2a.engine import executor

    began = timezone.now()
    rows = AgentListing.claim_due(began, began + timedelta(seconds=lease_seconds()))
    listings = []
    for row in rows:
        target = agent_registry.target_for(row.agent)
        if not lists(target):  # its card now says 0.3, or it was marked meanwhile
            AgentListing.stop(row.pk)
            Task.poll_agent_soon(row.pk)
            continue
        listings.append(Listing(row, target))
    for listing in executor().map(_fetch, listings):
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
    stamp = _stamp(reply.task)
    if stamp is None:
        give_up(task.agent, f"Agent '{target.agent_id}': {UNDATED}.")
        return
    misses = AgentListing.missed(task.agent_id, stamp, WIDEST)
    if misses is not None and misses >= MISSES:
        give_up(task.agent, f"Agent '{target.agent_id}': {SKIPPED}.")
