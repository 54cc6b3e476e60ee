"""The distributed mode for real: daphne and a celery worker as separate processes on
PostgreSQL and Redis, reached over HTTP and the broker."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from django.conf import settings

from agent_profiles.models import AgentProfile, AgentStatus, Skill
from platform_site.celery import app
from tests.support.processes import celery_worker, daphne_process

pytestmark = [pytest.mark.distributed, pytest.mark.slow]


def test_daphne_and_a_worker_serve_a_registration_round_trip(transactional_db: None) -> None:
    assert "postgresql" in settings.DATABASES["default"]["ENGINE"]
    Skill.objects.create(id="ce-review", name="CE review", input_schema={}, output_schema={})
    with celery_worker(name="boot") as worker, daphne_process() as daphne:
        http = httpx.Client(base_url=daphne.url, timeout=10)  # type: ignore[attr-defined]

        ready = http.get("/readyz")
        assert ready.status_code == 200, ready.text
        checks = ready.json()["checks"]
        assert checks["database"]["detail"] == "postgresql"
        assert checks["broker"]["detail"] == "redis"

        skills = http.get("/api/a2a/skills").json()
        assert [s["id"] for s in skills] == ["ce-review"]

        body: dict[str, Any] = {"agentId": "boot-agent", "skillIds": ["ce-review"]}
        created = http.post("/api/agent-profiles/register", json=body)
        assert created.status_code == 201, created.text
        key = created.json()["apiKey"]
        # The distributed default is approval: the new agent waits for an operator.
        assert created.json()["profile"]["status"] == AgentStatus.PENDING
        assert AgentProfile.objects.get().pk == "boot-agent"  # written to PostgreSQL

        again = http.post("/api/agent-profiles/register", json={**body, "name": "Boot"})
        assert again.status_code == 409
        updated = http.post(
            "/api/agent-profiles/register",
            json={**body, "name": "Boot"},
            headers={"Authorization": f"Bearer {key}"},
        )
        assert updated.status_code == 200, updated.text
        assert AgentProfile.objects.get().name == "Boot"

        # A pending agent's card is not published; an approved one's is.
        assert http.get("/api/a2a/agent-card/boot-agent").status_code == 404
        AgentProfile.objects.filter(pk="boot-agent").update(status=AgentStatus.ACTIVE)
        card = http.get("/api/a2a/agent-card/boot-agent").json()
        assert card["supportedInterfaces"][0]["url"].endswith("/v1/a2a/boot-agent")

        # The worker is alive and consuming from the Redis broker.
        replies = app.control.ping(destination=["boot@localhost"], timeout=5.0)
        assert replies == [{"boot@localhost": {"ok": "pong"}}], worker.log_text()[-2000:]
