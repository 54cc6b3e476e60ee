"""The SQLite backend (``platform_site.sqlite``): Django's, with each statement's ``%s`` to
``?`` rewrite remembered, and the process's writers queued on one lock per database file
(a transaction holds it from its ``BEGIN`` to its end, a write outside one for the
statement) instead of in SQLite's sleeping busy handler."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, connections, transaction

from platform_site.sqlite import base

pytestmark = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="the SQLite backend (the embedded mode)"
)


def test_statements_read_as_with_djangos_backend(db: None) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s || '%%s' || %s, '50%%'", ["a", "b"])
        assert cursor.fetchone() == ("a%sb", "50%")
        cursor.execute("SELECT %(x)s", {"x": 7})  # named parameters: Django's own path
        assert cursor.fetchone() == (7,)
        cursor.execute("SELECT '%%'")  # no parameters: the text as written, as in Django
        assert cursor.fetchone() == ("%%",)


def test_a_statement_is_rewritten_once(db: None) -> None:
    sql = "SELECT %s + 1 AS remembered"
    before = base._qmark.cache_info()
    with connection.cursor() as cursor:
        for n in range(3):
            cursor.execute(sql, [n])
            assert cursor.fetchone() == (n + 1,)
    after = base._qmark.cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 2)


# --- the process's writers queue on one lock --------------------------------------------


def _lock() -> Any:
    return base.write_lock(str(connection.settings_dict["NAME"]))


def _free_elsewhere() -> bool:
    """Whether another thread could take the write lock now (taken and given back)."""
    got: list[bool] = []

    def probe() -> None:
        lock = _lock()
        got.append(lock.acquire(blocking=False))
        if got[0]:
            lock.release()

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return got[0]


def _in_thread(work: Callable[[], None]) -> tuple[threading.Thread, threading.Event]:
    done = threading.Event()

    def run() -> None:
        try:
            work()
            done.set()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, done


def _write_a_row() -> None:
    with connections["default"].cursor() as cursor:
        cursor.execute("UPDATE django_migrations SET app = app WHERE id = %s", [1])


def test_a_transaction_holds_the_write_lock_until_it_ends(transactional_db: None) -> None:
    assert _free_elsewhere()
    with transaction.atomic():
        assert not _free_elsewhere()
    assert _free_elsewhere()
    held: list[bool] = []

    def fails() -> None:
        with transaction.atomic():
            held.append(not _free_elsewhere())
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        fails()  # a rollback gives it back too
    assert held == [True]
    assert _free_elsewhere()


def test_closing_a_connection_in_a_transaction_gives_the_lock_back(
    transactional_db: None,
) -> None:
    with transaction.atomic():
        assert not _free_elsewhere()
        connection.close()
        assert _free_elsewhere()
    assert _free_elsewhere()


def test_a_write_outside_a_transaction_waits_for_the_lock_not_for_sqlite(
    transactional_db: None,
) -> None:
    """The database is free, but another of the process's writers holds the lock: the
    write waits for the lock, and goes ahead when it is given back."""
    lock = _lock()
    assert lock.acquire(blocking=False)
    try:
        thread, done = _in_thread(_write_a_row)
        assert not done.wait(0.3)
    finally:
        lock.release()
    assert done.wait(10)
    thread.join()


def test_reads_do_not_wait_for_the_lock(transactional_db: None) -> None:
    def read() -> None:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM django_migrations")

    lock = _lock()
    assert lock.acquire(blocking=False)
    try:
        thread, done = _in_thread(read)
        assert done.wait(10)
        thread.join()
    finally:
        lock.release()


def test_a_writer_held_up_past_the_timeout_leaves_it_to_sqlite(
    transactional_db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the busy timeout without the lock (a writer stuck holding it), the write goes
    on as it would without the lock: here the database itself is free, so it succeeds."""
    monkeypatch.setitem(connection.settings_dict["OPTIONS"], "timeout", 0.05)
    lock = _lock()
    assert lock.acquire(blocking=False)
    try:
        thread, done = _in_thread(_write_a_row)
        assert done.wait(10)
        thread.join()
    finally:
        lock.release()
