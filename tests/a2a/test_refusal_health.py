"""An agent that refuses a request for what it says (HTTP 400 to a person's answer) has
answered: it is reachable, and its health and place in matching stay. Recorded as a failed
call, a streamed agent (no ``GetTask`` after the refusal to clear it) showed unhealthy,
"known unreachable" to the matcher, which sent new work to another agent. Credentials
refused, a route it lacks and 5xx still count against it; a body too large for it (413),
a caller's doing, does not (docs/registry.md "Agent health")."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.responses import JSONResponse

from a2a import agent_registry, creation, services
from a2a.exceptions import (
    A2AAuthError,
    A2ACallError,
    A2APermanentError,
    A2ATransientError,
)
from a2a.states import TaskState
from agent_profiles.health import health_of, is_known_unreachable
from agent_profiles.models import AgentProfile
from tests.support.scripted_agent import events, register, run_out, run_scripted_agent, start

QUESTION = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "EU or UK?"}]}
ASKING = {
    "id": "t1",
    "contextId": "c",
    "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": QUESTION},
}
REFUSAL = {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "EU or UK only"}}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stream", [False, True], ids=["polled", "streamed"])
def test_a_refused_answer_leaves_the_agent_healthy(
    make_agent: Any, make_skill: Any, make_user: Any, settings: Any, stream: bool
) -> None:
    """The person's answer refused (HTTP 400): the task asks again, the agent stays
    healthy and is still matched before an agent nothing is known of."""
    settings.ALLOW_LOOPBACK_URLS = True
    user = make_user()
    with run_scripted_agent() as agent:
        profile = register(make_agent, make_skill, agent, stream=stream)

        def answer(kind: str, body: Any) -> Any:
            if kind in ("send", "stream") and ((body or {}).get("message") or {}).get("taskId"):
                return JSONResponse(REFUSAL, status_code=400)
            if kind in ("stream", "subscribe"):
                return events({"task": ASKING})
            return JSONResponse(ASKING if kind == "get" else {"task": ASKING})

        agent.answer = answer
        task = run_out(start(user))
        assert task.state == TaskState.INPUT_REQUIRED, task.error
        services.reply_to_task(task, text="FR")
        task = run_out(task)
    assert task.state == TaskState.INPUT_REQUIRED
    assert "refused the answer" in task.error["message"]
    profile.refresh_from_db()
    assert health_of(profile).status == "healthy", (profile.last_call_code, profile.last_call_error)
    assert not is_known_unreachable(profile)
    make_agent(skills=[profile.skills.first()], id="agent-two", a2a_endpoint="http://127.0.0.1:9/")
    picked = creation.create_task(skill_id="ce-review", input={"product": "lamp"}, user=user)
    assert picked.agent_id == profile.id


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("error", "healthy"),
    [
        (A2APermanentError("HTTP 400", status=400), True),
        (A2APermanentError("HTTP 422", status=422), True),
        (A2APermanentError("JSON-RPC error -32602"), True),  # no HTTP status
        (A2APermanentError("HTTP 404: no such route", status=404), False),
        (A2APermanentError("HTTP 408", status=408), False),
        # A body too large is the caller's message, refused by the agent or its proxy
        # (tests/a2a/test_match_gaming.py); the content type and headers (the credential
        # among them) are the platform's own: refused, every call is.
        (A2APermanentError("HTTP 413 from a proxy", status=413), True),
        (A2APermanentError("HTTP 415", status=415), False),
        (A2APermanentError("HTTP 431", status=431), False),
        (A2APermanentError("HTTP 410", status=410), False),
        (A2AAuthError("HTTP 401", status=401), False),
        (A2AAuthError("HTTP 403", status=403), False),
        (A2ATransientError("HTTP 503", code="agent_http_error", status=503), False),
        (A2APermanentError("version", code="version_not_supported", status=400), False),
    ],
    ids=[
        "400",
        "422",
        "jsonrpc",
        "404",
        "408",
        "413",
        "415",
        "431",
        "410",
        "401",
        "403",
        "503",
        "version",
    ],
)
def test_which_refusals_count_as_an_answer(
    make_agent: Any, error: A2ACallError, healthy: bool
) -> None:
    """A refusal the agent read the request for is an answer (it clears an earlier failed
    call); credentials, a missing route, a request not read and 5xx stay failures."""
    profile: AgentProfile = make_agent(a2a_endpoint="http://127.0.0.1:9/")
    agent_registry.record_call_outcome(
        profile, A2ATransientError("refused", code="agent_unreachable")
    )
    agent_registry.record_call_outcome(profile, error)
    profile.refresh_from_db()
    assert profile.last_call_ok is healthy
    assert (health_of(profile).status == "healthy") is healthy
    if not healthy:
        assert profile.last_call_code == error.code
