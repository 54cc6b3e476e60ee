"""The urllib3 pool for plain calls to agents keeps the URL guard's promises: the name is
resolved once, refused if unsafe, the connection goes to the checked address with the
name's ``Host`` and TLS server name, redirects are not followed; failures are ours."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from agent_profiles.guarded_pool import (
    AnswerTooLarge,
    CallFailed,
    CallTimedOut,
    GuardedPool,
    PlainResponse,
)
from agent_profiles.urlguard import UnsafeURL, use_resolver

TIMEOUTS = {"connect_timeout": 2.0, "read_timeout": 2.0}


@pytest.fixture
def strict(settings: Any) -> Any:
    settings.ALLOW_PRIVATE_URLS = False
    settings.ALLOW_LOOPBACK_URLS = False
    return settings


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[dict[str, Any]] = []
    ports: list[int] = []  # the client's port of each request: which connection it used

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        _Handler.seen.append({"host": self.headers["Host"], "path": self.path, "body": body})
        _Handler.ports.append(self.client_address[1])
        if self.path == "/big":
            self._answer(200, b"x" * 300_000, {"Content-Type": "application/json"})
        elif self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for _ in range(300):
                self.wfile.write(b"3e8\r\n" + b"y" * 1000 + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/redirect":
            self._answer(302, b"", {"Location": "http://10.0.0.1/"})
        elif self.path == "/latin":
            self._answer(
                200, "café".encode("latin-1"), {"Content-Type": "text/plain; charset=latin-1"}
            )
        elif self.path == "/odd-charset":
            self._answer(200, b"ok", {"Content-Type": "text/plain; charset=no-such-thing"})
        else:
            self._answer(200, b'{"ok":true}', {"Content-Type": "application/json"})

    def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Handler.seen, _Handler.ports = [], []
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_it_connects_to_the_checked_address_with_the_names_host_header(
    strict: Any, receiver: int
) -> None:
    strict.ALLOW_LOOPBACK_URLS = True
    calls: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        # The first answer is safe, later ones private: a second resolution would be
        # refused, and there must be only one per request.
        calls.append(host)
        return ["127.0.0.1"] if len(calls) == 1 else ["10.9.9.9"]

    with use_resolver(rebinding):
        answer = GuardedPool().request(
            "POST",
            f"http://hook.example:{receiver}/in?x=1",
            headers={"Content-Type": "application/json"},
            body=b'{"a":1}',
            **TIMEOUTS,
        )
    assert (answer.status_code, answer.content, answer.text) == (200, b'{"ok":true}', '{"ok":true}')
    assert answer.headers.get("content-type") == "application/json"  # any case
    assert calls == ["hook.example"]
    assert _Handler.seen == [
        {"host": f"hook.example:{receiver}", "path": "/in?x=1", "body": b'{"a":1}'}
    ]


def test_a_name_that_resolves_to_a_refused_address_is_not_called(
    strict: Any, receiver: int
) -> None:
    with use_resolver(lambda host, port: ["127.0.0.1"]), pytest.raises(UnsafeURL, match="loopback"):
        GuardedPool().request(
            "POST", f"http://hook.example:{receiver}/in", headers={}, body=None, **TIMEOUTS
        )
    assert _Handler.seen == []


def test_redirects_are_answers_not_followed(strict: Any, receiver: int) -> None:
    strict.ALLOW_LOOPBACK_URLS = True
    answer = GuardedPool().request(
        "POST", f"http://127.0.0.1:{receiver}/redirect", headers={}, body=None, **TIMEOUTS
    )
    assert answer.status_code == 302
    assert len(_Handler.seen) == 1


def test_the_text_follows_the_declared_charset(strict: Any, receiver: int) -> None:
    strict.ALLOW_LOOPBACK_URLS = True
    pool = GuardedPool()
    latin = pool.request(
        "POST", f"http://127.0.0.1:{receiver}/latin", headers={}, body=None, **TIMEOUTS
    )
    odd = pool.request(
        "POST", f"http://127.0.0.1:{receiver}/odd-charset", headers={}, body=None, **TIMEOUTS
    )
    assert (latin.text, odd.text) == ("café", "ok")
    assert PlainResponse(200, {}, b"\xff").text == "\ufffd"


def test_a_refused_connection_is_a_failure_with_a_readable_reason(strict: Any) -> None:
    strict.ALLOW_LOOPBACK_URLS = True
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(CallFailed) as info:
            GuardedPool().request(
                "GET", f"http://127.0.0.1:{port}/", headers={}, body=None, **TIMEOUTS
            )
    assert not isinstance(info.value, CallTimedOut)
    assert "refused" in str(info.value).lower()
    assert "HTTPConnection(" not in str(info.value)


def test_an_agent_that_never_answers_times_out(strict: Any) -> None:
    strict.ALLOW_LOOPBACK_URLS = True
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # accepts (the kernel does), never answers
        port = silent.getsockname()[1]
        with pytest.raises(CallTimedOut, match="timed out"):
            GuardedPool().request(
                "GET",
                f"http://127.0.0.1:{port}/",
                headers={},
                body=None,
                connect_timeout=2,
                read_timeout=0.3,
            )


def _certificate(directory: Path, name: str) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def test_tls_names_the_url_host_and_checks_the_certificate(strict: Any, tmp_path: Path) -> None:
    """A self-signed certificate for the right name: the server sees the URL's name as
    the TLS server name (not the pinned address), and the client refuses the certificate
    (it is in no trusted bundle), so verification is on."""
    strict.ALLOW_LOOPBACK_URLS = True
    cert_file, key_file = _certificate(tmp_path, "agent.example")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    names: list[str | None] = []
    context.sni_callback = lambda sock, name, ctx: names.append(name)  # type: ignore[assignment]
    _Handler.seen, _Handler.ports = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"https://agent.example:{server.server_address[1]}/in"
        with (
            use_resolver(lambda host, port: ["127.0.0.1"]),
            pytest.raises(CallFailed, match="certificate"),
        ):
            GuardedPool().request("POST", url, headers={}, body=b"{}", **TIMEOUTS)
    finally:
        server.shutdown()
        server.server_close()
    assert names == ["agent.example"]
    assert _Handler.seen == []


@pytest.mark.parametrize("path", ["/big", "/chunked"])
def test_an_answer_over_the_cap_is_refused_and_its_connection_not_reused(
    settings: Any, receiver: int, path: str
) -> None:
    """A declared length over the cap is refused before reading; a chunked body once the
    cap is passed (300 kB against 70 kB: most of it unread). The half-read connection is
    closed, so the next call gets a new one."""
    settings.ALLOW_LOOPBACK_URLS = True
    pool = GuardedPool()
    url = f"http://127.0.0.1:{receiver}"
    whole = pool.request("POST", url + path, headers={}, body=b"", max_bytes=300_000, **TIMEOUTS)
    assert len(whole.content) == 300_000
    pool.request("POST", url + "/ok", headers={}, body=b"", max_bytes=11, **TIMEOUTS)
    with pytest.raises(AnswerTooLarge) as refused:
        pool.request("POST", url + path, headers={}, body=b"", max_bytes=70_000, **TIMEOUTS)
    assert refused.value.limit == 70_000
    after = pool.request("POST", url + "/ok", headers={}, body=b"", max_bytes=11, **TIMEOUTS)
    assert after.content == b'{"ok":true}'
    ports = _Handler.ports
    assert ports[0] == ports[1] == ports[2]  # read whole: the connection was kept
    assert ports[3] != ports[2]  # left half-read: closed, not reused
