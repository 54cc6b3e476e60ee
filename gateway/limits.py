"""What one gateway connection may send: bad frames in a window, frames a second (kept by
each :class:`gateway.consumers.AgentGatewayConsumer`; past either limit the connection is
closed with 4429); and how many connections of a process start their session at once.
"""

from __future__ import annotations

import asyncio
import collections

# Session starts (group join, presence row, outbox) in flight per process: a reconnect
# storm of thousands of agents queues here instead of exhausting DB and Redis pools.
START_CONCURRENCY = 64
_start_gates: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}


def start_gate() -> asyncio.Semaphore:
    """The process's gate of session starts (one per event loop: tests run several)."""
    loop = asyncio.get_running_loop()
    gate = _start_gates.get(loop)
    if gate is None:
        _start_gates.clear()  # one loop per process outside tests
        gate = _start_gates[loop] = asyncio.Semaphore(START_CONCURRENCY)
    return gate


class BadFrameLimiter:
    """Counts bad frames in a sliding window; too many and the connection is closed."""

    def __init__(self, limit: int, window: float) -> None:
        self.limit, self.window = limit, window
        self.times: collections.deque[float] = collections.deque()

    def hit(self, now: float) -> bool:
        """Record one bad frame; True when the limit is exceeded."""
        self.times.append(now)
        while self.times and self.times[0] < now - self.window:
            self.times.popleft()
        return len(self.times) > self.limit


class FrameRate:
    """Frames a connection may send: ``rate`` a second on average, ``burst`` at once (a
    token bucket). Valid frames count too: one agent sending pings as fast as it could
    (a million in 25 s) filled the server's queue for its connection faster than it was
    read, took 300 MB that stayed, and stalled every other client for seconds."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = burst
        self.at: float | None = None

    def take(self, now: float) -> bool:
        """One frame at ``now``; False when the connection is over its rate."""
        if self.at is not None:
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True
