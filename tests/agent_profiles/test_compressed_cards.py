"""Compressed agent cards (real HTTP servers): a gzip bomb is refused as too large while
it expands, not after (httpx once expanded 20 MB in one step before the cap saw it), a
gzip or deflate card is read as any other, one whose gzip is broken is refused, and one
trickled a byte at a time still ends at its deadline."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from agent_profiles.cards import CardUnreachable, fetch_card
from agent_profiles.models import AgentProfile
from agent_profiles.negotiation import InvalidCard
from tests.agent_profiles.test_registration import assert_error, body
from tests.support.cardserver import card_v1, serve
from tests.support.encoded import deflated, gzip_bomb, peak_memory
from tests.support.trickle import trickling_server

WELL_KNOWN = "/.well-known/agent-card.json"


@pytest.fixture(autouse=True)
def loopback(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True


def gzipped(body: bytes) -> tuple[int, dict[str, str], bytes]:
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    return 200, headers, gzip.compress(body)


def test_a_gzip_bomb_card_is_too_large_before_it_expands() -> None:
    """20 kB on the wire, 20 MB of zeros decoded, against the default 512 kB limit."""
    bomb = gzip_bomb()
    with serve() as server:
        server.routes[WELL_KNOWN] = (200, {"Content-Encoding": "gzip"}, bomb)
        with peak_memory() as peak, pytest.raises(InvalidCard) as refused:
            fetch_card("", server.url)
    assert refused.value.code == "agent_card_too_large"
    assert peak[0] < 5_000_000, peak  # the limit and a step or two, not 20 MB


@pytest.mark.usefixtures("open_registration")
def test_a_gzip_bomb_card_is_refused_at_registration(register: Any, skill: Any) -> None:
    with serve() as server:
        server.routes[WELL_KNOWN] = (200, {"Content-Encoding": "gzip"}, gzip_bomb())
        with peak_memory() as peak:
            response = register(body(a2aEndpoint=server.url))
    assert_error(response, 400, "agent_card_too_large")
    assert not AgentProfile.objects.exists()
    assert peak[0] < 5_000_000, peak


@pytest.mark.parametrize("coding", ["gzip", "deflate", "raw deflate"])
def test_a_compressed_card_is_read_as_any_other(coding: str) -> None:
    with serve() as server:
        card = card_v1(server.url, ("HTTP+JSON", "1.0"), padding="y" * 100_000)
        raw = json.dumps(card).encode()
        if coding == "gzip":
            server.routes[WELL_KNOWN] = gzipped(raw)
        else:
            compressed = deflated(raw, raw=coding == "raw deflate")
            server.routes[WELL_KNOWN] = (200, {"Content-Encoding": "deflate"}, compressed)
        read = fetch_card("", server.url)
    assert read.document == card
    assert read.chosen.url == server.url


def test_a_card_whose_gzip_is_broken_is_refused_naming_it() -> None:
    with serve() as server:
        garbled = gzip.compress(b'{"name": "x"}')[:10] + b"\xff" * 40  # a bad block type
        server.routes[WELL_KNOWN] = (200, {"Content-Encoding": "gzip"}, garbled)
        with pytest.raises(InvalidCard, match="gzip encoding is broken") as refused:
            fetch_card("", server.url)
    assert refused.value.code == "invalid_agent_card"


def test_a_gzip_card_trickled_a_byte_at_a_time_ends_at_its_deadline() -> None:
    """A gzip header and a stored block, then its bytes one at a time: each decodes at
    once, within the read timeout; the whole card never comes."""
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
        b"Content-Length: 100000\r\n\r\n"
        + b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # gzip header
        + b"\x00\xff\xff\x00\x00"  # a stored (uncompressed) deflate block of 65535 bytes
    )
    with trickling_server(head, b" ") as peer:
        url = f"http://127.0.0.1:{peer.port}{WELL_KNOWN}"
        with pytest.raises(CardUnreachable) as refused:
            fetch_card(url, "", timeout=0.3)
    assert "no whole answer by the call's deadline" in str(refused.value)
