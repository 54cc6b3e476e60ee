"""Shared fixtures: small factories with keyword overrides, and service gating.

Tests marked ``postgres`` or ``distributed`` need the distributed mode's servers; without
them they are skipped, unless ``REQUIRE_SERVICES=1`` (CI), which turns the skip into a
failure so a missing server can never pass silently.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import override_settings

from agent_profiles.models import AgentProfile, Skill, UserToken
from tests.support.agents import TestAgent, run_agent

REQUIRE_SERVICES = os.environ.get("REQUIRE_SERVICES") == "1"


def _missing_service(item: pytest.Item) -> str | None:
    db_engine = settings.DATABASES["default"]["ENGINE"]
    if item.get_closest_marker("postgres") and "postgresql" not in db_engine:
        return "needs PostgreSQL: set DATABASE_URL (make test does)"
    if item.get_closest_marker("distributed") and not settings.DISTRIBUTED:
        return "needs the distributed mode: set DATABASE_URL and REDIS_URL (make test does)"
    return None


@pytest.fixture(scope="session", autouse=True)
def _short_stop_wait() -> Iterator[None]:
    """Embedded workers stopped at a test's end with a long call still running (a stream
    a test left open) wait 1 s for it, not A2A_STOP_WAIT's 120; tests of that wait set
    their own (tests/test_worker_sigterm.py)."""
    with override_settings(A2A_STOP_WAIT=1.0):
        yield


# The processes tests boot (a platform, a worker) keep the real hashers: a user who logs
# into one is made with those (tests/platform_site/test_console_browser.py).
TEST_PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    *settings.PASSWORD_HASHERS,
]


# Rows migrate's post_migrate signal makes (content types, permissions): the same for every
# test, like the migrations' own tables.
MIGRATED_ROWS = {"django_content_type", "auth_permission"}


@pytest.fixture(scope="session", autouse=True)
def _flush_keeps_migrated_rows() -> Iterator[None]:
    """A transactional test's flush empties every table but those of
    :data:`MIGRATED_ROWS`, and sends no post_migrate signal to make them again: that
    signal's content type and permission queries cost more than the flush itself, after
    each of some 1,100 transactional tests per pass. A test in a transaction (``db``)
    keeps those rows too: the same start for both.

    On PostgreSQL the tables are emptied by DELETE, not TRUNCATE: a TRUNCATE makes new
    files for every table and index and waits for every other connection's locks (a
    process or thread of the test still closing) where a few rows go at once. The
    flush is one transaction and every foreign key is DEFERRABLE INITIALLY DEFERRED
    (Django's), so the order does not matter. Measured on test_overtaken_calls.py:
    0.22-0.26 s per flush before, 0.02-0.03 s after."""
    from django.core.management.commands import flush

    def sql_flush(style: Any, connection: Any, **options: Any) -> list[str]:
        tables = connection.introspection.django_table_names(
            only_existing=True, include_views=False
        )
        emptied = [table for table in tables if table not in MIGRATED_ROWS]
        if connection.vendor == "postgresql" and not any(options.values()):
            return [f"DELETE FROM {connection.ops.quote_name(table)};" for table in emptied]
        return connection.ops.sql_flush(style, emptied, **options)

    with (
        mock.patch.object(flush, "sql_flush", sql_flush),
        mock.patch.object(flush, "emit_post_migrate_signal", return_value=None),
    ):
        yield


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hashing() -> Iterator[None]:
    """Users made with a password here (the ``admin_client`` of some 200 tests) are hashed
    with MD5: PBKDF2's million rounds cost about half a second of CPU each (Django's
    "Speeding up the tests")."""
    with override_settings(PASSWORD_HASHERS=TEST_PASSWORD_HASHERS):
        yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        reason = _missing_service(item)
        if reason is None:
            continue
        if REQUIRE_SERVICES:
            item.add_marker(pytest.mark.xfail(reason=reason, run=False, strict=True))
            item.user_properties.append(("missing", reason))
        else:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report = outcome.get_result()
    missing = dict(item.user_properties).get("missing")
    if missing and REQUIRE_SERVICES and report.when == "setup":
        report.outcome = "failed"
        report.longrepr = f"REQUIRE_SERVICES=1 but the test {missing}"


SKILL_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"product": {"type": "string"}, "market": {"type": "string"}},
    "required": ["product"],
    "additionalProperties": True,
}
SKILL_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["pass", "fail"]}},
    "required": ["verdict"],
}


@pytest.fixture(autouse=True)
def _close_kept_threads() -> Iterator[None]:
    """After each test, the threads a sweep or a batch kept close their database
    connections (PostgreSQL will not drop the test database while one is open)."""
    yield
    from a2a.tasks import batch_threads
    from a2a.worker import sweep_threads

    sweep_threads.close()
    batch_threads.close()
    # A lean ASGI path run under asyncio.run() with its pool sized 0 (the face's, the
    # tasks API's) put its ORM calls on asgiref's one shared thread-sensitive thread,
    # which lives for the whole run: its connection too, unless closed here.
    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)


@pytest.fixture(autouse=True)
def _fresh_receive_locks() -> Iterator[None]:
    """After each test, the Redis channel layer forgets its per-channel receive locks.

    channels_redis holds one until the task that cleans a received message's backup ends.
    A test whose event loop closes first leaves it held, bound to that loop, and the next
    test whose consumers wait on it fails with "bound to a different event loop" (seen in
    CI on the gateway's consumer tests). A process runs one loop: only tests meet this."""
    yield
    from channels.layers import channel_layers

    for layer in list(channel_layers.backends.values()):
        locks = getattr(layer, "receive_clean_locks", None)
        if locks is not None:
            layer.receive_clean_locks = type(locks)()


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    """Each test starts with empty caches: no skill or agent of an earlier (rolled back)
    test remembered by task creation, nothing an earlier test cached."""
    from django.core.cache import cache

    from a2a import listing_models, lookups

    cache.clear()
    lookups.clear()
    listing_models.forget()


@pytest.fixture
def peer() -> Iterator[TestAgent]:
    """A real a2a-sdk agent (:mod:`tests.support.agents`) serving on loopback."""
    with run_agent() as agent:
        yield agent


@pytest.fixture
def make_skill(db: None) -> Callable[..., Skill]:
    """Create a skill; keyword arguments override the defaults."""

    def make(**overrides: Any) -> Skill:
        fields: dict[str, Any] = {
            "id": "ce-review",
            "name": "CE review",
            "description": "Reviews a product for CE marking.",
            "tags": ["compliance"],
            "domain": "compliance",
            "subdomain": "ce_certification",
            "input_schema": SKILL_INPUT_SCHEMA,
            "output_schema": SKILL_OUTPUT_SCHEMA,
        }
        fields.update(overrides)
        return Skill.objects.create(**fields)

    return make


@pytest.fixture
def make_agent(db: None) -> Callable[..., AgentProfile]:
    """Create an agent offering ``skills`` (Skill objects); returns the profile.

    The agent's API key is set on ``agent.raw_key``.
    """

    def make(skills: list[Skill] | None = None, **overrides: Any) -> AgentProfile:
        fields: dict[str, Any] = {
            "id": "agent-one",
            "name": "Agent One",
            "a2a_endpoint": "http://127.0.0.1:9/",
        }
        fields.update(overrides)
        agent = AgentProfile.objects.create(**fields)
        agent.skills.set(skills or [])
        agent.raw_key = agent.issue_key()  # type: ignore[attr-defined]
        return agent

    return make


@pytest.fixture
def make_user(db: None) -> Callable[..., Any]:
    """Create a user; its API token is set on ``user.raw_token``."""

    def make(username: str = "alice", **overrides: Any) -> Any:
        user = get_user_model().objects.create_user(username=username, **overrides)
        user.raw_token = UserToken.issue(user)
        return user

    return make


@pytest.fixture
def live_platform(transactional_db: None) -> Any:
    """The running platform in this pass's mode (embedded process, or daphne + celery
    worker + beat on PostgreSQL + Redis); ``.url`` is its base URL. Slow: mark tests."""
    from tests.support.processes import live_platform_for_mode

    with live_platform_for_mode() as platform:
        yield platform


class _EveryRecord(logging.Handler):
    """Keeps every log record of one test (any logger, any level that is emitted)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a broken record is not this fixture's business
            text = str(record.msg)
        if record.exc_info and record.exc_info[1] is not None:
            text += f" {record.exc_info[1]!r}"
        self.lines.append(f"{record.name}: {text}")


@pytest.fixture(autouse=True)
def _no_secret_in_logs() -> Any:
    """No API key, token or credential in any log line of any test (docs/operations.md):
    every record logged during the test is scanned when it ends."""
    from tests.support.processes import LEAKS
    from tests.support.secrets_scan import find_secrets

    LEAKS.clear()
    handler = _EveryRecord()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
    leaks = [f"{line[:200]}  <- {hit}" for line in handler.lines for hit in find_secrets(line)]
    leaks += [f"process log <- {hit}" for hit in LEAKS]
    if leaks:
        pytest.fail("secrets in log lines:\n" + "\n".join(leaks[:10]), pytrace=False)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None) -> Iterator[None]:  # wraps pytest-django's
    """Before the test database is dropped: close what threads still hold on it, the
    pools that keep connections (face, tasks API, gateway, agent push), asgiref's shared
    thread, and ended threads' connections (embedded Celery pool threads) not yet
    collected (their wrappers sit in reference cycles until a full collection)."""
    yield
    import gc

    from asgiref.sync import SyncToAsync
    from django.db import connections

    from a2a import agent_push_asgi
    from a2a.api import asgi as tasks_asgi
    from a2a.face import db as face_db
    from gateway import db as gateway_db

    for pool in (face_db.pool, tasks_asgi.pool, gateway_db.pool, agent_push_asgi.pool):
        pool.close()
    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)
    # The poll engine's pool threads, which the listings' fetches also run on, may hold a
    # connection (tests/a2a/listing alone left one): ended, it goes with the collection.
    from a2a import engine

    if engine._pool is not None:
        engine._pool.shutdown()
        engine._pool = None
    gc.collect()
