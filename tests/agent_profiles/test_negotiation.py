"""Reading cards and choosing the interface (pure functions, no network)."""

from __future__ import annotations

from typing import Any

import pytest

from agent_profiles.negotiation import (
    Interface,
    InvalidCard,
    normalize_binding,
    normalize_version,
    parse_card,
    spoken,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("HTTP+JSON", "HTTP+JSON"),
        ("http+json", "HTTP+JSON"),
        ("REST", "HTTP+JSON"),
        ("JSONRPC", "JSONRPC"),
        ("json-rpc", "JSONRPC"),
        ("GRPC", "GRPC"),
        (None, ""),
    ],
)
def test_binding_spellings(raw: Any, expected: str) -> None:
    assert normalize_binding(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1.0", "1.0"),
        ("1", "1.0"),
        ("1.0.2", "1.0"),
        ("0.3.0", "0.3"),
        ("0.3.x", "0.3"),
        ("0.2.5", "0.2.5"),
        ("2.0", "2.0"),
    ],
)
def test_version_spellings(raw: str, expected: str) -> None:
    assert normalize_version(raw) == expected


def test_the_order_is_10_first_then_http_json_then_the_cards_order() -> None:
    offered = [
        Interface("JSONRPC", "0.3", "http://a/1"),
        Interface("GRPC", "1.0", "http://a/2"),
        Interface("HTTP+JSON", "0.3", "http://a/3"),
        Interface("JSONRPC", "1.0", "http://a/4"),
        Interface("JSONRPC", "1.0", "http://a/5"),
        Interface("HTTP+JSON", "2.0", "http://a/6"),
    ]
    assert [i.url for i in spoken(offered)] == [
        "http://a/4",
        "http://a/5",
        "http://a/3",
        "http://a/1",
    ]


def test_relative_interface_urls_are_read_against_the_card() -> None:
    card = {"name": "x", "supportedInterfaces": [{"url": "/a2a", "protocolBinding": "JSONRPC"}]}
    parsed = parse_card(card, "https://agent.example/.well-known/agent-card.json")
    assert parsed.interfaces == [Interface("JSONRPC", "1.0", "https://agent.example/a2a")]


def test_capabilities_must_be_true_booleans() -> None:
    card = {"name": "x", "url": "http://a/", "capabilities": {"streaming": "yes"}}
    assert parse_card(card, "http://a/card").streaming is False


def test_an_empty_name_or_missing_interfaces_is_not_a_card() -> None:
    with pytest.raises(InvalidCard):
        parse_card({"supportedInterfaces": []}, "http://a/card")
    with pytest.raises(InvalidCard):
        parse_card({"name": "x", "skills": []}, "http://a/card")
