"""End to end: platform tasks done by a real agent process over A2A, for the Python
reference agent and the Node.js adapter alike: a task completed with validated output, and
a question (INPUT_REQUIRED) answered through the REST API."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.core.management import call_command

from tests.refagent.processes import agent_env, node_agent, reference_agent

pytestmark = pytest.mark.slow

SKILL_ID = "ce-certification-review-v1"
KETTLE: dict[str, Any] = {
    "product_name": "Smart kettle K2",
    "category": "electrical_equipment",
    "target_markets": ["DE", "FR", "CH"],
    "intended_use": "Boiling water in households",
    "rated_voltage_v": 230,
    "has_radio": True,
    "documents_available": ["technical_file", "user_instructions"],
}


class Api:
    """The platform's REST API as an operator's script uses it."""

    def __init__(self, url: str, token: str) -> None:
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10
        )

    def create(self, agent_id: str, task_input: dict[str, Any]) -> dict[str, Any]:
        body = {"skillId": SKILL_ID, "input": task_input, "agentId": agent_id}
        response = self.http.post("/api/tasks", json=body)
        assert response.status_code == 201, response.text
        return response.json()

    def wait(self, task_id: str, state: str, timeout: float = 20) -> dict[str, Any]:
        return self.wait_for(task_id, lambda task: task["state"] == state, timeout)

    def wait_for(
        self, task_id: str, check: Callable[[dict[str, Any]], bool], timeout: float = 20
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            task = self.http.get(f"/api/tasks/{task_id}").json()
            if check(task):
                return task
            assert time.monotonic() < deadline, f"still {task['state']}: {task}"
            time.sleep(0.1)

    def cancel(self, task_id: str) -> None:
        response = self.http.post(f"/api/tasks/{task_id}/cancel", json={})
        assert response.status_code == 200, response.text

    def reply(self, task_id: str, text: str) -> None:
        response = self.http.post(f"/api/tasks/{task_id}/reply", json={"text": text})
        assert response.status_code == 200, response.text


def wait_until(check: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


@pytest.fixture
def api(live_platform: Any, make_user: Any) -> Api:
    call_command("loadskills", str(settings.EXAMPLE_SKILLS_FILE), verbosity=0)
    return Api(live_platform.url, make_user("operator").raw_token)


@pytest.mark.parametrize("kind", ["python", "node"])
def test_an_agent_completes_a_task_and_answers_a_question(
    kind: str, api: Api, live_platform: Any, tmp_path: Path
) -> None:
    env = agent_env(live_platform.url, tmp_path, AGENT_ID=f"{kind}-agent")
    start = reference_agent(env) if kind == "python" else node_agent(env, tmp_path)
    with start as agent:
        task = api.create(f"{kind}-agent", KETTLE)
        done = api.wait(task["id"], "TASK_STATE_COMPLETED")
        assert done["transport"] == "a2a"
        assert done["output"]["product_name"] == "Smart kettle K2"  # validated by the platform

        asking = api.create(f"{kind}-agent", {**KETTLE, "demo": {"ask": "Who uses it?"}})
        asked = api.wait(asking["id"], "TASK_STATE_INPUT_REQUIRED")
        assert "Who uses it?" in str(asked["question"])
        api.reply(asking["id"], "consumers")
        answered = api.wait(asking["id"], "TASK_STATE_COMPLETED")
        assert answered["output"]["notes"].endswith("consumers")

        slow = api.create(f"{kind}-agent", {**KETTLE, "demo": {"delaySeconds": 60}})
        working = api.wait(slow["id"], "TASK_STATE_WORKING")
        api.cancel(slow["id"])
        api.wait(slow["id"], "TASK_STATE_CANCELED")
        remote = f"{agent.url}/tasks/{working['remoteTaskId']}"  # the platform told the agent
        a2a = {"A2A-Version": "1.0"}
        wait_until(
            lambda: (
                httpx.get(remote, headers=a2a).json()["status"]["state"] == "TASK_STATE_CANCELED"
            )
        )

    if kind == "python":  # the reference agent's CE rules
        assert done["output"]["verdict"] == "documents_missing"
        assert done["output"]["non_eea_markets"] == ["CH"]
        codes = [d["code"] for d in done["output"]["applicable_directives"]]
        assert codes == ["2014/53/EU", "2011/65/EU"]
