"""The transports' ``ListTasks`` (A2A 1.0, HTTP+JSON and JSON-RPC) against real a2a-sdk
agents, the checks a page must pass, and an answer's ``Date`` (the agent's clock)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from a2a import transports
from a2a.exceptions import A2AProtocolError, A2AUnsupportedOperation
from a2a.states import TaskState
from a2a.transports import shapes
from agent_profiles.interfaces import CallTarget
from tests.support.agents import TestAgent, run_agent
from tests.support.peers import RPC_PATH, run_peer


@pytest.fixture(autouse=True)
def loopback_agents(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True


@pytest.fixture
def peer() -> Iterator[TestAgent]:
    with run_agent() as agent:
        yield agent


@pytest.fixture
def rpc_peer() -> Iterator[TestAgent]:
    with run_peer(bindings=("JSONRPC",)) as agent:
        yield agent


@pytest.mark.parametrize("binding", ["HTTP+JSON", "JSONRPC"])
def test_both_bindings_list_what_changed_since_a_time(
    binding: str, peer: TestAgent, rpc_peer: TestAgent
) -> None:
    served = peer if binding == "HTTP+JSON" else rpc_peer
    url = served.url + (RPC_PATH if binding == "JSONRPC" else "")
    transport = transports.transport_for(CallTarget("a", binding=binding, url=url))
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"data": {"behaviour": "slow"}}]}
    sent = transport.send({**message, "parts": [{"data": {"behaviour": "slow", "seconds": 0.1}}]})
    transport.send({**message, "messageId": "m-2", "parts": [{"data": {"behaviour": "working"}}]})
    time.sleep(0.4)
    page = transport.list_tasks(since="1970-01-01T00:00:00Z", page_size=100)
    by_id = {task["id"]: task for task in page.tasks}
    assert by_id[sent.task["id"]]["status"]["state"] == TaskState.COMPLETED
    assert by_id[sent.task["id"]]["artifacts"][0]["parts"][0]["data"] == {"verdict": "pass"}
    assert all(task.get("history", []) == [] for task in page.tasks)  # historyLength 0
    assert page.next_page_token == ""
    first = transport.list_tasks(since="1970-01-01T00:00:00Z", page_size=1)
    assert len(first.tasks) == 1
    assert first.next_page_token
    later = transport.list_tasks(since="2999-01-01T00:00:00Z", page_size=100)
    assert later.tasks == []


def test_an_03_agent_has_no_listing() -> None:
    transport = transports.transport_for(CallTarget("a", url="http://127.0.0.1:9", version="0.3"))
    with pytest.raises(A2AUnsupportedOperation):
        transport.list_tasks(since="1970-01-01T00:00:00Z", page_size=10)


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"tasks": "no"},
        {"tasks": [{"id": "t"}]},
        {"tasks": [{"id": "t", "status": {"state": "MADE_UP"}}]},
        {"tasks": [], "nextPageToken": 7},
        {},
        {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"}},  # one Task
        {"kind": "task", "id": "t", "status": {"state": "completed"}, "pageSize": 1},
    ],
)
def test_a_page_that_is_not_a2a_is_refused(data: Any) -> None:
    with pytest.raises(A2AProtocolError):
        shapes.read_task_page(data, what="answer to GET /tasks")


def test_an_empty_page_may_leave_its_tasks_out() -> None:
    assert shapes.read_task_page({"nextPageToken": ""}, what="page") == ([], "")


def test_an_answer_without_a_date_leaves_the_cursor() -> None:
    assert transports.base.agent_time(None) is None
    assert transports.base.agent_time("yesterday") is None
    when = transports.base.agent_time("Wed, 02 Dec 2026 10:00:00 GMT")
    assert when is not None
    assert when.isoformat() == "2026-12-02T10:00:00+00:00"
