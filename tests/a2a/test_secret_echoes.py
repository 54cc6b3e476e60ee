"""Agents and token endpoints that echo the request in their error answer: whatever the
platform quotes of such an answer (the task's ``error``, its metadata and events, the
agent's health, log lines) has every secret the call sent redacted, in every form it went
out in (raw, as its header value, base64 in HTTP Basic). And an agent answering a status
line of raw garbage with NULs gets an error text PostgreSQL can store.

The agent here is a small real HTTP server (stdlib, loopback) so the echo is exactly what
went over the wire; no test waits on a clock.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, unquote

import pytest
from django.utils import timezone

from a2a import creation, worker
from a2a.models import Task
from a2a.states import TERMINAL_STATES, Transport
from a2a.transports import credentials as outbound_credentials
from a2a.transports import redaction
from agent_profiles.credentials import set_credentials
from agent_profiles.models import AgentProfile
from tests.support.serving import threaded

pytestmark = pytest.mark.django_db

BEARER = "SUPERSECRET-BEARER-123"
API_KEY = "SUPERSECRET-APIKEY-789"
CLIENT_ID = "cid"
CLIENT_SECRET = "SUPERSECRET-CLIENT-456"
ACCESS_TOKEN = "SUPERSECRET-ACCESS-321"
# Every secret above starts so: an excerpt cut inside one must not keep its start either.
SECRET_START = "SUPERSECRET"
BASIC = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
GARBAGE = b"X\x00EVIL\x00 garbage\r\n\r\n"


class Echo(BaseHTTPRequestHandler):
    """Paths: ``/token-ok`` (a token), ``/token-refuses`` (400 echoing the request),
    ``/{status}[/pad{n}]/...`` (the agent: an HTTP+JSON error of that status echoing
    the request, ``n`` characters in front so a secret straddles the excerpt's cut),
    ``/notjson/...`` (a 200 that is not JSON, echoing) and ``/rpc`` (JSON-RPC: a
    JSON-RPC error at HTTP 200, echoing)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the server's own access log is not the platform's

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _echo(self, body: bytes) -> str:
        # The headers that carry secrets first, so the echo is within the quoted excerpt.
        lines = [f"{name}: {value}" for name, value in self.headers.items()]
        lines.sort(key=lambda line: not line.lower().startswith(("authorization", "x-api-key")))
        basic = self.headers.get("Authorization", "")
        if basic.startswith("Basic "):  # also the decoded "id:secret", as a debug page would
            lines.insert(1, "client " + unquote(base64.b64decode(basic[6:]).decode()))
        return "you sent " + " | ".join(lines) + " | body " + body.decode("utf-8", "replace")

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.calls += 1  # type: ignore[attr-defined]
        path = self.path
        status, ctype = 200, "application/json"
        if path == "/token-ok":
            answer = json.dumps(
                {"access_token": ACCESS_TOKEN, "token_type": "Bearer", "expires_in": 300}
            )
        elif path == "/token-refuses":
            status = 400
            answer = json.dumps({"error": "invalid_client", "error_description": self._echo(body)})
        elif path.startswith("/rpc"):
            request_id = json.loads(body or b"{}").get("id")
            error = {"code": -32600, "message": self._echo(body)}
            answer = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error})
        elif path.startswith("/notjson"):
            ctype, answer = "text/html", "<html>" + self._echo(body)
        else:
            first, _, rest = path.strip("/").partition("/")
            pad = rest.partition("/")[0]
            status, ctype = int(first), "text/plain"
            answer = "x" * int(pad[3:] if pad.startswith("pad") else 0) + self._echo(body)
        data = answer.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def echo() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    server.calls = 0  # type: ignore[attr-defined]
    with threaded(server) as url:
        yield url


@pytest.fixture
def garbage() -> Iterator[tuple[str, list[int]]]:
    """An agent that answers every request with a garbage status line holding NULs and
    closes; the list counts the requests it took."""
    listener = socket.create_server(("127.0.0.1", 0))
    taken: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed at the test's end
            with conn:
                conn.recv(65536)
                taken.append(1)
                conn.sendall(GARBAGE)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", taken
    finally:
        listener.close()


@pytest.fixture(autouse=True)
def fast(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_RETRY_BACKOFF = 0.0
    outbound_credentials.forget_tokens()


def agent_with(
    make_agent: Any, skill: Any, url: str, auth: dict[str, Any] | None, **extra: Any
) -> AgentProfile:
    """An agent at ``url`` (its registration, no card to read first) with ``auth``."""
    agent = make_agent(skills=[skill], a2a_endpoint=url, card_read_at=timezone.now(), **extra)
    if auth is not None:
        set_credentials(agent, auth)
        agent.save()
    return agent


def run(user: Any) -> Task:
    """Create a task and run the worker on it until its send is settled: failed, handed
    to the gateway or waiting (each step is due at once, so nothing waits)."""
    task = creation.create_task(skill_id="ce-review", input={"product": "lamp"}, user=user)
    for _ in range(10):
        task.refresh_from_db()
        if task.state in TERMINAL_STATES or task.transport == Transport.OFFLINE:
            break
        Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now(), lease_until=None)
        worker.process_task(task.pk)
    task.refresh_from_db()
    return task


def stored(task: Task) -> str:
    """Everything the platform kept of the failed call: the task's error, metadata and
    events, and the agent's health."""
    events = list(task.events.values_list("reason", flat=True))
    agent = AgentProfile.objects.get(pk=task.agent_id)
    health = [agent.last_call_code, agent.last_call_error]
    return json.dumps([task.error, task.metadata, events, health], ensure_ascii=False)


def assert_no_secret(text: str, *secrets: str) -> None:
    assert SECRET_START not in text
    for secret in secrets:
        assert secret not in text
        assert quote(secret, safe="") not in text


OAUTH_OK = {"type": "oauth2", "clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET}


@pytest.mark.parametrize(
    ("auth", "where", "secrets"),
    [
        ({"type": "bearer", "token": BEARER}, "/401/a2a", [BEARER, f"Bearer {BEARER}"]),
        ({"type": "bearer", "token": BEARER}, "/403/pad163/a2a", [BEARER]),  # cut inside
        ({"type": "bearer", "token": BEARER}, "/400/a2a", [BEARER]),
        ({"type": "bearer", "token": BEARER}, "/notjson/a2a", [BEARER]),
        (
            {"type": "apiKey", "in": "header", "name": "X-Api-Key", "value": API_KEY},
            "/401/a2a",
            [API_KEY],
        ),
        (OAUTH_OK, "/401/a2a", [ACCESS_TOKEN, CLIENT_SECRET, BASIC]),
    ],
    ids=["bearer-401", "bearer-cut", "bearer-400", "bearer-not-json", "api-key", "oauth2-token"],
)
def test_an_agent_echoing_the_request_gets_no_secret_into_the_task_or_the_log(
    echo: str,
    make_agent: Any,
    skill: Any,
    user: Any,
    caplog: Any,
    auth: dict[str, Any],
    where: str,
    secrets: list[str],
) -> None:
    if auth["type"] == "oauth2":
        auth = {**auth, "tokenUrl": echo + "/token-ok"}
    agent_with(make_agent, skill, echo + where, auth)
    task = run(user)
    assert task.error is not None
    assert "[redacted]" in json.dumps(task.error)  # the echo was quoted, and cleaned
    assert_no_secret(stored(task) + caplog.text, *secrets)


def test_a_token_endpoint_echoing_http_basic_gets_no_secret_into_the_task_or_the_log(
    echo: str, make_agent: Any, skill: Any, user: Any, caplog: Any
) -> None:
    auth = {**OAUTH_OK, "tokenUrl": echo + "/token-refuses", "scopes": ["tasks"]}
    agent_with(make_agent, skill, echo + "/200/a2a", auth)
    task = run(user)
    assert task.error["code"] == "agent_auth_failed"
    assert "invalid_client" in task.error["message"]
    assert "[redacted]" in task.error["message"]
    assert_no_secret(stored(task) + caplog.text, CLIENT_SECRET, BASIC, f"Basic {BASIC}")


def test_a_json_rpc_error_echoing_the_request_gets_no_secret_into_the_task_or_the_log(
    echo: str, make_agent: Any, skill: Any, user: Any, caplog: Any
) -> None:
    auth = {"type": "bearer", "token": BEARER}
    agent_with(make_agent, skill, echo + "/rpc", auth, protocol_binding="JSONRPC")
    task = run(user)
    assert "[redacted]" in task.error["message"]
    assert_no_secret(stored(task) + caplog.text, BEARER)


def test_a_garbage_status_line_with_nuls_is_stored_scrubbed_and_sent_at_most_max_attempts(
    garbage: tuple[str, list[int]], make_agent: Any, skill: Any, user: Any, settings: Any
) -> None:
    url, taken = garbage
    agent_with(make_agent, skill, url, None)
    task = run(user)
    text = stored(task)
    assert task.error["code"] == "agent_unreachable"
    assert "EVIL" in task.error["message"]  # the agent's bytes are quoted, made storable
    assert "\x00" not in text
    assert "\\u0000" not in text  # json.dumps writes a NUL so
    assert len(taken) <= settings.A2A_MAX_ATTEMPTS


def test_redaction_covers_every_form_and_a_secret_cut_by_an_excerpt() -> None:
    from a2a.transports.quoting import excerpt
    from agent_profiles.interfaces import CallTarget

    target = CallTarget("a", auth={"type": "bearer", "token": BEARER})
    redact = redaction.redactor(target, extra=["push-token-xyz"]).text
    assert redact(f"a Bearer {BEARER} b") == "a [redacted] b"
    assert redact(f"q={quote(f'Bearer {BEARER}', safe='')}") == "q=[redacted]"
    assert redact("token push-token-xyz") == "token [redacted]"
    cut = excerpt("x" * 186 + f" Bearer {BEARER}")  # ends " Bearer SUPERS…"
    assert SECRET_START[:6] in cut
    assert SECRET_START[:4] not in redact(cut)
    assert redact("nothing here…") == "nothing here…"
    nobody = redaction.redactor(CallTarget("a"))
    assert nobody.text(f"Bearer {BEARER}") == f"Bearer {BEARER}"
