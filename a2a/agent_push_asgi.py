"""The webhook agents push to: ``POST /api/a2a/push/{taskId}/{agentId}/{serial}``, a lean
ASGI app.

It needs nothing of Django's request machinery: it reads a bounded body, checks the token
(an HMAC, so a forged request costs no database read), parses the A2A body on the event
loop and applies it on a small pool of database threads (``AGENT_PUSH_THREADS``,
:mod:`platform_site.dbthreads`). Answers are JSON in the platform's error shape:

* ``200`` ``{"state"}`` applied (or a harmless repeat, a finished task's final state
  included, or work stamped before a finished task's end, pushed late); ``202``
  ``{"state", "readBack": true}`` a COMPLETED without artifacts, which the worker reads
  back with ``GetTask``;
* ``400`` ``not_a2a`` / ``malformed_json`` / ``bad_text``; ``401`` a missing or wrong
  token; ``404`` no such task; ``405`` not a POST; ``409`` ``task_finished``,
  ``stale_update`` (older than what was applied, or an old attempt's webhook, one
  retried or reassigned since included, or the webhook of an agent the task was
  reassigned from),
  ``wrong_task`` (another agent task than the one followed), ``too_many_messages`` (a
  message past ``TASK_AGENT_MESSAGES_MAX`` of the task's); ``413`` too large
  (``AGENT_PUSH_MAX_BYTES``); ``503`` ``unavailable`` with ``Retry-After`` (the database
  is down: the push may be sent again). None of them changes anything, but ``413``
  ``artifacts_too_large``: the push would take the task's artifacts past
  ``TASK_ARTIFACTS_MAX_BYTES``, and the task failed.

Every push is counted in ``a2a_agent_pushes_total`` by result; refusals are logged (INFO,
the path and the reason, never the token; at most a line a second per reason).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from django.conf import settings

from a2a import agent_push, agent_push_body, agent_push_tokens
from platform_site import metrics
from platform_site.dbthreads import ConnectionPool
from platform_site.errors import RETRY_AFTER_SECONDS, PlatformError, error_body, outage_error
from platform_site.lean_asgi import SECURITY_HEADERS, ASGIApp, route_to
from platform_site.text import BadText, find_bad_text, loads_bounded

log = logging.getLogger(__name__)

pool = ConnectionPool("agent-push", "AGENT_PUSH_THREADS")
close_pool = pool.close


class _TooLarge(Exception):
    pass


async def _read_body(receive: Any, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionError("client went away")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


async def _answer(
    send: Any, status: int, body: dict[str, Any], extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    payload = json.dumps(body, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))]
    headers += [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
    headers += extra or []
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def _presented_token(scope: dict[str, Any]) -> str:
    token = ""
    for name, value in scope.get("headers") or []:
        if name == b"x-a2a-notification-token":
            return value.decode("latin-1").strip()
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            token = value[7:].decode("latin-1").strip()
    return token


def _error(status: int, code: str, message: str, details: Any = None) -> tuple[int, dict]:
    return status, error_body(code, message, details)


async def _handle(scope: dict[str, Any], receive: Any) -> tuple[int, dict[str, Any]]:
    if scope.get("method") != "POST":
        return _error(405, "method_not_allowed", "Push with POST.")
    try:
        hook = agent_push_tokens.parse_path(scope.get("path", ""))
    except PlatformError as exc:
        return _error(exc.status_code, exc.code, exc.message)
    presented = _presented_token(scope)
    if not presented or not agent_push_tokens.token_matches(hook, presented):
        return _error(
            401,
            "unauthorized",
            "Missing or wrong push token: send the token of this webhook's "
            "taskPushNotificationConfig in X-A2A-Notification-Token or as a Bearer token.",
        )
    if hook.legacy:  # an address given out before an upgrade: the body is not applied
        try:
            applied = await pool.call(agent_push.legacy_push)(hook.task_id)
        except PlatformError as exc:  # a task deleted since (retention): 404
            return exc.status_code, error_body(exc.code, exc.message, exc.details)
        return 202, {"state": applied.state, "readBack": True}
    try:
        raw = await _read_body(receive, settings.AGENT_PUSH_MAX_BYTES)
    except _TooLarge:
        limit = settings.AGENT_PUSH_MAX_BYTES
        return _error(413, "payload_too_large", f"A push is at most {limit} bytes.")
    try:
        body = loads_bounded(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, too deep, NaN, 1e400
        return _error(400, "malformed_json", f"The body is not JSON: {exc}")
    bad: BadText | None = find_bad_text(body, "body")
    if bad is not None:
        return _error(400, "bad_text", str(bad), {"field": bad.where})
    try:
        push = agent_push_body.parse(body)
        applied = await pool.call(agent_push.apply)(
            hook.task_id, hook.attempt, push, agent_id=hook.agent_id
        )
    except PlatformError as exc:
        return exc.status_code, error_body(exc.code, exc.message, exc.details)
    if applied.read_back:
        return 202, {"state": applied.state, "readBack": True}
    return 200, {"state": applied.state}


async def push_webhook(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The ASGI app of the webhook."""
    try:
        status, body = await _handle(scope, receive)
    except ConnectionError:
        return
    except Exception as exc:
        outage = outage_error(exc)
        if outage is None:
            log.exception("push webhook: could not handle %s", scope.get("path"))
            status, body = _error(500, "internal_error", "The platform could not apply the push.")
        else:  # as every /api/ route: the agent's sender may retry; nothing was applied
            log.warning("push to %s not applied: %s", scope.get("path"), exc)
            status, body = (
                outage.status_code,
                error_body(outage.code, outage.message, outage.details),
            )
    _count(scope, status, body)
    retry = [(b"retry-after", b"%d" % RETRY_AFTER_SECONDS)] if status == 503 else []
    await _answer(send, status, body, retry)


# Refusals are logged at most once a second per code: anyone can post forged pushes, and
# a flood of them must not become a flood of log lines (the counter counts them all).
LOG_EVERY = 1.0
_clock = time.monotonic
_logged_at: dict[str, float] = {}
_not_logged: dict[str, int] = {}


def _count(scope: dict[str, Any], status: int, body: dict[str, Any]) -> None:
    """Count the push by result; log a refusal (what an agent's operator asks about: its
    push failed), with the path, never the token. Runs on the event loop's one thread."""
    if status < 400:
        metrics.AGENT_PUSHES.labels("read_back" if body.get("readBack") else "applied").inc()
        return
    error = body.get("error") or {}
    code = str(error.get("code") or status)
    metrics.AGENT_PUSHES.labels(code).inc()
    if status >= 500:
        return  # logged with its traceback already
    now = _clock()
    if now - _logged_at.get(code, float("-inf")) < LOG_EVERY:
        _not_logged[code] = _not_logged.get(code, 0) + 1
        return
    _logged_at[code] = now
    skipped = _not_logged.pop(code, 0)
    also = f" ({skipped} more {code} refusals since the last line)" if skipped else ""
    log.info("push to %s refused: %s %s%s", scope.get("path"), status, error.get("message"), also)


def with_agent_push(app: ASGIApp) -> ASGIApp:
    """``app``, except the push webhook's paths, which :func:`push_webhook` serves."""
    return route_to(
        push_webhook, lambda scope: agent_push_tokens.is_push_path(scope.get("path", "")), app
    )
