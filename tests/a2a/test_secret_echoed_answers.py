"""An agent that answers 200 with a FAILED or REJECTED task whose status message echoes
the request's headers (a framework's error text): the task's ``error`` quotes that
message, and it showed the platform's credential for the agent in the API and the admin.
It is now redacted as a refused call's echo is (tests/a2a/test_secret_echoes.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from rest_framework.test import APIClient

from a2a import creation
from a2a.states import TaskState
from a2a.transports import credentials as outbound_credentials
from agent_profiles.credentials import set_credentials
from tests.a2a.test_peers import drive
from tests.support.serving import threaded

pytestmark = pytest.mark.django_db

SECRET = "ECHOED-SECRET-bearer-4711"


class Echo(BaseHTTPRequestHandler):
    """``message:send`` answered with a task in the state the path names, its status
    message quoting every request header."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = "; ".join(f"{name}: {value}" for name, value in self.headers.items())
        state = self.path.split("/")[1]
        message = {
            "messageId": "m-1",
            "role": "ROLE_AGENT",
            "parts": [{"text": f"upstream refused a request with headers {headers}"}],
        }
        task = {"id": "t-1", "contextId": "c-1", "status": {"state": state, "message": message}}
        body = json.dumps({"task": task}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def echo(settings: Any) -> Iterator[str]:
    settings.ALLOW_LOOPBACK_URLS = True
    outbound_credentials.forget_tokens()
    with threaded(ThreadingHTTPServer(("127.0.0.1", 0), Echo)) as url:
        yield url


@pytest.mark.parametrize("state", [TaskState.FAILED, TaskState.REJECTED])
def test_an_ended_task_echoing_the_request_keeps_no_secret_in_its_error(
    echo: str, make_skill: Any, make_agent: Any, make_user: Any, state: str
) -> None:
    skill = make_skill()
    agent = make_agent(skills=[skill], a2a_endpoint=f"{echo}/{state}")
    set_credentials(agent, {"type": "bearer", "token": SECRET})
    agent.save()
    user = make_user()
    task = creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=user)
    task = drive(task, lambda t: t.state == state)
    message = task.error["message"]
    assert message.startswith(f"Agent '{agent.id}': upstream refused a request with headers")
    assert "[redacted]" in message
    assert SECRET not in json.dumps(task.error)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {user.raw_token}")
    answer = client.get(f"/api/tasks/{task.pk}")
    assert answer.status_code == 200
    assert SECRET not in answer.content.decode()
