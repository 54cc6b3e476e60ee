"""Daphne sending the registered WebSocket close codes the gateway uses (1013).

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

Installed when the ASGI application is built (:mod:`gateway.routing`); a process that
does not serve WebSockets (a Celery worker) never imports daphne's protocol for it.
Remove it when daphne or autobahn let an application send these codes.
"""

from __future__ import annotations

from typing import Any

# Registered close codes an endpoint may send (1004, 1005, 1006 and 1015 are reserved for
# "no code" and the like and must never appear in a close frame).
SENDABLE_BY_ENDPOINT = frozenset({1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014})

_installed = False


def install() -> None:
    """Let daphne's WebSocket protocol send :data:`SENDABLE_BY_ENDPOINT` (idempotent)."""
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
    _installed = True
