from __future__ import annotations

from typing import Any

import pytest

from agent_profiles import keys
from agent_profiles.authentication import AgentPrincipal, authenticate_bearer
from agent_profiles.models import ApiKey


def test_it_stores_only_a_keyed_hash(make_agent: Any) -> None:
    agent = make_agent()
    stored = ApiKey.objects.get(agent=agent)
    assert agent.raw_key not in (stored.prefix, stored.digest)
    assert stored.digest == keys.digest(agent.raw_key)
    assert agent.raw_key.startswith(f"a2a_{stored.prefix}_")


def test_it_authenticates_an_agent_by_key(make_agent: Any) -> None:
    agent = make_agent()
    principal = authenticate_bearer(agent.raw_key)
    assert isinstance(principal, AgentPrincipal)
    assert principal.agent == agent


@pytest.mark.parametrize("tamper", [lambda k: k[:-1] + ("A" if k[-1] != "A" else "B"), str.upper])
def test_it_rejects_a_tampered_key(make_agent: Any, tamper: Any) -> None:
    agent = make_agent()
    assert authenticate_bearer(tamper(agent.raw_key)) is None


def test_it_rejects_a_revoked_key_after_rotation(make_agent: Any) -> None:
    agent = make_agent()
    old = agent.raw_key
    new = agent.issue_key()
    assert authenticate_bearer(old) is None
    assert authenticate_bearer(new).agent == agent


def test_it_authenticates_a_user_token(make_user: Any) -> None:
    user = make_user()
    assert authenticate_bearer(user.raw_token) == user


def test_it_rejects_garbage_tokens(db: None) -> None:
    for raw in ["", "nope", "usr_short_x", "a2a_12345678_", "usr_abcdefgh_zzz"]:
        assert authenticate_bearer(raw) is None
