"""The HTTP+JSON binding, A2A 1.0 and 0.3.

1.0: ``POST {url}/message:send``, ``GET {url}/tasks/{id}``, ``POST {url}/tasks/{id}:cancel``,
``POST {url}/message:stream``, ``GET {url}/tasks/{id}:subscribe`` (SSE) and ``GET {url}/tasks``
(a listing); a tenant is a
``/{tenant}`` path prefix. 0.3: the same under ``{url}/v1``, in the 0.3 proto's JSON
(``content`` parts, ``configuration.blocking``).
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator
from typing import Any
from urllib.parse import quote, urlencode

import httpx

from a2a.exceptions import A2ACallError, A2APermanentError
from a2a.transports import answers, credentials, http, shapes, stream_view
from a2a.transports.base import (
    AgentReply,
    AgentTransport,
    TaskPage,
    agent_time,
    list_params,
    parse_retry_after,
    send_params,
)
from agent_profiles.guarded_pool import PlainResponse
from agent_profiles.interfaces import HTTP_JSON, V0_3
from platform_site.text import loads_bounded


class RestTransport(AgentTransport):
    """HTTP+JSON, 1.0 or 0.3 (``target.version``)."""

    binding = HTTP_JSON

    @property
    def v03(self) -> bool:
        return self.target.version == V0_3

    def _base(self) -> str:
        if not self.target.url:
            raise A2APermanentError(
                f"Agent '{self.target.agent_id}' has no A2A endpoint.", code="no_endpoint"
            )
        base = self.target.url.rstrip("/")
        if self.v03:
            return base + "/v1"
        if self.target.tenant:
            base += "/" + quote(self.target.tenant, safe="")
        return base

    def _task_path(self, task_id: str, suffix: str = "") -> str:
        return f"{self._base()}/tasks/{quote(task_id, safe='')}{suffix}"

    def _send_body(
        self, message: dict[str, Any], blocking: bool, push: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        return send_params(
            message,
            blocking=blocking,
            v03=self.v03,
            rest=True,
            push=push,
            output_modes=self.output_modes,
        )

    def send(
        self,
        message: dict[str, Any],
        *,
        blocking: bool = False,
        timeout: float | None = None,
        push: dict[str, Any] | None = None,
    ) -> AgentReply:
        url = self._base() + "/message:send"
        body = self._send_body(message, blocking, push)
        response = http.call(self.target, "POST", url, body, operation="send", timeout=timeout)
        data = answers.read_json(response, "answer to message:send")
        task, reply_message = shapes.read_send_answer(
            data, v03=self.v03, rest=True, what="answer to message:send"
        )
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        return AgentReply(
            task=task,
            message=reply_message,
            retry_after=retry_after,
            agent_time=agent_time(response.headers.get("Date")),
        )

    def get_task(self, task_id: str, *, history: int = 0) -> AgentReply:
        url = self._task_path(task_id) + f"?historyLength={history}"
        return self._task_call("GET", url, None, "get_task", "tasks/get")

    def list_tasks(self, *, since: str, page_size: int, page_token: str = "") -> TaskPage:
        if self.v03:
            return super().list_tasks(since=since, page_size=page_size, page_token=page_token)
        query = list_params(since, page_size, page_token)
        query["includeArtifacts"] = "true"
        url = f"{self._base()}/tasks?{urlencode(query)}"
        response = http.call(self.target, "GET", url, operation="list_tasks")
        data = answers.read_json(response, "answer to GET /tasks")
        tasks, token = shapes.read_task_page(data, what="answer to GET /tasks")
        return TaskPage(tasks, token)

    def cancel(self, task_id: str, *, timeout: float | None = None) -> AgentReply:
        url = self._task_path(task_id, ":cancel")
        return self._task_call("POST", url, {}, "cancel", "tasks/cancel", timeout)

    def _task_call(
        self,
        method: str,
        url: str,
        body: Any,
        operation: str,
        what: str,
        timeout: float | None = None,
    ) -> AgentReply:
        response = http.call(self.target, method, url, body, operation=operation, timeout=timeout)
        data = answers.read_json(response, f"answer to {what}")
        task = shapes.read_task_answer(data, v03=self.v03, rest=True, what=f"answer to {what}")
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        return AgentReply(task=task, retry_after=retry_after)

    def stream(
        self,
        message: dict[str, Any],
        *,
        timeout: float,
        until: float | None = None,
        total: float | None = None,
    ) -> Generator[AgentReply, None, None]:
        url = self._base() + "/message:stream"
        body = self._send_body(message, blocking=False)
        yield from self._events("POST", url, body, "stream", timeout, until, total)

    def subscribe(self, task_id: str, *, timeout: float) -> Generator[AgentReply, None, None]:
        # A GET in both versions: a2a-sdk 0.3's HTTP+JSON server serves 0.3's
        # TaskSubscription only as a GET (its proto's mapping); other servers take both.
        url = self._task_path(task_id, ":subscribe")
        yield from self._events("GET", url, None, "subscribe", timeout)

    def _events(
        self,
        method: str,
        url: str,
        body: Any,
        operation: str,
        timeout: float,
        until: float | None = None,
        total: float | None = None,
    ) -> Iterator[AgentReply]:
        deadline = time.monotonic() + (timeout if total is None else total)
        view = stream_view.StreamView()
        with http.open_stream(
            self.target, method, url, body, operation=operation, timeout=timeout
        ) as response:
            began = agent_time(response.headers.get("Date"))  # the agent's clock, as it took it
            for event in self._read(response, method, url, operation, view, until, deadline):
                kind, payload = shapes.read_stream_event(event, v03=self.v03, rest=True)
                if kind == "message":
                    if view.task is None:  # a single Message is the whole answer
                        yield AgentReply(message=payload)
                        return
                    answers.skip_message(self.target, view.task)
                    continue
                task = view.apply(kind, payload)
                if task is not None:
                    yield AgentReply(task=task, agent_time=began)

    def _read(
        self,
        response: httpx.Response,
        method: str,
        url: str,
        operation: str,
        view: stream_view.StreamView,
        until: float | None,
        deadline: float,
    ) -> Iterator[Any]:
        """The JSON of each event. A JSON body instead of a stream is the whole answer (as
        the JSON-RPC binding reads one); an ``error`` event raises the agent's error: as
        it is before the stream named its task (the call's answer), else as the agent's
        last word on that task (:class:`~a2a.transports.answers.AgentErrorEvent`)."""
        if "json" in response.headers.get("Content-Type", ""):
            yield answers.read_json(answers.read_whole(response), f"answer to {operation}")
            return
        for name, data in answers.iter_events(response, until=until, deadline=deadline):
            if name == "error":
                error = self._error_event(data, method, url, operation)
                raise error if view.task is None else answers.AgentErrorEvent(error)
            yield answers.parse_event_json(data)

    def _error_event(self, data: str, method: str, url: str, operation: str) -> A2ACallError:
        """The error an ``event: error`` carries (a2a-sdk's: the A2A error body, ``code``
        its HTTP status), mapped as an error answer with that status would be."""
        status = _error_status(data)
        answer = PlainResponse(status, {"Content-Type": "application/json"}, data.encode())
        try:
            http.check_status(
                self.target, answer, method, url, credentials.scheme(self.target), operation
            )
        except A2ACallError as exc:
            return exc
        raise AssertionError("an error status raises")  # pragma: no cover


# google.rpc.Code names an error body may give instead of its HTTP status (``code``).
_STATUS_OF = {
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "ABORTED": 409,
    "RESOURCE_EXHAUSTED": 429,
    "UNIMPLEMENTED": 501,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}


def _error_status(data: str) -> int:
    """The HTTP status an error event's body names: its ``code`` (4xx/5xx), else its
    ``status`` name; 500 when it names neither (the agent said it failed, not why)."""
    try:
        body = loads_bounded(data)
    except ValueError:
        return 500
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return 500
    code = error.get("code")
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
        return code
    status = error.get("status")
    return _STATUS_OF.get(status, 500) if isinstance(status, str) else 500
