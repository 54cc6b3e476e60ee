"""Routes of the A2A face: the well-known card, HTTP+JSON under /v1/a2a (and the tenant
prefix /v1/a2a/{agentId}), JSON-RPC at .../jsonrpc (with or without a trailing slash:
clients built on httpx's ``base_url`` post to ``{url}/``), and also at the HTTP+JSON
interface's own URL (``POST /v1/a2a``, ``POST /v1/a2a/{agentId}``: clients given only a URL
post JSON-RPC there), a JSON-RPC 404 envelope for any path below the JSON-RPC URL, and the
HTTP+JSON 404 for anything else."""

from __future__ import annotations

from django.urls import URLPattern, re_path

from a2a.face import jsonrpc, rest

TENANT = r"(?P<tenant>[a-z0-9](?:[a-z0-9_-]{0,98}[a-z0-9])?)/"
TASK = r"(?P<id>[^/:]+)"


def _operations(prefix: str, name: str) -> list[URLPattern]:
    return [
        re_path(rf"^{prefix}jsonrpc/?$", jsonrpc.endpoint, name=f"{name}-jsonrpc"),
        re_path(rf"^{prefix}jsonrpc/.+$", jsonrpc.not_here, name=f"{name}-jsonrpc-below"),
        re_path(rf"^{prefix}message:send$", rest.send_message, name=f"{name}-send"),
        re_path(rf"^{prefix}message:stream$", rest.stream_message, name=f"{name}-stream"),
        re_path(rf"^{prefix}tasks$", rest.list_tasks, name=f"{name}-tasks"),
        re_path(rf"^{prefix}tasks/{TASK}:cancel$", rest.cancel_task, name=f"{name}-cancel"),
        re_path(rf"^{prefix}tasks/{TASK}:subscribe$", rest.subscribe, name=f"{name}-subscribe"),
        re_path(
            rf"^{prefix}tasks/(?P<taskId>[^/:]+)/pushNotificationConfigs$",
            rest.push_configs_view,
            name=f"{name}-push-configs",
        ),
        re_path(
            rf"^{prefix}tasks/(?P<taskId>[^/:]+)/pushNotificationConfigs/(?P<id>[^/]+)$",
            rest.push_config_view,
            name=f"{name}-push-config",
        ),
        re_path(rf"^{prefix}tasks/{TASK}$", rest.get_task, name=f"{name}-task"),
        re_path(rf"^{prefix}extendedAgentCard$", rest.extended_card, name=f"{name}-extended-card"),
        re_path(rf"^{prefix}\.well-known/agent-card\.json$", rest.agent_card, name=f"{name}-card"),
    ]


urlpatterns: list[URLPattern] = [
    re_path(r"^\.well-known/agent-card\.json$", rest.agent_card, name="a2a-well-known-card"),
    *_operations("v1/a2a/", "a2a-face"),
    *_operations(f"v1/a2a/{TENANT}", "a2a-tenant"),
    # The HTTP+JSON interface's own URL takes JSON-RPC posts too (a2a/face/asgi.py tells
    # them apart for its early errors the same way).
    re_path(r"^v1/a2a/?$", jsonrpc.at_interface, name="a2a-face-interface"),
    re_path(rf"^v1/a2a/{TENANT}?$", jsonrpc.at_interface, name="a2a-tenant-interface"),
    re_path(r"^v1/a2a(?:/.*)?$", rest.not_found, name="a2a-face-not-found"),
]
