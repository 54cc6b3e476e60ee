"""End to end: when the agent's HTTP side is down, the platform falls back to its
WebSocket, and the same agent does the work there (questions included); an agent that is
not connected at all gets the task when it connects."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command

from tests.refagent.processes import agent_env, node_agent, reference_agent
from tests.refagent.test_e2e_tasks import KETTLE, Api
from tests.support.processes import embedded_platform

pytestmark = pytest.mark.slow

ASK = {**KETTLE, "demo": {"ask": "Who uses it?"}}


def assert_fell_back(task: dict[str, Any]) -> None:
    assert task["transport"] == "websocket"
    (fallback,) = task["metadata"]["fallbacks"]
    assert (fallback["from"], fallback["to"]) == ("a2a", "websocket")
    assert fallback["reason"]


@pytest.fixture
def platform(transactional_db: None, make_user: Any) -> Any:
    call_command("loadskills", str(settings.EXAMPLE_SKILLS_FILE), verbosity=0)
    user = make_user("operator")
    # Quick retries, so the offline case does not wait out the default backoff.
    with embedded_platform(A2A_RETRY_BACKOFF=0.2, A2A_MAX_ATTEMPTS=2) as proc:
        proc.api = Api(proc.url, user.raw_token)  # type: ignore[attr-defined]
        yield proc


def test_sigusr1_moves_the_reference_agent_between_http_and_the_websocket(
    platform: Any, tmp_path: Path
) -> None:
    api: Api = platform.api
    env = agent_env(platform.url, tmp_path, AGENT_ID="toggler")
    with reference_agent(env) as agent:
        over_http = api.wait(api.create("toggler", KETTLE)["id"], "TASK_STATE_COMPLETED")
        assert over_http["transport"] == "a2a"

        agent.popen.send_signal(signal.SIGUSR1)
        agent.wait_log("HTTP side stopped")
        asking = api.create("toggler", ASK)
        asked = api.wait(asking["id"], "TASK_STATE_INPUT_REQUIRED")
        assert_fell_back(asked)
        api.reply(asking["id"], "consumers")  # goes to the agent over the WebSocket
        done = api.wait(asking["id"], "TASK_STATE_COMPLETED")
        assert done["output"]["notes"] == "Users: consumers"
        assert done["output"]["verdict"] == "documents_missing"

        agent.popen.send_signal(signal.SIGUSR1)
        agent.wait_log(r"HTTP\+JSON on .*\n(.|\n)*HTTP\+JSON on")  # started again
        back = api.wait(api.create("toggler", KETTLE)["id"], "TASK_STATE_COMPLETED")
        assert back["transport"] == "a2a"


def test_the_node_adapter_works_over_the_websocket_when_its_http_side_is_off(
    platform: Any, tmp_path: Path
) -> None:
    api: Api = platform.api
    env = agent_env(platform.url, tmp_path, AGENT_ID="node-ws", A2A_HTTP="off")
    with node_agent(env, tmp_path):
        done = api.wait(api.create("node-ws", KETTLE)["id"], "TASK_STATE_COMPLETED")
        assert_fell_back(done)
        assert done["output"]["product_name"] == "Smart kettle K2"
        asking = api.create("node-ws", ASK)
        api.wait(asking["id"], "TASK_STATE_INPUT_REQUIRED")
        api.reply(asking["id"], "consumers")
        assert api.wait(asking["id"], "TASK_STATE_COMPLETED")["output"]["notes"] == "consumers"


def test_a_task_for_a_stopped_agent_waits_offline_and_is_done_when_it_connects(
    platform: Any, tmp_path: Path
) -> None:
    api: Api = platform.api
    env = agent_env(platform.url, tmp_path, AGENT_ID="sleeper")
    with reference_agent(env) as agent:
        assert agent.stop() == 0
    waiting = api.wait(api.create("sleeper", KETTLE)["id"], "TASK_STATE_SUBMITTED")
    task = api.wait_for(waiting["id"], lambda t: t["transport"] == "offline")
    assert task["metadata"]["fallbacks"][-1]["to"] == "offline"
    with reference_agent(env):  # the same agent (same key) comes back
        done = api.wait(waiting["id"], "TASK_STATE_COMPLETED")
    assert done["output"]["verdict"] == "documents_missing"
