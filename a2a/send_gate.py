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
The limit is per process; several workers multiply it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

SLOT_WAIT = 2.0  # seconds a send waits for a slot before its task is deferred
DEFER_SECONDS = 0.5  # and then it is due again after this long

_lock = threading.Lock()
_gates: dict[tuple[str, int], threading.BoundedSemaphore] = {}


def _gate(agent_id: str) -> threading.BoundedSemaphore | None:
    limit = int(settings.A2A_AGENT_SENDS_IN_FLIGHT)
    if limit <= 0:
        return None
    with _lock:
        gate = _gates.get((agent_id, limit))
        if gate is None:
            gate = _gates[(agent_id, limit)] = threading.BoundedSemaphore(limit)
        return gate


@contextmanager
def slot(agent_id: str, wait: float | None = None) -> Iterator[bool]:
    """``with slot(agent_id) as got:`` — ``got`` is False when the agent's sends are all
    in flight for ``wait`` seconds (:data:`SLOT_WAIT`); the slot is freed when the block
    ends."""
    wait = SLOT_WAIT if wait is None else wait
    gate = _gate(agent_id)
    if gate is None:
        yield True
        return
    if not gate.acquire(timeout=wait):
        yield False
        return
    try:
        yield True
    finally:
        gate.release()
