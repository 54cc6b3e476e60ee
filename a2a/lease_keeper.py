"""The claims of long calls, renewed in short steps while the call runs.

A long call (a stream followed, a blocking send, a send the agent holds) lasts as long
as the agent's task, up to ``A2A_LONG_CALL_MAX`` or the task's deadline. Its claim used to
be taken up front for that whole time: a worker killed during the call held the task up
to its deadline, where the sweep failed it ``timeout`` although the agent went on (and
may have finished). Now the claim is ``A2A_LONG_CALL_LEASE`` seconds (:func:`lease`),
renewed every third of that by one thread per process while the call runs: a killed
worker's claim runs out within that time, and another worker takes the task up again
(a subscribe to the agent's task, or the same message sent again), long before the
deadline.

A renewal is a compare-and-set on the lease this process wrote last: a claim the task
lost meanwhile (a transition, a schedule, another worker's claim after renewals failed
while the database was away) is never taken back. A claim of this same process taken
after renewals failed, nothing else having changed, goes back to the call that still runs
(:func:`adopt`); another process's, through Redis (:mod:`a2a.lease_marks`). The thread
runs only while there are calls to keep, and closes its database connection when it
stops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connections
from django.utils import timezone

from a2a import lease_marks
from a2a.claims import lease_seconds
from a2a.models import Task
from platform_site.dbthreads import drop_dead_connections

log = logging.getLogger(__name__)

STEPS = 3  # renewals per lease: two may come late before the claim runs out
TICK = 0.5  # seconds between the thread's looks at the claims it keeps

_lock = threading.Lock()
_kept: dict[Any, _Kept] = {}  # the calls whose claims are kept, by task id
_thread: threading.Thread | None = None
_marked_at = 0.0  # time.monotonic() of the last marks in Redis (a2a.lease_marks)


@dataclass(eq=False)
class _Kept:
    """One kept claim: its task (the object the call works with) and the lock a renewal
    holds, which :func:`let_go` waits for."""

    task: Task
    lock: threading.Lock = field(default_factory=threading.Lock)
    failing: bool = False  # its last renewal could not reach the database
    lost: bool = False  # its claim lapsed and another's replaced it (a hand-back may come)


def lease() -> float:
    """A long call's claim, renewed while the call runs (never shorter than one call)."""
    return max(settings.A2A_LONG_CALL_LEASE, lease_seconds())


def keep(task: Task) -> None:
    """Claim the task for a long call from now on, renewed until :func:`let_go`."""
    global _thread
    # What the call writes and what a renewal takes on go one at a time on this object
    # (Task.lease_guard): it never shows a claim its row no longer has.
    task.__dict__.setdefault("_lease_guard", threading.RLock())
    task.extend_lease(lease())
    with _lock:
        _kept[task.pk] = _Kept(task)
        if _thread is None or not _thread.is_alive():  # none yet, or not in this fork
            _thread = threading.Thread(target=_run, name="a2a-lease-keeper", daemon=True)
            _thread.start()
    lease_marks.mark(task, lease())  # for the other processes (distributed mode)


def let_go(task: Task) -> None:
    """The long call ended: its claim is no longer renewed (what the call wrote last, a
    schedule or a release, stands). Returns once no renewal of it is under way: none
    comes after, which could take back a claim the call wrote since (a retry's)."""
    with _lock:
        entry = _kept.get(task.pk)
        if entry is None or entry.task is not task:
            return
        del _kept[task.pk]
    with entry.lock:
        lease_marks.unmark(task.pk)


@contextmanager
def kept(task: Task) -> Iterator[None]:
    """The task's claim kept while the block runs (:func:`keep`, :func:`let_go`)."""
    keep(task)
    try:
        yield
    finally:
        let_go(task)
        drop_dead_connections()  # the call may have outlived a database restart


def unchanged(task: Task, call: Task) -> bool:
    """Whether the row ``task`` was read from holds what the long call's object last wrote
    (``updated_at``, which every write but a claim's and a renewal's moves, and the action
    due): only the claim changed since. A person's cancel, or the call's own schedule, is
    a change, and is acted on."""
    return task.updated_at == call.updated_at and task.next_action == call.next_action


def adopt(task: Task) -> bool:
    """Whether ``task``, just claimed, is a long call this process still runs whose claim
    lapsed while renewals failed (the database was away), and nothing else changed since
    (:func:`unchanged`). Then the claim is handed to the running call (its next renewal
    goes from it) and nothing else is done: acting on it too would send the held message
    again (the agent runs it twice) or subscribe a second time."""
    with _lock:
        entry = _kept.get(task.pk)
    if entry is None or entry.task is task:
        return False
    with entry.lock:
        with _lock:
            if _kept.get(task.pk) is not entry:
                return False  # it ended meanwhile: the claim is this caller's
        if not (entry.failing or entry.lost) or not unchanged(task, entry.task):
            return False  # its claim did not lapse for want of renewals, or news came
        with entry.task.lease_guard():
            entry.task.lease_until = task.lease_until
        entry.lost = False
    log.info("task %s: claimed while its long call runs here; the call keeps it", task.pk)
    return True


def kept_ids() -> list[Any]:
    """The tasks whose claims this process keeps now."""
    with _lock:
        return list(_kept)


def _run() -> None:
    global _thread
    try:
        while True:
            time.sleep(TICK)
            with _lock:
                if not _kept:
                    _thread = None
                    return
            renew_due()
    finally:
        connections.close_all()  # this thread's own, which ends here


def renew_due(*, every: bool = False) -> None:
    """Renew the claims kept here that have run a third of their time (``every``: all of
    them; tests). Each claim goes by its own time, whenever its call began."""
    global _marked_at
    now = timezone.now()
    keep_for = lease()
    with _lock:
        entries = list(_kept.values())
    for entry in entries:
        held = entry.task.lease_until
        left = (held - now).total_seconds() if held is not None else 0.0
        # A lost claim is another's until it comes back (adopt, a hand-back): no renewal.
        if not entry.lost and (every or left <= keep_for * (1 - 1 / STEPS)):
            _renew(entry, keep_for)
    if every or time.monotonic() - _marked_at >= keep_for / STEPS:
        _marked_at = time.monotonic()
        for entry in entries:
            _mark(entry, keep_for)
    lost = [entry for entry in entries if entry.lost]
    handed = lease_marks.handbacks([entry.task.pk for entry in lost])
    for entry in lost:
        if entry.task.pk in handed:
            _take_back(entry, handed[entry.task.pk])


def _mark(entry: _Kept, keep_for: float) -> None:
    """Mark the call alive in Redis (:mod:`a2a.lease_marks`) under its lock, only while it
    is kept: :func:`let_go` removes the mark under the same lock, and no mark written
    after it outlives the call."""
    with entry.lock:
        with _lock:
            if _kept.get(entry.task.pk) is not entry:
                return
        lease_marks.mark(entry.task, keep_for)


def _take_back(entry: _Kept, lease_until: Any) -> None:
    """Another process's sweep claimed this call's task after its claim lapsed, and left
    the claim to it (:func:`a2a.lease_marks.held_elsewhere`): the next renewal goes from
    it."""
    task = entry.task
    with entry.lock:
        with _lock:
            if _kept.get(task.pk) is not entry:
                return
        with task.lease_guard():
            task.lease_until = lease_until
        entry.lost = False
    log.info("task %s: its long call's claim came back from another process", task.pk)


def _renew(entry: _Kept, keep_for: float) -> None:
    task = entry.task
    with entry.lock:
        with _lock:
            if _kept.get(task.pk) is not entry:
                return  # let go meanwhile
        held = task.lease_until
        was_failing = entry.failing
        try:
            renewed = held is not None and task.renew_lease(held, keep_for)
        except Exception:  # the database is away: the next tick tries again
            if not entry.failing:  # once per outage, not every tick
                log.warning("could not renew the claim of task %s", task.pk, exc_info=True)
            entry.failing = True
            drop_dead_connections()  # a new one for the next try, if this one broke
            return
        if entry.failing:
            entry.failing = False
            log.info("task %s: its claim is renewed again", task.pk)
        # Not renewed right after renewals failed (the database was away), the object
        # still showing the lease tried: the claim lapsed and another replaced it. Kept,
        # "lost": a claim of this process, or another's that finds the call marked in
        # Redis, gives it back (adopt, a hand-back). Any other miss is the claim moving
        # on (the call's own write, a person's cancel, another worker's claim): done, and
        # never taken back.
        entry.lost = not renewed and held is not None and task.lease_until == held and was_failing
        done = not renewed and not entry.lost
    if done:
        with _lock:
            if _kept.get(task.pk) is entry:
                del _kept[task.pk]
