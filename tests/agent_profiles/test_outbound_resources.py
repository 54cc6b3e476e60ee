"""What outbound calls cost the process, whatever the number of agents: one TLS context for
all of them (health checks and card reads built one per agent per run: 28 ms CPU and
860 kB each), a bounded set of per-host pools in a long-lived guarded client (one per
agent host ever called, never dropped), and no card-read entry kept for an agent once
nobody reads its card (one per agent id ever seen)."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_profiles import card_reads, guarded_http
from agent_profiles.cards import ensure_card, fetch_card
from agent_profiles.guarded_http import GuardedTransport, guarded_client
from agent_profiles.health import check_one
from agent_profiles.urlguard import use_resolver
from tests.agent_profiles.test_guarded_pool import _certificate
from tests.support.cardserver import card_v1, json_response, serve
from tests.support.recorder import BIG_BYTES, Recording, recording_server

WELL_KNOWN = "/.well-known/agent-card.json"


@pytest.fixture
def loopback(settings: Any) -> Iterator[Any]:
    """Loopback allowed, every name resolving to 127.0.0.1 (one server, many agents)."""
    settings.ALLOW_LOOPBACK_URLS = True
    with use_resolver(lambda host, port: ["127.0.0.1"]):
        yield settings


@pytest.fixture
def contexts_built(monkeypatch: pytest.MonkeyPatch) -> list[ssl.SSLContext]:
    """Every TLS context httpx builds from now on (the process's one is forgotten)."""
    built: list[ssl.SSLContext] = []
    original = ssl.create_default_context

    def counting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        context = original(*args, **kwargs)
        built.append(context)
        return context

    monkeypatch.setattr(ssl, "create_default_context", counting)
    monkeypatch.setattr(guarded_http, "_ssl_context", None)
    return built


@pytest.fixture
def closed(monkeypatch: pytest.MonkeyPatch) -> list[httpx.HTTPTransport]:
    """The per-host transports closed from now on."""
    seen: list[httpx.HTTPTransport] = []
    original = httpx.HTTPTransport.close

    def recording(self: httpx.HTTPTransport) -> None:
        seen.append(self)
        original(self)

    monkeypatch.setattr(httpx.HTTPTransport, "close", recording)
    return seen


def test_health_checks_and_card_reads_of_many_agents_build_one_tls_context(
    loopback: Any, contexts_built: list[ssl.SSLContext]
) -> None:
    with serve() as server:
        server.routes["/health"] = json_response({"ok": True})
        server.routes[WELL_KNOWN] = json_response(card_v1(server.url, ("JSONRPC", "1.0")))
        for i in range(20):
            base = f"http://agent-{i}.example:{server.url.rsplit(':', 1)[1]}"
            assert check_one(f"{base}/health", [base + WELL_KNOWN]).ok
            assert fetch_card("", base).chosen.binding == "JSONRPC"
        assert server.hits["/health"] == 20
    assert len(contexts_built) == 1


def test_the_shared_context_still_checks_certificates_and_names_the_host(
    loopback: Any, tmp_path: Path
) -> None:
    """A self-signed certificate for the right name: the server is asked for the URL's
    name (not the pinned address) and the client refuses the certificate."""
    cert_file, key_file = _certificate(tmp_path, "agent.example")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    names: list[str | None] = []
    context.sni_callback = lambda sock, name, ctx: names.append(name)  # type: ignore[assignment]
    with recording_server(tls=context) as server, guarded_client(timeout=5) as client:
        with pytest.raises(httpx.ConnectError, match="certificate"):
            client.post(f"https://agent.example:{server.port}/in")
        assert names == ["agent.example"]
        assert server.seen == []


def _client(transport: GuardedTransport) -> httpx.Client:
    return httpx.Client(transport=transport, timeout=5, trust_env=False)


def test_a_long_lived_client_keeps_the_pools_of_its_latest_hosts_only(
    loopback: Any, monkeypatch: pytest.MonkeyPatch, closed: list[httpx.HTTPTransport]
) -> None:
    monkeypatch.setattr(guarded_http, "MAX_HOSTS", 3)
    transport = GuardedTransport()
    with recording_server() as server, _client(transport) as client:
        for host in ["a", "b", "c", "a", "d", "e"]:  # "a" used again: "b" is the oldest
            client.post(f"http://{host}.example:{server.port}/in")
        assert list(transport._pools) == ["a.example", "d.example", "e.example"]
        assert len(closed) == 2  # those of b and c, idle: at once
        assert len(server.seen) == 6


def test_a_pool_evicted_under_a_stream_is_closed_when_the_stream_ends(
    loopback: Any, monkeypatch: pytest.MonkeyPatch, closed: list[httpx.HTTPTransport]
) -> None:
    monkeypatch.setattr(guarded_http, "MAX_HOSTS", 1)
    transport = GuardedTransport()
    server: Recording
    with recording_server() as server, _client(transport) as client:
        with client.stream("POST", f"http://a.example:{server.port}/chunked") as stream:
            chunks = stream.iter_bytes()
            received = len(next(chunks))
            # Another host while the stream runs: a's pool leaves, but stays open.
            assert client.post(f"http://b.example:{server.port}/in").status_code == 200
            assert list(transport._pools) == ["b.example"]
            assert closed == []
            received += sum(len(chunk) for chunk in chunks)
        assert received == BIG_BYTES  # the stream was read to its end
        assert len(closed) == 1  # a's, once its stream was closed
        assert client.post(f"http://a.example:{server.port}/in").status_code == 200
        assert list(transport._pools) == ["a.example"]
        assert len(closed) == 2  # b's, idle: at once


@pytest.mark.django_db(transaction=True)
def test_no_card_read_entry_is_kept_once_the_read_is_over(make_agent: Any, loopback: Any) -> None:
    with serve() as server:
        server.routes[WELL_KNOWN] = json_response(card_v1(server.url, ("JSONRPC", "1.0")))
        for i in range(5):
            agent = make_agent(id=f"agent-{i}", a2a_endpoint=server.url)
            ensure_card(agent)
            assert agent.card_read_at is not None
        assert server.hits[WELL_KNOWN] == 5
    assert card_reads._reads == {}


def test_a_thread_waiting_for_a_card_read_sees_that_it_ended() -> None:
    """The entry of an agent outlives the read while a thread waits for it: the waiter
    finds the read ended after it asked, and takes its result (no second read)."""
    seen: list[bool] = []
    with card_reads.reading("agent-x") as (_asked, read):

        def waiter() -> None:
            with card_reads.reading("agent-x") as (asked, mine):
                seen.append(mine.ended > asked)

        thread = threading.Thread(target=waiter)
        thread.start()
        while read.users < 2:  # the waiter asked and waits for the lock
            time.sleep(0.01)
        time.sleep(0.05)  # past the moment it asked
        read.ended = time.monotonic()
    thread.join(5)
    assert seen == [True]
    assert card_reads._reads == {}
