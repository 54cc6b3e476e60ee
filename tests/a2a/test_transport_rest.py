"""The HTTP+JSON 1.0 transport against a real a2a-sdk agent and against agents that are
not A2A."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from a2a.exceptions import A2ACallError, A2APermanentError, A2AProtocolError, A2ATransientError
from a2a.states import TaskState
from a2a.transports.base import parse_retry_after
from a2a.transports.rest import RestTransport
from a2a.wire import user_message
from agent_profiles.interfaces import CallTarget
from tests.support.agents import TestAgent, run_agent
from tests.support.peers import run_legacy_peer
from tests.support.serving import down_url


@pytest.fixture(scope="module")
def peer() -> Iterator[TestAgent]:
    with run_agent() as agent:
        yield agent


@pytest.fixture(autouse=True)
def loopback_allowed(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True  # the peers run on 127.0.0.1 in every mode


def rest(url: str) -> RestTransport:
    return RestTransport(CallTarget(agent_id="peer", url=url))


def message(behaviour: str = "complete") -> dict[str, Any]:
    return user_message(skill_id="ce-review", data={"product": "x", "behaviour": behaviour})


@pytest.mark.slow
def test_it_sends_polls_and_cancels_against_the_sdk(peer: TestAgent, settings: Any) -> None:
    client = rest(peer.url)
    done = client.send(message())
    assert done.state == TaskState.COMPLETED
    working = client.send(message("working"))
    assert working.state in {TaskState.SUBMITTED, TaskState.WORKING}
    polled = client.get_task(working.task["id"])
    assert polled.task["id"] == working.task["id"]
    canceled = client.cancel(working.task["id"])
    assert canceled.state == TaskState.CANCELED


@pytest.mark.slow
def test_a_poll_asks_for_no_history(peer: TestAgent) -> None:
    """The agent's task holds the conversation; a poll needs none of it, so it asks for
    ``historyLength=0`` and the a2a-sdk agent leaves the history out."""
    client = rest(peer.url)
    working = client.send(message("working"))
    task_id = working.task["id"]
    whole = httpx.get(f"{peer.url}/tasks/{task_id}", headers={"A2A-Version": "1.0"}, timeout=5)
    assert whole.json()["history"], "without the parameter the agent sends its history"
    polled = client.get_task(task_id)
    assert polled.task["id"] == task_id
    assert not polled.task.get("history")
    client.cancel(task_id)


@pytest.mark.slow
def test_a_bare_message_is_a_message_reply(peer: TestAgent) -> None:
    reply = rest(peer.url).send(message("message"))
    assert reply.task is None
    assert reply.message["parts"][0]["data"] == {"verdict": "pass"}


@pytest.mark.slow
def test_an_unknown_remote_task_is_a_permanent_error(peer: TestAgent) -> None:
    with pytest.raises(A2APermanentError) as info:
        rest(peer.url).get_task(str(uuid.uuid4()))
    assert info.value.code == "remote_task_not_found"
    assert "Task not found" in info.value.message


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "error", "code"),
    [
        ("500", A2ATransientError, "agent_http_error"),
        ("busy", A2ATransientError, "agent_busy"),
        ("html", A2AProtocolError, "not_a2a"),
        ("garbage", A2AProtocolError, "not_a2a"),
        ("wrongshape", A2AProtocolError, "not_a2a"),
    ],
)
def test_bad_answers_raise_typed_errors(
    peer: TestAgent, mode: str, error: type[Exception], code: str
) -> None:
    with pytest.raises(error) as info:
        rest(peer.url_for(mode)).send(message())
    assert info.value.code == code
    if mode == "busy":
        assert info.value.retry_after == 1.0


@pytest.mark.slow
def test_a_hanging_agent_is_a_timeout(peer: TestAgent, settings: Any) -> None:
    settings.A2A_HTTP_TIMEOUT = 0.3
    with pytest.raises(A2ATransientError) as info:
        rest(peer.url_for("hang")).send(message())
    assert info.value.code == "agent_timeout"
    assert "timed out" in str(info.value)  # the reason, not an exception's class name


def test_a_closed_port_is_unreachable() -> None:
    with pytest.raises(A2ATransientError) as info:
        rest(down_url()).send(message())
    assert info.value.code == "agent_unreachable"
    assert "refused" in str(info.value).lower()
    assert "HTTPConnection(" not in str(info.value)  # urllib3's repr of the connection


def test_no_endpoint_is_a_permanent_error() -> None:
    with pytest.raises(A2APermanentError):
        rest("").send(message())


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("3", 3.0), ("0", 0.0), ("-5", 0.0), ("99999", 300.0), ("soon", None), (None, None)],
)
def test_it_reads_retry_after(header: str | None, seconds: float | None) -> None:
    assert parse_retry_after(header) == seconds


def test_it_reads_an_http_date_retry_after() -> None:
    value = parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT")
    assert value == 0.0


@pytest.mark.slow
def test_a_tenant_reaches_the_sdks_tenant_routes(peer: TestAgent) -> None:
    peer.reset()
    client = RestTransport(CallTarget(agent_id="peer", url=peer.url, tenant="acme"))
    assert client.send(message()).state == TaskState.COMPLETED
    assert peer.counts["/acme/message:send"] == 1


@pytest.mark.slow
def test_the_03_binding_against_a2a_sdk_0_3s_own_server() -> None:
    """a2a-sdk 0.3.26's HTTP+JSON server (its own environment): send, poll, subscribe and
    cancel. It serves a subscription only as a GET (a POST was 405)."""
    with run_legacy_peer("--rest") as agent:
        client = RestTransport(CallTarget(agent_id="peer", url=agent.url, version="0.3"))
        remote_id = client.send(message("working")).task["id"]
        deadline = time.monotonic() + 10
        while client.get_task(remote_id).state != TaskState.WORKING:
            assert time.monotonic() < deadline, "the 0.3 agent's task never worked"
            time.sleep(0.05)
        # The subscription is served (a POST was answered 405) and, as a2a-sdk 0.3 does,
        # carries what happens from now on: it ends with the task.
        seen: list[str] = []

        def follow() -> None:
            try:
                seen.extend(reply.state for reply in client.subscribe(remote_id, timeout=10))
            except A2ACallError as exc:
                seen.append(f"refused: {exc}")

        follower = threading.Thread(target=follow)
        follower.start()
        time.sleep(0.5)
        assert follower.is_alive()  # open while the task works
        assert client.cancel(remote_id).state == TaskState.CANCELED
        follower.join(15)
        assert not follower.is_alive()
        assert set(seen) <= {TaskState.WORKING, TaskState.CANCELED}, seen
