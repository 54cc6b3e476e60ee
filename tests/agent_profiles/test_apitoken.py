from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from agent_profiles.authentication import authenticate_bearer

pytestmark = pytest.mark.django_db


def apitoken(*args: str) -> str:
    out = StringIO()
    call_command("apitoken", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_it_creates_the_user_and_prints_only_a_token() -> None:
    out = apitoken("carol")
    token = out.strip()
    assert out == token + "\n"
    assert token.startswith("usr_")
    user = get_user_model().objects.get(username="carol")
    assert not user.has_usable_password()
    assert not user.is_staff
    assert authenticate_bearer(token) == user


def test_it_issues_another_token_for_an_existing_user(make_user: Any) -> None:
    user = make_user("dave")
    token = apitoken("dave").strip()
    assert authenticate_bearer(token) == user
    assert authenticate_bearer(user.raw_token) == user  # earlier tokens stay valid
    assert get_user_model().objects.count() == 1


def test_staff_flag_makes_an_admin(db: None) -> None:
    apitoken("erin", "--staff")
    user = get_user_model().objects.get(username="erin")
    assert user.is_staff
    assert user.is_superuser


def test_the_token_authenticates_on_the_rest_api(client: Any, make_agent: Any) -> None:
    token = apitoken("frank").strip()
    agent = make_agent()
    # Re-registering someone else's agent is refused even for an authenticated user (409),
    # but a bad token is refused before that (401): proof the token is checked.
    body = {"agentId": agent.pk, "skillIds": ["x"]}
    bad = client.post(
        "/api/agent-profiles/register",
        body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}x",
    )
    assert bad.status_code == 401
    good = client.post(
        "/api/agent-profiles/register",
        body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert good.status_code == 400  # authenticated; then the unknown skill is named


def test_it_refuses_an_inactive_user_instead_of_printing_a_dead_token() -> None:
    """The token of an inactive user is refused (401): printed with exit 0, it looked like
    one that works."""
    from django.core.management import CommandError

    from agent_profiles.models import UserToken

    get_user_model().objects.create_user("gone", is_active=False)
    with pytest.raises(CommandError, match="gone is inactive"):
        apitoken("gone")
    assert not UserToken.objects.filter(user__username="gone").exists()
