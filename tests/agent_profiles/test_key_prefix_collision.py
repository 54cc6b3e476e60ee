"""Key prefixes are 8 hex digits (32 bits), unique, and revoked keys keep theirs: after
some tens of thousands of keys and tokens (each rotation and each ``apitoken`` run adds
one) a new prefix meets an old one. Issuing draws again instead of failing with an
IntegrityError (a 500 on registration)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import IntegrityError, transaction

from agent_profiles import keys
from agent_profiles.authentication import authenticate_bearer
from agent_profiles.models import AgentProfile, ApiKey, UserToken

pytestmark = pytest.mark.django_db


@pytest.fixture
def draws(monkeypatch: Any) -> Callable[..., list[str]]:
    """Make the next prefix draws return the given prefixes, then random ones; returns
    the list of every prefix drawn."""

    def queue(*prefixes: str) -> list[str]:
        pending = list(prefixes)
        drawn: list[str] = []
        real = keys.secrets.token_hex

        def token_hex(n: int) -> str:
            value = pending.pop(0) if pending else real(n)
            drawn.append(value)
            return value

        monkeypatch.setattr(keys.secrets, "token_hex", token_hex)
        return drawn

    return queue


def test_an_agent_key_prefix_that_is_taken_is_drawn_again(
    make_agent: Any, draws: Callable[..., list[str]]
) -> None:
    """The revoked key still holds its prefix: a new agent's key draws again."""
    first = make_agent()
    taken = first.api_keys.get().prefix
    first.issue_key()  # the old row is revoked, its prefix kept
    draws(taken, "0badcafe")
    other = make_agent(id="agent-two")
    assert other.raw_key.startswith("a2a_0badcafe_")
    assert authenticate_bearer(other.raw_key).agent == other


def test_a_user_token_prefix_that_is_taken_is_drawn_again(
    make_user: Any, make_agent: Any, draws: Callable[..., list[str]]
) -> None:
    """User tokens and agent keys are separate tables: a token meets a token."""
    user = make_user()
    draws(UserToken.objects.get().prefix, "0badcafe")
    raw = UserToken.issue(user)
    assert raw.startswith("usr_0badcafe_")
    assert authenticate_bearer(raw) == user


def test_a_registration_whose_key_prefix_is_taken_succeeds(
    register: Any, skill: Any, make_agent: Any, open_registration: None, draws: Any
) -> None:
    """The registration's transaction survives the collision (a savepoint; PostgreSQL
    would abort the whole transaction otherwise) and the agent gets a working key."""
    taken = make_agent().api_keys.get().prefix
    draws(taken)
    response = register(
        {"agentId": "acme-ce", "skillIds": [skill.pk], "a2aEndpoint": "http://127.0.0.1:9/a2a"}
    )
    assert response.status_code == 201, response.content
    key = response.json()["apiKey"]
    assert authenticate_bearer(key).agent.pk == "acme-ce"
    assert not key.startswith(f"a2a_{taken}_")


def test_a_run_of_collisions_gives_up_and_leaves_the_transaction_usable(
    make_agent: Any, draws: Callable[..., list[str]]
) -> None:
    """Five taken prefixes in a row are not chance: the IntegrityError is raised after
    PREFIX_TRIES draws, not looped on, and the caller's transaction still works."""
    agent = make_agent()
    taken = agent.api_keys.get().prefix
    drawn = draws(*[taken] * keys.PREFIX_TRIES)
    with transaction.atomic():
        with pytest.raises(IntegrityError):
            keys.create_row(ApiKey, "a2a", agent=agent)
        assert drawn == [taken] * keys.PREFIX_TRIES
        assert AgentProfile.objects.filter(pk=agent.pk).exists()


def test_another_integrity_error_is_not_drawn_again(draws: Callable[..., list[str]]) -> None:
    """Only a taken prefix is retried: a different constraint (here NOT NULL on the
    owner) is raised at once."""
    drawn = draws()
    with pytest.raises(IntegrityError):
        keys.create_row(UserToken, "usr", user=None)
    assert len(drawn) == 1
