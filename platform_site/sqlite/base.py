"""Django's SQLite backend, converting each statement's placeholders once, with the
process's writers queued on a lock instead of on SQLite's busy handler.

Python's ``sqlite3`` takes ``?`` placeholders and Django writes ``%s``, so Django's cursor
rewrites every statement with a regular expression before running it. The platform runs
the same few statements for every task (its claims, verb UPDATEs and INSERTs), and that
rewrite was 3% of the embedded process's CPU in a profile of instant tasks: a bounded
cache of the rewritten text takes it away.

SQLite lets one writer at a time hold a database. A writer that finds it taken waits in
SQLite's busy handler, which sleeps 1, 2, 5, 10, 15, 20, 25... ms between tries whatever
happens meanwhile: under load (instant tasks, sampled by py-spy) the embedded process's
threads (the tasks API's, the worker's) spent 7.7% of their samples asleep in it before
a transaction alone, often while the database was already free, and in a synthetic test
of ten writing threads one write in a hundred waited 20-34 ms and the slowest 230-431 ms
(5-7 and 10-13 ms with the lock). Writers of one process now queue on
one lock per database file, taken for a transaction from its ``BEGIN`` to its end and
for a write statement outside one, and handed to the next writer the moment it is
released. Other processes (a management command beside ``runplatform``) still meet
SQLite's busy handler, as before. Everything else is Django's backend.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from django.db import OperationalError
from django.db.backends.sqlite3 import base

_locks: dict[str, threading.RLock] = {}
_locks_guard = threading.Lock()


def write_lock(name: str) -> threading.RLock:
    """The lock the process's writers to database file ``name`` queue on."""
    with _locks_guard:
        return _locks.setdefault(name, threading.RLock())


@lru_cache(maxsize=1024)
def _qmark(query: str) -> str:
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


@lru_cache(maxsize=1024)
def _writes(query: str) -> bool:
    return query.lstrip()[:7].upper().startswith(("INSERT", "UPDATE", "DELETE", "REPLACE"))


class CursorWrapper(base.SQLiteCursorWrapper):
    """Django's cursor, remembering the ``?`` form of each ``%s`` statement, and taking
    the process's write lock for a write outside a transaction."""

    lock: threading.RLock | None = None
    wait: float = 0.0

    def execute(self, query: str, params: Any = None) -> Any:
        if self.lock is None or self.connection.in_transaction or not _writes(query):
            return super().execute(query, params)
        with _Held(self.lock, self.wait):
            return super().execute(query, params)

    def executemany(self, query: str, param_list: Any) -> Any:
        if self.lock is None or self.connection.in_transaction or not _writes(query):
            return super().executemany(query, param_list)
        with _Held(self.lock, self.wait):
            return super().executemany(query, param_list)

    def convert_query(self, query: str, *, param_names: Any = None) -> str:
        if param_names is None and len(query) <= 4096:  # long ones are one-off IN lists
            return _qmark(query)
        return super().convert_query(query, param_names=param_names)


class _Held:
    """The lock for the length of a ``with``; after ``wait`` seconds without it, the
    statement goes on and SQLite's own busy timeout decides, as without the lock."""

    __slots__ = ("got", "lock", "wait")

    def __init__(self, lock: threading.RLock, wait: float) -> None:
        self.lock = lock
        self.wait = wait
        self.got = False

    def __enter__(self) -> None:
        self.got = self.lock.acquire(timeout=self.wait)

    def __exit__(self, *exc: object) -> None:
        if self.got:
            self.lock.release()


class DatabaseWrapper(base.DatabaseWrapper):
    _write_lock: threading.RLock | None = None
    _writing = False  # this connection holds the write lock (a transaction is open)

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        connection = super().get_new_connection(conn_params)
        if not self.is_in_memory_db():
            self._write_lock = write_lock(str(self.settings_dict["NAME"]))
        return connection

    def write_at_once(self, write: Callable[[], Any]) -> bool:
        """Run ``write`` (one small statement, outside a transaction) only if the database
        takes it without waiting; whether it ran. For bookkeeping a busy database can do
        without (a token's last use): waiting for the write lock made a read-only request
        wait 40 s behind another process's long transaction, then fail with a 503."""
        self.ensure_connection()
        if self.in_atomic_block or self._write_lock is None:
            write()
            return True
        if not self._write_lock.acquire(blocking=False):
            return False  # another thread of this process is writing
        try:
            raw = self.connection
            (waits,) = raw.execute("PRAGMA busy_timeout").fetchone()
            raw.execute("PRAGMA busy_timeout = 0")
            try:
                write()
                return True
            except OperationalError:  # another process holds the database
                return False
            finally:
                raw.execute(f"PRAGMA busy_timeout = {int(waits)}")
        finally:
            self._write_lock.release()

    def _lock_wait(self) -> float:
        return float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5))

    def create_cursor(self, name: str | None = None) -> Any:
        cursor = self.connection.cursor(factory=CursorWrapper)
        if self._write_lock is not None:
            cursor.lock = self._write_lock
            cursor.wait = self._lock_wait()
        return cursor

    def _start_transaction_under_autocommit(self) -> None:
        if self._write_lock is not None and not self._writing:
            self._writing = self._write_lock.acquire(timeout=self._lock_wait())
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._stop_writing()
            raise

    def _stop_writing(self) -> None:
        if self._writing and self._write_lock is not None:
            self._writing = False
            self._write_lock.release()

    def _commit(self) -> None:
        try:
            super()._commit()
        finally:
            self._stop_writing()

    def _rollback(self) -> None:
        try:
            super()._rollback()
        finally:
            self._stop_writing()

    def _close(self) -> None:
        try:
            super()._close()
        finally:
            self._stop_writing()
