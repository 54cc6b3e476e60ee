"""The agent gateway's WebSocket consumer (``/ws/agent-gateway/``): thin.

It authenticates (header via :mod:`gateway.middleware`, or a first ``auth`` frame), parses
frames (:mod:`gateway.frames`) and calls :mod:`gateway.services`; one channel group per
agent carries "deliver now" hints from any process.

Close codes: 4401 bad or missing key (or the key was revoked meanwhile), 4403 disabled
agent, 4408 silent for a whole heartbeat timeout, 4429 too many bad frames, too many
frames a second (:class:`FrameRate`) or too many connections of one agent, 1013 the
platform cannot serve the agent now (try again later): its database or Redis failed (or
Redis did not answer in time: :mod:`platform_site.layer_calls`) while the key was checked
or the session started, or Redis failed under an open connection.
Daphne sends 1013 only with :mod:`gateway.daphne_close` installed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from agent_profiles.models import AgentProfile
from gateway import frames, observe, presence, services, sessions
from gateway.connections import local
from gateway.db import db, db_fresh
from gateway.frames import FrameError
from gateway.limits import BadFrameLimiter, FrameRate, start_gate
from gateway.middleware import CLOSE_TRY_AGAIN
from gateway.sessions import AccessLost, end_session
from platform_site import logs
from platform_site.layer_calls import within
from platform_site.redis_layer import forget_channel
from platform_site.shielded import to_the_end

log = logging.getLogger(__name__)

# Frame errors that are no fault of the frame: not counted toward GATEWAY_BAD_FRAME_LIMIT.
_LATE_ANSWERS = frozenset({"invalid_state"})


CLOSE_FLOOD = 4429


class AgentGatewayConsumer(AsyncWebsocketConsumer):
    """One agent connection: auth, heartbeats, acks, updates and pushed deliveries."""

    agent: AgentProfile | None = None
    _auth_timer: asyncio.TimerHandle | None = None
    _forgotten = False
    _slot: str | None = None  # the agent whose connection count this one is in
    remote_addr = ""
    _layer_failed = False
    _refused = False
    _layer_receive: Callable[[], Awaitable[dict[str, Any]]]

    # AsyncConsumer.__call__ sets ``channel_receive`` to the channel layer's receive for
    # this connection and dispatches what it returns; when Redis is down it raises, which
    # killed the handler and dropped the socket with 1011 (no error frame, and agents
    # could not tell an outage from a bug). The property puts a guard around it.
    @property
    def channel_receive(self) -> Callable[[], Awaitable[dict[str, Any]]]:
        return self._guarded_layer_receive

    @channel_receive.setter
    def channel_receive(self, receive: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        self._layer_receive = receive

    async def _guarded_layer_receive(self) -> dict[str, Any]:
        """The next channel-layer message; once the layer fails, one ``gateway.layer_down``
        (the connection is closed with 1013) and then nothing."""
        if self._layer_failed:
            await asyncio.Event().wait()  # cancelled when the handler ends
        try:
            return await self._layer_receive()
        except Exception:
            self._layer_failed = True
            log.warning("gateway: channel layer receive failed for %s", self.agent, exc_info=True)
            # Only this consumer sees it (channels_redis: one reader per process at a
            # time); the others stay open, and their groups may be gone with Redis: the
            # next heartbeat tick re-joins them all (gateway.connections.MARKER_TTL_TICKS).
            local.layer_failed()
            return {"type": "gateway.layer_down"}

    @property
    def agent_id(self) -> str:
        """The authenticated agent's id (for the heartbeat's presence refresh)."""
        return self.agent.id if self.agent is not None else ""

    async def connect(self) -> None:
        await self.accept()
        loop = asyncio.get_running_loop()
        self.last_frame_at = loop.time()
        self.bad_frames = BadFrameLimiter(
            settings.GATEWAY_BAD_FRAME_LIMIT, settings.GATEWAY_BAD_FRAME_WINDOW
        )
        self.frame_rate = FrameRate(settings.GATEWAY_FRAME_RATE, settings.GATEWAY_FRAME_BURST)
        self.flooded = False
        close_code = self.scope.get("agent_close_code")
        if close_code:
            await self._refuse(close_code)
        elif self.scope.get("agent") is not None:
            await self._start(self.scope["agent"])
        else:
            self._auth_timer = loop.call_later(
                settings.GATEWAY_AUTH_TIMEOUT, lambda: loop.create_task(self._auth_expired())
            )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # However the handler ends (a clean close, or an exception or cancellation that
            # skipped disconnect()), this process stops refreshing its presence: a dead
            # handler must not keep an agent "online" until the heartbeat timeout. To its
            # end: daphne's next cancel of a killed handler cut it off (platform_site.shielded).
            await to_the_end(self._forget())
            # A hint that read the group before this left, popped by another socket's read.
            forget_channel(self.channel_layer, self.channel_name)

    async def disconnect(self, code: int) -> None:
        self._close_code = code  # for the "disconnected" log line
        # To its end as in __call__: cut here, it had said "forgotten" already, and the
        # finally's call returned at once with the presence row still there.
        await to_the_end(self._forget())

    async def _forget(self) -> None:
        """Leave the process's live set, the agent's group and the presence table (once)."""
        if self._auth_timer is not None:
            self._auth_timer.cancel()
        if self._slot is not None:  # also for one that never got past the start gate
            local.release_slot(self._slot)
            self._slot = None
        if self.agent is None or self._forgotten:
            return
        self._forgotten = True
        local.discard(self)
        try:
            # Time-limited (a stalled Redis held the handler's end for its 30 s timeout).
            await within(
                self.channel_layer.group_discard(
                    presence.agent_group(self.agent.id), self.channel_name
                )
            )
        except Exception:  # Redis down or stalled: the membership expires by itself
            log.warning("gateway: group_discard failed for %s", self.agent, exc_info=True)
        try:
            await db(end_session)(self.channel_name)
        except Exception:  # database down: the row goes stale and the sweep drops it
            log.warning("gateway: presence of %s not removed", self.agent, exc_info=True)
        observe.disconnected(self.agent.id, getattr(self, "_close_code", None))

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        now = self.last_frame_at = asyncio.get_running_loop().time()
        if self.flooded:
            return  # closed for flooding: what it sent meanwhile is dropped unread
        if not self.frame_rate.take(now):
            self.flooded = True
            log.warning("gateway: agent %s closed for sending too many frames", self.agent)
            rate = settings.GATEWAY_FRAME_RATE
            await self._send(
                frames.error("too_many_frames", f"More than {rate:g} frames a second.")
            )
            await self.close(code=CLOSE_FLOOD)
            return
        try:
            frame = frames.parse(text_data if text_data is not None else bytes_data)
        except FrameError as exc:
            if self.agent is None:
                await self._refuse(services.CLOSE_BAD_KEY, exc.message)
            else:
                await self._bad_frame(exc)
            return
        if self.agent is None:
            try:
                await self._authenticate(frame)
            except Exception:
                # Database down, say: the agent should come back later, not see a crash.
                log.exception("gateway: authentication failed on a platform fault")
                await self._refuse(CLOSE_TRY_AGAIN)
            return
        try:
            await self._handle(frame)
        except FrameError as exc:
            if exc.code in _LATE_ANSWERS:
                # An answer about a task that ended meanwhile (its deadline, a cancel):
                # the agent is told, but a well-behaved agent finishing many such tasks at
                # once is not closed as a flood of bad frames.
                await self._send(frames.error(exc.code, exc.message))
            else:
                await self._bad_frame(exc)
        except Exception:
            # A platform fault (database down, a bug) must not drop the agent's socket: it
            # hears about it and may resend; nothing was acknowledged on its behalf.
            log.exception("gateway: %s frame from %s failed", frame.type, self.agent)
            await self._send(frames.error("internal_error", "The platform could not apply it."))

    # --- frames ----------------------------------------------------------------------

    async def _handle(self, frame: frames.Frame) -> None:
        assert self.agent is not None
        data = frame.data
        if frame.type == "ping":
            await self._send(frames.PONG)
        elif frame.type == "task.ack":
            await db_fresh(sessions.ack)(self.agent.id, data["deliveryId"])
        elif frame.type == "task.update":
            # Nothing tells the agent its update was stored (only a later pong): one that met
            # a connection a database restart killed runs again on a new one.
            await db_fresh(sessions.apply_update)(
                self.agent.id, data["taskId"], data["status"], data.get("artifacts")
            )
        elif frame.type == "auth":
            raise FrameError("already_authenticated", "This connection is already authenticated.")

    async def _authenticate(self, frame: frames.Frame) -> None:
        if frame.type != "auth":
            await self._refuse(services.CLOSE_BAD_KEY, "authenticate first")
            return
        agent, close_code = await db(services.authenticate_key)(frame.data["apiKey"])
        if close_code or agent is None:
            await self._refuse(close_code or services.CLOSE_BAD_KEY)
            return
        await self._start(agent)

    async def _bad_frame(self, exc: FrameError) -> None:
        await self._send(frames.error(exc.code, exc.message))
        if self.bad_frames.hit(asyncio.get_running_loop().time()):
            log.warning("gateway: agent %s closed for flooding bad frames", self.agent)
            await self._send(frames.error("too_many_bad_frames", "Too many bad frames."))
            await self.close(code=CLOSE_FLOOD)

    # --- sessions --------------------------------------------------------------------

    async def _start(self, agent: AgentProfile) -> None:
        """Join the agent's group, record presence, then send what the agent is owed."""
        if self._auth_timer is not None:
            self._auth_timer.cancel()
        limit = settings.GATEWAY_MAX_CONNECTIONS_PER_AGENT
        if not local.take_slot(agent.id, limit):
            log.warning("gateway: agent %s refused a connection past %d", agent.id, limit)
            observe.refused(CLOSE_FLOOD)
            message = f"Agent {agent.id!r} has {limit} connections to this server already."
            await self._send(frames.error("too_many_connections", message))
            await self.close(code=CLOSE_FLOOD)
            return
        self._slot = agent.id
        async with start_gate():
            try:
                await self._join(agent)
            except AccessLost as exc:  # the key revoked or the agent disabled meanwhile
                await self._refuse(exc.code)
            except Exception:
                # Redis (the group) or the database (presence, outbox) failed: "try again
                # later", as for a key that could not be checked, not a 1011 crash.
                log.exception("gateway: the session of %s failed to start", agent.id)
                await self._refuse(CLOSE_TRY_AGAIN)

    async def _join(self, agent: AgentProfile) -> None:
        self.agent = agent
        logs.bind(agent_id=agent.id)  # every line of this connection names its agent
        self.joined_at = asyncio.get_running_loop().time()
        # Group first, presence second, outbox last: a push committed before the outbox
        # read is found by it, and one committed after finds the connection in the group.
        # Time-limited: with Redis stalled (connections open, no answer) the join waited
        # the layer's 30 s socket timeout, the accepted socket stayed silent (no pong, no
        # 1013) and held a start-gate place, holding up other agents' starts. A timeout is
        # refused "try again" as a refused connection is (:meth:`_start`).
        await within(
            self.channel_layer.group_add(presence.agent_group(agent.id), self.channel_name)
        )
        client = self.scope.get("client") or ("", 0)
        self.remote_addr = str(client[0] or "")
        owed = await db(sessions.start_session)(agent, self.channel_name, self.remote_addr)
        local.add(self)
        observe.connected(agent.id, self.remote_addr)
        for delivery_id in owed:
            await self._deliver(str(delivery_id), resend=True)

    async def rejoin_group(self) -> None:
        """Join the agent's group again (the heartbeat tick's re-joins); raises
        :class:`TimeoutError` when Redis does not answer in time, as it raises when Redis
        refuses: the rest of the tick's re-joins wait for the next tick."""
        if self.agent is not None:
            await within(
                self.channel_layer.group_add(presence.agent_group(self.agent.id), self.channel_name)
            )

    async def resume(self) -> None:
        """Presence was re-registered after the sweep had dropped it (see
        :meth:`gateway.connections.LocalConnections.sweep_once`): look at the outbox, in
        this connection's own handler so its frames stay in order."""
        await within(self.channel_layer.send(self.channel_name, {"type": "gateway.resume"}))

    async def _auth_expired(self) -> None:
        if self.agent is None:
            await self._refuse(services.CLOSE_BAD_KEY, "no auth frame in time")

    async def _refuse(self, code: int, reason: str = "") -> None:
        if self._refused:
            # One error frame and one close: with Redis down both the session start and
            # the channel layer's receive fail, and a frame after the close is not read.
            return
        self._refused = True
        observe.refused(code)
        if code == CLOSE_TRY_AGAIN:
            error = frames.error("unavailable", reason or "The platform is unavailable; retry.")
        else:
            message = "invalid or missing API key" if code == services.CLOSE_BAD_KEY else "disabled"
            error = frames.error("unauthorized", reason or message)
        await self._send(error)
        await self.close(code=code)

    async def _deliver(self, delivery_id: str, *, resend: bool = False) -> None:
        assert self.agent is not None
        payload = await db(sessions.claim)(
            delivery_id, self.agent.id, self.channel_name, resend=resend
        )
        if payload is not None:
            await self._send(payload, delivery_id)

    async def _send(self, frame: dict[str, Any], delivery_id: str = "") -> None:
        text, size = frames.encode(frame)
        if delivery_id and size > frames.MAX_SENT_BYTES:  # daphne would refuse it: fail its task
            assert self.agent is not None
            await db(sessions.undeliverable)(delivery_id, self.agent.id, size)
            return
        try:
            await self.send(text_data=text)
        except Exception:
            # The socket closed, by the platform or by the agent (daphne refuses every
            # send from the agent's close until the disconnect is handled). A frame read
            # before the close and handled after it must not raise: that ended the handler,
            # and the frames queued behind it (the agent's last task.update, its task.ack)
            # were never applied: the task stuck, the acknowledged one sent again. A
            # delivery that could not go out is sent again (the disconnect requeues it).
            log.debug("gateway: no answer after the close to %s", self.agent)

    # --- channel-layer events ------------------------------------------------------------

    async def gateway_deliver(self, event: dict[str, Any]) -> None:
        """A delivery row was committed for this agent: claim it and send it.

        A claim the database failed leaves the row pending, and the sweep hints it again
        (:func:`gateway.offline.renotify_pending`). Raised, it ended the handler: daphne
        closed the socket with 1011 and dropped the frames the agent had sent meanwhile
        (its task.update frames after a PostgreSQL restart: not applied, not answered).
        """
        if self.agent is None:
            return
        frame = event.get("frame")
        try:
            if frame is None:  # a re-hint (sweep, requeue): read the row
                await self._deliver(event["delivery_id"])
                return
            claimed = await db(sessions.claim_pending)(
                event["delivery_id"],
                self.agent.id,
                self.channel_name,
                event.get("task_id", ""),
                bool(event.get("was_offline")),
            )
        except Exception:
            delivery_id = event.get("delivery_id")
            log.warning("gateway: %s not claimed by %s", delivery_id, self.agent, exc_info=True)
            return
        if claimed:
            await self._send(frame, event["delivery_id"])

    async def gateway_resume(self, event: dict[str, Any]) -> None:
        """Send what the agent is owed, as on a fresh connect: while its presence was gone
        it counted as offline, so what was queued meanwhile may have no hint on its way."""
        if self.agent is None:
            return
        try:
            owed = await db(sessions.outbox)(self.agent.id, self.channel_name)
            for delivery_id in owed:
                await self._deliver(str(delivery_id), resend=True)
        except Exception:  # the database failed again: the sweep's renotify hints later
            log.warning("gateway: outbox of %s not resent", self.agent, exc_info=True)

    async def gateway_layer_down(self, event: dict[str, Any]) -> None:
        """The channel layer (Redis) failed: no hint can reach this connection any more."""
        await self._refuse(CLOSE_TRY_AGAIN, "The platform's message bus is unavailable; retry.")

    async def gateway_close(self, event: dict[str, Any]) -> None:
        """The agent was disabled or its key revoked: drop the connection."""
        await self._refuse(int(event.get("code") or services.CLOSE_DISABLED))
