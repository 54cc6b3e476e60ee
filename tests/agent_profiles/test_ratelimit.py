"""agent_profiles.ratelimit: a sliding rate limit counted in the database, so that every
process shares it; and the registration throttle built on it, across two daphne processes."""

from __future__ import annotations

import json
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from agent_profiles import ratelimit
from agent_profiles.models import AgentProfile, RateWindow
from tests.support.processes import daphne_process

T0 = 1_800_000_000.0  # the start of a 60 s window (a multiple of 60)


@pytest.mark.django_db
def test_it_allows_the_limit_then_refuses_without_counting_the_refusals() -> None:
    assert [ratelimit.hit("s", "1.2.3.4", 3, 60, now=T0 + i).allowed for i in range(3)] == [
        True,
        True,
        True,
    ]
    for i in range(5):
        assert not ratelimit.hit("s", "1.2.3.4", 3, 60, now=T0 + 10 + i).allowed
    assert list(RateWindow.objects.values_list("hits", flat=True)) == [3]


@pytest.mark.django_db
def test_clients_and_scopes_count_apart() -> None:
    for _ in range(2):
        assert ratelimit.hit("s", "1.2.3.4", 2, 60, now=T0).allowed
    assert not ratelimit.hit("s", "1.2.3.4", 2, 60, now=T0).allowed
    assert ratelimit.hit("s", "5.6.7.8", 2, 60, now=T0).allowed
    assert ratelimit.hit("other", "1.2.3.4", 2, 60, now=T0).allowed


@pytest.mark.django_db
def test_the_window_before_still_counts_for_what_of_it_lies_within_the_duration() -> None:
    for i in range(4):
        assert ratelimit.hit("s", "c", 4, 60, now=T0 + 50 + i).allowed
    # 15 s into the next window, three quarters of the last one's 4 still count: 3 + 1.
    assert ratelimit.hit("s", "c", 4, 60, now=T0 + 75).allowed
    refused = ratelimit.hit("s", "c", 4, 60, now=T0 + 76)
    assert not refused.allowed
    # 4 x (1 - 16/60) + 1 + 1 = 4.93 > 4; room for one when the old weight is 2/4:
    # 30 s into the window, 14 s from now.
    assert refused.retry_after == 14
    assert ratelimit.hit("s", "c", 4, 60, now=T0 + 76 + 14).allowed


@pytest.mark.django_db
def test_retry_after_runs_into_the_next_window_when_this_one_is_full() -> None:
    for _ in range(2):
        ratelimit.hit("s", "c", 2, 60, now=T0)
    refused = ratelimit.hit("s", "c", 2, 60, now=T0 + 20)
    # 40 s left in this window, then this window's 2 must fade to 1: 30 s more.
    assert refused.retry_after == 70
    assert not ratelimit.hit("s", "c", 2, 60, now=T0 + 20 + 69).allowed
    assert ratelimit.hit("s", "c", 2, 60, now=T0 + 20 + 70).allowed


@pytest.mark.django_db
def test_windows_that_no_longer_count_are_dropped() -> None:
    ratelimit.hit("s", "a", 5, 60, now=T0)
    ratelimit.hit("s", "b", 5, 60, now=T0 + 60)
    ratelimit.hit("s", "c", 5, 60, now=T0 + 180)  # opens a window: drops those before T0+120
    assert sorted(RateWindow.objects.values_list("slot", flat=True)) == [int(T0 // 60) + 3]


@pytest.mark.django_db
def test_many_new_clients_in_one_window_drop_old_windows_once() -> None:
    """Dropping is once per window, not per new client: a flood of addresses must not
    make each of its requests scan the table."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    start = T0 + 600  # a window no other test used in this process
    with CaptureQueriesContext(connection) as queries:
        for i in range(20):
            assert ratelimit.hit("s", f"10.0.0.{i}", 5, 60, now=start + i).allowed
    deletes = [q for q in queries if q["sql"].lstrip().upper().startswith("DELETE")]
    assert len(deletes) == 1
    assert RateWindow.objects.count() == 20


@pytest.mark.django_db
def test_any_client_text_is_stored_in_a_fixed_size() -> None:
    odd = "x\x00\udc80" * 100  # NUL and a lone surrogate: PostgreSQL refuses both in text
    assert ratelimit.hit("s", odd, 1, 60, now=T0).allowed
    assert not ratelimit.hit("s", odd, 1, 60, now=T0).allowed
    assert {len(c) for c in RateWindow.objects.values_list("client", flat=True)} == {64}


def _register(url: str, agent_id: str) -> httpx.Response:
    body = {
        "agentId": agent_id,
        "name": agent_id,
        "skillIds": ["ce-review"],
        "a2aEndpoint": "http://127.0.0.1:9100/a2a",
    }
    return httpx.post(
        f"{url}/api/agent-profiles/register",
        content=json.dumps(body),
        headers={"Content-Type": "application/json"},
        timeout=10,
    )


def test_two_processes_share_the_registration_limit(
    transactional_db: None, make_skill: Any
) -> None:
    """Each process counting alone would let this client register twice per process."""
    make_skill()
    env: dict[str, Any] = {
        "REGISTRATION_MODE": "open",
        "REGISTRATION_THROTTLE": "3/min",
        "ALLOW_LOOPBACK_URLS": True,
        "LOG_LEVEL": "WARNING",
    }
    with ExitStack() as stack:
        first = stack.enter_context(daphne_process(**env))
        second = stack.enter_context(daphne_process(**env))
        urls = [first.url, second.url]  # type: ignore[attr-defined]
        answers = [_register(urls[i % 2], f"agent-{i}") for i in range(4)]
    assert [a.status_code for a in answers] == [201, 201, 201, 429], answers[-1].text
    assert answers[3].json()["error"]["code"] == "throttled"
    assert int(answers[3].headers["Retry-After"]) >= 1
    assert sorted(AgentProfile.objects.values_list("pk", flat=True)) == [
        "agent-0",
        "agent-1",
        "agent-2",
    ]
