"""Matching cannot be steered by a caller or a registered agent, through the real routes:
an agent's key is also a caller on the A2A face (open registration gives anyone one).

* Tasks an agent sends itself (its own tenant route) and completes at once are not its
  record: they won it the match over an agent with real work done.
* A message too large for an agent (HTTP 413 from it or the proxy in front) is the
  caller's doing: recorded as a failed call, one such message made a healthy agent
  "known unreachable", out of matching until the next health check.

The unit cases are in tests/agent_profiles/test_matching.py and test_refusal_health.py.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from a2a import worker
from a2a.models import Task
from a2a.states import TaskState
from agent_profiles.health import health_of
from agent_profiles.matching import score_agents
from agent_profiles.models import AgentProfile, HealthStatus
from gateway import presence
from tests.a2a_face.conftest import FaceClient
from tests.a2a_face.test_send import message, send

pytestmark = pytest.mark.django_db

LIMIT = 64 * 1024  # the victim's (or its proxy's) request body limit


@pytest.fixture(autouse=True)
def _face_db_in_the_test_thread(settings: Any) -> None:
    """The face's ORM calls where the test's transaction is visible, no token cache (as
    tests/a2a_face/conftest.py), and open registration (the embedded default)."""
    settings.A2A_FACE_DB_THREADS = 0
    settings.A2A_FACE_AUTH_CACHE_SECONDS = 0
    settings.REGISTRATION_MODE = "open"


def _register(skill: Any, agent_id: str) -> str:
    """An agent registered with no key and no endpoint (open registration); its key."""
    r = Client().post(
        "/api/agent-profiles/register",
        {
            "agentId": agent_id,
            "skillIds": [skill.id],
            "domain": skill.domain,
            "subdomain": skill.subdomain,
        },
        content_type="application/json",
    )
    assert r.status_code == 201, r.content
    return r.json()["apiKey"]


def _ids(skill: Any) -> list[str]:
    cache.clear()  # the matcher's history cache
    return [row["agentId"] for row in score_agents(skill)]


def test_tasks_an_agent_sent_itself_do_not_win_it_the_match(
    make_skill: Any, make_agent: Any
) -> None:
    skill = make_skill()
    proven = make_agent(id="proven", skills=[skill], domain=skill.domain, subdomain=skill.subdomain)
    AgentProfile.objects.filter(pk=proven.pk).update(
        health_status=HealthStatus.HEALTHY, health_checked_at=timezone.now()
    )
    end = timezone.now() - timedelta(hours=1)
    for i in range(3):  # done for a person, 5 s each
        Task.objects.create(
            skill=skill,
            agent=proven,
            state=TaskState.COMPLETED,
            created_at=end - timedelta(seconds=5 + i),
            state_changed_at=end - timedelta(seconds=i),
        )
    face = FaceClient(_register(skill, "selfish"), check=False)
    presence.register("selfish", "chan-s")  # connected: online as the proven one
    assert _ids(skill)[0] == "proven"
    for _ in range(10):
        r = send(face, message(metadata={"skillId": skill.id}), path="/v1/a2a/selfish")
        assert r.status_code == 200, r.content
        task = Task.objects.get(pk=r.json()["task"]["id"])
        assert task.created_by_agent_id == "selfish"
        task.complete({"verdict": "pass"}, [])  # at once, as its socket would
    assert _ids(skill)[0] == "proven"


class _LimitedAgent(BaseHTTPRequestHandler):
    """A healthy A2A HTTP+JSON agent behind a body limit (413 above it, as nginx or any
    framework with a limit answers); it completes every task it can read."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length") or 0)
        if size > LIMIT:
            self._answer(413, {"error": "request entity too large"})
            return
        msg = json.loads(self.rfile.read(size) or b"{}").get("message", {})
        task = {
            "id": "remote-1",
            "contextId": msg.get("contextId", "c"),
            "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a", "parts": [{"data": {"verdict": "pass"}}]}],
        }
        self._answer(200, {"task": task})

    def _answer(self, code: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def limited_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _LimitedAgent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_an_oversized_message_leaves_the_agent_in_matching(
    make_skill: Any, make_agent: Any, limited_url: str, settings: Any
) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    skill = make_skill()
    make_agent(
        id="victim",
        skills=[skill],
        a2a_endpoint=limited_url,
        domain=skill.domain,
        subdomain=skill.subdomain,
    )
    face = FaceClient(_register(skill, "rival"), check=False)
    ok = send(face, message(metadata={"skillId": skill.id}), path="/v1/a2a/victim")
    worker.process_task(ok.json()["task"]["id"])
    assert Task.objects.get(pk=ok.json()["task"]["id"]).state == TaskState.COMPLETED
    assert "victim" in _ids(skill)

    big = message(
        metadata={"skillId": skill.id},
        parts=[{"data": {"product": "lamp"}}, {"text": "x" * 100_000}],  # < MAX_BODY_BYTES
    )
    r = send(face, big, path="/v1/a2a/victim")
    assert r.status_code == 200, r.content
    worker.process_task(r.json()["task"]["id"])

    victim = AgentProfile.objects.get(pk="victim")
    assert health_of(victim).status == "healthy", (victim.last_call_code, victim.last_call_error)
    assert "victim" in _ids(skill)
