"""Daphne sending the registered WebSocket close codes the gateway uses (1013, and 1001
when the server stops).

The gateway closes a socket with 1013 "Try Again Later" (RFC 6455 section 7.4, IANA's
WebSocket close code registry) when it cannot check the agent's key: its database or
Redis is down, and the agent should reconnect with backoff. Daphne passes the
application's ``websocket.close`` code to autobahn's ``sendClose``, which accepts only
1000 and 3000-4999 from an application: 1013 raised ``invalid close code 1013 (must be
1000 or from [3000, 4999])`` inside the application, and the agent got 1011 "internal
error" (or, in some paths, no close at all until the auth timeout closed it with 4401
"bad key", telling a well-configured agent to stop retrying during a mere outage).

Autobahn's check guards *its own* API users against codes that need the protocol's
context; the close frame itself is written by ``sendCloseFrame``, which sends any code
(daphne calls it directly for its own 1011). This module sends the codes an endpoint
may put on the wire that autobahn refuses (1001-1003, 1007-1014, the same list as the
``websockets`` client library's) through ``sendCloseFrame``, exactly as ``sendClose``
would after its check (no reason, not a reply). 1000 and 3000-4999 still go through
daphne's own path, and so do codes no endpoint may send (1004-1006, 1015): autobahn
still refuses those.

A stopping daphne (SIGTERM to the Procfile's ``daphne``, SIGTERM or Ctrl-C to
``runplatform``) closes its agents' sockets with 1001 "going away" (:func:`stop_gracefully`).
Daphne's own shutdown step, ``Server.kill_all_applications``, read
``details["application_instance"]`` of every connection: one without an application (an
HTTP keep-alive connection between requests, such as a load balancer's health check) raised
``KeyError``, which Twisted logged where daphne sends its log (nowhere) and stopped the loop
at once; and when it did run, it only cancelled the handlers. Either way Twisted then dropped
every TCP connection: agents saw 1006 (abnormal closure) rather than a close frame, and the
consumers' clean-up (:mod:`platform_site.shielded`) was cut off with the loop, so in the
distributed mode the agent's presence row stayed and it counted as online until
``GATEWAY_HEARTBEAT_TIMEOUT``.

Installed when the ASGI application is built (:mod:`gateway.routing`); a process that
does not serve WebSockets (a Celery worker) never imports daphne's protocol for it.
Remove the first patch when daphne or autobahn let an application send these codes, the
second when daphne's shutdown closes its WebSockets.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger(__name__)

# Registered close codes an endpoint may send (1004, 1005, 1006 and 1015 are reserved for
# "no code" and the like and must never appear in a close frame).
SENDABLE_BY_ENDPOINT = frozenset({1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014})

# Sent to every open agent socket when the server stops (RFC 6455 7.4.1: "going away",
# a server going down); agents reconnect with backoff, to another server or this one's
# restart.
GOING_AWAY = 1001
# How long a stop waits for the agents' close replies and their handlers' ends (autobahn
# drops a socket whose agent does not answer its close within 1 s), then for the handlers
# still running, cancelled, and their clean-up: a stop never waits longer than both,
# whatever the agents, the database or Redis do.
STOP_CLOSE_WAIT = 2.0
STOP_CANCEL_WAIT = 2.0

_installed = False


def install() -> None:
    """Let daphne's WebSocket protocol send :data:`SENDABLE_BY_ENDPOINT`, and its server
    stop with :func:`stop_gracefully` (idempotent)."""
    global _installed
    if _installed:
        return
    try:
        from daphne.ws_protocol import WebSocketProtocol
    except ImportError:  # served by another ASGI server: nothing to patch
        return
    daphne_close = WebSocketProtocol.serverClose

    def server_close(protocol: Any, code: int | None = None) -> None:
        """Daphne's ``serverClose``, but a registered code goes out as it was asked for."""
        if code in SENDABLE_BY_ENDPOINT:
            protocol.sendCloseFrame(code=code, isReply=False)
        else:
            daphne_close(protocol, code=code)

    WebSocketProtocol.serverClose = server_close  # type: ignore[method-assign]
    from daphne.server import Server

    Server.kill_all_applications = _kill_all_applications  # type: ignore[method-assign]
    _installed = True


def _kill_all_applications(server: Any) -> Any:
    """Daphne's "before shutdown" step: stop listening, then :func:`stop_gracefully`, whose
    Deferred holds the reactor's shutdown until it ends (it cannot fail: a failure is
    logged, and the shutdown goes on)."""
    from twisted.internet import defer, reactor

    # No new connection meanwhile: an agent told 1001 reconnecting at once to this server
    # would be dropped without a close frame, its presence left behind.
    for reader in list(reactor.getReaders()):  # type: ignore[attr-defined]
        if getattr(reader, "factory", None) is server.http_factory:
            stop_listening = getattr(reader, "stopListening", None)
            if stop_listening is not None:
                stop_listening()
    done = defer.Deferred.fromFuture(asyncio.ensure_future(stop_gracefully(server)))
    done.addErrback(lambda failure: log.error("daphne: graceful stop failed: %s", failure))
    return done


async def stop_gracefully(
    server: Any, close_wait: float = STOP_CLOSE_WAIT, cancel_wait: float = STOP_CANCEL_WAIT
) -> None:
    """Close the daphne ``server``'s open WebSockets with :data:`GOING_AWAY` and wait up to
    ``close_wait`` s for their handlers to end; then cancel every handler still running
    (as daphne does) and wait up to ``cancel_wait`` s for them and the clean-ups they left
    (:mod:`platform_site.shielded`)."""
    from daphne.ws_protocol import WebSocketProtocol

    from platform_site import shielded

    sockets = []
    for protocol, details in list(server.connections.items()):
        app = details.get("application_instance")  # none between keep-alive requests
        if (
            isinstance(protocol, WebSocketProtocol)
            and protocol.state == protocol.STATE_OPEN
            and not details.get("disconnected")
        ):
            protocol.sendCloseFrame(code=GOING_AWAY, isReply=False)
            if app is not None and not app.done():
                sockets.append(app)
    if sockets:
        # Each agent's close reply (or autobahn's 1 s timeout) ends the connection, and
        # its handler's websocket.disconnect removes the agent's presence.
        await asyncio.wait(sockets, timeout=close_wait)
    running = []
    for details in list(server.connections.values()):
        app = details.get("application_instance")
        if app is not None and not app.done():
            app.cancel()
            running.append(app)
    log.info(
        "daphne stopping: closed %d agent socket(s) with %d, cancelled %d handler(s)",
        len(sockets),
        GOING_AWAY,
        len(running),
    )
    # A cancelled gateway handler's own end awaits its clean-up (presence removal);
    # _RUNNING holds those whose handler an earlier cancel already ended.
    loop = asyncio.get_running_loop()
    pending = [f for f in [*running, *shielded._RUNNING] if not f.done() and f.get_loop() is loop]
    if pending:
        _, left = await asyncio.wait(pending, timeout=cancel_wait)
        if left:
            log.warning("daphne stopping: %d handler(s) or clean-up(s) cut short", len(left))
