"""The JSON-RPC binding, A2A 1.0 and 0.3: every call is a POST of a JSON-RPC 2.0 request
to the interface URL.

1.0 methods ``SendMessage``, ``GetTask``, ``CancelTask``, ``SendStreamingMessage``,
``SubscribeToTask``, ``ListTasks`` (params in the 1.0 shapes, a tenant as the ``tenant`` field); 0.3
methods ``message/send``, ``tasks/get``, ``tasks/cancel``, ``message/stream``,
``tasks/resubscribe`` (``kind`` fields, lowercase roles, ``configuration.blocking``).
An answer must carry our request id and exactly one of ``result`` / ``error``; A2A error
codes are mapped to the platform's error kinds (:func:`rpc_error`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Generator, Iterator
from datetime import datetime
from typing import Any

from a2a.exceptions import (
    A2ACallError,
    A2APermanentError,
    A2AProtocolError,
    A2ATransientError,
    A2AUnsupportedOperation,
)
from a2a.transports import answers, http, shapes, stream_view
from a2a.transports.base import (
    AgentReply,
    AgentTransport,
    TaskPage,
    agent_time,
    list_params,
    parse_retry_after,
    send_params,
)
from a2a.transports.quoting import excerpt, quoted
from agent_profiles.interfaces import JSONRPC, V0_3

METHODS = {
    "1.0": {
        "send": "SendMessage",
        "stream": "SendStreamingMessage",
        "get_task": "GetTask",
        "cancel": "CancelTask",
        "subscribe": "SubscribeToTask",
        "list_tasks": "ListTasks",
    },
    "0.3": {
        "send": "message/send",
        "stream": "message/stream",
        "get_task": "tasks/get",
        "cancel": "tasks/cancel",
        "subscribe": "tasks/resubscribe",
    },
}

TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
UNSUPPORTED_OPERATION = -32004
VERSION_NOT_SUPPORTED = -32009
METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603


def rpc_error(agent_id: str, method: str, error: Any) -> A2ACallError:
    """The platform error a JSON-RPC ``error`` object means."""
    code = error.get("code") if isinstance(error, dict) else None
    # JSON's true is no error code, though Python's bool is an int (true read as 1).
    if not isinstance(code, int) or isinstance(code, bool):
        return A2AProtocolError(
            f"Agent '{agent_id}' answered {method} with a malformed JSON-RPC error."
        )
    said = excerpt(str(error.get("message") or ""))
    text = f"Agent '{agent_id}' answered {method} with JSON-RPC error {code}: {said}"
    if code == TASK_NOT_FOUND:
        return A2APermanentError(text, code="remote_task_not_found")
    if code in (UNSUPPORTED_OPERATION, METHOD_NOT_FOUND):
        return A2AUnsupportedOperation(text)
    if code == VERSION_NOT_SUPPORTED:
        return A2APermanentError(text, code="version_not_supported")
    if code == TASK_NOT_CANCELABLE:
        return A2APermanentError(text, code="task_not_cancelable")
    if code == INTERNAL_ERROR:
        return A2ATransientError(text, code="agent_error")
    return A2APermanentError(text, code="agent_refused")


class JsonRpcTransport(AgentTransport):
    """JSON-RPC, 1.0 or 0.3 (``target.version``)."""

    binding = JSONRPC

    @property
    def v03(self) -> bool:
        return self.target.version == V0_3

    def _method(self, operation: str) -> str:
        return METHODS[V0_3 if self.v03 else "1.0"][operation]

    def _url(self) -> str:
        if not self.target.url:
            raise A2APermanentError(
                f"Agent '{self.target.agent_id}' has no A2A endpoint.", code="no_endpoint"
            )
        return self.target.url

    def _params(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.target.tenant and not self.v03:
            return {**params, "tenant": self.target.tenant}
        return params

    def _request(self, operation: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        request_id = uuid.uuid4().hex
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": self._method(operation),
            "params": self._params(params),
        }
        return request_id, body

    def _result(self, data: Any, request_id: str, method: str) -> Any:
        agent_id = self.target.agent_id
        if not isinstance(data, dict):
            raise A2AProtocolError(f"Agent '{agent_id}' answered {method} with no JSON-RPC object.")
        if data.get("error") is not None and data.get("result") is not None:
            # JSON-RPC 2.0: exactly one of them. Neither is the answer: not an error to
            # retry (the agent may have acted on the message), nor a result to apply.
            raise A2AProtocolError(
                f"Agent '{agent_id}' answered {method} with both a result and an error."
            )
        if "error" in data and data["error"] is not None:
            if data.get("id") not in (request_id, None):
                raise A2AProtocolError(
                    f"Agent '{agent_id}' answered {method} with an error for another request "
                    f"(id {quoted(data.get('id'))})."
                )
            raise rpc_error(agent_id, method, data["error"])
        if data.get("id") != request_id:
            raise A2AProtocolError(
                f"Agent '{agent_id}' answered {method} for another request "
                f"(id {quoted(data.get('id'))}, not {request_id!r})."
            )
        if "result" not in data:
            raise A2AProtocolError(f"Agent '{agent_id}' answered {method} without a result.")
        return data["result"]

    def _call(self, operation: str, params: dict[str, Any], timeout: float | None = None) -> Any:
        return self._call_answered(operation, params, timeout)[0]

    def _call_answered(
        self, operation: str, params: dict[str, Any], timeout: float | None = None
    ) -> tuple[Any, datetime | None, float | None]:
        """The call's result, the agent's clock when it answered (``Date``), and the
        pause it asked for (``Retry-After``: on any answer, as over HTTP+JSON)."""
        request_id, body = self._request(operation, params)
        method = body["method"]
        response = http.call(
            self.target, "POST", self._url(), body, operation=operation, timeout=timeout
        )
        data = answers.read_json(response, f"answer to {method}")
        result = self._result(data, request_id, method)
        pause = parse_retry_after(response.headers.get("Retry-After"))
        return result, agent_time(response.headers.get("Date")), pause

    def _send_params(
        self, message: dict[str, Any], blocking: bool, push: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        return send_params(
            message,
            blocking=blocking,
            v03=self.v03,
            rest=False,
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
        method = self._method("send")
        params = self._send_params(message, blocking, push)
        result, answered_at, pause = self._call_answered("send", params, timeout)
        task, reply = shapes.read_send_answer(
            result, v03=self.v03, rest=False, what=f"answer to {method}"
        )
        return AgentReply(task=task, message=reply, retry_after=pause, agent_time=answered_at)

    def get_task(self, task_id: str, *, history: int = 0) -> AgentReply:
        return self._task_call("get_task", {"id": task_id, "historyLength": history})

    def list_tasks(self, *, since: str, page_size: int, page_token: str = "") -> TaskPage:
        if self.v03:
            return super().list_tasks(since=since, page_size=page_size, page_token=page_token)
        result = self._call("list_tasks", list_params(since, page_size, page_token))
        tasks, token = shapes.read_task_page(result, what="answer to ListTasks")
        return TaskPage(tasks, token)

    def cancel(self, task_id: str, *, timeout: float | None = None) -> AgentReply:
        return self._task_call("cancel", {"id": task_id}, timeout)

    def _task_call(
        self, operation: str, params: dict[str, Any], timeout: float | None = None
    ) -> AgentReply:
        method = self._method(operation)
        result, _, pause = self._call_answered(operation, params, timeout)
        task = shapes.read_task_answer(result, v03=self.v03, rest=False, what=f"answer to {method}")
        return AgentReply(task=task, retry_after=pause)

    def stream(
        self,
        message: dict[str, Any],
        *,
        timeout: float,
        until: float | None = None,
        total: float | None = None,
    ) -> Generator[AgentReply, None, None]:
        params = self._send_params(message, False)
        yield from self._events("stream", params, timeout, until, total)

    def subscribe(self, task_id: str, *, timeout: float) -> Generator[AgentReply, None, None]:
        yield from self._events("subscribe", {"id": task_id}, timeout)

    def _events(
        self,
        operation: str,
        params: dict[str, Any],
        timeout: float,
        until: float | None = None,
        total: float | None = None,
    ) -> Iterator[AgentReply]:
        deadline = time.monotonic() + (timeout if total is None else total)
        request_id, body = self._request(operation, params)
        method = body["method"]
        view = stream_view.StreamView()
        with http.open_stream(
            self.target, "POST", self._url(), body, operation=operation, timeout=timeout
        ) as response:
            began = agent_time(response.headers.get("Date"))  # the agent's clock, as it took it
            if "json" in response.headers.get("Content-Type", ""):
                # An error (or a plain answer) instead of a stream.
                answer = answers.read_json(answers.read_whole(response), method)
                result = self._result(answer, request_id, method)
                events: Iterator[Any] = iter([result])
            else:
                events = (
                    self._event_result(data, request_id, method, view)
                    for data in answers.iter_sse(response, until=until, deadline=deadline)
                )
            for result in events:
                kind, payload = shapes.read_stream_event(result, v03=self.v03, rest=False)
                if kind == "message":
                    if view.task is None:  # a single Message is the whole answer
                        yield AgentReply(message=payload)
                        return
                    answers.skip_message(self.target, view.task)
                    continue
                task = view.apply(kind, payload)
                if task is not None:
                    yield AgentReply(task=task, agent_time=began)

    def _event_result(
        self, data: str, request_id: str, method: str, view: stream_view.StreamView
    ) -> Any:
        """One event's ``result``. Its JSON-RPC ``error`` (a2a-sdk sends one when its
        executor raises) is raised as it is before the stream named its task (the call's
        answer), else as the agent's last word on that task
        (:class:`~a2a.transports.answers.AgentErrorEvent`): not a break to follow again."""
        event = answers.parse_event_json(data)
        try:
            return self._result(event, request_id, method)
        except A2ACallError as exc:
            # An event with a result too said no error: it is not A2A (as in an answer).
            said_error = (
                isinstance(event, dict)
                and event.get("error") is not None
                and event.get("result") is None
            )
            if said_error and view.task is not None:
                raise answers.AgentErrorEvent(exc) from None
            raise
