"""Task events for streams and blocking sends: one channel-layer group per task.

After the commit of every transition, the face's ``task_changed`` receiver
(:mod:`a2a.face.signals`) reads the task once and sends the
same snapshot, with the task's event sequence number (its count of transitions), to the
group ``a2a-task-<uuid hex>``. Every subscriber therefore gets identical events in
sequence order, whichever daphne process it runs on and whichever worker changed the task.
Subscribers drop anything not newer than what they already sent, and re-read the row when
the group stays quiet (the database is the source of truth: a lost message only delays).

In the embedded mode the in-memory channel layer lives in this process but is not safe to
call from the Celery worker threads, so subscribers there get the snapshots through a
process-local fan-out (:mod:`a2a.face.local_bus`) that wakes each subscriber's event loop
thread-safely.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.db.models import Count

from a2a.face import listeners, queries
from a2a.face.db import db_call
from a2a.face.errors import TaskNotFound
from a2a.face.local_bus import local_bus
from a2a.face.serializers import task_json
from a2a.face.stream_slots import Slot
from a2a.models import Task
from a2a.states import INTERRUPTED_STATES, TERMINAL_STATES
from platform_site.layer_calls import cancel_until_done, within
from platform_site.layer_loop import sender
from platform_site.redis_layer import forget_channel

log = logging.getLogger(__name__)

MESSAGE_TYPE = "a2a.task"
# What a closing subscription sends its own channel: its reader returns on it.
CLOSE_TYPE = "a2a.close"
# How long a closing subscription waits for its reader to see that (one Redis round trip).
CLOSE_WAIT = 2.0
KEEPALIVE = None  # yielded by streams when quiet; the binding writes an SSE comment


def group_name(task_id: uuid.UUID | str) -> str:
    return f"a2a-task-{uuid.UUID(str(task_id)).hex}"


# Seconds between re-reads of a streamed task while the shared channel layer is away.
DEGRADED_RECHECK = 1.0


def recheck_seconds() -> float:
    return float(getattr(settings, "A2A_STREAM_RECHECK", 5.0))


# --- snapshots ------------------------------------------------------------------------


def snapshot(
    task_id: uuid.UUID | str, *, with_history: bool = False, history_length: int | None = None
) -> dict[str, Any] | None:
    """``{"seq", "task"}`` for the task now, read in one query (seq = transitions so far);
    ``with_history``: with its history, the last ``history_length`` messages of it (None:
    all of it; 0: none, and no query for it)."""
    task = Task.objects.annotate(seq=Count("events")).filter(pk=task_id).first()
    if task is None:
        return None
    history = None
    if with_history and history_length != 0:
        history = queries.history(task, history_length)
    payload = task_json(task, history=history, history_length=history_length)
    return {"seq": int(task.seq), "task": payload}  # type: ignore[attr-defined]


def stream_events(task: dict[str, Any]) -> list[dict[str, Any]]:
    """StreamResponse events for one new snapshot: artifacts (when completed), then status."""
    events: list[dict[str, Any]] = []
    status = task["status"]
    if status["state"] in TERMINAL_STATES:
        for artifact in task.get("artifacts") or []:
            event = {"taskId": task["id"], "contextId": task.get("contextId", "")}
            event.update({"artifact": artifact, "lastChunk": True})
            events.append({"artifactUpdate": event})
    update: dict[str, Any] = {"taskId": task["id"]}
    if task.get("contextId"):
        update["contextId"] = task["contextId"]
    update["status"] = status
    events.append({"statusUpdate": update})
    return events


def _is_local(layer: Any) -> bool:
    return layer is None or isinstance(layer, InMemoryChannelLayer)


# --- publishing (called after commit by the task_changed receiver) --------------------


def has_listeners(task_id: uuid.UUID | str, *, watched: bool | None = None) -> bool:
    """False only when no stream can be listening: no local subscriber with the
    in-memory layer; with the shared layer, a task that is not ``watched`` (its
    transition said so: a subscriber marks the row before anything else, see
    :meth:`Subscription.open`) or no marker in Redis (:mod:`.listeners`)."""
    if _is_local(get_channel_layer()):
        return local_bus.has(group_name(task_id))
    return watched is not False and listeners.is_marked(task_id)


def _log_failure(future: Any) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("could not publish a task event: %s", future.exception())


def publish_snapshot(task_id: uuid.UUID | str, snap: dict[str, Any]) -> None:
    """Send a snapshot (from :func:`snapshot`) to the task's group."""
    group = group_name(task_id)
    message = {"type": MESSAGE_TYPE, **snap}
    layer = get_channel_layer()
    if _is_local(layer):
        local_bus.fan_out(group, message)
    else:
        # The process's one sender loop keeps the layer's connection pool and runs a group's
        # sends one after another, so they reach it in the order they were published (a
        # subscriber drops an event older than one it has); the caller does not wait.
        sender.submit(layer.group_send(group, message), key=group).add_done_callback(_log_failure)


# --- subscribing ----------------------------------------------------------------------


class Subscription:
    """Receives the snapshots of one task; ``await next(timeout)`` → message or None.

    ``watched``: the task's row already says so (``Task.watched``); else, with the shared
    layer, opening marks it first."""

    def __init__(self, task_id: uuid.UUID | str, *, watched: bool = False) -> None:
        self.group = group_name(task_id)
        self.layer = get_channel_layer()
        self.local = _is_local(self.layer)
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.loop = asyncio.get_running_loop()
        self.channel: str | None = None
        self._reader: asyncio.Task[None] | None = None
        self.task_id = task_id
        self.watched = watched
        self.marker = listeners.Marker()
        self.degraded = False  # opened without the shared layer: the task is re-read

    async def open(self) -> None:
        if self.local:
            local_bus.add(self.group, self.loop, self.queue)
            return
        if not self.watched:
            # Before the Redis mark and the first snapshot: a transition that wrote the row
            # before this is in that snapshot; one after says watched and reads the mark.
            await db_call(Task.watch)(self.task_id)
        try:
            # Time-limited: a stalled Redis (connections open, no answer) held the join for
            # the layer's 30 s socket timeout, and the caller had no byte meanwhile though
            # its task was made. A join that timed out may land when Redis wakes: the
            # channel, never read, then gets this task's events until the group expires
            # (Redis keeps a bounded few of them; this process drops what it pops).
            self.channel = await within(self.layer.new_channel())
            await within(self.layer.group_add(self.group, self.channel))
        except Exception as exc:
            # The shared layer (Redis) is away or stalled. The caller's task may exist
            # already (a blocking send, a stream's send): refused now, the client would
            # send it again and the agent get the work twice. The row is the truth: it is
            # re-read instead.
            log.warning(
                "task %s: no channel layer (%s); its stream re-reads the task every %s s",
                self.task_id,
                type(exc).__name__,
                DEGRADED_RECHECK,
            )
            if self.channel is not None:  # what a join that lands later brings: dropped
                forget_channel(self.layer, self.channel)
            self.channel = None
            self.degraded = True
            return
        await self._mark()
        # One long-lived reader per subscription: cancelling a pending receive() on the
        # Redis layer can drop a message, cancelling a queue get cannot.
        self._reader = asyncio.create_task(self._read(self.channel))

    async def _read(self, channel: str) -> None:
        """Move the channel's messages to the queue until the close message comes.

        Each receive is a task of its own, cancelled again until it ends: redis-py writes
        through ``asyncio.wait_for``, which on Python 3.11 loses a cancel landing as its
        write completes (CPython gh-86296), and the receive then popped on forever, hanging
        the close of its loop (``asyncio.run``, ``async_to_sync``: a synchronously served
        stream leaves its reader to that close)."""
        while True:
            receive = asyncio.ensure_future(self.layer.receive(channel))
            try:
                await asyncio.wait({receive})
            except asyncio.CancelledError:
                await cancel_until_done(receive)
                raise
            message = receive.result()
            if message.get("type") == CLOSE_TYPE:
                return
            self.queue.put_nowait(message)

    async def _mark(self) -> None:
        """Tell publishers in every process that this task has a listener."""
        await asyncio.to_thread(listeners.mark, self.task_id)
        self.marker.done()

    async def next(self, wait: float) -> dict[str, Any] | None:
        """The next snapshot published within ``wait`` seconds, else None (the caller
        re-reads the task). Without the layer, None after a short wait."""
        if self.degraded:
            await asyncio.sleep(min(wait, DEGRADED_RECHECK))
            return None
        if not self.local and self.marker.due():
            await self._mark()
        try:
            # Not wait_for: on Python 3.11 it loses a cancel landing as its get completes
            # (gh-86296), and a stream whose client had left went on with an event.
            async with asyncio.timeout(wait):
                return await self.queue.get()
        except TimeoutError:
            return None

    async def close(self) -> None:
        if self.local:
            local_bus.remove(self.group, self.loop, self.queue)
            return
        # Each layer call time-limited: a stream that sent its final event stayed open
        # until a stalled Redis answered (suppress() catches failures, not waits).
        answered = True
        if self.channel is not None:
            # Unanswered, the membership expires with the group.
            answered = await _closing_call(self.layer.group_discard(self.group, self.channel))
        if self._reader is not None:
            await self._stop_reader(self._reader, layer_away=not answered)
        if self.channel is not None:  # a publish that read the group before it left
            forget_channel(self.layer, self.channel)

    async def _stop_reader(self, reader: asyncio.Task[None], *, layer_away: bool) -> None:
        """End the reader by a message, not by cancelling it: the reader of any channel of
        this process may be the one popping the process's shared Redis list, and a receive
        cancelled between its pop and its hand-over loses what it popped, which may have
        been another stream's event. Cancelled only if the message does not come back in
        :data:`CLOSE_WAIT`, or cannot be sent in it, or ``layer_away`` (the group leave
        timed out): the layer is away or stalled, it holds nothing to lose then."""
        assert self.channel is not None
        if layer_away:
            reader.cancel()
            return
        # A reader already ended (its loop's close cancelled it) is sent nothing: the
        # message would lie in the process's shared Redis queue for some other reader.
        if not reader.done() and not await _closing_call(
            self.layer.send(self.channel, {"type": CLOSE_TYPE})
        ):
            reader.cancel()
            return
        done, _ = await asyncio.wait({reader}, timeout=CLOSE_WAIT)
        if not done:
            reader.cancel()
        elif not reader.cancelled():
            reader.exception()  # retrieved: a reader the layer failed is no news here

    async def __aenter__(self) -> Subscription:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def _closing_call(call: Awaitable[Any]) -> bool:
    """Run a closing subscription's layer call; False if the layer did not answer it in
    :data:`CLOSE_WAIT` (stalled). A failure counts as answered, as it always did: Redis
    refused it, and the reader's receive fails as fast."""
    try:
        await within(call, CLOSE_WAIT)
    except TimeoutError:
        return False
    except Exception as exc:
        log.debug("a closing subscription's layer call failed: %s", exc)
    return True


def _settled(state: str, seq: int, since_seq: int | None) -> bool:
    if state in TERMINAL_STATES:
        return True
    return state in INTERRUPTED_STATES and (since_seq is None or seq > since_seq)


async def wait_until_settled(
    task_id: uuid.UUID | str, *, since_seq: int | None, seconds: float, watched: bool = False
) -> None:
    """Return once the task is terminal, or interrupted after ``since_seq``, or at timeout.

    Holds no database connection or thread while waiting.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    async with Subscription(task_id, watched=watched) as sub:
        snap = await db_call(snapshot)(task_id)
        while snap is not None:
            if _settled(snap["task"]["status"]["state"], snap["seq"], since_seq):
                return
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            message = await sub.next(min(remaining, recheck_seconds()))
            if message is None:
                snap = await db_call(snapshot)(task_id)
            elif message["seq"] > snap["seq"]:
                snap = message


def _deleted(task_id: uuid.UUID | str) -> TaskNotFound:
    return TaskNotFound(f"Task {task_id} not found.", metadata={"taskId": str(task_id)})


async def task_stream(
    task_id: uuid.UUID | str,
    *,
    watched: bool = False,
    sent: bool = False,
    since_seq: int | None = None,
    slot: Slot | None = None,
    history_length: int | None = None,
) -> AsyncIterator[dict[str, Any] | None]:
    """The StreamResponse events of a task: the current Task first (with the last
    ``history_length`` messages of its history; None: all), then every new status
    (and the artifacts on completion), closing after a final state. Yields
    :data:`KEEPALIVE` while nothing happens.

    ``sent``: the stream answers a message (``SendStreamingMessage``), so it also closes
    once the task is interrupted (INPUT_REQUIRED, AUTH_REQUIRED) after ``since_seq``, as
    the specification's streams do and as clients built on a2a-sdk wait for (the answer
    goes by a new message, which opens a new stream). A subscription stays open to the
    end. A task deleted meanwhile (the admin's delete) raises :class:`TaskNotFound`, an
    ordinary error before the first event and the stream's last, in-band error after it.
    ``slot`` (the caller's, :mod:`a2a.face.stream_slots`) is given back when the stream
    ends, however it ends."""

    def ends(state: str, seq: int) -> bool:
        return state in TERMINAL_STATES or (sent and _settled(state, seq, since_seq))

    try:
        async with Subscription(task_id, watched=watched) as sub:
            snap = await db_call(snapshot)(
                task_id, with_history=True, history_length=history_length
            )
            if snap is None:
                raise _deleted(task_id)
            yield {"task": snap["task"]}
            last = snap["seq"]
            state = snap["task"]["status"]["state"]
            while not ends(state, last):
                message = await sub.next(recheck_seconds())
                if message is None:
                    message = await db_call(snapshot)(task_id)
                    if message is None:
                        # Deleted while streamed (the admin's delete): said in-band, as
                        # any error once the stream started, not a silent end.
                        raise _deleted(task_id)
                    if message["seq"] <= last:
                        yield KEEPALIVE
                        continue
                if message["seq"] <= last:
                    continue
                last = message["seq"]
                state = message["task"]["status"]["state"]
                for event in stream_events(message["task"]):
                    yield event
    finally:
        if slot is not None:
            slot.release()
