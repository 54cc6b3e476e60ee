"""A2AClientService: the platform's calls to agents (A2A 1.0, HTTP+JSON binding).

Named ``agent_client`` rather than ``client`` because ``a2a.client`` is the official
SDK's client package (see ``a2a/__init__.py``).

One pooled :class:`httpx.Client` per process (connection reuse, explicit timeouts). Every
call sends ``A2A-Version: 1.0``. Answers are checked for shape, not trusted: unknown
fields are ignored, 0.3-style spellings are accepted, and anything that is not A2A raises
:class:`~a2a.exceptions.A2AProtocolError` instead of leaking a parser exception.
"""

from __future__ import annotations

import email.utils
import json
import os
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
from django.conf import settings

from a2a.exceptions import A2APermanentError, A2AProtocolError, A2ATransientError
from a2a.states import normalize_state

A2A_VERSION = "1.0"
# Cap on what we keep of a non-A2A body in an error message.
EXCERPT = 200
# A Retry-After longer than this is treated as this (an agent must not park a task forever).
MAX_RETRY_AFTER = 300.0

_client_lock = threading.Lock()
_client: tuple[int, httpx.Client] | None = None


def shared_http_client() -> httpx.Client:
    """The process-wide pooled client (re-created after a fork)."""
    global _client
    with _client_lock:
        if _client is None or _client[0] != os.getpid():
            timeout = httpx.Timeout(settings.A2A_HTTP_TIMEOUT, connect=settings.A2A_CONNECT_TIMEOUT)
            limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
            client = httpx.Client(timeout=timeout, limits=limits, follow_redirects=False)
            _client = (os.getpid(), client)
        return _client[1]


@dataclass
class AgentReply:
    """What an agent answered: a Task (``task``) or a bare Message (``message``)."""

    task: dict[str, Any] | None = None
    message: dict[str, Any] | None = None
    retry_after: float | None = None

    @property
    def state(self) -> str | None:
        if self.task is None:
            return None
        return normalize_state((self.task.get("status") or {}).get("state"))


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, min(seconds, MAX_RETRY_AFTER))


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text[:EXCERPT] + ("…" if len(text) > EXCERPT else "")


def _agent_error_message(response: httpx.Response) -> str:
    """The agent's own error message, if its body is the A2A (or any JSON) error shape."""
    try:
        body = response.json()
    except ValueError:
        return _excerpt(response.text)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(error, str):
            return error
    return _excerpt(response.text)


def _is_task(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("id"), str)
        and bool(obj["id"])
        and isinstance(obj.get("status"), dict)
    )


def _is_message(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("parts"), list)


def check_task(task: dict[str, Any], what: str) -> dict[str, Any]:
    """Raise :class:`A2AProtocolError` unless ``task`` has an id and a known state."""
    if not _is_task(task):
        raise A2AProtocolError(f"The agent's {what} is not an A2A Task (no id or status).")
    raw = task["status"].get("state")
    if normalize_state(raw) is None:
        raise A2AProtocolError(f"The agent's {what} has an unknown task state {raw!r}.")
    for key in ("artifacts", "history"):
        if key in task and not isinstance(task[key], list):
            raise A2AProtocolError(f"The agent's {what} has a {key} that is not a list.")
    return task


class A2AClientService:
    """Sends messages to agents and follows their tasks over HTTP+JSON."""

    def __init__(self, client: httpx.Client | None = None) -> None:
        self.client = client or shared_http_client()

    # --- operations -----------------------------------------------------------------

    def send_message(
        self, endpoint: str, message: dict[str, Any], *, return_immediately: bool = True
    ) -> AgentReply:
        """``POST {endpoint}/message:send``; returns the agent's Task or bare Message."""
        body = {"message": message, "configuration": {"returnImmediately": return_immediately}}
        response = self._call("POST", self._url(endpoint, "/message:send"), body)
        data = self._json(response, "answer to message:send")
        reply = AgentReply(retry_after=parse_retry_after(response.headers.get("Retry-After")))
        if isinstance(data, dict) and "task" in data and _is_task(data["task"]):
            reply.task = check_task(data["task"], "answer to message:send")
        elif isinstance(data, dict) and "message" in data and _is_message(data["message"]):
            reply.message = data["message"]
        elif _is_task(data):  # some agents answer the Task without the wrapper
            reply.task = check_task(data, "answer to message:send")
        elif isinstance(data, dict) and _is_message(data) and "messageId" in data:
            reply.message = data
        else:
            raise A2AProtocolError(
                "The agent's answer to message:send is neither a Task nor a Message.",
                {"body": _excerpt(response.text)},
            )
        return reply

    def get_task(self, endpoint: str, task_id: str) -> AgentReply:
        """``GET {endpoint}/tasks/{id}``; returns the agent's Task."""
        response = self._call("GET", self._url(endpoint, f"/tasks/{quote(task_id, safe='')}"))
        return self._task_reply(response, "answer to tasks/get")

    def cancel_task(self, endpoint: str, task_id: str) -> AgentReply:
        """``POST {endpoint}/tasks/{id}:cancel``; returns the agent's Task."""
        path = f"/tasks/{quote(task_id, safe='')}:cancel"
        response = self._call("POST", self._url(endpoint, path), {})
        return self._task_reply(response, "answer to tasks/cancel")

    # --- plumbing -------------------------------------------------------------------

    @staticmethod
    def _url(endpoint: str, path: str) -> str:
        if not endpoint:
            raise A2APermanentError("The agent has no A2A endpoint.", code="no_endpoint")
        return endpoint.rstrip("/") + path

    def _call(self, method: str, url: str, body: dict[str, Any] | None = None) -> httpx.Response:
        headers = {"A2A-Version": A2A_VERSION, "Accept": "application/json"}
        # Per request, so a settings change applies to the shared client at once.
        timeout = httpx.Timeout(settings.A2A_HTTP_TIMEOUT, connect=settings.A2A_CONNECT_TIMEOUT)
        content = None
        if body is not None:
            content = json.dumps(body, separators=(",", ":"))
            headers["Content-Type"] = "application/json"
        try:
            response = self.client.request(
                method, url, headers=headers, content=content, timeout=timeout
            )
        except httpx.TimeoutException as exc:
            raise A2ATransientError(
                f"The agent did not answer {method} {url} in time ({type(exc).__name__}).",
                code="agent_timeout",
            ) from None
        except httpx.TransportError as exc:
            raise A2ATransientError(
                f"Could not reach the agent at {url}: {exc or type(exc).__name__}.",
                code="agent_unreachable",
            ) from None
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        status = response.status_code
        if status == 429 or status >= 500:
            raise A2ATransientError(
                f"The agent answered HTTP {status} to {method} {url}: "
                f"{_agent_error_message(response)}",
                code="agent_busy" if status == 429 else "agent_http_error",
                status=status,
                retry_after=retry_after,
            )
        if status >= 400:
            code = (
                "remote_task_not_found" if status == 404 and "/tasks/" in url else "agent_refused"
            )
            raise A2APermanentError(
                f"The agent refused {method} {url} with HTTP {status}: "
                f"{_agent_error_message(response)}",
                code=code,
                status=status,
            )
        if status >= 300:
            raise A2AProtocolError(
                f"The agent answered HTTP {status} (a redirect) to {method} {url}.",
                status=status,
            )
        return response

    @staticmethod
    def _json(response: httpx.Response, what: str) -> Any:
        ctype = response.headers.get("Content-Type", "")
        try:
            return response.json()
        except (ValueError, UnicodeDecodeError):
            raise A2AProtocolError(
                f"The agent's {what} is not JSON (Content-Type {ctype or 'missing'}).",
                {"body": _excerpt(response.text)},
            ) from None

    def _task_reply(self, response: httpx.Response, what: str) -> AgentReply:
        data = self._json(response, what)
        if (
            isinstance(data, dict)
            and "task" in data
            and not _is_task(data)
            and _is_task(data["task"])
        ):
            data = data["task"]  # tolerate the send-style wrapper
        if not _is_task(data):
            raise A2AProtocolError(
                f"The agent's {what} is not an A2A Task.", {"body": _excerpt(response.text)}
            )
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        return AgentReply(task=check_task(data, what), retry_after=retry_after)
