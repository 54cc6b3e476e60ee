"""The WebSocket side: the platform's agent gateway (``/ws/agent-gateway/``).

The platform pushes tasks here when it cannot reach the HTTP side (or the agent has
none). Frames carry the same A2A objects as HTTP, and the same skill handler runs them.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import websockets
from a2a.types.a2a_pb2 import TaskState, TaskStatus

from reference_agent import shared_tasks
from reference_agent.messages import answer_of, artifacts_of, input_of, text_message, to_json
from reference_agent.skill import Job, Outcome, handle_task

if TYPE_CHECKING:
    from reference_agent.agent import ReferenceAgent

log = logging.getLogger("reference-agent.gateway")

# Seconds before updates the platform could not store are sent again (its database may
# need a moment).
RESEND_DELAY = 1.0
# Updates kept until confirmed: after them the agent sends nothing more for its task (it
# ended, or waits for a person), so one lost would strand the task.
WAITING_STATES = frozenset(
    {
        "TASK_STATE_COMPLETED",
        "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_REJECTED",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_AUTH_REQUIRED",
    }
)


@dataclass
class GatewayTask:
    """A task that arrived over the WebSocket, by the platform's task id."""

    job: Job
    context_id: str
    last_update: dict[str, Any] | None = None
    running: asyncio.Task[None] | None = None
    message_ids: set[str] = field(default_factory=set)
    # When the HTTP side got the message first: its send (the task it started, once it
    # answered), and that task's id.
    http_send: asyncio.Future[str | None] | None = None
    http_message: str = ""
    remote: str = ""


class Gateway:
    """Keeps a WebSocket to ``/ws/agent-gateway/`` open and serves the frames it carries.

    Frames (DESIGN.md): ``task.assign`` → ``task.ack`` then ``task.update`` frames (a
    known messageId: the last update again; a known task with a new one: a retry, run
    again); ``task.message`` (an answer) → ``task.ack``, the next turn; ``task.cancel`` →
    ``task.ack``, CANCELED; ``ping`` every ``ping_interval``. Updates made while
    disconnected are sent on reconnect. An assignment whose message reached the HTTP side
    first is that side's task (:mod:`reference_agent.shared_tasks`): never run twice.

    The platform answers a stored update with nothing: a ``pong`` tells the frames sent
    before its ``ping`` were applied (docs/gateway.md). Until then a task's last update
    that ends it or asks a question is kept, and sent again after an ``internal_error``
    (the platform could not store a frame) and on the next connection (a close may drop
    frames the platform had not read).
    """

    def __init__(self, agent: ReferenceAgent) -> None:
        self.agent = agent
        self.tasks: dict[str, GatewayTask] = {}
        self.connected = False
        self._ws: Any = None
        self._outbox: list[dict[str, Any]] = []
        # Each task's last update sent and not yet followed by a pong, and what each ping
        # in flight will confirm (pongs come in the order of the pings).
        self._unconfirmed: dict[str, dict[str, Any]] = {}
        self._pings: collections.deque[dict[str, dict[str, Any]]] = collections.deque()
        self._resender: asyncio.Task[None] | None = None

    async def run_forever(self) -> None:
        """Connect, serve, and reconnect with exponential backoff (a refusal such as 4403,
        "not approved yet", also backs off: only a connection that lasted resets it)."""
        delay = 0.5
        loop = asyncio.get_running_loop()
        while True:
            opened = None
            try:
                headers = {"Authorization": f"Bearer {self.agent.api_key}"}
                async with websockets.connect(
                    self.agent.config.gateway_url, additional_headers=headers, open_timeout=10
                ) as ws:
                    opened = loop.time()
                    await self._serve(ws)
            except asyncio.CancelledError:
                raise
            except websockets.ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd else None
                log.warning("gateway closed the connection (%s)", _close_reason(code))
            except (OSError, websockets.InvalidHandshake, TimeoutError) as exc:
                log.warning("gateway unreachable: %s", exc)
            finally:
                self.connected, self._ws = False, None
            if opened is not None and loop.time() - opened > 10:
                delay = 0.5  # it was a good connection: reconnect quickly
            wait = min(delay, self.agent.config.reconnect_max) * random.uniform(0.8, 1.2)
            log.info("reconnecting to the gateway in %.1fs", wait)
            await asyncio.sleep(wait)
            delay *= 2

    async def _serve(self, ws: Any) -> None:
        self._ws, self.connected = ws, True
        log.info("gateway connected: %s", self.agent.config.gateway_url)
        pending, self._outbox = self._outbox, []
        self._pings.clear()  # the old connection's pings get no pong now
        newer = {frame.get("taskId") for frame in pending if frame["type"] == "task.update"}
        unsure = [f for task_id, f in self._unconfirmed.items() if task_id not in newer]
        for frame in unsure + pending:  # maybe not stored; then what happened while away
            await self.send_frame(frame)
        pinger = asyncio.create_task(self._ping(ws))
        try:
            async for raw in ws:
                await self._on_frame(raw)
        finally:
            pinger.cancel()

    async def _ping(self, ws: Any) -> None:
        while True:
            await asyncio.sleep(self.agent.config.ping_interval)
            self._pings.append(dict(self._unconfirmed))
            await ws.send(json.dumps({"type": "ping"}))

    def _confirmed(self) -> None:
        """A pong: the updates sent before its ping were stored."""
        if not self._pings:
            return
        for task_id, frame in self._pings.popleft().items():
            if self._unconfirmed.get(task_id) is frame:
                del self._unconfirmed[task_id]

    async def _send_unconfirmed_again(self) -> None:
        """After an ``internal_error``: the platform could not store a frame (its database
        failed; the error does not say which frame), so the updates it has not confirmed
        go again, a moment later. Duplicates are harmless: a task takes its final state
        again, and the last update of a running one is its state now."""
        await asyncio.sleep(RESEND_DELAY)
        for frame in list(self._unconfirmed.values()):
            await self.send_frame(frame)

    async def send_frame(self, frame: dict[str, Any]) -> None:
        """Send now, or keep it for the next connection."""
        if self._ws is None:
            self._outbox.append(frame)
            return
        try:
            await self._ws.send(json.dumps(frame))
        except websockets.ConnectionClosed:
            self._outbox.append(frame)
            return
        if frame["type"] == "task.update":
            if (frame.get("status") or {}).get("state") in WAITING_STATES:
                self._unconfirmed[frame["taskId"]] = frame
            else:  # a WORKING lost is superseded by the next update; the one before is old
                self._unconfirmed.pop(frame["taskId"], None)

    async def _on_frame(self, raw: str | bytes) -> None:
        try:
            frame = json.loads(raw)
            kind = frame["type"]
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring a frame that is not JSON with a type: %.200r", raw)
            return
        if kind == "task.assign":
            await self._on_assign(frame)
        elif kind == "task.message":
            await self._on_message(frame)
        elif kind == "task.cancel":
            await self._on_cancel(frame)
        elif kind == "error":
            log.warning("gateway error %s: %s", frame.get("code"), frame.get("message"))
            resending = self._resender is not None and not self._resender.done()
            if frame.get("code") == "internal_error" and not resending:
                self._resender = asyncio.create_task(self._send_unconfirmed_again())
        elif kind == "pong":
            self._confirmed()
        else:
            log.debug("ignoring frame type %r", kind)

    async def _on_assign(self, frame: dict[str, Any]) -> None:
        # Ack first: the platform stops re-sending it. Delivery is at least once, so an
        # assignment whose messageId we already have is answered, not re-run; the same
        # task with a new messageId is the platform's retry (or a reassignment back to
        # us): a new attempt, run again.
        await self.send_frame({"type": "task.ack", "deliveryId": frame.get("deliveryId")})
        task = frame.get("task") or {}
        message = frame.get("message") or {}
        task_id = task.get("id") or message.get("taskId")
        if not task_id:
            log.warning("task.assign without a task id: ignored")
            return
        message_id = message.get("messageId", "")
        known = self.tasks.get(task_id)
        if known is not None and (not message_id or message_id in known.message_ids):
            if known.last_update is not None:
                await self.send_frame(known.last_update)
            return
        context_id = task.get("contextId") or message.get("contextId") or str(uuid.uuid4())
        entry = GatewayTask(job=Job(input=input_of(message)), context_id=context_id)
        if known is not None:
            log.info("task %s assigned again (a retry): running it again", task_id)
            if known.running is not None and not known.running.done():
                known.running.cancel()  # the old attempt's updates would now mislead
            entry.message_ids |= known.message_ids  # its messages stay answered
        entry.message_ids.add(message_id)
        self.tasks[task_id] = entry
        skill_id = frame.get("skillId") or (message.get("metadata") or {}).get("skillId")
        if known is None and not message.get("taskId"):
            entry.http_send = shared_tasks.http_send_of(self, message_id)
            entry.http_message = message_id
        if entry.http_send is not None:
            # Not awaited here: the HTTP side may still be running a blocking send of it,
            # and this connection's other frames must not wait for that.
            log.info("task %s: its message reached the HTTP side first; following it", task_id)
            entry.running = asyncio.create_task(self._follow_http(task_id, skill_id))
            return
        await self._start(task_id, skill_id)

    async def _start(self, task_id: str, skill_id: str | None) -> None:
        """Run an assigned task here (or refuse it for another skill)."""
        if skill_id and skill_id != self.agent.skill["id"]:
            text = f"This agent offers {self.agent.skill['id']}, not {skill_id}."
            await self._update(task_id, Outcome(TaskState.TASK_STATE_REJECTED, text))
            return
        log.info("task %s assigned over the WebSocket", task_id)
        self.tasks[task_id].running = asyncio.create_task(self._turn(task_id))

    async def _follow_http(self, task_id: str, skill_id: str | None) -> None:
        """Follow the HTTP side's task of this message; run it here if that side's send
        failed (it holds no task then)."""
        if not await shared_tasks.follow(self, task_id, self.tasks[task_id]):
            await self._start(task_id, skill_id)

    async def _ack(self, frame: dict[str, Any]) -> None:
        """Acknowledge a ``task.message`` or ``task.cancel`` by its deliveryId, whether or
        not we know its task: unacknowledged, it is sent again on every connection (our
        task table is in memory, so after a restart we know none of them)."""
        if frame.get("deliveryId"):
            await self.send_frame({"type": "task.ack", "deliveryId": frame["deliveryId"]})

    async def _on_message(self, frame: dict[str, Any]) -> None:
        await self._ack(frame)
        task_id, message = frame.get("taskId", ""), frame.get("message") or {}
        entry = self.tasks.get(task_id)
        if entry is None:
            log.warning("task.message for unknown task %s: acknowledged, ignored", task_id)
            return
        if message.get("messageId") and message["messageId"] in entry.message_ids:
            return  # the same answer re-sent
        entry.message_ids.add(message.get("messageId", ""))
        if entry.http_send is not None:
            entry.running = asyncio.create_task(self._answer_http(task_id, message))
            return
        entry.job.answers.append(answer_of(message))
        entry.running = asyncio.create_task(self._turn(task_id))

    async def _answer_http(self, task_id: str, message: dict[str, Any]) -> None:
        """An answer for the HTTP side's task; the socket side's turn when it has none."""
        entry = self.tasks[task_id]
        if not await shared_tasks.answer(self, task_id, entry, message):
            entry.job.answers.append(answer_of(message))
            await self._turn(task_id)

    async def _on_cancel(self, frame: dict[str, Any]) -> None:
        await self._ack(frame)
        entry = self.tasks.get(frame.get("taskId", ""))
        if entry is None:  # nothing runs here: the ack is the whole answer
            log.info("task.cancel for unknown task %s: acknowledged", frame.get("taskId"))
            return
        if entry.running is not None and not entry.running.done():
            entry.running.cancel()
        if entry.http_send is not None:  # the HTTP side's task: canceled there, its end told
            entry.running = asyncio.create_task(self._cancel_http(frame["taskId"]))
            return
        await self._update(frame["taskId"], Outcome(TaskState.TASK_STATE_CANCELED, "Canceled."))

    async def _cancel_http(self, task_id: str) -> None:
        """Cancel the HTTP side's task; the socket side's when it has none."""
        if not await shared_tasks.cancel(self, task_id, self.tasks[task_id]):
            await self._update(task_id, Outcome(TaskState.TASK_STATE_CANCELED, "Canceled."))

    async def _turn(self, task_id: str) -> None:
        entry = self.tasks[task_id]
        await self._update(task_id, Outcome(TaskState.TASK_STATE_WORKING, "Working on it."))
        try:
            outcome = await handle_task(self.agent.skill, entry.job)
        except Exception as exc:  # as the SDK does on the HTTP side: the task fails
            log.exception("task %s: the handler raised", task_id)
            outcome = Outcome(TaskState.TASK_STATE_FAILED, f"The agent failed: {exc}")
        await self._update(task_id, outcome)

    async def _update(self, task_id: str, outcome: Outcome) -> None:
        entry = self.tasks[task_id]
        message = text_message(outcome.text, task_id, entry.context_id)
        status = TaskStatus(state=outcome.state, message=message)
        status.timestamp.FromDatetime(datetime.now(UTC))
        frame: dict[str, Any] = {
            "type": "task.update",
            "taskId": task_id,
            "status": to_json(status),
        }
        artifacts = artifacts_of(outcome)
        if artifacts:
            frame["artifacts"] = [to_json(a) for a in artifacts]
        entry.last_update = frame
        await self.send_frame(frame)


def _close_reason(code: int | None) -> str:
    reasons = {4401: "4401: API key refused", 4403: "4403: agent disabled or not approved yet"}
    return reasons.get(code or 0, f"code {code}")
