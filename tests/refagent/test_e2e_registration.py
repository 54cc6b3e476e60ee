"""End to end: the reference agent against a real embedded platform, as an agent
developer runs it: registration, identity across restarts, the gateway connection, and
bad configuration."""

from __future__ import annotations

import json
import stat
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.core.management import call_command

from agent_profiles.models import AgentProfile, AgentStatus, ApiKey
from gateway.presence import is_online
from tests.refagent.conftest import SCRIPTS
from tests.refagent.processes import agent_env, reference_agent
from tests.support.processes import PYTHON, embedded_platform

pytestmark = pytest.mark.slow

SKILL_ID = "ce-certification-review-v1"


def wait_until(check: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


@pytest.fixture
def platform(live_platform: Any) -> Any:
    call_command("loadskills", str(settings.EXAMPLE_SKILLS_FILE), verbosity=0)
    return live_platform


def test_it_registers_connects_and_keeps_its_identity_across_restarts(
    platform: Any, tmp_path: Path
) -> None:
    env = agent_env(platform.url, tmp_path, AGENT_ID="ref-e2e")
    with reference_agent(env) as agent:
        assert httpx.get(f"{agent.url}/health").json()["gateway"] == "connected"
        profile = AgentProfile.objects.get(pk="ref-e2e")
        assert profile.a2a_endpoint.rstrip("/") == agent.url
        assert list(profile.skills.values_list("id", flat=True)) == [SKILL_ID]
        wait_until(lambda: is_online("ref-e2e"))  # presence is written just after accept
        assert agent.stop() == 0  # SIGTERM: a clean exit
    saved = json.loads((tmp_path / "ref-e2e.json").read_text())
    assert saved["apiKey"].startswith("a2a_")
    assert stat.S_IMODE((tmp_path / "ref-e2e.json").stat().st_mode) == 0o600

    with reference_agent(env) as again:
        assert "re-registered as ref-e2e" in again.log_text()
    assert json.loads((tmp_path / "ref-e2e.json").read_text()) == saved
    assert ApiKey.objects.filter(agent_id="ref-e2e", revoked_at=None).count() == 1
    assert AgentProfile.objects.filter(pk="ref-e2e").count() == 1

    # A platform that forgot the agent (a fresh database): the saved key is refused, and
    # the agent registers anew and saves its new key.
    AgentProfile.objects.filter(pk="ref-e2e").delete()
    with reference_agent(env) as fresh:
        assert "was refused; registering anew" in fresh.log_text()
    assert json.loads((tmp_path / "ref-e2e.json").read_text())["apiKey"] != saved["apiKey"]
    assert AgentProfile.objects.filter(pk="ref-e2e").exists()


def test_bad_configuration_against_a_live_platform_is_one_line_and_exit_2(
    platform: Any, tmp_path: Path
) -> None:
    def run(**env: str) -> str:
        result = subprocess.run(
            [PYTHON, str(SCRIPTS / "a2a_server_reference.py")],
            env=agent_env(platform.url, tmp_path, **env),
            capture_output=True,
            text=True,
            timeout=60,
        )
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2, result.stderr
        assert len(lines) == 1, result.stderr
        return lines[0]

    assert "skill 'no-such-skill' is not on the platform" in run(SKILL_ID="no-such-skill")
    assert "known: ce-certification-review-v1" in run(SKILL_ID="no-such-skill")
    # Someone else's agent id, and no key for it here: 409 from the platform.
    call_command("loadskills", str(settings.EXAMPLE_SKILLS_FILE), verbosity=0)
    httpx.post(
        f"{platform.url}/api/agent-profiles/register",
        json={"agentId": "taken-id", "skillIds": [SKILL_ID]},
    ).raise_for_status()
    assert "already registered" in run(AGENT_ID="taken-id")
    assert "reserved" in run(AGENT_ID="tasks")


def test_in_approval_mode_it_waits_for_approval_then_connects(
    transactional_db: None, tmp_path: Path
) -> None:
    call_command("loadskills", str(settings.EXAMPLE_SKILLS_FILE), verbosity=0)
    with embedded_platform(REGISTRATION_MODE="approval") as platform:
        env = agent_env(platform.url, tmp_path, AGENT_ID="newcomer")
        with reference_agent(env, wait_gateway=False) as agent:
            assert AgentProfile.objects.get(pk="newcomer").status == AgentStatus.PENDING
            agent.wait_log("4403: agent disabled or not approved yet")
            AgentProfile.objects.filter(pk="newcomer").update(status=AgentStatus.ACTIVE)
            agent.wait_log("gateway connected")  # it kept retrying
