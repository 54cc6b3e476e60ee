"""Every kind of agent the platform must drive, end to end through the worker: a2a-sdk 1.3
agents on HTTP+JSON, JSON-RPC or both, HTTP+JSON 0.3, an a2a-sdk 0.3.26 agent (JSON-RPC
0.3, its own process), agents requiring a bearer token, an API-key header or OAuth2 client
credentials, and agents that cannot be polled (with and without streaming).

For each: complete, slow (followed until done), ask-and-answer on the same task, cancel,
failure and a bare Message answer. The worker runs in the test's thread (``drive``); the
agents' cards are read by the registry before the first call, as in production.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.utils import timezone

from a2a import creation, services, worker
from a2a.models import Task
from a2a.states import INTERRUPTED_STATES, TERMINAL_STATES, TaskState
from a2a.transports import credentials as outbound_credentials
from agent_profiles.credentials import set_credentials
from agent_profiles.interfaces import call_target
from tests.support.agents import TestAgent
from tests.support.peers import API_KEY, BEARER, CLIENT_ID, CLIENT_SECRET, run_legacy_peer, run_peer

pytestmark = [pytest.mark.slow]

PEERS: dict[str, dict[str, Any]] = {
    "http-json-1.0": {},
    "jsonrpc-1.0": {"bindings": ("JSONRPC",)},
    "both-bindings": {"bindings": ("JSONRPC", "HTTP+JSON")},
    "http-json-0.3": {"rest_03": True},
    "jsonrpc-0.3-sdk-0.3.26": {"legacy": True},
    "http-json-0.3-sdk-0.3.26": {"legacy": True, "flags": ("--rest",)},
    "bearer": {"auth": "bearer"},
    "api-key": {"auth": "apiKey"},
    "oauth2": {"auth": "oauth2"},
    "no-polling-streaming": {"no_get_task": True, "streaming": True},
    "no-polling-blocking": {"no_get_task": True, "streaming": False},
}
EXPECTED = {
    "jsonrpc-1.0": ("JSONRPC", "1.0"),
    "both-bindings": ("HTTP+JSON", "1.0"),
    "http-json-0.3": ("HTTP+JSON", "0.3"),
    "jsonrpc-0.3-sdk-0.3.26": ("JSONRPC", "0.3"),
    "http-json-0.3-sdk-0.3.26": ("HTTP+JSON", "0.3"),
}


def credential(kind: str, peer: TestAgent) -> dict[str, Any] | None:
    if kind == "bearer":
        return {"type": "bearer", "token": BEARER}
    if kind == "apiKey":
        return {"type": "apiKey", "in": "header", "name": "X-API-Key", "value": API_KEY}
    if kind == "oauth2":
        return {
            "type": "oauth2",
            "tokenUrl": peer.url + "/oauth/token",
            "clientId": CLIENT_ID,
            "clientSecret": CLIENT_SECRET,
            "scopes": ["tasks"],
        }
    return None


@pytest.fixture(scope="module", params=list(PEERS))
def peer(request: Any) -> Iterator[tuple[str, TestAgent]]:
    options = dict(PEERS[request.param])
    if options.pop("legacy", False):
        with run_legacy_peer(*options.pop("flags", ())) as legacy:
            yield request.param, legacy
        return
    with run_peer(**options) as served:
        yield request.param, served


@pytest.fixture
def agent(peer: tuple[str, TestAgent], make_agent: Any, skill: Any, settings: Any) -> Any:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_POLL_INTERVAL = 0.05
    settings.A2A_TASK_TIMEOUT = 20.0
    settings.A2A_HTTP_TIMEOUT = 5.0
    name, served = peer
    served.reset()
    outbound_credentials.forget_tokens()
    profile = make_agent(skills=[skill], a2a_endpoint=served.url)
    auth = credential(PEERS[name].get("auth", ""), served)
    if auth:
        set_credentials(profile, auth)
        profile.save()
    return profile


def drive(task: Task, until: Callable[[Task], bool], timeout: float = 15.0) -> Task:
    """Run the worker on ``task`` in this thread until ``until(task)``."""
    deadline = time.monotonic() + timeout
    while True:
        task.refresh_from_db()
        if until(task):
            return task
        if time.monotonic() > deadline:
            raise AssertionError(f"task still {task.state}: {task.error} {task.metadata}")
        if task.next_action:  # due now (the test does not wait out poll intervals)
            Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now(), lease_until=None)
            worker.process_task(task.pk)
        else:
            time.sleep(0.02)


def settled(task: Task) -> bool:
    return task.state in TERMINAL_STATES or task.state in INTERRUPTED_STATES


def start(user: Any, behaviour: str, **extra: Any) -> Task:
    data = {"product": "lamp", "behaviour": behaviour, **extra}
    return creation.create_task(skill_id="ce-review", input=data, user=user)


@pytest.fixture
def skill(make_skill: Any) -> Any:
    return make_skill(id="ce-review")


def test_the_card_decides_the_interface(peer: tuple[str, TestAgent], agent: Any, user: Any) -> None:
    task = drive(start(user, "complete"), settled)
    assert task.state == TaskState.COMPLETED
    agent.refresh_from_db()
    target = call_target(agent)
    assert (target.binding, target.version) == EXPECTED.get(peer[0], ("HTTP+JSON", "1.0"))


def test_a_task_completes(agent: Any, user: Any) -> None:
    task = drive(start(user, "complete"), settled)
    assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})


def test_a_working_task_is_followed_to_its_end(
    peer: tuple[str, TestAgent], agent: Any, user: Any
) -> None:
    task = drive(start(user, "slow", seconds=0.3), settled)
    assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"}), task.error
    agent.refresh_from_db()
    if PEERS[peer[0]].get("no_get_task"):
        assert not agent.polling  # marked, and the task was followed another way
        assert "noPolling" in task.metadata


def test_a_question_is_answered_on_the_same_task(agent: Any, user: Any) -> None:
    task = drive(start(user, "ask"), settled)
    assert task.state == TaskState.INPUT_REQUIRED
    remote = task.remote_task_id
    services.reply_to_task(task, text="EU")
    task = drive(task, settled)
    assert task.state == TaskState.COMPLETED, list(task.events.values_list("reason", flat=True))
    assert task.output["answer"] == "EU"
    assert task.remote_task_id == remote


def test_a_cancel_reaches_the_agent(agent: Any, user: Any) -> None:
    task = drive(start(user, "working"), lambda t: bool(t.remote_task_id) or settled(t))
    assert task.state in (TaskState.SUBMITTED, TaskState.WORKING)
    services.cancel_task(task)
    task = drive(task, lambda t: "remoteCancel" in t.metadata)
    assert task.state == TaskState.CANCELED
    assert task.metadata["remoteCancel"].get("state") == TaskState.CANCELED, task.metadata


def test_an_agent_failure_fails_the_task(agent: Any, user: Any) -> None:
    task = drive(start(user, "fail"), settled)
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "agent_failed")
    assert "The agent broke." in task.error["message"]


def test_a_bare_message_completes_the_task(agent: Any, user: Any) -> None:
    task = drive(start(user, "message"), settled)
    assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})
