"""The urllib3 pool for plain calls to agents keeps the URL guard's promises: the name is
resolved once, refused if unsafe, the connection goes to the checked address with the
name's ``Host`` and TLS server name, redirects are not followed; failures are ours."""

from __future__ import annotations

import datetime
import socket
import ssl
from collections.abc import Iterator
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
from tests.support.recorder import Recording, recording_server
from tests.support.trickle import trickling_server

TIMEOUTS = {"connect_timeout": 2.0, "read_timeout": 2.0}


@pytest.fixture
def strict(settings: Any) -> Any:
    settings.ALLOW_PRIVATE_URLS = False
    settings.ALLOW_LOOPBACK_URLS = False
    return settings


@pytest.fixture
def server() -> Iterator[Recording]:
    with recording_server() as recording:
        yield recording


def test_it_connects_to_the_checked_address_with_the_names_host_header(
    strict: Any, server: Recording
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
            f"http://hook.example:{server.port}/in?x=1",
            headers={"Content-Type": "application/json"},
            body=b'{"a":1}',
            **TIMEOUTS,
        )
    assert (answer.status_code, answer.content, answer.text) == (200, b'{"ok":true}', '{"ok":true}')
    assert answer.headers.get("content-type") == "application/json"  # any case
    assert calls == ["hook.example"]
    assert server.seen == [
        {"host": f"hook.example:{server.port}", "path": "/in?x=1", "body": b'{"a":1}'}
    ]


def test_a_name_that_resolves_to_a_refused_address_is_not_called(
    strict: Any, server: Recording
) -> None:
    with use_resolver(lambda host, port: ["127.0.0.1"]), pytest.raises(UnsafeURL, match="loopback"):
        GuardedPool().request(
            "POST", f"http://hook.example:{server.port}/in", headers={}, body=None, **TIMEOUTS
        )
    assert server.seen == []


def test_redirects_are_answers_not_followed(strict: Any, server: Recording) -> None:
    strict.ALLOW_LOOPBACK_URLS = True
    answer = GuardedPool().request(
        "POST", f"http://127.0.0.1:{server.port}/redirect", headers={}, body=None, **TIMEOUTS
    )
    assert answer.status_code == 302
    assert len(server.seen) == 1


def test_the_text_follows_the_declared_charset(strict: Any, server: Recording) -> None:
    strict.ALLOW_LOOPBACK_URLS = True
    pool = GuardedPool()
    latin = pool.request(
        "POST", f"http://127.0.0.1:{server.port}/latin", headers={}, body=None, **TIMEOUTS
    )
    odd = pool.request(
        "POST", f"http://127.0.0.1:{server.port}/odd-charset", headers={}, body=None, **TIMEOUTS
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
    with recording_server(tls=context) as server:
        url = f"https://agent.example:{server.port}/in"
        with (
            use_resolver(lambda host, port: ["127.0.0.1"]),
            pytest.raises(CallFailed, match="certificate"),
        ):
            GuardedPool().request("POST", url, headers={}, body=b"{}", **TIMEOUTS)
    assert names == ["agent.example"]
    assert server.seen == []


@pytest.mark.parametrize("variable", ["SSL_CERT_FILE", "SSL_CERT_DIR"])
def test_an_operators_own_ca_verifies_calls_as_it_does_httpxs_requests(
    strict: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """SSL_CERT_FILE / SSL_CERT_DIR (docs/registry.md) trusted a CA for card reads and
    pushes (httpx) while every plain call to the same agent refused its certificate
    (certifi's bundle alone)."""
    strict.ALLOW_LOOPBACK_URLS = True
    cert_file, key_file = _certificate(tmp_path, "agent.example")
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):  # a machine may set either
        monkeypatch.delenv(name, raising=False)
    if variable == "SSL_CERT_FILE":
        monkeypatch.setenv(variable, str(cert_file))
    else:  # a directory of hashed names, as `openssl rehash` makes
        certs = tmp_path / "certs"
        certs.mkdir()
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
        (certs / f"{_subject_hash(cert)}.0").write_bytes(cert_file.read_bytes())
        monkeypatch.setenv(variable, str(certs))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    with recording_server(tls=context) as server, use_resolver(lambda h, p: ["127.0.0.1"]):
        url = f"https://agent.example:{server.port}/in"
        answer = GuardedPool().request("POST", url, headers={}, body=b"{}", **TIMEOUTS)
    assert answer.status_code == 200


def _subject_hash(cert: x509.Certificate) -> str:
    """OpenSSL's subject hash (``openssl x509 -hash``), the name a CA directory uses."""
    import subprocess

    pem = cert.public_bytes(serialization.Encoding.PEM)
    done = subprocess.run(
        ["openssl", "x509", "-noout", "-hash"], input=pem, capture_output=True, check=True
    )
    return done.stdout.decode().strip()


@pytest.mark.parametrize("path", ["/big", "/chunked"])
def test_an_answer_over_the_cap_is_refused_and_its_connection_not_reused(
    settings: Any, server: Recording, path: str
) -> None:
    """A declared length over the cap is refused before reading; a chunked body once the
    cap is passed (300 kB against 70 kB: most of it unread). The half-read connection is
    closed, so the next call gets a new one."""
    settings.ALLOW_LOOPBACK_URLS = True
    pool = GuardedPool()
    url = f"http://127.0.0.1:{server.port}"
    whole = pool.request("POST", url + path, headers={}, body=b"", max_bytes=300_000, **TIMEOUTS)
    assert len(whole.content) == 300_000
    pool.request("POST", url + "/ok", headers={}, body=b"", max_bytes=11, **TIMEOUTS)
    with pytest.raises(AnswerTooLarge) as refused:
        pool.request("POST", url + path, headers={}, body=b"", max_bytes=70_000, **TIMEOUTS)
    assert refused.value.limit == 70_000
    after = pool.request("POST", url + "/ok", headers={}, body=b"", max_bytes=11, **TIMEOUTS)
    assert after.content == b'{"ok":true}'
    ports = server.ports
    assert ports[0] == ports[1] == ports[2]  # read whole: the connection was kept
    assert ports[3] != ports[2]  # left half-read: closed, not reused


@pytest.mark.parametrize(
    ("head", "drip"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n", b"x"),  # the body
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"1\r\nx\r\n"),
        (b"HTTP/1.1 200 OK\r\nX-Slow: ", b"a"),  # the headers
        (b"", b"HTTP/1.1 200 OK\r\n"),  # the status line
    ],
    ids=["body", "chunked-body", "headers", "status-line"],
)
def test_an_answer_trickled_a_byte_at_a_time_ends_at_the_calls_deadline(
    strict: Any, head: bytes, drip: bytes
) -> None:
    """Each byte comes within the read timeout, so only a deadline for the whole answer
    ends the call (connect + read timeout + a little for the body); it held a worker's
    thread for as long as the agent liked (eight seconds here, then it failed otherwise)."""
    from agent_profiles.deadlines import whole_answer_seconds
    from agent_profiles.guarded_pool import AnswerTimedOut

    strict.ALLOW_LOOPBACK_URLS = True
    with trickling_server(head, drip) as peer, pytest.raises(AnswerTimedOut) as ended:
        GuardedPool().request(
            "POST",
            f"http://127.0.0.1:{peer.port}/",
            headers={},
            body=b"{}",
            connect_timeout=0.3,
            read_timeout=0.3,
        )
    assert f"within {whole_answer_seconds(0.3, 0.3):g} s" in str(ended.value)


def test_a_call_that_ends_in_time_leaves_its_pooled_connection_alone(
    strict: Any, server: Recording
) -> None:
    """The deadline of a call that ended is forgotten: its connection, back in the pool,
    serves the next calls after that deadline passed."""
    import time

    strict.ALLOW_LOOPBACK_URLS = True
    pool = GuardedPool()
    url = f"http://127.0.0.1:{server.port}/ok"
    for _ in range(2):
        pool.request("POST", url, headers={}, body=b"", connect_timeout=0.05, read_timeout=0.05)
        time.sleep(0.2)  # past the first call's deadline (0.15 s)
    assert len(set(server.ports)) == 1
