"""The SQLite backend (``platform_site.sqlite``): Django's, with each statement's ``%s`` to
``?`` rewrite remembered."""

from __future__ import annotations

import pytest
from django.db import connection

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
