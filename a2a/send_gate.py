"""Back-pressure on sends: at most ``A2A_AGENT_SENDS_IN_FLIGHT`` sends to one agent at once,
per process.

Without it a burst of new tasks (a batch of thousands) went out to one agent as fast as
the workers' threads allowed; an agent that cannot answer that fast answers after the
HTTP timeout, the platform re-sends the message (same ``messageId``), and an agent that
does not deduplicate gets every task twice or three times, which slows it further
(``bench/long_tasks.py``, distributed, 2,000 pushing tasks). With the gate, a send waits
up to :data:`SLOT_WAIT` seconds for one of the agent's slots, else the task is deferred
(same action, a little later, no attempt counted): the queue stays at the platform, in
rows, where a crash cannot lose it.

Long calls (streams, blocking sends to agents that cannot be polled, sends an agent
holds) take no slot: they last minutes by design, and :mod:`a2a.long_calls` bounds them.
The limit is per process; several workers multiply it. An agent's gate lives while one of
its sends holds or waits for a slot, and goes when the last one leaves (all slots free):
kept for good, one per agent id ever sent to, the gates only grew.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

SLOT_WAIT = 2.0  # seconds a send waits for a slot before its task is deferred
DEFER_SECONDS = 0.5  # and then it is due again after this long


class _Gate:
    """One agent's slots, and how many sends hold or wait for one (``users``, counted
    under :data:`_lock`): with none, every slot is free and the gate can go."""

    __slots__ = ("slots", "users")

    def __init__(self, limit: int) -> None:
        self.slots = threading.BoundedSemaphore(limit)
        self.users = 0


_lock = threading.Lock()
_gates: dict[tuple[str, int], _Gate] = {}


def _enter(key: tuple[str, int]) -> _Gate:
    with _lock:
        gate = _gates.get(key)
        if gate is None:
            gate = _gates[key] = _Gate(key[1])
        gate.users += 1
        return gate


def _leave(key: tuple[str, int], gate: _Gate) -> None:
    with _lock:
        gate.users -= 1
        if gate.users == 0 and _gates.get(key) is gate:
            # Nobody holds a slot nor waits: a new gate, all free, is the same gate.
            del _gates[key]


@contextmanager
def slot(agent_id: str, wait: float | None = None) -> Iterator[bool]:
    """``with slot(agent_id) as got:`` — ``got`` is False when the agent's sends are all
    in flight for ``wait`` seconds (:data:`SLOT_WAIT`); the slot is freed when the block
    ends."""
    wait = SLOT_WAIT if wait is None else wait
    limit = int(settings.A2A_AGENT_SENDS_IN_FLIGHT)
    if limit <= 0:
        yield True
        return
    key = (agent_id, limit)
    gate = _enter(key)
    try:
        if not gate.slots.acquire(timeout=wait):
            yield False
            return
        try:
            yield True
        finally:
            gate.slots.release()
    finally:
        _leave(key, gate)
