"""The agent card endpoints: caching headers, 304, tenant cards, the extended card."""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import pytest
from a2a.compat.v0_3 import types as v03
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import a2a_pb2 as pb
from django.test import Client
from google.protobuf.json_format import ParseDict

from tests.a2a_face.conftest import FaceClient, error_reason
from tests.a2a_face.schema import core_card, validate

pytestmark = pytest.mark.django_db


@pytest.fixture
def cards(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """Stand-in card builders, so these tests exercise only the face's HTTP behaviour."""
    calls = types.SimpleNamespace(version="1")

    def platform_card(*, extended: bool = False) -> dict[str, Any]:
        return {"name": "Platform", "version": calls.version, "extended": extended}

    def agent_card(agent: Any) -> dict[str, Any]:
        return {"name": agent.id}

    try:
        import a2a.cards as module
    except ImportError:
        module = types.ModuleType("a2a.cards")
        monkeypatch.setitem(sys.modules, "a2a.cards", module)
    monkeypatch.setattr(module, "platform_card", platform_card, raising=False)
    monkeypatch.setattr(module, "agent_card", agent_card, raising=False)
    return calls


def test_the_well_known_card_is_cacheable(cards: Any, skill: Any) -> None:
    response = Client().get("/.well-known/agent-card.json")
    assert response.status_code == 200
    assert response.json()["name"] == "Platform"
    assert response["Cache-Control"].startswith("public, max-age=")
    assert response["ETag"].startswith('"')
    assert response["Last-Modified"].endswith("GMT")


def test_if_none_match_gives_304(cards: Any) -> None:
    etag = Client().get("/.well-known/agent-card.json")["ETag"]
    response = Client().get("/.well-known/agent-card.json", headers={"If-None-Match": etag})
    assert response.status_code == 304
    assert response["ETag"] == etag
    assert response.content == b""


def test_a_changed_card_gets_a_new_etag(cards: Any) -> None:
    etag = Client().get("/.well-known/agent-card.json")["ETag"]
    cards.version = "2"
    response = Client().get("/.well-known/agent-card.json", headers={"If-None-Match": etag})
    assert response.status_code == 200
    assert response["ETag"] != etag


def test_if_modified_since_gives_304(cards: Any, skill: Any) -> None:
    modified = Client().get("/.well-known/agent-card.json")["Last-Modified"]
    response = Client().get("/.well-known/agent-card.json", headers={"If-Modified-Since": modified})
    assert response.status_code == 304


def test_the_card_refuses_post_with_json_405(cards: Any) -> None:
    response = Client().post("/.well-known/agent-card.json")
    assert response.status_code == 405
    assert error_reason(response) == "UNSUPPORTED_OPERATION"


def test_a_tenant_serves_its_agents_card(cards: Any, agent: Any) -> None:
    response = Client().get("/v1/a2a/agent-one/.well-known/agent-card.json")
    assert response.json() == {"name": "agent-one"}
    missing = Client().get("/v1/a2a/nobody/.well-known/agent-card.json")
    assert missing.status_code == 404


def test_the_extended_card_is_unsupported_without_the_setting(cards: Any, alice: Any) -> None:
    response = FaceClient(alice.raw_token).get("/v1/a2a/extendedAgentCard")
    assert response.status_code == 400
    assert error_reason(response) == "UNSUPPORTED_OPERATION"


def test_the_extended_card_is_for_authenticated_callers(
    cards: Any, settings: Any, alice: Any, make_agent: Any
) -> None:
    settings.A2A_EXTENDED_CARD_BEARER_TOKEN = "s3cret-extended"
    settings.A2A_ALLOW_ANONYMOUS = True  # anonymous task calls do not open the extended card
    for refused in (None, "wrong-token", "usr_forged_token"):
        response = FaceClient(refused).get("/v1/a2a/extendedAgentCard")
        assert response.status_code == 401, refused
        assert error_reason(response) == "UNAUTHENTICATED"
    # The card's own scheme (a user's token, an agent's key: A2A 1.0 13.3) and the
    # extended card's token (stand-in cards: no schema check).
    agent_key = make_agent(id="agent-reader").raw_key
    for token in (alice.raw_token, agent_key, "s3cret-extended"):
        response = FaceClient(token, check=False).get("/v1/a2a/extendedAgentCard")
        assert response.status_code == 200
        assert response.json() == {"name": "Platform", "version": "1", "extended": True}


def test_the_extended_card_over_jsonrpc(cards: Any, settings: Any) -> None:
    settings.A2A_EXTENDED_CARD_BEARER_TOKEN = "s3cret-extended"
    client = FaceClient("s3cret-extended", check=False)  # stand-in cards: no schema check
    result = client.rpc("GetExtendedAgentCard").json()["result"]
    assert result["extended"] is True
    settings.A2A_EXTENDED_CARD_BEARER_TOKEN = ""
    error = FaceClient("s3cret-extended").rpc("GetExtendedAgentCard").json()["error"]
    assert error["code"] == -32004


def test_the_real_card_advertises_both_bindings(skill: Any, settings: Any) -> None:
    body = Client().get("/.well-known/agent-card.json").json()
    interfaces = [
        (i["protocolBinding"], i["url"], i["protocolVersion"]) for i in body["supportedInterfaces"]
    ]
    assert interfaces == [
        ("HTTP+JSON", f"{settings.PUBLIC_URL}/v1/a2a", "1.0"),
        ("JSONRPC", f"{settings.PUBLIC_URL}/v1/a2a/jsonrpc", "1.0"),
        ("JSONRPC", f"{settings.PUBLIC_URL}/v1/a2a/jsonrpc", "0.3"),
    ]
    # What a 0.3 client reads: the 0.3 JSON-RPC interface.
    assert body["url"] == f"{settings.PUBLIC_URL}/v1/a2a/jsonrpc"
    assert (body["preferredTransport"], body["protocolVersion"]) == ("JSONRPC", "0.3")
    validate("Agent Card", core_card(body))
    assert body["capabilities"]["streaming"] is True
    assert body["capabilities"]["pushNotifications"] is True
    assert [s["id"] for s in body["skills"]] == ["ce-review"]


def test_a_skill_without_tags_is_carried_with_its_id_as_its_tag(
    make_skill: Any, make_agent: Any
) -> None:
    """AgentSkill.tags is REQUIRED, and a required list holds at least one element; the
    registry allows a skill with no tags nor domain, which the cards carried as []."""
    bare = make_skill(id="bare", tags=[], domain="", subdomain="")
    make_agent(skills=[bare])
    for path in ("/.well-known/agent-card.json", "/v1/a2a/agent-one/.well-known/agent-card.json"):
        skills = {s["id"]: s for s in Client().get(path).json()["skills"]}
        assert skills["bare"]["tags"] == ["bare"]


def test_a_json_example_reads_in_the_cards_as_its_own_text(
    make_skill: Any, make_agent: Any
) -> None:
    """An example that is JSON is shown as JSON text (docs/registry.md): as written, not
    with every non-ASCII character as a ``\\u`` escape (an emoji as two)."""
    example = {"product": "lampe à pied 🛋", "market": "ישראל"}
    skill = make_skill(id="intl", examples=["une lampe", example])
    make_agent(skills=[skill])
    for path in ("/.well-known/agent-card.json", "/v1/a2a/agent-one/.well-known/agent-card.json"):
        shown = {s["id"]: s for s in Client().get(path).json()["skills"]}["intl"]["examples"]
        assert shown[0] == "une lampe"
        assert json.loads(shown[1]) == example
        assert "lampe à pied 🛋" in shown[1], shown[1]
        assert "ישראל" in shown[1], shown[1]


def test_the_real_card_changes_its_etag_when_a_skill_changes(skill: Any) -> None:
    first = Client().get("/.well-known/agent-card.json")
    skill.description = "Now with more checks."
    skill.save()
    second = Client().get("/.well-known/agent-card.json", headers={"If-None-Match": first["ETag"]})
    assert second.status_code == 200
    assert second["ETag"] != first["ETag"]


@pytest.mark.parametrize(
    "path", ["/.well-known/agent-card.json", "/v1/a2a/agent-one/.well-known/agent-card.json"]
)
def test_a_0_3_client_reads_the_security_and_the_extended_card_the_official_server_gives(
    path: str, agent: Any, settings: Any
) -> None:
    """A 0.3 client (a2a-sdk 0.3, @a2a-js/sdk 0.3) reads ``security`` and the 0.3 form of
    the bearer scheme to send its credentials (without them its auth interceptor sends
    none, and every call is refused), and ``supportsAuthenticatedExtendedCard`` to fetch
    the extended card; the official a2a-sdk server puts them on the same card."""
    settings.A2A_EXTENDED_CARD_BEARER_TOKEN = "s3cret-extended"
    served = Client().get(path).json()
    official = agent_card_to_dict(ParseDict(served, pb.AgentCard(), ignore_unknown_fields=True))
    assert served == official
    legacy = v03.AgentCard.model_validate(served)  # as a 0.3 client reads it
    assert legacy.security == [{"bearer": []}]
    assert isinstance(legacy.security_schemes["bearer"].root, v03.HTTPAuthSecurityScheme)
    assert legacy.security_schemes["bearer"].root.scheme == "Bearer"
    assert legacy.supports_authenticated_extended_card is True
    validate("Agent Card", core_card(served))
