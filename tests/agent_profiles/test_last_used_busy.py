"""Authentication records when a token was last used (every five minutes at most): on
SQLite only if the database takes the write at once. A read-only request whose token's
record was due waited for the write lock another writer held (40 s behind another
process's long transaction), then failed with a 503, while a fresh token's read passed."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from agent_profiles.models import UserToken
from platform_site.sqlite.base import write_lock

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sqlite_only() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's write lock; PostgreSQL writers of other rows never wait")


@pytest.fixture
def stale(make_user: Any) -> Any:
    user = make_user()
    UserToken.objects.update(last_used_at=timezone.now() - timedelta(hours=1))
    return user


def last_used() -> Any:
    return UserToken.objects.values_list("last_used_at", flat=True).get()


def get(client: Any, user: Any) -> Any:
    return client.get("/api/tasks", HTTP_AUTHORIZATION=f"Bearer {user.raw_token}")


def test_a_read_goes_on_while_another_process_holds_the_database(client: Any, stale: Any) -> None:
    before = last_used()
    other = sqlite3.connect(connection.settings_dict["NAME"], timeout=0)
    try:
        other.execute("BEGIN IMMEDIATE")
        assert get(client, stale).status_code == 200
        assert last_used() == before  # not recorded: the database was busy
    finally:
        other.rollback()
        other.close()
    assert get(client, stale).status_code == 200
    assert last_used() > before  # recorded once it was free


@pytest.fixture
def held_in_this_process() -> Iterator[None]:
    lock = write_lock(str(connection.settings_dict["NAME"]))
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            taken.set()
            done.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    taken.wait(5)
    yield
    done.set()
    thread.join()


def test_a_read_goes_on_while_another_thread_writes(
    client: Any, stale: Any, held_in_this_process: None
) -> None:
    before = last_used()
    assert get(client, stale).status_code == 200
    assert last_used() == before
