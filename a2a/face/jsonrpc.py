"""The JSON-RPC 2.0 binding of the A2A face: parse, route to the shared handler, render.

``POST /v1/a2a/jsonrpc`` (and ``/v1/a2a/{agentId}/jsonrpc``, or a ``tenant`` param naming
the agent). Errors are JSON-RPC error objects with the A2A codes; HTTP status 200, except
401 (authentication), 405 and 415 (checked before the body is parsed).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from a2a.face.context import build_context, check_version
from a2a.face.errors import (
    FaceError,
    InvalidParams,
    InvalidRequest,
    MethodNotAllowed,
    MethodNotFound,
    Unauthenticated,
    jsonrpc_error_body,
)
from a2a.face.handler import handler
from a2a.face.responses import as_face_error, json_response, read_json_body, sse_response

# Method name → (handler operation, streams?).
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


def error_response(exc: BaseException, request_id: Any = None) -> HttpResponse:
    error = as_face_error(exc)
    from a2a.face.errors import mapping_for

    status = mapping_for(error).http_status
    return json_response(
        jsonrpc_error_body(error, request_id),
        status=status if status in _TRANSPORT_STATUSES else 200,
        headers=error.headers if isinstance(error, Unauthenticated | MethodNotAllowed) else None,
    )


def _request_id(body: dict[str, Any]) -> str | int | None:
    rid = body.get("id")
    if isinstance(rid, bool) or not isinstance(rid, str | int | type(None)):
        return None
    return rid


def _parse_call(body: dict[str, Any]) -> tuple[str, dict[str, Any], bool]:
    if body.get("jsonrpc") != "2.0":
        raise InvalidRequest("'jsonrpc' must be exactly \"2.0\".")
    rid = body.get("id")
    if isinstance(rid, bool) or not isinstance(rid, str | int | type(None)):
        raise InvalidRequest("'id' must be a string, an integer or null.")
    method = body.get("method")
    if not isinstance(method, str) or not method:
        raise InvalidRequest("'method' is required.")
    if method not in METHODS:
        raise MethodNotFound(f"Method {method!r} not found.", metadata={"method": method[:100]})
    params = body.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise InvalidParams("'params' must be an object.")
    operation, streams = METHODS[method]
    return operation, params, streams


@csrf_exempt
async def endpoint(request: HttpRequest, tenant: str | None = None) -> HttpResponse:
    request_id: Any = None
    try:
        if request.method != "POST":
            raise MethodNotAllowed("JSON-RPC takes POST.", headers={"Allow": "POST"})
        body = read_json_body(request, required=True)
        request_id = _request_id(body)
        operation, params, streams = _parse_call(body)
        check_version(request)
        ctx = build_context(request, tenant or params.get("tenant") or None)
        result = await getattr(handler, operation)(params, ctx)
    except FaceError as exc:
        return error_response(exc, request_id)
    except Exception as exc:
        return error_response(exc, request_id)
    if not streams:
        return json_response({"jsonrpc": "2.0", "id": request_id, "result": result})
    try:
        return await sse_response(
            result,
            lambda event: {"jsonrpc": "2.0", "id": request_id, "result": event},
            lambda error: jsonrpc_error_body(error, request_id),
        )
    except Exception as exc:
        return error_response(exc, request_id)
