"""Counts requests to the platform's A2A face by operation and status, as an ASGI wrapper
(the face skips Django's middleware for speed, so a middleware would not see it)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from platform_site import metrics

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_RULES: list[tuple[re.Pattern[str], dict[str, str]]] = [
    (re.compile(r"(^|/)message:send$"), {"*": "SendMessage"}),
    (re.compile(r"(^|/)message:stream$"), {"*": "SendStreamingMessage"}),
    (re.compile(r"(^|/)tasks$"), {"*": "ListTasks"}),
    (re.compile(r"(^|/)tasks/[^/]+:cancel$"), {"*": "CancelTask"}),
    (re.compile(r"(^|/)tasks/[^/]+:subscribe$"), {"*": "SubscribeToTask"}),
    (
        re.compile(r"(^|/)tasks/[^/]+/pushNotificationConfigs$"),
        {"POST": "CreatePushConfig", "*": "ListPushConfigs"},
    ),
    (
        re.compile(r"(^|/)tasks/[^/]+/pushNotificationConfigs/[^/]+$"),
        {"DELETE": "DeletePushConfig", "*": "GetPushConfig"},
    ),
    (re.compile(r"(^|/)tasks/[^/]+$"), {"*": "GetTask"}),
    (re.compile(r"(^|/)extendedAgentCard$"), {"*": "GetExtendedAgentCard"}),
    (re.compile(r"(^|/)jsonrpc$"), {"*": "jsonrpc"}),
]


def operation(path: str, method: str) -> str | None:
    """The A2A operation a face request is, or None when the path is not the face's."""
    if path == "/.well-known/agent-card.json":
        return "AgentCard"
    if not path.startswith("/v1/a2a"):
        return None
    rest = path.removeprefix("/v1/a2a/")  # "[agentId/]operation": rules match the end
    for pattern, by_method in _RULES:
        if pattern.search(rest):
            return by_method.get(method, by_method["*"])
    return "other"


def with_face_metrics(app: ASGIApp) -> ASGIApp:
    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        http = scope["type"] == "http"
        op = operation(scope.get("path", ""), scope.get("method", "")) if http else None
        if op is None:
            await app(scope, receive, send)
            return

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                metrics.FACE_REQUESTS.labels(op, str(message.get("status", 0))).inc()
            await send(message)

        await app(scope, receive, counting_send)

    return wrapped
