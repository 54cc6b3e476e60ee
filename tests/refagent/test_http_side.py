"""An agent's A2A 1.0 HTTP+JSON side, driven by the official a2a-sdk client.

The same checks run against the Python reference agent (in-process) and the Node.js
adapter served at /api/a2a/adapter.js (under real ``node``; slow)."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from a2a.types.a2a_pb2 import Task, TaskState
from reference_agent.skill import QUESTION, schema_errors

from a2a.adapter import render_adapter
from tests.refagent.a2a_client import cancel, output_of, send, user_message, wait_for
from tests.refagent.support import OUTPUT_SCHEMA, SKILL, http_side
from tests.support.processes import Proc, running
from tests.support.serving import free_port

NODE = shutil.which("node")
NODE_DRIVER = """
const { serveAgent } = require("./adapter.js");
serveAgent({ skill: JSON.parse(process.env.SKILL_JSON), port: Number(process.env.A2A_PORT) })
  .then(() => console.log("listening"));
"""


def node_agent(tmp: Path) -> Iterator[str]:
    """The adapter as served by the platform, run by node with the driver above."""
    if NODE is None:
        pytest.skip("node is not installed (CI installs it): the Node.js adapter is untested here")
    (tmp / "adapter.js").write_text(render_adapter("http://127.0.0.1:9"))
    (tmp / "serve.js").write_text(NODE_DRIVER)
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "A2A_PORT": str(port), "SKILL_JSON": json.dumps(SKILL)}
    proc = Proc([NODE, str(tmp / "serve.js")], env, name="node-adapter")
    with running(proc):
        proc.wait_log("listening", timeout=20)
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module", params=["python", pytest.param("node", marks=pytest.mark.slow)])
def agent_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if request.param == "python":
        with http_side() as agent:
            yield agent.url  # type: ignore[attr-defined]
    else:
        yield from node_agent(tmp_path_factory.mktemp("node"))


def run(coro: object) -> Task:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_it_completes_a_task_with_output_that_fits_the_skill(agent_url: str) -> None:
    task = run(send(agent_url, user_message({"product": "kettle"})))
    done = run(wait_for(agent_url, task.id, {TaskState.TASK_STATE_COMPLETED}))
    output = output_of(done)
    assert output["product"] == "kettle"
    assert schema_errors(OUTPUT_SCHEMA, output) == []


def test_it_asks_a_question_and_completes_with_the_answer_on_the_same_task(
    agent_url: str,
) -> None:
    first = user_message({"product": "kettle", "demo": {"ask": True}})
    task = run(send(agent_url, first))
    asked = run(wait_for(agent_url, task.id, {TaskState.TASK_STATE_INPUT_REQUIRED}))
    assert asked.status.message.parts[0].text == QUESTION
    reply = user_message(text="EU", task_id=task.id, context_id=task.context_id)
    run(send(agent_url, reply))
    done = run(wait_for(agent_url, task.id, {TaskState.TASK_STATE_COMPLETED}))
    assert output_of(done)["answer"] == "EU"


def test_it_runs_a_message_sent_twice_only_once(agent_url: str) -> None:
    message = user_message({"product": "kettle"})
    first = run(send(agent_url, message))
    again = run(send(agent_url, message))
    assert again.id == first.id
    done = run(wait_for(agent_url, first.id, {TaskState.TASK_STATE_COMPLETED}))
    assert len(done.artifacts) == 1


def test_it_fails_a_task_when_the_input_says_so(agent_url: str) -> None:
    task = run(send(agent_url, user_message({"demo": {"fail": "no datasheet"}})))
    failed = run(wait_for(agent_url, task.id, {TaskState.TASK_STATE_FAILED}))
    assert "no datasheet" in failed.status.message.parts[0].text


def test_it_rejects_a_task_for_another_skill(agent_url: str) -> None:
    task = run(send(agent_url, user_message({}, skill_id="other-skill")))
    rejected = run(wait_for(agent_url, task.id, {TaskState.TASK_STATE_REJECTED}))
    assert "other-skill" in rejected.status.message.parts[0].text


def test_it_cancels_a_slow_task(agent_url: str) -> None:
    task = run(send(agent_url, user_message({"demo": {"delaySeconds": 30}})))
    run(wait_for(agent_url, task.id, {TaskState.TASK_STATE_WORKING}))
    canceled = run(cancel(agent_url, task.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    final = run(wait_for(agent_url, task.id, {TaskState.TASK_STATE_CANCELED}))
    assert final.status.state == TaskState.TASK_STATE_CANCELED


def test_it_answers_an_unknown_task_with_the_a2a_not_found_error(agent_url: str) -> None:
    response = httpx.get(f"{agent_url}/tasks/nope", headers={"A2A-Version": "1.0"})
    assert response.status_code == 404
    detail = response.json()["error"]["details"][0]
    assert detail["reason"] == "TASK_NOT_FOUND"
    assert detail["domain"] == "a2a-protocol.org"


def test_it_refuses_a_malformed_send_with_a_400(agent_url: str) -> None:
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    response = httpx.post(f"{agent_url}/message:send", content=b"{not json", headers=headers)
    assert response.status_code == 400
    assert "error" in response.json()


def test_it_serves_health_and_its_agent_card(agent_url: str) -> None:
    health = httpx.get(f"{agent_url}/health").json()
    card = httpx.get(f"{agent_url}/.well-known/agent-card.json").json()
    assert health["status"] == "ok"
    assert card["skills"][0]["id"] == "ce-review"
    assert card["supportedInterfaces"] == [
        {"url": agent_url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
    ]
