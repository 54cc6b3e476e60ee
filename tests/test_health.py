from __future__ import annotations

from typing import Any

import pytest

from tests.support.serving import free_port


def test_healthz_answers_without_touching_anything(client: Any) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_ok_when_the_database_answers(client: Any, db: None) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["database"]["ok"] is True


def test_readyz_is_503_when_the_broker_is_unreachable(client: Any, db: None, settings: Any) -> None:
    settings.DISTRIBUTED = True
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["broker"]["ok"] is False
    assert "Connection" in body["checks"]["broker"]["error"]


@pytest.mark.distributed
def test_readyz_checks_the_real_redis_in_distributed_mode(client: Any, db: None) -> None:
    body = client.get("/readyz").json()
    assert body["checks"]["broker"] == {**body["checks"]["broker"], "ok": True, "detail": "redis"}
    assert body["checks"]["database"]["detail"] == "postgresql"


def test_readyz_is_503_while_migrations_are_pending(
    client: Any, db: None, monkeypatch: Any
) -> None:
    from django.db.migrations.executor import MigrationExecutor

    from platform_site import views

    monkeypatch.setattr(views, "_migrated", False)
    # Unapply the newest registry migration's effect on the recorder only: the plan then
    # lists it as pending, exactly as before `migrate` on a new release.
    executor = MigrationExecutor(views.connection)
    leaf = next(n for n in executor.loader.graph.leaf_nodes() if n[0] == "agent_profiles")
    executor.recorder.record_unapplied(*leaf)
    try:
        response = client.get("/readyz")
        assert response.status_code == 503
        assert "run migrate" in response.json()["checks"]["migrations"]["error"]
    finally:
        executor.recorder.record_applied(*leaf)
    monkeypatch.setattr(views, "_migrated", False)
    assert client.get("/readyz").json()["checks"]["migrations"]["ok"] is True
