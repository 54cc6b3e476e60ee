"""The JSON-RPC 2.0 binding of the A2A face, A2A 1.0 and 0.3: parse, route, render.

``POST /v1/a2a/jsonrpc`` (with or without a trailing slash; also
``/v1/a2a/{agentId}/jsonrpc``, or a ``tenant`` param naming the agent). The method name
tells the version: 1.0 methods (``SendMessage``, ...) and 0.3 methods (``message/send``,
..., see :mod:`a2a.face.legacy`) share the URL; a 0.3-named send with a 1.0 message is
FastA2A's mix of the two (:mod:`a2a.face.hybrid`). Everything under this URL answers a
JSON-RPC envelope: ``{"jsonrpc": "2.0", "id", "result"}`` or ``{"jsonrpc": "2.0", "id",
"error": {"code", "message", "data"}}``; HTTP status 200, except 401 (authentication), 404
(no endpoint at that path), 405, 413 and 415 (checked before the body is parsed).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from a2a.face import hybrid, legacy, rest
from a2a.face.context import LEGACY_VERSION, PROTOCOL_VERSION, build_context, check_version
from a2a.face.errors import (
    InvalidParams,
    InvalidRequest,
    MethodNotAllowed,
    MethodNotFound,
    TaskNotFound,
    as_face_error,
    jsonrpc_error_body,
    mapping_for,
)
from a2a.face.handler import handler
from a2a.face.protojson import read_body, read_params
from a2a.face.responses import json_response, sse_event, sse_response
from platform_site.text import find_bad_text

# 1.0 method name → (handler operation, streams?).
METHODS: dict[str, tuple[str, bool]] = {
    "SendMessage": ("send_message", False),
    "SendStreamingMessage": ("stream_message", True),
    "GetTask": ("get_task", False),
    "ListTasks": ("list_tasks", False),
    "CancelTask": ("cancel_task", False),
    "SubscribeToTask": ("subscribe", True),
    "CreateTaskPushNotificationConfig": ("create_push_config", False),
    "GetTaskPushNotificationConfig": ("get_push_config", False),
    "ListTaskPushNotificationConfigs": ("list_push_configs", False),
    "DeleteTaskPushNotificationConfig": ("delete_push_config", False),
    "GetExtendedAgentCard": ("get_extended_card", False),
}
# HTTP statuses kept on JSON-RPC errors; everything else answers 200.
_TRANSPORT_STATUSES = {401, 405, 413, 415}


def error_response(
    exc: BaseException, request_id: Any = None, operation: str = "", *, status: int = 0
) -> HttpResponse:
    error = as_face_error(exc, operation)
    if not status:
        status = mapping_for(error).http_status
        status = status if status in _TRANSPORT_STATUSES else 200
    return json_response(
        jsonrpc_error_body(error, request_id), status=status, headers=error.headers
    )


def _stream_error_response(exc: BaseException, request_id: Any, operation: str) -> HttpResponse:
    """A 0.3 streaming method's error (``message/stream``, ``tasks/resubscribe``) as its
    stream's one event, as 0.3 servers send it: a 0.3 SDK client (Python, JavaScript)
    reads nothing but ``text/event-stream`` there, and took a JSON body for a broken
    stream, losing the error's code. Transport-level refusals (401, 413, ...) stay JSON."""
    error = as_face_error(exc, operation)
    if mapping_for(error).http_status in _TRANSPORT_STATUSES:
        return error_response(exc, request_id, operation)
    response = HttpResponse(
        sse_event(jsonrpc_error_body(error, request_id)), content_type="text/event-stream"
    )
    response["Cache-Control"] = "no-cache"
    for name, value in error.headers.items():
        response[name] = value
    return response


def _envelope(body: dict[str, Any]) -> tuple[Any, str, Any]:
    """``(id, method, params)`` of a request; the id is returned even when the rest is
    invalid (InvalidRequest carries it as ``request_id``)."""
    rid = body.get("id")
    if isinstance(rid, bool) or not isinstance(rid, str | int | type(None)):
        raise InvalidRequest("'id' must be a string, an integer or null.")
    if isinstance(rid, str) and (find_bad_text(rid) is not None or len(rid) > 1000):
        raise InvalidRequest("'id' holds a NUL character or a lone surrogate, or is too long.")
    if isinstance(rid, int) and abs(rid) > 2**63:
        raise InvalidRequest("'id' is out of range.")
    return rid, body.get("method"), body.get("params")


def _method(body: dict[str, Any], rid: Any) -> str:
    if body.get("jsonrpc") != "2.0":
        raise InvalidRequest("'jsonrpc' must be exactly \"2.0\".")
    method = body.get("method")
    if not isinstance(method, str) or not method:
        raise InvalidRequest("'method' is required.")
    if find_bad_text(method) is not None or len(method) > 200:
        raise InvalidRequest("'method' holds a NUL character or a lone surrogate, or is too long.")
    if method not in METHODS and method not in legacy.METHODS:
        raise MethodNotFound(f"Method {method!r} not found.", metadata={"method": method})
    return method


class _Call:
    """One parsed call: which operation, in which version, with which params."""

    def __init__(self, method: str, raw_params: Any) -> None:
        if raw_params is None:
            raw_params = {}
        if not isinstance(raw_params, dict):
            raise InvalidParams("'params' must be an object.")
        # FastA2A's client: 1.0 objects under 0.3's names (a2a.face.hybrid).
        self.hybrid = hybrid.speaks(method, raw_params)
        self.legacy = method in legacy.METHODS and not self.hybrid
        if self.hybrid:
            self.operation, self.streams, _model = legacy.METHODS[method]
            self.version = LEGACY_VERSION  # no A2A-Version header, as a 0.3 client's
            raw_params = hybrid.params_in(raw_params)
        elif self.legacy:
            self.operation, self.streams, _model = legacy.METHODS[method]
            self.version = LEGACY_VERSION
            raw_params = legacy.params_in(method, raw_params)
        else:
            self.operation, self.streams = METHODS[method]
            self.version = PROTOCOL_VERSION
        # The whole body was checked for bad text when it was read.
        self.params = read_params(self.operation, raw_params, checked=True)
        if self.legacy:
            # After reading, which would drop the mark: a 0.3 client's webhook gets 0.3.
            legacy.mark_push_config(self.operation, self.params)
        if self.hybrid or (self.legacy and method in hybrid.READS):
            self.params[hybrid.KEY] = hybrid.MIX  # see a2a.face.hybrid

    def result(self, result: Any) -> Any:
        if self.hybrid or (self.legacy and hybrid.marked(result)):
            return hybrid.out(result)
        return legacy.result_out(self.operation, result) if self.legacy else result

    def event(self, event: dict[str, Any]) -> Any:
        if self.hybrid:
            return hybrid.out(event)
        return legacy.event_out(event) if self.legacy else event

    def ends(self, event: dict[str, Any]) -> bool:
        """Whether the stream ends after this (1.0) event: 0.3 streams end after their
        ``final`` event; 1.0 streams end when the task stream does."""
        return self.legacy and legacy.ends_stream(legacy.event_out(event))


@csrf_exempt
async def endpoint(request: HttpRequest, tenant: str | None = None) -> HttpResponse:
    request_id: Any = None
    operation = ""
    legacy_stream = legacy_method = False
    try:
        if request.method != "POST":
            raise MethodNotAllowed("JSON-RPC takes POST.", headers={"Allow": "POST"})
        body = read_body(request, required=True)
        request_id, _method_name, raw_params = _envelope(body)
        method = _method(body, request_id)
        legacy_method = method in legacy.METHODS
        legacy_stream = legacy_method and legacy.METHODS[method][1]
        call = _Call(method, raw_params)
        operation = call.operation
        check_version(request, call.version)
        ctx = build_context(request, tenant or call.params.get("tenant") or None)
        result = await getattr(handler, operation)(call.params, ctx)
        if not call.streams:
            return json_response(
                {"jsonrpc": "2.0", "id": request_id, "result": call.result(result)}
            )
        rid = request_id
        return await sse_response(
            result,
            lambda event: {"jsonrpc": "2.0", "id": rid, "result": call.event(event)},
            lambda error: jsonrpc_error_body(error, rid),
            last=call.ends,
        )
    except Exception as exc:
        if legacy_method and isinstance(exc, TaskNotFound):
            # 0.3's own words for its -32001 (the id is in the error's data): FastA2A's
            # client takes no other message there, and raised on ours.
            exc.message = TaskNotFound.default_message
        if legacy_stream:
            return _stream_error_response(exc, request_id, operation)
        return error_response(exc, request_id, operation)


@csrf_exempt
async def at_interface(request: HttpRequest, tenant: str | None = None) -> HttpResponse:
    """The HTTP+JSON interface's own URL (``/v1/a2a``, ``/v1/a2a/{agentId}``), which has
    no HTTP+JSON operation: a POST there is a JSON-RPC call. A client given only a URL
    makes a card of it with one JSON-RPC interface and posts there (Microsoft Agent
    Framework's ``A2AAgent(url=...)``, as its examples do). Other methods: HTTP+JSON's 404."""
    if request.method == "POST":
        return await endpoint(request, tenant)
    return await rest.not_found(request)


@csrf_exempt
async def not_here(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    """Any path below the JSON-RPC URL: a JSON-RPC error envelope, never another shape."""
    return error_response(
        MethodNotFound("No JSON-RPC endpoint here: post to the JSON-RPC URL itself."),
        status=404,
    )
