"""Agents' credentials: accepted shapes, write-only, encrypted at rest, rotatable."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.db import connection

from agent_profiles.credentials import read_credentials
from agent_profiles.interfaces import call_target
from agent_profiles.models import AgentProfile
from tests.agent_profiles.test_registration import assert_error, assert_nothing_written, body

SECRET = "tok-5f1c0ffee-very-secret"
BEARER = {"type": "bearer", "token": SECRET}
API_KEY = {"type": "apiKey", "in": "header", "name": "X-Api-Key", "value": SECRET}


pytestmark = pytest.mark.usefixtures("open_registration")


def oauth2(**overrides: Any) -> dict[str, Any]:
    auth = {
        "type": "oauth2",
        "tokenUrl": "http://127.0.0.1:9/token",
        "clientId": "platform",
        "clientSecret": SECRET,
        "scopes": ["a2a.call"],
    }
    auth.update(overrides)
    return auth


def stored_column(agent_id: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT auth_encrypted FROM agent_profiles_agentprofile WHERE id = %s", [agent_id]
        )
        return cursor.fetchone()[0]


@pytest.mark.parametrize("auth", [BEARER, API_KEY, oauth2()])
def test_each_shape_is_accepted_stored_encrypted_and_given_to_dispatch(
    register: Any, skill: Any, auth: dict[str, Any], caplog: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    response = register(body(auth=auth))
    assert response.status_code == 201, response.content
    assert SECRET not in response.content.decode()
    assert response.json()["profile"]["credential"] == {"configured": True, "type": auth["type"]}
    column = stored_column("acme-ce")
    assert column
    assert SECRET not in column
    assert "token" not in column
    assert call_target(AgentProfile.objects.get()).auth == auth
    assert SECRET not in caplog.text


@pytest.mark.parametrize(
    ("auth", "field"),
    [
        ("a token", "auth"),
        ({"type": "basic", "username": "u"}, "auth.type"),
        ({"token": SECRET}, "auth.type"),
        ({"type": "bearer"}, "auth.token"),
        ({"type": "bearer", "token": 123}, "auth.token"),
        ({"type": "bearer", "token": "  "}, "auth.token"),
        ({"type": "bearer", "token": "a\r\nX-Evil: 1"}, "auth.token"),
        ({"type": "bearer", "token": SECRET, "extra": 1}, "auth.extra"),
        ({**API_KEY, "in": "query"}, "auth.in"),
        ({**API_KEY, "name": "Bad Name"}, "auth.name"),
        ({**API_KEY, "name": "Content-Type"}, "auth.name"),
        # A pattern's $ matches before a final newline: taken, then refused by httpx at
        # every call to the agent.
        ({**API_KEY, "name": "X-Api-Key\n"}, "auth.name"),
        ({**API_KEY, "value": None}, "auth.value"),
        (oauth2(clientSecret=None), "auth.clientSecret"),
        (oauth2(tokenUrl="ftp://x/token"), "auth.tokenUrl"),
        (oauth2(scopes="a2a.call"), "auth.scopes"),
        (oauth2(scopes=["two words"]), "auth.scopes"),
    ],
)
def test_a_credential_of_the_wrong_shape_is_refused_naming_the_field(
    register: Any, skill: Any, auth: Any, field: str
) -> None:
    error = assert_error(register(body(auth=auth)), 400, "validation_error")
    assert field in error["message"]
    assert SECRET not in str(error)
    assert_nothing_written()


def test_a_token_url_at_a_private_address_is_refused(
    register: Any, skill: Any, settings: Any
) -> None:
    settings.ALLOW_LOOPBACK_URLS = False
    error = assert_error(register(body(auth=oauth2())), 400, "validation_error")
    assert "auth.tokenUrl" in error["message"]


def test_a_nul_in_a_secret_is_refused_without_echoing_it(register: Any, skill: Any) -> None:
    error = assert_error(
        register(body(auth={"type": "bearer", "token": "abc\u0000def"})), 400, "invalid_text"
    )
    assert "auth.token" in error["message"]
    assert "abc" not in error["message"]
    assert_nothing_written()


def test_the_agent_rotates_its_credential_by_re_registering(register: Any, skill: Any) -> None:
    key = register(body(auth=BEARER)).json()["apiKey"]
    response = register(body(auth={"type": "bearer", "token": "second-token"}), key=key)
    assert response.status_code == 200
    agent = AgentProfile.objects.get()
    assert read_credentials(agent) == {"type": "bearer", "token": "second-token"}
    register(body(name="kept"), key=key)  # auth left out: kept
    agent.refresh_from_db()
    assert read_credentials(agent) == {"type": "bearer", "token": "second-token"}
    response = register(body(auth=None), key=key)  # null: cleared
    assert response.json()["profile"]["credential"] == {"configured": False, "type": None}
    agent.refresh_from_db()
    assert read_credentials(agent) is None
    assert call_target(agent).auth is None


def test_another_caller_cannot_replace_a_credential(register: Any, skill: Any) -> None:
    register(body(auth=BEARER))
    assert_error(register(body(auth={"type": "bearer", "token": "evil"})), 409, "agent_exists")
    assert read_credentials(AgentProfile.objects.get()) == BEARER


def test_credentials_key_rotation_keeps_old_secrets_readable(
    register: Any, skill: Any, settings: Any
) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.CREDENTIALS_KEY = old
    register(body(auth=BEARER))
    settings.CREDENTIALS_KEY = f"{new},{old}"
    assert read_credentials(AgentProfile.objects.get()) == BEARER
    settings.CREDENTIALS_KEY = new  # the old key dropped before re-encryption
    assert read_credentials(AgentProfile.objects.get()) is None


def test_an_unreadable_credential_is_logged_without_the_secret(
    register: Any, skill: Any, settings: Any, caplog: Any
) -> None:
    settings.CREDENTIALS_KEY = Fernet.generate_key().decode()
    register(body(auth=BEARER))
    settings.CREDENTIALS_KEY = Fernet.generate_key().decode()
    with caplog.at_level(logging.ERROR):
        assert call_target(AgentProfile.objects.get()).auth is None
    assert "cannot be decrypted" in caplog.text
    assert SECRET not in caplog.text


def test_the_default_key_is_derived_from_secret_key(
    register: Any, skill: Any, settings: Any
) -> None:
    settings.CREDENTIALS_KEY = ""
    register(body(auth=BEARER))
    agent = AgentProfile.objects.get()
    assert read_credentials(agent) == BEARER
    settings.SECRET_KEY = "another-secret-key-entirely"
    assert read_credentials(agent) is None
