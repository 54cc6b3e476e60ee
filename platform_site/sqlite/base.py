"""Django's SQLite backend, converting each statement's placeholders once.

Python's ``sqlite3`` takes ``?`` placeholders and Django writes ``%s``, so Django's cursor
rewrites every statement with a regular expression before running it. The platform runs
the same few statements for every task (its claims, verb UPDATEs and INSERTs), and that
rewrite was 3% of the embedded process's CPU in a profile of instant tasks: a bounded
cache of the rewritten text takes it away. Everything else is Django's backend.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.db.backends.sqlite3 import base


@lru_cache(maxsize=1024)
def _qmark(query: str) -> str:
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


class CursorWrapper(base.SQLiteCursorWrapper):
    """Django's cursor, remembering the ``?`` form of each ``%s`` statement."""

    def convert_query(self, query: str, *, param_names: Any = None) -> str:
        if param_names is None and len(query) <= 4096:  # long ones are one-off IN lists
            return _qmark(query)
        return super().convert_query(query, param_names=param_names)


class DatabaseWrapper(base.DatabaseWrapper):
    def create_cursor(self, name: str | None = None) -> Any:
        return self.connection.cursor(factory=CursorWrapper)
