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


@pytest.fixture
def probe_settles() -> Any:
    """After the test: wait for a database probe given up on to end, so that the next
    test's /readyz does not find it still running."""
    from platform_site import db_bounds

    yield
    running = db_bounds._given_up.get("database")
    if running is not None:
        running.exception(timeout=15)


def test_readyz_gives_up_on_a_database_that_does_not_answer(
    client: Any, db: None, monkeypatch: Any, probe_settles: None
) -> None:
    """A database that takes the query and says nothing (a stopped server) held /readyz,
    and the load balancer asking it, for ever: now 503 after PROBE_TIMEOUT (2 s)."""
    import threading

    from django.db import connections

    released = threading.Event()
    wrapper = type(connections["default"])
    cursor = wrapper.cursor

    def silent(self: Any) -> Any:
        released.wait(8)  # bounded: the old code waited here in the request itself
        return cursor(self)

    monkeypatch.setattr(wrapper, "cursor", silent)
    try:
        # The answer says it gave up (the old code answered 200 once released, 8 s on).
        response = client.get("/readyz")
        assert response.status_code == 503
        assert response.json()["checks"]["database"] == {"ok": False, "error": "timeout after 2 s"}
        assert "migrations" not in response.json()["checks"]
        # Asked again while that probe still waits: no second thread piling up.
        again = client.get("/readyz").json()["checks"]["database"]
        assert again["ok"] is False
        assert "has not answered" in again["error"]
    finally:
        released.set()


@pytest.mark.postgres
def test_readyz_gives_up_on_a_postgresql_that_accepts_and_says_nothing(
    client: Any, transactional_db: None, probe_settles: None
) -> None:
    """The real thing: a listener that takes the TCP connection and never answers libpq."""
    import socket

    from django.db import connection

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # the kernel completes handshakes; nothing ever reads or answers
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT=str(silent.getsockname()[1]))
    try:
        # The probe's own time limit, not the connect timeout's OperationalError.
        response = client.get("/readyz")
        assert response.status_code == 503
        assert response.json()["checks"]["database"] == {"ok": False, "error": "timeout after 2 s"}
    finally:
        from platform_site import db_bounds

        running = db_bounds._given_up.get("database")
        if running is not None:
            running.exception(timeout=15)  # DATABASE_CONNECT_TIMEOUT (5 s) ends it
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)
        silent.close()


def test_probes_at_once_each_answer() -> None:
    """A load balancer's and an orchestrator's probes at the same moment: each runs its
    check (the second was refused as if the first had timed out)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from platform_site import db_bounds

    both_in = threading.Barrier(2, timeout=5)

    def probe() -> str:
        both_in.wait()  # both run at once, or neither gets past here
        return "ok"

    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: db_bounds.in_thread("concurrent", probe), range(2)))
    assert answers == ["ok", "ok"]


# --- probes on the host, behind an https-only site ---------------------------------------
# deploy/systemd/platform.env.example: ALLOWED_HOSTS=agents.example.com and
# SECURE_SSL_REDIRECT=true. A probe on the host names the address it calls, over plain http.

PROBES = {"/healthz": "application/json", "/readyz": "application/json", "/metrics": "text/plain"}


@pytest.mark.parametrize("host", ["127.0.0.1:8001", "10.0.0.5", "anything.invalid"])
def test_the_probes_answer_whatever_the_host_header(
    client: Any, db: None, settings: Any, caplog: Any, host: str
) -> None:
    """Each was a 400 HTML page with an ERROR and its traceback in the log: they return no
    URL built from the request, so the Host header means nothing to them."""
    settings.ALLOWED_HOSTS = ["agents.example.com"]
    for path, content_type in PROBES.items():
        answer = client.get(path, HTTP_HOST=host)
        assert answer.status_code == 200, (path, answer.content[:200])
        assert answer["Content-Type"].startswith(content_type), path
        assert answer["X-Content-Type-Options"] == "nosniff", path  # as the stack adds it
    assert client.get("/healthz", HTTP_HOST=host).json() == {"status": "ok"}
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text


def test_the_rest_of_the_site_stays_under_allowed_hosts(client: Any, settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["agents.example.com"]
    for path in ("/admin/login/", "/healthz/", "/api/tasks"):
        assert client.get(path, HTTP_HOST="127.0.0.1:8001").status_code == 400, path
    assert client.get("/admin/login/", HTTP_HOST="agents.example.com").status_code == 200


def test_plain_http_probes_are_not_redirected_on_an_https_only_site(
    client: Any, db: None, settings: Any
) -> None:
    """A proxy's health check of /readyz goes over plain http: it was a 301, which the
    proxy counts as healthy, so it never saw an outage. Through the proxy (https) the
    answer carries HSTS like any other."""
    settings.ALLOWED_HOSTS = ["agents.example.com"]
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_HSTS_SECONDS = 3600
    for path in PROBES:
        for host in ("agents.example.com", "127.0.0.1:8001"):
            assert client.get(path, HTTP_HOST=host).status_code == 200, (path, host)
        proxied = client.get(path, HTTP_HOST="agents.example.com", HTTP_X_FORWARDED_PROTO="https")
        assert proxied["Strict-Transport-Security"] == "max-age=3600", path
    assert client.get("/admin/login/", HTTP_HOST="agents.example.com").status_code == 301


def test_readyz_is_exempt_from_the_https_redirect_like_the_other_probes(settings: Any) -> None:
    """Django's own redirect spares the three probes too (SECURE_REDIRECT_EXEMPT), should
    anything put the redirect before them."""
    from django.middleware.security import SecurityMiddleware
    from django.test import RequestFactory

    settings.SECURE_SSL_REDIRECT = True
    redirect = SecurityMiddleware(lambda request: None)  # type: ignore[arg-type,return-value]
    for path in PROBES:
        assert redirect.process_request(RequestFactory().get(path)) is None, path
    assert redirect.process_request(RequestFactory().get("/admin/")) is not None
