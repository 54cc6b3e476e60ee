"""Writes a busy database can do without (when a key was last used): made only if the
database takes them at once, never waited for on a request's path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connections, router


def write_unless_busy(model: type[Any], write: Callable[[], Any]) -> bool:
    """Run ``write`` (one small statement on ``model``'s table); whether it ran. On SQLite
    only if no other writer holds the database (the backend's ``write_at_once``); on
    PostgreSQL, whose writers of other rows never wait for each other, at once."""
    connection = connections[router.db_for_write(model)]
    at_once = getattr(connection, "write_at_once", None)
    if at_once is None:
        write()
        return True
    return bool(at_once(write))
