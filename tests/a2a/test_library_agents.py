"""The platform drives agents built with other A2A libraries and versions, end to end:
the official JavaScript SDK on Express, ``@a2a-js/sdk`` 1.3 (A2A 1.0) and 0.3.14 (A2A
0.3), and the Python ``a2a-sdk`` 0.3.26 over HTTP+JSON. The agent's card decides the
binding and version (HTTP+JSON, or JSON-RPC when that is all it offers), a pushing agent
is followed by its SDK's own push sender, and replies and cancels reach it. The live
platform runs in this pass's mode. Slow: a few tests, each covering a lot."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from a2a.creation import create_task
from a2a.models import Task, TaskEvent
from a2a.services import cancel_task, reply_to_task
from a2a.states import TaskState
from tests.a2a.helpers import wait_for
from tests.a2a.test_agent_push_live import ENV as PUSH_ENV
from tests.a2a.test_agent_push_live import live
from tests.support.js_sdk import JsAgent, run_js_agent
from tests.support.peers import run_legacy_peer

pytestmark = pytest.mark.slow

# Tasks created here reach the platform without a hint: its sweep takes them at once.
ENV = {**PUSH_ENV, "A2A_HINT_GRACE": 0.2}


def start(user: Any, behaviour: str, **extra: Any) -> Task:
    data = {"product": "lamp", "behaviour": behaviour, **extra}
    return create_task(skill_id="ce-review", input=data, user=user)


def the_four_behaviours(user: Any) -> dict[str, Task]:
    """A task that completes, one that asks (and gets its answer), one that fails and one
    canceled while it works; each waited to its end."""
    tasks = {name: start(user, name) for name in ("complete", "ask", "fail")}
    tasks["slow"] = start(user, "slow", seconds=20)
    working = lambda t: t.state == TaskState.WORKING and bool(t.remote_task_id)  # noqa: E731
    tasks["slow"] = wait_for(tasks["slow"], working, timeout=30)
    cancel_task(tasks["slow"], reason="no longer needed")
    asked = wait_for(tasks["ask"], lambda t: t.state == TaskState.INPUT_REQUIRED, timeout=30)
    # A person reads the question first. (a2a-sdk 0.3 loses a reply that comes while it
    # still closes the question's execution: the reply taps the task's event queue, which
    # that cleanup then closes, so nothing of the answer is pushed; the platform's
    # safety-net poll would find it, a minute later.)
    time.sleep(0.5)
    reply_to_task(asked, text="EU")
    return {name: wait_for(task, timeout=30) for name, task in tasks.items()}


def check_outcomes(tasks: dict[str, Task], followed_by: str) -> None:
    assert (tasks["complete"].state, tasks["complete"].output) == (
        TaskState.COMPLETED,
        {"verdict": "pass"},
    )
    assert tasks["ask"].state == TaskState.COMPLETED
    assert tasks["ask"].output == {"verdict": "pass", "answer": "EU"}
    assert tasks["fail"].state == TaskState.FAILED
    assert tasks["fail"].error["code"] == "agent_failed"
    assert tasks["slow"].state == TaskState.CANCELED
    for task in tasks.values():
        assert task.metadata["followedBy"] == followed_by
        finals = TaskEvent.objects.filter(task=task, to_state=task.state).count()
        assert finals == 1, task.state


@pytest.fixture
def user_for(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any
) -> Callable[[JsAgent], Any]:
    def make(peer: JsAgent) -> Any:
        make_agent(skills=[make_skill()], a2a_endpoint=peer.url)
        return make_user()

    return make


@pytest.mark.parametrize(
    ("version", "bindings", "calls"),
    [
        # The card lists HTTP+JSON first.
        ("1.3", "rest,jsonrpc", {"POST /rest/message:send": 5, "POST /rest/tasks/:cancel": 1}),
        # The 0.3 card prefers JSON-RPC (`url`, `preferredTransport`); the platform takes
        # HTTP+JSON when both fit (docs/registry.md), and its send carries the push config
        # under the 0.3 proto's name there (`pushNotification`), which the SDK reads.
        (
            "0.3",
            "jsonrpc,rest",
            {"POST /rest/v1/message:send": 5, "POST /rest/v1/tasks/:cancel": 1},
        ),
        # SendMessage / message/send four times and the reply, CancelTask once.
        ("1.3", "jsonrpc", {"POST /rpc": 6}),
        ("0.3", "jsonrpc", {"POST /rpc": 6}),
    ],
)
def test_a_pushing_javascript_agent_is_followed_by_its_pushes(
    user_for: Callable[[JsAgent], Any], version: str, bindings: str, calls: dict[str, int]
) -> None:
    with run_js_agent(version, bindings=bindings, push=True) as peer:
        user = user_for(peer)
        # Safety-net polls every 60 s: within this test only pushes move the tasks.
        with live(AGENT_PUSH_POLL_INTERVAL=60, **ENV):
            tasks = the_four_behaviours(user)
            peer.wait_pushes_settled()
        stats = peer.stats()
    check_outcomes(tasks, "push")
    # Every call went to the interface chosen: the sends and the reply, one cancel, and
    # no poll (the pushes carried every task). Task ids left out of the paths.
    counted: dict[str, int] = {}
    for key, n in stats["requests"].items():
        key = re.sub(r"/tasks/[^/:]+", "/tasks/", key)
        counted[key] = counted.get(key, 0) + n
    del counted["GET /.well-known/agent-card.json"], counted["GET /_stats"]
    assert counted == calls
    assert stats["pushes"] >= 8
    assert stats["pushFailures"] == 0


@pytest.mark.parametrize(
    ("bindings", "listings"),
    [("jsonrpc", r"^POST /rpc$"), ("rest", r"^GET /rest/tasks$")],
)
def test_a_javascript_agent_that_does_not_push_is_followed_by_listing(
    user_for: Callable[[JsAgent], Any], bindings: str, listings: str
) -> None:
    with run_js_agent("1.3", bindings=bindings) as peer:
        user = user_for(peer)
        with live(**ENV):
            tasks = the_four_behaviours(user)
        check_outcomes(tasks, "list")
        # JSON-RPC: the five sends, the cancel and the listings all post to /rpc.
        assert peer.requests(listings) >= (7 if bindings == "jsonrpc" else 1)
        assert peer.requests(r"/rest" if bindings == "jsonrpc" else r"/rpc") == 0
        assert peer.stats()["pushes"] == 0


def test_a_javascript_0_3_agent_over_http_json_is_polled(
    user_for: Callable[[JsAgent], Any],
) -> None:
    with run_js_agent("0.3", bindings="rest") as peer:
        user = user_for(peer)
        with live(**ENV):
            tasks = the_four_behaviours(user)
        check_outcomes(tasks, "poll")
        assert peer.requests(r"^POST /rest/v1/message:send$") == 5
        assert peer.requests(r"^GET /rest/v1/tasks/") >= 1
        assert peer.stats()["pushes"] == 0


@pytest.mark.parametrize("binding", ["--rest", "--jsonrpc"])
def test_a_pushing_a2a_sdk_0_3_agent(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any, binding: str
) -> None:
    """a2a-sdk 0.3's HTTP+JSON server parses the 0.3 proto strictly: a send whose
    configuration names the JSON-RPC schema's ``pushNotificationConfig`` is refused
    outright, so the push config goes as ``pushNotification`` there (and as
    ``pushNotificationConfig`` over JSON-RPC)."""
    flags = ["--push"] + (["--rest"] if binding == "--rest" else [])
    with run_legacy_peer(*flags) as peer:
        make_agent(skills=[make_skill()], a2a_endpoint=peer.url)
        user = make_user()
        with live(AGENT_PUSH_POLL_INTERVAL=60, **ENV):
            tasks = the_four_behaviours(user)
    check_outcomes(tasks, "push")
