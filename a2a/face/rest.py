"""The HTTP+JSON binding of the A2A face: parse the request, call the handler, render.

Routes (under ``/v1/a2a`` and the tenant prefix ``/v1/a2a/{agentId}``) are in
:mod:`a2a.face.urls`. Every response on these paths is JSON, errors included.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings
from django.db.models import Max
from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.utils.http import http_date, parse_http_date_safe, quote_etag
from django.views.decorators.csrf import csrf_exempt

from a2a.face.context import build_context, check_version
from a2a.face.db import db_call
from a2a.face.errors import (
    MethodNotAllowed,
    MethodNotFound,
    as_face_error,
    rest_error_body,
)
from a2a.face.handler import handler
from a2a.face.protojson import check_text, query_params, read_body, read_params
from a2a.face.responses import dumps, json_response, sse_response

View = Callable[..., Awaitable[HttpResponse]]


def error_response(exc: BaseException, operation: str = "") -> HttpResponse:
    error = as_face_error(exc, operation)
    status, body = rest_error_body(error)
    return json_response(body, status=status, headers=error.headers)


def operation(
    name: str, methods: tuple[str, ...], *, body: str = "none", stream: bool = False
) -> View:
    """A view for one handler operation. ``body``: "required" or "optional" for a JSON
    body; GET and DELETE take their params from the query string. Path arguments
    override body fields."""

    @csrf_exempt
    async def view(request: HttpRequest, tenant: str | None = None, **path: str) -> HttpResponse:
        try:
            if request.method not in methods:
                raise MethodNotAllowed(
                    f"{request.method} is not allowed here; use {', '.join(methods)}.",
                    headers={"Allow": ", ".join(methods)},
                )
            check_version(request)
            if request.method in ("GET", "DELETE") or body == "none":
                params = read_params(name, query_params(request), from_query=True)
            else:
                raw = read_body(request, required=body == "required")
                params = read_params(name, raw, checked=True)
            check_text(path)
            params.update(path)
            ctx = build_context(request, tenant)
            result = await getattr(handler, name)(params, ctx)
            if stream:
                return await sse_response(result, lambda e: e, lambda err: rest_error_body(err)[1])
            return json_response(result)
        except Exception as exc:
            return error_response(exc, name)

    view.__name__ = f"a2a_{name}"
    return view


send_message = operation("send_message", ("POST",), body="required")
stream_message = operation("stream_message", ("POST",), body="required", stream=True)
list_tasks = operation("list_tasks", ("GET",))
get_task = operation("get_task", ("GET",))
cancel_task = operation("cancel_task", ("POST",), body="optional")
subscribe = operation("subscribe", ("GET", "POST"), body="optional", stream=True)
push_configs = {
    "POST": operation("create_push_config", ("POST",), body="required"),
    "GET": operation("list_push_configs", ("GET",)),
}
push_config = {
    "GET": operation("get_push_config", ("GET",)),
    "DELETE": operation("delete_push_config", ("DELETE",)),
}
extended_card = operation("get_extended_card", ("GET",))


def by_method(views: dict[str, View]) -> View:
    """One path, one view per method; other methods get the JSON 405."""
    allowed = tuple(views)

    @csrf_exempt
    async def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        target = views.get(request.method or "")
        if target is None:
            return error_response(
                MethodNotAllowed(
                    f"{request.method} is not allowed here; use {', '.join(allowed)}.",
                    headers={"Allow": ", ".join(allowed)},
                )
            )
        return await target(request, *args, **kwargs)

    return view


push_configs_view = by_method(push_configs)
push_config_view = by_method(push_config)


@csrf_exempt
async def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    """Any other path under /v1/a2a: the A2A error shape, never Django's HTML page."""
    return error_response(MethodNotFound(f"No A2A operation at {request.path}."))


# --- agent cards ----------------------------------------------------------------------


def _card_and_time(tenant: str | None) -> tuple[dict[str, Any], float | None]:
    from a2a import cards
    from a2a.face.visibility import tenant_agent
    from agent_profiles.models import AgentProfile, Skill

    stamps = [Skill.objects.aggregate(at=Max("updated_at"))["at"]]
    if tenant:
        agent = tenant_agent(tenant)
        card = cards.agent_card(agent)
        stamps.append(agent.updated_at)
    else:
        card = cards.platform_card()
        stamps.append(AgentProfile.objects.aggregate(at=Max("updated_at"))["at"])
    known = [s.timestamp() for s in stamps if s is not None]
    return card, (max(known) if known else None)


@csrf_exempt
async def agent_card(request: HttpRequest, tenant: str | None = None) -> HttpResponse:
    """The public agent card, cacheable: ``Cache-Control``, ``ETag``, ``Last-Modified``
    and ``304 Not Modified`` for ``If-None-Match`` / ``If-Modified-Since``."""
    try:
        if request.method not in ("GET", "HEAD"):
            raise MethodNotAllowed("Use GET.", headers={"Allow": "GET, HEAD"})
        card, modified = await db_call(_card_and_time)(tenant)
    except Exception as exc:
        return error_response(exc)
    content = dumps(card)
    etag = quote_etag(hashlib.sha256(content).hexdigest()[:32])
    headers = {
        "ETag": etag,
        "Cache-Control": f"public, max-age={settings.A2A_CARD_MAX_AGE}",
        "Vary": "Accept-Encoding",
    }
    if modified is not None:
        headers["Last-Modified"] = http_date(modified)
    if _not_modified(request, etag, modified):
        response: HttpResponse = HttpResponseNotModified()
    else:
        response = HttpResponse(content, content_type="application/json")
    for name, value in headers.items():
        response[name] = value
    return response


def _not_modified(request: HttpRequest, etag: str, modified: float | None) -> bool:
    if_none_match = request.headers.get("If-None-Match")
    if if_none_match is not None:
        tags = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
        return "*" in tags or etag in tags
    since = parse_http_date_safe(request.headers.get("If-Modified-Since") or "")
    return since is not None and modified is not None and int(modified) <= since
