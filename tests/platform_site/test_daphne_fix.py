"""platform_site.daphne_fix: daphne hands POST bodies on without Twisted's form parsing."""

from __future__ import annotations

from io import BytesIO
from types import SimpleNamespace
from typing import Any

import pytest
from daphne.http_protocol import WebRequest
from twisted.web import http
from twisted.web.test.requesthelper import DummyChannel

from platform_site import daphne_fix

FORM = b"a=1&b=2"


def _received(request_class: type[http.Request]) -> http.Request:
    """A form POST through Twisted's ``requestReceived``; ``process`` keeps ``args``."""

    class Probe(request_class):  # type: ignore[misc, valid-type]
        def process(self) -> None:
            self.seen = dict(self.args)

    channel: Any = DummyChannel()
    channel.factory = SimpleNamespace(server=SimpleNamespace(protocol_connected=lambda r: None))
    request = Probe(channel)
    request.content = BytesIO()
    request.content.write(FORM)  # as the channel leaves it: positioned after the body
    request.requestHeaders.setRawHeaders(b"content-type", [b"application/x-www-form-urlencoded"])
    request.requestReceived(b"POST", b"/api/tasks", b"HTTP/1.1")
    return request


def test_daphne_requests_skip_the_content_type_parse_and_the_form(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    daphne_fix.install()  # as platform_site.asgi does; twice is harmless
    daphne_fix.install()
    parsed: list[bytes] = []
    real = http._parseContentType
    monkeypatch.setattr(http, "_parseContentType", lambda line: parsed.append(line) or real(line))
    request = _received(WebRequest)
    assert request._parsePOSTFormSubmission is False
    assert request.seen == {}  # type: ignore[attr-defined]
    assert request.content.getvalue() == FORM  # the body is untouched for the app
    assert parsed == []


def test_plain_twisted_requests_still_parse_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fix is daphne's alone (and the probe above would see a parsed form without it)."""
    daphne_fix.install()
    parsed: list[bytes] = []
    real = http._parseContentType
    monkeypatch.setattr(http, "_parseContentType", lambda line: parsed.append(line) or real(line))
    request = _received(http.Request)
    assert request.seen == {b"a": [b"1"], b"b": [b"2"]}  # type: ignore[attr-defined]
    assert parsed == [b"application/x-www-form-urlencoded"]


class _Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, line: str) -> None:
        self.lines.append(line)

    def flush(self) -> None:
        pass


def _factory_log(verbosity: int) -> list[str]:
    """What daphne's HTTP factory writes to Twisted's log for one finished request."""
    from daphne.http_protocol import HTTPFactory

    factory = HTTPFactory(SimpleNamespace(verbosity=verbosity))
    factory._logFile = _Lines()
    request = _received(WebRequest)
    request.setResponseCode(200)
    factory.log(request)
    return factory._logFile.lines


def test_no_access_line_is_formatted_when_daphne_discards_twisteds_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    daphne_fix.install()
    formatted: list[Any] = []
    real = http.combinedLogFormatter
    monkeypatch.setattr(http, "combinedLogFormatter", lambda *a: formatted.append(a) or real(*a))
    assert _factory_log(verbosity=1) == []
    assert _factory_log(verbosity=0) == []
    assert formatted == []


def test_a_verbose_daphne_still_gets_twisteds_access_line() -> None:
    daphne_fix.install()
    lines = _factory_log(verbosity=2)
    assert len(lines) == 1
    assert '"POST /api/tasks HTTP/1.1" 200' in lines[0]
