"""Channels middleware authenticating agents on the gateway route.

Sets ``scope["agent"]`` (the :class:`~agent_profiles.models.AgentProfile`, or None when no
``Authorization`` header was sent: the consumer then waits for an ``auth`` frame) and
``scope["agent_close_code"]`` (4401 bad key, 4403 disabled agent) when a header was sent
but refused. No Origin check: agents are programs, not browsers.
"""

from __future__ import annotations

import logging
from typing import Any

from channels.middleware import BaseMiddleware

from agent_profiles.authentication import bearer_token
from gateway.db import db
from gateway.services import authenticate_key

log = logging.getLogger(__name__)

CLOSE_TRY_AGAIN = 1013  # RFC 6455 "Try Again Later"


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


class AgentAuthMiddleware(BaseMiddleware):
    """Authenticate ``Authorization: Bearer <apiKey>`` on the WebSocket handshake."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        scope = dict(scope, agent=None, agent_close_code=None)
        header = _header(scope, b"authorization")
        if header is not None:
            try:
                agent, close_code = await db(authenticate_key)(bearer_token(header))
            except Exception:
                # A platform fault (database down): "try again later", not a crash.
                log.exception("gateway: header authentication failed on a platform fault")
                agent, close_code = None, CLOSE_TRY_AGAIN
            scope["agent"], scope["agent_close_code"] = agent, close_code
        return await super().__call__(scope, receive, send)
