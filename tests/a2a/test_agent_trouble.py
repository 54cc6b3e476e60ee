"""Agents that go wrong, and what the platform makes of it: refused credentials
(``agent_auth_failed`` on the task, in the fallback record and in the agent's health),
OAuth2 tokens (reused, fetched again once on 401, a token endpoint answering garbage),
JSON-RPC answers for another request or not JSON, and never waiting silently: a task an
agent cannot take fails at its deadline with the agent's last answer unless an operator
lets it wait offline longer. No secret reaches a log line or an error message."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a import creation, deadlines, reassign, services
from a2a.models import Task
from a2a.states import TaskState, Transport
from a2a.transports import credentials as outbound_credentials
from agent_profiles.credentials import set_credentials
from gateway.models import Delivery
from tests.a2a.test_peers import drive, settled
from tests.support.agents import TestAgent
from tests.support.peers import BEARER, CLIENT_ID, CLIENT_SECRET, run_peer

# Not marked slow although it boots agents (a few seconds): these error paths store what
# agents answer, and PostgreSQL refuses bytes SQLite accepts, so they run in both passes.

WRONG_TOKEN = "wrong-bearer-secret-0000"


@pytest.fixture(scope="module")
def oauth_peer() -> Iterator[TestAgent]:
    with run_peer(bindings=("HTTP+JSON",), auth="oauth2") as peer:
        yield peer


@pytest.fixture(scope="module")
def bearer_peer() -> Iterator[TestAgent]:
    with run_peer(bindings=("HTTP+JSON", "JSONRPC"), auth="bearer") as peer:
        yield peer


@pytest.fixture(autouse=True)
def fast(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_POLL_INTERVAL = 0.05
    settings.A2A_HTTP_TIMEOUT = 5.0
    outbound_credentials.forget_tokens()


@pytest.fixture
def skill(make_skill: Any) -> Any:
    return make_skill(id="ce-review")


def start(user: Any, behaviour: str = "complete", agent_id: str | None = None) -> Task:
    data = {"product": "lamp", "behaviour": behaviour}
    return creation.create_task(skill_id="ce-review", input=data, agent_id=agent_id, user=user)


def with_auth(agent: Any, auth: dict[str, Any]) -> Any:
    set_credentials(agent, auth)
    agent.save()
    return agent


def oauth(peer: TestAgent, token_path: str = "/oauth/token") -> dict[str, Any]:
    return {
        "type": "oauth2",
        "tokenUrl": peer.url + token_path,
        "clientId": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scopes": ["tasks"],
    }


def no_secret_in(text: str) -> None:
    for secret in (BEARER, WRONG_TOKEN, CLIENT_SECRET):
        assert secret not in text


def waiting_offline(task: Task) -> bool:
    return task.transport == Transport.OFFLINE or settled(task)


# --- credentials ------------------------------------------------------------------------


def test_a_refused_credential_is_agent_auth_failed_on_the_task_the_fallback_and_health(
    bearer_peer: TestAgent, make_agent: Any, skill: Any, user: Any, caplog: Any
) -> None:
    agent = with_auth(
        make_agent(skills=[skill], a2a_endpoint=bearer_peer.url),
        {"type": "bearer", "token": WRONG_TOKEN},
    )
    task = drive(start(user), waiting_offline)
    assert (task.state, task.transport) == (TaskState.SUBMITTED, Transport.OFFLINE)
    assert task.error["code"] == "agent_auth_failed"
    assert "agent-one" in task.error["message"]
    assert "bearer" in task.error["message"]
    assert task.metadata["lastAgentAnswer"]["code"] == "agent_auth_failed"
    assert task.metadata["fallbacks"][0]["reason"].startswith("agent_auth_failed (HTTP 401)")
    agent.refresh_from_db()
    assert (agent.last_call_ok, agent.last_call_code) == (False, "agent_auth_failed")
    no_secret_in(caplog.text + str(task.error) + str(task.metadata) + agent.last_call_error)


def test_an_agent_asking_for_a_credential_none_is_configured_for_says_so(
    bearer_peer: TestAgent, make_agent: Any, skill: Any, user: Any
) -> None:
    make_agent(skills=[skill], a2a_endpoint=bearer_peer.url)
    task = drive(start(user), waiting_offline)
    assert task.error["code"] == "agent_auth_failed"
    assert "no credential configured" in task.error["message"]


def test_the_right_bearer_token_works_on_json_rpc_too(
    bearer_peer: TestAgent, make_agent: Any, skill: Any, user: Any
) -> None:
    agent = make_agent(
        skills=[skill],
        a2a_endpoint=bearer_peer.url + "/rpc",
        protocol_binding="JSONRPC",
        card_read_at=timezone.now(),  # the registration's statement, not the card
    )
    with_auth(agent, {"type": "bearer", "token": BEARER})
    task = drive(start(user, "ask"), settled)
    assert task.state == TaskState.INPUT_REQUIRED
    services.reply_to_task(task, data={"market": "EU"})
    task = drive(task, settled)
    assert (task.state, task.output["answer"]) == (TaskState.COMPLETED, {"market": "EU"})


def test_an_oauth2_token_is_reused_and_fetched_again_once_after_a_401(
    oauth_peer: TestAgent, make_agent: Any, skill: Any, user: Any, caplog: Any
) -> None:
    with_auth(make_agent(skills=[skill], a2a_endpoint=oauth_peer.url), oauth(oauth_peer))
    oauth_peer.reset()
    for _ in range(2):
        assert drive(start(user), settled).state == TaskState.COMPLETED
    assert oauth_peer.counts["/oauth/token"] == 1
    oauth_peer.revoke()  # type: ignore[attr-defined]
    task = drive(start(user), settled)
    assert task.state == TaskState.COMPLETED, task.error
    assert oauth_peer.counts["/oauth/token"] == 2
    no_secret_in(caplog.text)
    for token in oauth_peer.issued:  # type: ignore[attr-defined]
        assert token not in caplog.text


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("/oauth/garbage", "did not answer an OAuth2 token"),
        ("/oauth/broken", "did not answer an OAuth2 token"),
        ("/oauth/nowhere", "HTTP 404"),
        ("/oauth/huge", "answered more than 64000 bytes"),
    ],
)
def test_a_token_endpoint_answering_garbage_is_a_clear_task_error(
    oauth_peer: TestAgent,
    make_agent: Any,
    skill: Any,
    user: Any,
    caplog: Any,
    path: str,
    words: str,
) -> None:
    with_auth(make_agent(skills=[skill], a2a_endpoint=oauth_peer.url), oauth(oauth_peer, path))
    task = drive(start(user), waiting_offline)
    assert task.error["code"] == "agent_auth_failed"
    assert words in task.error["message"]
    assert "agent-one" in task.error["message"]
    assert "internalErrors" not in task.metadata  # a clear error, not a worker crash
    no_secret_in(caplog.text + str(task.error))


# --- JSON-RPC answers that are not ours ----------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "words"),
    [("rpc-wrongid", "for another request"), ("rpc-notjson", "is not JSON")],
)
def test_a_json_rpc_answer_for_another_id_or_not_json_fails_the_task_clearly(
    bearer_peer: TestAgent, make_agent: Any, skill: Any, user: Any, mode: str, words: str
) -> None:
    make_agent(
        skills=[skill],
        a2a_endpoint=bearer_peer.url_for(mode),
        protocol_binding="JSONRPC",
        card_read_at=timezone.now(),
    )
    task = drive(start(user), settled)
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "not_a2a")
    assert words in task.error["message"]


# --- answers too large to hold --------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "binding"), [("huge", "HTTP+JSON"), ("endless", "HTTP+JSON"), ("huge", "JSONRPC")]
)
def test_an_answer_over_the_size_cap_fails_the_task_clearly_unread(
    bearer_peer: TestAgent,
    make_agent: Any,
    skill: Any,
    user: Any,
    settings: Any,
    mode: str,
    binding: str,
) -> None:
    """A 2 MB answer (declared), or one that never ends (chunked), against a 100 kB cap:
    the task fails with ``answer_too_large``, and the worker held at most the cap."""
    settings.AGENT_ANSWER_MAX_BYTES = 100_000
    agent = make_agent(
        skills=[skill],
        a2a_endpoint=bearer_peer.url_for(mode),
        protocol_binding=binding,
        card_read_at=timezone.now(),
    )
    with_auth(agent, {"type": "bearer", "token": BEARER})
    task = drive(start(user), settled)
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "answer_too_large")
    assert "more than 100000 bytes" in task.error["message"]
    assert "AGENT_ANSWER_MAX_BYTES" in task.error["message"]
    assert task.error["details"] == {"maxBytes": 100_000}
    assert "internalErrors" not in task.metadata


# --- never wait silently ---------------------------------------------------------------------


def refused_agent(make_agent: Any, skill: Any, peer: TestAgent, **fields: Any) -> Any:
    """An agent whose endpoint answers 404 to message:send (and that never used the gateway)."""
    return make_agent(
        skills=[skill],
        a2a_endpoint=peer.url + "/nothing-here",
        card_read_at=timezone.now(),
        **fields,
    )


def test_an_agent_that_never_used_the_gateway_does_not_keep_a_task_past_its_timeout(
    bearer_peer: TestAgent,
    make_agent: Any,
    skill: Any,
    user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    refused_agent(make_agent, skill, bearer_peer)
    task = drive(start(user), waiting_offline)
    assert task.transport == Transport.OFFLINE
    assert task.error["code"] == "agent_auth_failed"  # the peer wants a bearer token
    assert deadlines.expire_overdue() == 0  # within its timeout it waits, error visible
    Task.objects.filter(pk=task.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert deadlines.expire_overdue() == 1
    task.refresh_from_db()
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "agent_auth_failed")
    assert "never connected to the gateway" in task.error["message"]
    assert "HTTP 401" in task.error["message"]
    assert not Delivery.objects.filter(task=task, status__in=["pending", "sent"]).exists()


def test_an_operator_may_let_an_agent_keep_tasks_offline_longer(
    bearer_peer: TestAgent, make_agent: Any, skill: Any, user: Any
) -> None:
    refused_agent(make_agent, skill, bearer_peer, offline_wait=3600.0)
    task = drive(start(user), waiting_offline)
    Task.objects.filter(pk=task.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))
    assert deadlines.expire_overdue() == 0
    delivery = Delivery.objects.get(task=task)
    assert delivery.expires_at > timezone.now() + timedelta(seconds=3500)


def test_an_agent_that_used_the_gateway_keeps_its_offline_tasks(
    bearer_peer: TestAgent, make_agent: Any, skill: Any, user: Any
) -> None:
    refused_agent(make_agent, skill, bearer_peer, gateway_seen_at=timezone.now())
    task = drive(start(user), waiting_offline)
    Task.objects.filter(pk=task.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))
    assert deadlines.expire_overdue() == 0
    task.refresh_from_db()
    assert task.state == TaskState.SUBMITTED


def test_a_task_waiting_at_a_refusing_agent_is_reassigned_and_completes(
    bearer_peer: TestAgent, make_agent: Any, skill: Any, user: Any
) -> None:
    refused_agent(make_agent, skill, bearer_peer)
    good = make_agent(skills=[skill], id="agent-two", a2a_endpoint=bearer_peer.url)
    with_auth(good, {"type": "bearer", "token": BEARER})
    task = drive(start(user, agent_id="agent-one"), waiting_offline)
    assert task.transport == Transport.OFFLINE
    reassign.reassign_task(task, by=user)
    task = drive(task, settled)
    assert (task.state, task.agent_id) == (TaskState.COMPLETED, "agent-two")
    assert [r["to"] for r in task.metadata["reassignments"]] == ["agent-two"]
