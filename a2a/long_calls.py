"""Long calls on threads of their own, a bounded number per agent.

A long call lasts as long as the agent's task: a stream followed to its end (an agent that
cannot be polled), a blocking send (one that can do neither), a send the agent holds
until its task ends (one that does not stream and ignores ``returnImmediately``). Run on
the threads that start tasks (local dispatch, the hint listener, the sweep), a few of them
took all of those threads: with eight tasks streaming for minutes at one agent, no other
task started in the embedded mode until a stream ended.

So wherever tasks are started on this process's threads (:func:`start`, with
:mod:`a2a.local_dispatch`: the embedded platform, a distributed worker), a long call gets
a thread of its own, at most ``A2A_LONG_CALLS`` at once in the process and
``A2A_LONG_CALLS_PER_AGENT`` to one agent: an agent that hangs holds that many threads,
never the ones that start other agents' tasks. A task that finds no room is due again
:data:`WAIT_SECONDS` later (no attempt counted): it waits in its row, where a crash
cannot lose it, and the sweep takes it up again.

The threads are started per call (a long call is rare next to its own length). A process
that stops (a worker's warm shutdown on SIGTERM, the embedded platform's Ctrl-C) takes no
new long call from then on, leaving each due again for another process, and waits for the
running ones up to ``A2A_STOP_WAIT`` seconds. Left to their claims, their tasks were lost
when the agent ended meanwhile: the next worker subscribes to an agent task that is over,
which an agent that cannot be polled refuses, and the answer never came. A call still
running then is left to its claim as before (the threads are daemons): the claim runs out
and a later sweep takes the task up again.

An operator who will not wait cuts the wait short (:func:`cut`): a second Ctrl-C or
SIGTERM on the embedded platform (``runplatform``), a worker's cold shutdown (its second
Ctrl-C, SIGQUIT). Both used to be ignored while the stop waited, up to two minutes for an
agent's stream: the running calls are left to their claims at once, as when the wait runs
out (delayed, never lost nor sent twice).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

from django.conf import settings
from django.db import connections

from a2a.models import Task
from platform_site.metrics import LONG_CALLS, LONG_CALLS_WAITED

log = logging.getLogger(__name__)

WAIT_SECONDS = 1.0  # a task that found no room is due again after this long
CUT_CHECK_SECONDS = 0.2  # how often a stop that waits looks whether it was cut short

_lock = threading.Lock()
_ended = threading.Condition(_lock)  # notified whenever a long call ends
_running: Counter[str] = Counter()  # long calls running in this process, per agent
_started = False
_stopping = False  # no new long call here: they are left due for another process
_cut = False  # the stop waits for no running long call (cut): they are left to their claims
_here = threading.local()


def start() -> None:
    """Take long calls on threads of their own from now on (see the module docstring)."""
    global _started, _stopping, _cut
    _stopping = _cut = False
    _started = True


def stop_taking(how: str = "Warm", **_: object) -> None:
    """Take no new long call from now on: each is left due again for another process
    (:func:`take`). Celery's ``worker_shutting_down``: from the SIGTERM on, before the
    worker's own shutdown, so no long call starts while it runs. Its cold shutdown (a
    second Ctrl-C, SIGQUIT) also cuts the wait for the running ones short (:func:`cut`).
    Only flags are set (this runs in a signal handler)."""
    global _stopping
    _stopping = True
    if how == "Cold":
        cut()


def cut(*_: object) -> None:
    """Wait for no running long call at stop (:func:`stop`, now or when it comes): they
    are left to their claims, as when ``A2A_STOP_WAIT`` runs out. For an operator who will
    not wait (a second Ctrl-C). Only a flag is set, no lock taken: this runs in a signal
    handler, on the very thread that may be waiting under the lock."""
    global _stopping, _cut
    _stopping = _cut = True


def stop(wait: float | None = None) -> int:
    """Take no more long calls, wait for the running ones up to ``wait`` seconds
    (``A2A_STOP_WAIT`` by default: below the worker unit's ``TimeoutStopSec``, 160 s, with
    room for the rest of the shutdown; systemd's SIGKILL would cut the wait short), then
    run long calls where they are asked for again. Returns how many still run: those are
    left to their claims, which outlive this process if it exits, and a later sweep takes
    their tasks up again. A :func:`cut` (before the stop or while it waits) ends the wait
    at once."""
    global _started, _stopping, _cut
    stop_taking()
    try:
        left = _wait_running(settings.A2A_STOP_WAIT if wait is None else wait)
        was_cut = _cut
    finally:
        _started = _stopping = _cut = False
    if left and was_cut:
        log.warning(
            "stop cut short: %d long call(s) left to their claims (their tasks are taken up "
            "again when the claims run out)",
            left,
        )
    elif left:
        log.warning("%d long call(s) still running at stop: left to their claims", left)
    return left


def _wait_running(seconds: float) -> int:
    """Wait until no long call runs here, ``seconds`` passed or the stop is :func:`cut`;
    how many still run. The wait is in slices: a cut only sets a flag (a signal handler
    cannot notify under the lock), looked at every :data:`CUT_CHECK_SECONDS`."""
    deadline = time.monotonic() + seconds
    with _ended:
        count = sum(_running.values())
        if count and seconds > 0 and not _cut:
            log.info("waiting up to %.0f s for %d long call(s) to end", seconds, count)
        while count and not _cut and (left := deadline - time.monotonic()) > 0:
            _ended.wait(min(left, CUT_CHECK_SECONDS))
            count = sum(_running.values())
        return count


def taken_here() -> bool:
    """Whether this process runs long calls on threads of their own (:func:`take`)."""
    return _started


def running() -> dict[str, int]:
    """The long calls running in this process, per agent."""
    with _lock:
        return dict(_running)


def on_own_thread() -> bool:
    """Whether this thread is a long call's own."""
    return bool(getattr(_here, "long", False))


def take(task: Task, run: Callable[[Task], None]) -> bool:
    """Run ``run(task)`` (the claimed task's long call) on a thread of its own.

    True when it is taken care of here: started, or left due again for want of room;
    False when long calls are not taken in this process (the caller runs it itself).
    """
    if not _started or on_own_thread():
        return False
    if _stopping:  # this process is going: another one (or its next start) makes the call
        task.defer(WAIT_SECONDS)
        return True
    agent_id = task.agent_id or ""
    with _lock:
        # Again under the lock: a stop that counted the running calls since the look
        # above (it sets the flag, then counts under this lock) must not see one start
        # after its count, to be cut off when the process exits.
        going = _stopping or not _started
        room = not going and _room(agent_id)
        if room:
            _running[agent_id] += 1
    if going:
        task.defer(WAIT_SECONDS)
        return True
    if not room:
        LONG_CALLS_WAITED.inc()
        task.defer(WAIT_SECONDS)
        return True
    LONG_CALLS.inc()
    try:
        threading.Thread(
            target=_run, args=(task, run, agent_id), name=f"a2a-long-{agent_id}", daemon=True
        ).start()
    except RuntimeError:  # no thread to be had (interpreter exiting): the task stays due
        _done(agent_id)
        task.defer(WAIT_SECONDS)
    return True


def _room(agent_id: str) -> bool:
    """Whether one more long call to the agent fits (under the lock)."""
    return (
        sum(_running.values()) < settings.A2A_LONG_CALLS
        and _running[agent_id] < settings.A2A_LONG_CALLS_PER_AGENT
    )


def crowded(agent_id: str) -> bool:
    """Whether more than half the room for long calls is taken (the agent's, or the
    process's): a call that only waits (a subscribe to a task waiting for authorization,
    :mod:`a2a.agent_streams`) then gives its thread back rather than hold it, leaving the
    room to tasks at work."""
    with _lock:
        return (
            _running[agent_id] * 2 > settings.A2A_LONG_CALLS_PER_AGENT
            or sum(_running.values()) * 2 > settings.A2A_LONG_CALLS
        )


def room_for(agent_id: str) -> bool:
    """Whether a call to the agent could become a long call now (:mod:`a2a.send_watch`)."""
    with _lock:
        return _room(agent_id)


def became_long(agent_id: str) -> None:
    """Count a call that turned out to be a long one where it runs (a send the agent held:
    :mod:`a2a.send_watch`) until :func:`ended`. Counted even past the limits: it runs
    already, and the calls that may turn so are bounded by the threads that start tasks."""
    LONG_CALLS.inc()
    with _lock:
        _running[agent_id] += 1


def ended(agent_id: str) -> None:
    """A long call counted by :func:`became_long` ended."""
    _done(agent_id)


def _run(task: Task, run: Callable[[Task], None], agent_id: str) -> None:
    _here.long = True
    try:
        run(task)
    except Exception:  # run_claimed records failures on the task: this is a bug guard
        log.exception("task %s: long call failed", task.pk)
    finally:
        connections.close_all()  # this thread's own, which ends here
        _done(agent_id)


def _done(agent_id: str) -> None:
    LONG_CALLS.dec()
    with _lock:
        _running[agent_id] -= 1
        if _running[agent_id] <= 0:
            del _running[agent_id]
        _ended.notify_all()
