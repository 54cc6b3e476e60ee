"""The urllib3 pool's thread (:mod:`agent_profiles.guarded_pool`): it ends the calls still
running at their deadlines, and closes the pooled connections left idle too long.

Every call to an agent has a whole deadline besides its per-read timeouts: an agent that
answers a byte at a time, each within the read timeout, once held a worker's thread as
long as it liked (every sweep thread, at last, on one such agent's polls).

Agents close their keep-alive connections after a few seconds (uvicorn: 5 s). A pooled
end kept after that sat in CLOSE_WAIT, one file descriptor each, until its pool was
evicted: 16 concurrent calls to each of 80 agents left 1,217 of them, past the usual
limit of 1,024 descriptors. A connection idle for :data:`IDLE_SECONDS` is now closed, by
this thread or when a call takes it again.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import queue
import socket
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from urllib3.connection import HTTPConnection
from urllib3.connectionpool import HTTPConnectionPool

# A connection idle this long is closed instead of reused: under the 5 s keep-alive of
# uvicorn (and of most agent servers), so the platform closes it first and never writes
# a request on a connection the agent is closing.
IDLE_SECONDS = 4.0
# The clock of the idle times (tests replace it); the deadlines keep time.monotonic.
_clock = time.monotonic


@dataclass(eq=False)
class _Call:
    """One request under way: when it must have its whole answer, and its connection."""

    deadline: float
    conn: HTTPConnection | None = None
    expired: bool = False


# The call each thread has under way (the connection classes below attach themselves).
_current = threading.local()


class _Reaper:
    """Ends the calls still running at their deadlines by shutting their sockets down: the
    thread blocked in a read gets an end of stream at once, whatever the agent trickles.

    One thread per process, started with the first call; a call that ends first leaves the
    watch, so a socket that went back to the pool is never touched. The same thread
    closes the pooled connections left idle too long (:func:`prune_idle`)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Call]] = []
        self._live: set[_Call] = set()
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        # When idle connections are next looked at (time.monotonic), None if none wait.
        self.prune_at: float | None = None

    def _start(self) -> None:
        """Start the thread if it is not running (the first call, or a fork). Called
        holding the condition."""
        if self._thread is None or not self._thread.is_alive():
            self.prune_at = None  # a parent's schedule, with no thread to keep it
            self._thread = threading.Thread(target=self._run, name="agent-call-reaper")
            self._thread.daemon = True
            self._thread.start()

    def watch(self, call: _Call) -> None:
        with self._cond:
            self._live.add(call)
            heapq.heappush(self._heap, (call.deadline, next(self._order), call))
            self._start()
            if self._heap[0][2] is call:
                self._cond.notify()  # an earlier deadline than the one waited for

    def done(self, call: _Call) -> None:
        with self._cond:
            self._live.discard(call)

    def prune_in(self, seconds: float) -> None:
        """Look at the idle connections in ``seconds`` (or sooner, if so planned)."""
        with self._cond:
            self._start()
            at = time.monotonic() + seconds
            if self.prune_at is None or at < self.prune_at:
                self.prune_at = at
                self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][2] not in self._live:
                    heapq.heappop(self._heap)  # ended before its deadline
                now = time.monotonic()
                prune = self.prune_at is not None and self.prune_at <= now
                if prune:
                    self.prune_at = None
                else:
                    deadline = self._heap[0][0] if self._heap else None
                    times = [at for at in (deadline, self.prune_at) if at is not None]
                    if not times or min(times) > now:
                        self._cond.wait(min(times) - now if times else None)
                        continue
                    _, _, call = heapq.heappop(self._heap)
                    self._live.discard(call)
                    call.expired = True
                    _shut(call.conn)
            if prune:  # outside the condition: calls starting and ending do not wait
                later = prune_idle()
                if later is not None:  # (never more than IDLE_SECONDS on one clock)
                    self.prune_in(min(later, IDLE_SECONDS))


def _shut(conn: HTTPConnection | None) -> None:
    sock = getattr(conn, "sock", None)
    if sock is not None:
        # socket.socket's own shutdown, also for a TLS socket: the reading thread's SSL
        # object stays as it is, and its read ends. (Closed meanwhile: nothing to end.)
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


_reaper = _Reaper()


# Every pool made, for the reaper to look at their idle connections (a pool the manager
# evicted is closed, and goes when it is collected).
_pools: weakref.WeakSet[HTTPConnectionPool] = weakref.WeakSet()
_pools_lock = threading.Lock()


class Expiring:
    """A pool whose connections are stamped when they come back and closed when idle past
    :data:`IDLE_SECONDS`; one that comes back to a full pool is closed quietly (urllib3
    logs a warning for each: a burst is expected, see
    :data:`agent_profiles.guarded_pool.PER_HOST`). Its connections carry ``idle_since``."""

    pool: queue.LifoQueue[Any] | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        with _pools_lock:
            _pools.add(self)  # type: ignore[arg-type]

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)  # type: ignore[misc]
        since, conn.idle_since = getattr(conn, "idle_since", None), None
        if since is not None and _clock() - since >= IDLE_SECONDS:
            conn.close()  # the agent has closed it, or is about to: a new one, then
        return conn

    def _put_conn(self, conn: Any) -> None:
        slots = self.pool
        if conn is None or slots is None:
            super()._put_conn(conn)  # type: ignore[misc]
            return
        conn.idle_since = _clock()
        try:
            slots.put(conn, block=False)
        except queue.Full:
            conn.close()
            return
        if _reaper.prune_at is None:  # else a look is planned, and will see this one
            _reaper.prune_in(IDLE_SECONDS)


def prune_idle() -> float | None:
    """Close the pooled connections idle for :data:`IDLE_SECONDS`; the seconds until the
    next one will be (None: no other is idle). Their slots become empty ones (None, as
    urllib3 fills a new pool), so the pool opens a new connection when it needs one."""
    now = _clock()
    with _pools_lock:
        pools = list(_pools)
    stale: list[HTTPConnection] = []
    later: float | None = None
    for pool in pools:
        slots = pool.pool
        if slots is None:  # closed
            continue
        # The queue's own lock, which its get and put take: a connection is never closed
        # while a call takes it.
        with slots.mutex:
            for i, conn in enumerate(slots.queue):
                since = getattr(conn, "idle_since", None)
                if since is None:
                    continue
                if now - since >= IDLE_SECONDS:
                    slots.queue[i] = None
                    stale.append(conn)
                else:
                    left = since + IDLE_SECONDS - now
                    later = left if later is None else min(later, left)
    for conn in stale:
        conn.close()
    return later
