from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent_profiles.authentication import authenticate_bearer
from agent_profiles.models import ApiKey, UserToken


def test_it_records_when_a_key_was_last_used(make_agent: Any) -> None:
    agent = make_agent()
    assert ApiKey.objects.get().last_used_at is None
    authenticate_bearer(agent.raw_key)
    assert ApiKey.objects.get().last_used_at is not None


def test_it_refreshes_last_used_only_coarsely(make_user: Any) -> None:
    user = make_user()
    authenticate_bearer(user.raw_token)
    with CaptureQueriesContext(connection) as queries:
        authenticate_bearer(user.raw_token)
    # The lookup only (the token with its user, one statement): no write within the
    # resolution.
    assert [q["sql"].split()[0] for q in queries.captured_queries] == ["SELECT"]
    old = timezone.now() - timedelta(hours=1)
    UserToken.objects.update(last_used_at=old)
    authenticate_bearer(user.raw_token)
    assert UserToken.objects.get().last_used_at > old
