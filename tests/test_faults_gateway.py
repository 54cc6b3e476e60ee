"""Fault suite, distributed mode: WebSocket agents hold tasks on a daphne that is killed
(SIGKILL) before they answer. They reconnect to another daphne and every task completes,
once. Agents here behave as the docs ask: reconnect with a short backoff to any daphne,
keep working on what they hold, ack and report on the new connection."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import ClientConnection, connect

from a2a.models import Task, TaskEvent
from a2a.states import TaskState
from agent_profiles.models import AgentProfile, Skill
from tests.support.processes import beat_proc, daphne_proc, started, worker_proc

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

ENV = {
    "A2A_SWEEP_INTERVAL": 0.3,
    "GATEWAY_HEARTBEAT_TIMEOUT": 3.0,
    "GATEWAY_SWEEP_INTERVAL": 0.5,
}
AGENTS = 3
TASKS_PER_AGENT = 3
WORK_SECONDS = 6.0  # the agent's time per task: the kill lands while it works


class SocketAgent(threading.Thread):
    """A gateway agent that fails over between daphne URLs and keeps its work across
    connections."""

    def __init__(self, key: str, urls: list[str]) -> None:
        super().__init__(daemon=True)
        self.key, self.urls = key, urls
        self.stop = threading.Event()
        self.connections = 0
        self.pending: dict[str, tuple[float, str]] = {}  # task id → (due, deliveryId)
        self.received: list[str] = []
        self.reported: list[str] = []

    def run(self) -> None:
        index = 0
        while not self.stop.is_set():
            url = self.urls[index].replace("http://", "ws://", 1) + "/ws/agent-gateway/"
            try:
                with connect(
                    url,
                    additional_headers={"Authorization": f"Bearer {self.key}"},
                    open_timeout=3,
                    close_timeout=1,
                ) as ws:
                    self.connections += 1
                    self.serve(ws)
            except (OSError, ConnectionClosed, InvalidHandshake, TimeoutError):
                pass
            index = (index + 1) % len(self.urls)
            time.sleep(0.2)

    def serve(self, ws: ClientConnection) -> None:
        next_ping = 0.0
        while not self.stop.is_set():
            now = time.monotonic()
            if now >= next_ping:
                ws.send('{"type":"ping"}')
                next_ping = now + 0.5
            try:
                frame = json.loads(ws.recv(timeout=0.1))
            except TimeoutError:
                frame = None
            if frame and frame["type"] == "task.assign":
                task_id = frame["task"]["id"]
                self.received.append(task_id)
                self.pending.setdefault(task_id, (now + WORK_SECONDS, frame["deliveryId"]))
            for task_id, (due, delivery_id) in list(self.pending.items()):
                if due <= now:
                    ws.send(json.dumps({"type": "task.ack", "deliveryId": delivery_id}))
                    ws.send(json.dumps(completed(task_id)))
                    self.reported.append(task_id)
                    del self.pending[task_id]


def completed(task_id: str) -> dict[str, Any]:
    return {
        "type": "task.update",
        "taskId": task_id,
        "status": {"state": "TASK_STATE_COMPLETED"},
        "artifacts": [{"artifactId": "r", "parts": [{"data": {"verdict": "pass"}}]}],
    }


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_socket_agents_finish_their_tasks_on_another_daphne_after_a_crash(
    transactional_db: None,
    make_user: Callable[..., Any],
    make_skill: Callable[..., Skill],
    make_agent: Callable[..., AgentProfile],
) -> None:
    user = make_user()
    skill = make_skill()
    agents = [make_agent(id=f"ws-{i}", skills=[skill], a2a_endpoint="") for i in range(AGENTS)]
    auth = {"Authorization": f"Bearer {user.raw_token}"}
    procs = (worker_proc(**ENV), beat_proc(**ENV), daphne_proc(**ENV), daphne_proc(**ENV))
    with started(*procs) as (worker, _, doomed, survivor):
        urls = [doomed.url, survivor.url]  # type: ignore[attr-defined]
        runners = [SocketAgent(a.raw_key, urls) for a in agents]
        for runner in runners:
            runner.start()
        try:
            wait_until(lambda: all(r.connections for r in runners), 20, "agents connected")
            ids = []
            for agent in agents:
                for _ in range(TASKS_PER_AGENT):
                    body = {"skillId": skill.id, "input": {"product": "k"}, "agentId": agent.id}
                    response = httpx.post(
                        f"{survivor.url}/api/tasks",  # type: ignore[attr-defined]
                        json=body,
                        headers=auth,
                        timeout=10,
                    )
                    assert response.status_code == 201, response.text
                    ids.append(response.json()["id"])
            # Every agent holds work (received, not yet reported) when its daphne dies.
            wait_until(lambda: all(r.received for r in runners), 20, "assignments received")
            doomed.kill()
            assert all(r.pending for r in runners), "every agent was working when it died"

            def all_done() -> bool:
                return Task.objects.filter(pk__in=ids, state=TaskState.COMPLETED).count() == len(
                    ids
                )

            wait_until(all_done, 60, "every task completed after the crash")
            assert all(r.connections >= 2 for r in runners)  # each reconnected
            assert survivor.alive()
            assert worker.alive()
        finally:
            for runner in runners:
                runner.stop.set()
            for runner in runners:
                runner.join(timeout=5)
    completions = TaskEvent.objects.filter(task_id__in=ids, to_state=TaskState.COMPLETED)
    assert completions.count() == len(ids)
    assert set(Task.objects.filter(pk__in=ids).values_list("transport", flat=True)) == {"websocket"}
