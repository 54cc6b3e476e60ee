"""A2A peers of every kind the platform must drive, built with the official ``a2a-sdk`` 1.3.

:func:`run_peer` serves the test agent of :mod:`tests.support.agents` (same behaviours,
``input["behaviour"]``) with a chosen face:

* ``bindings``: ``("HTTP+JSON",)`` (the SDK's REST routes at the base URL),
  ``("JSONRPC",)`` (the SDK's JSON-RPC route at ``{url}/rpc``) or both; the card lists
  what is served;
* ``rest_03``: the HTTP+JSON interface is A2A 0.3 (the SDK's 0.3 adapter under ``/v1``);
* ``streaming``: the card's ``capabilities.streaming``;
* ``no_get_task``: ``GET /tasks/{id}`` answers a bare 404 and JSON-RPC ``GetTask``
  answers ``-32601`` (an agent that cannot be polled);
* ``auth``: ``"bearer"`` (``Authorization: Bearer`` :data:`BEARER`), ``"apiKey"``
  (header ``X-API-Key: ``:data:`API_KEY`) or ``"oauth2"`` (a token from
  ``{url}/oauth/token`` for :data:`CLIENT_ID` / :data:`CLIENT_SECRET`, HTTP Basic);
  anything else gets 401. The card and ``/oauth/*`` stay open.

``/oauth/garbage`` answers HTML with 200, ``/oauth/broken`` JSON without a token and
``/oauth/huge`` a 200 kB token (bad token endpoints). ``/x/rpc-wrongid`` answers every
JSON-RPC call for another id, and ``/x/rpc-notjson`` with a body that is not JSON.
``peer.issued`` lists the tokens given out; ``peer.revoke()`` invalidates them (the next
call gets 401).
"""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.support.agents import TestAgent, agent_card, run_agent
from tests.support.behaviours import VALID_OUTPUT, BehaviourExecutor
from tests.support.raw_modes import RawModes, whole_body

BEARER = "peer-bearer-secret-1234"
API_KEY = "peer-api-key-secret-5678"
CLIENT_ID = "platform-client"
CLIENT_SECRET = "peer-client-secret-9999"
RPC_PATH = "/rpc"


def peer_card(
    agent: TestAgent, bindings: tuple[str, ...], rest_03: bool, streaming: bool, auth: str
) -> pb.AgentCard:
    card = agent_card(agent.url)
    del card.supported_interfaces[:]
    for binding in bindings:
        if binding == "JSONRPC":
            card.supported_interfaces.append(
                pb.AgentInterface(
                    url=agent.url + RPC_PATH, protocol_binding="JSONRPC", protocol_version="1.0"
                )
            )
        else:
            card.supported_interfaces.append(
                pb.AgentInterface(
                    url=agent.url,
                    protocol_binding="HTTP+JSON",
                    protocol_version="0.3" if rest_03 else "1.0",
                )
            )
    card.capabilities.streaming = streaming
    if auth == "bearer":
        card.security_schemes["bearer"].http_auth_security_scheme.scheme = "bearer"
    elif auth == "apiKey":
        card.security_schemes["key"].api_key_security_scheme.name = "X-API-Key"
        card.security_schemes["key"].api_key_security_scheme.location = "header"
    elif auth == "oauth2":
        flow = card.security_schemes["oauth"].oauth2_security_scheme.flows.client_credentials
        flow.token_url = agent.url + "/oauth/token"
        flow.scopes["tasks"] = "run tasks"
    return card


def _replay(body: bytes) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive


class PeerFaces:
    """ASGI middleware: credentials, no-polling and JSON-RPC fault modes."""

    def __init__(self, app: ASGIApp, agent: TestAgent, auth: str, no_get_task: bool) -> None:
        self.app = app
        self.agent = agent
        self.auth = auth
        self.no_get_task = no_get_task

    def _allowed(self, scope: Scope) -> bool:
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        if self.auth == "bearer":
            return headers.get("authorization") == f"Bearer {BEARER}"
        if self.auth == "apiKey":
            return headers.get("x-api-key") == API_KEY
        if self.auth == "oauth2":
            given = headers.get("authorization", "").removeprefix("Bearer ")
            return given in self.agent.issued  # type: ignore[attr-defined]
        return True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path.startswith("/x/rpc-"):
            await self._rpc_fault(path, scope, receive, send)
            return
        open_path = path.startswith(("/.well-known/", "/oauth/", "/_stats", "/health"))
        if not open_path and not self._allowed(scope):
            self.agent.count("401")
            await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
            return
        get_task = scope["method"] == "GET" and path.startswith("/tasks/")
        if self.no_get_task and get_task and ":" not in path.rsplit("/", 1)[-1]:
            # GET /tasks/{id} is not served (GET /tasks/{id}:subscribe is).
            self.agent.count(path)
            await PlainTextResponse("Not Found", status_code=404)(scope, receive, send)
            return
        if self.no_get_task and path == RPC_PATH:
            body = await whole_body(receive)
            request = json.loads(body or b"{}")
            if request.get("method") in ("GetTask", "tasks/get"):
                self.agent.count("rpc:GetTask")
                error = {"code": -32601, "message": "Method not found"}
                answer = {"jsonrpc": "2.0", "id": request.get("id"), "error": error}
                await JSONResponse(answer)(scope, receive, send)
                return
            receive = _replay(body)
        await self.app(scope, receive, send)

    async def _rpc_fault(self, path: str, scope: Scope, receive: Receive, send: Send) -> None:
        self.agent.count(path)
        body = await whole_body(receive)
        response: Response
        if path.startswith("/x/rpc-wrongid"):
            task = {"id": "t-1", "status": {"state": "TASK_STATE_COMPLETED"}}
            response = JSONResponse({"jsonrpc": "2.0", "id": "not-yours", "result": {"task": task}})
        else:
            response = Response(b"\x00not json" + body[:0], media_type="application/json")
        await response(scope, receive, send)


def _oauth_routes(agent: TestAgent) -> list[Route]:
    expected = "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()

    async def token(request: Request) -> Response:
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
        if request.headers.get("authorization") != expected:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        if form.get("grant_type") != "client_credentials":
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        issued = secrets.token_urlsafe(16)
        agent.issued.append(issued)  # type: ignore[attr-defined]
        return JSONResponse({"access_token": issued, "token_type": "Bearer", "expires_in": 3600})

    async def garbage(request: Request) -> Response:
        return Response("<html>login</html>", media_type="text/html")

    async def broken(request: Request) -> Response:
        return JSONResponse({"token_type": "Bearer"})

    async def huge(request: Request) -> Response:
        return JSONResponse({"access_token": "x" * 200_000, "token_type": "Bearer"})

    return [
        Route("/oauth/token", token, methods=["POST"]),
        Route("/oauth/garbage", garbage, methods=["POST"]),
        Route("/oauth/broken", broken, methods=["POST"]),
        Route("/oauth/huge", huge, methods=["POST"]),
    ]


def peer_builder(
    *,
    bindings: tuple[str, ...] = ("HTTP+JSON",),
    rest_03: bool = False,
    streaming: bool = True,
    no_get_task: bool = False,
    auth: str = "",
) -> Any:
    def build(agent: TestAgent) -> ASGIApp:
        agent.issued = []  # type: ignore[attr-defined]
        card = peer_card(agent, bindings, rest_03, streaming, auth)
        handler = DefaultRequestHandler(
            agent_executor=BehaviourExecutor(agent),
            task_store=InMemoryTaskStore(),
            agent_card=card,
        )
        routes: list[Any] = [
            Route("/health", lambda request: JSONResponse({"ok": True})),
            *create_agent_card_routes(card),
            *_oauth_routes(agent),
        ]
        if "JSONRPC" in bindings:
            routes += create_jsonrpc_routes(handler, rpc_url=RPC_PATH)
        if "HTTP+JSON" in bindings:
            routes += create_rest_routes(handler, enable_v0_3_compat=rest_03)
        app = Starlette(routes=routes)
        return PeerFaces(RawModes(app, agent, output=VALID_OUTPUT), agent, auth, no_get_task)

    return build


@contextlib.contextmanager
def run_peer(**options: Any) -> Iterator[TestAgent]:
    """Serve a peer (see the module docstring) in a background thread."""
    with run_agent(build=peer_builder(**options)) as agent:
        agent.revoke = agent.issued.clear  # type: ignore[attr-defined]
        yield agent


@contextlib.contextmanager
def run_legacy_peer(*flags: str) -> Iterator[TestAgent]:
    """The a2a-sdk 0.3.26 agent of ``tests/support/legacy_agent.py`` (A2A 0.3, JSON-RPC;
    ``--rest``: HTTP+JSON; ``--push``: it pushes) as a child process with the cached 0.3
    environment; yields a :class:`TestAgent` that only carries its URL (the process keeps
    its own records)."""
    import subprocess
    import time
    from pathlib import Path

    import httpx

    from tests.support.legacy_sdk import legacy_python
    from tests.support.serving import free_port

    port = free_port()
    script = Path(__file__).with_name("legacy_agent.py")
    process = subprocess.Popen(
        [str(legacy_python()), str(script), str(port), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        agent = TestAgent(port=port)
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(agent.url + "/.well-known/agent-card.json", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the 0.3 agent did not start") from None
                time.sleep(0.1)
        yield agent
    finally:
        process.terminate()
        process.wait(timeout=10)
