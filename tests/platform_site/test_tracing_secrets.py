"""Exported spans carry no secret: an exported span is a log line. A URL's query string
(a key a caller put there anyway, a webhook receiver's ``?token=``) is cut from the URLs
the Django and httpx instrumentations record, and headers an operator chooses to capture
go out redacted when they carry a credential."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from django.core.asgi import get_asgi_application
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from platform_site import tracing

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "s3cr3t-in-a-url-9f8e7d"


class _Ok(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    """A webhook receiver on loopback that answers 200."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


def _get(path: str, headers: dict[str, str] | None = None) -> httpx.Response:
    """A GET through Django's handler, made now: its middleware chain holds the
    instrumentation's only when built while tracing is on (the project's ASGI app may have
    been built before, by another test)."""
    application = get_asgi_application()

    async def run() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.get(path, headers=headers)

    return asyncio.run(run())


def _values(spans: InMemorySpanExporter) -> list[str]:
    return [
        f"{s.name}: {name}={value}"
        for s in spans.get_finished_spans()
        for name, value in (s.attributes or {}).items()
    ]


def _post_both_ways(url: str, headers: dict[str, str] | None = None) -> None:
    assert httpx.post(url, json={}, headers=headers).status_code == 200

    async def run() -> None:
        async with httpx.AsyncClient() as client:
            assert (await client.post(url, json={}, headers=headers)).status_code == 200

    asyncio.run(run())


def test_a_query_string_reaches_no_span(spans: InMemorySpanExporter, receiver: str) -> None:
    _get(f"/api/a2a/skills?api_key={SECRET}")
    _post_both_ways(f"{receiver}?token={SECRET}")
    with tracing.client_span("POST", f"{receiver}?code={SECRET}", {}):
        pass
    values = _values(spans)
    assert [v for v in values if SECRET in v] == []
    # the spans are there, with the URLs' paths
    assert any(v.endswith("/api/a2a/skills") for v in values), values
    assert sum(v.endswith("/hook") for v in values) == 3, values


def test_captured_headers_are_redacted(monkeypatch: pytest.MonkeyPatch, receiver: str) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SERVER_REQUEST", ".*")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_REQUEST", ".*")
    monkeypatch.delenv("OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SANITIZE_FIELDS", raising=False)
    exporter = InMemorySpanExporter()
    assert tracing.setup(exporter, batch=False)
    try:
        credentials = {
            "Authorization": f"Bearer {SECRET}",
            "X-A2A-Notification-Token": SECRET,
            "X-Api-Key": SECRET,
            "X-Trace-Note": "kept",
        }
        _get("/api/a2a/skills", credentials)
        _post_both_ways(receiver, credentials)
    finally:
        tracing.teardown()
    values = _values(exporter)
    assert [v for v in values if SECRET in v] == []
    # captured (so the check above saw them), redacted; other headers as they came
    assert any("header.authorization=('[REDACTED]',)" in v for v in values), values
    assert any("header.x_trace_note=('kept',)" in v for v in values), values
