"""PostgreSQL runs the hot statements prepared (``DATABASE_PREPARED_STATEMENTS``): a
statement run a few times on one connection is parsed and planned once; the setting turns
it off, and options given in ``DATABASE_URL`` are kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from a2a import rows
from a2a.models import Task

SHOW_OPTIONS = (
    "import json, django; django.setup(); from django.conf import settings; "
    "print(json.dumps(settings.DATABASES['default'].get('OPTIONS', {})))"
)


def options_with(**env: str) -> dict[str, Any]:
    """The database OPTIONS the settings give with this environment (a fresh process:
    settings are read once)."""
    environ = {**os.environ, "DJANGO_SETTINGS_MODULE": "platform_site.settings", **env}
    out = subprocess.run(
        [sys.executable, "-c", SHOW_OPTIONS],
        env=environ,
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_statement_run_again_on_one_connection_is_prepared(
    make_skill: Any, make_agent: Any
) -> None:
    skill = make_skill()
    task = Task.objects.create(skill=skill, agent=make_agent(skills=[skill]))

    def prepared() -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
                ['%FROM "a2a_task"%'],
            )
            return int(cursor.fetchone()[0])

    before = prepared()
    for _ in range(6):  # psycopg prepares a statement after its fifth run
        assert rows.task(task.pk, lock=False) is not None
    assert prepared() > before


def test_prepared_statements_are_on_by_default_and_the_url_options_kept() -> None:
    url = "postgres://u@db.example:5432/d?sslmode=require"
    options = options_with(
        DATABASE_URL=url, DATABASE_PREPARED_STATEMENTS="", DATABASE_CONNECT_TIMEOUT=""
    )
    assert options == {
        "server_side_binding": True,
        "prepare_threshold": 5,
        "connect_timeout": 5,  # DATABASE_CONNECT_TIMEOUT (tests/platform_site/test_settings_env.py)
        "sslmode": "require",
    }


def test_prepared_statements_can_be_turned_off_for_a_pooler() -> None:
    url = "postgres://u@db.example:5432/d"
    options = options_with(
        DATABASE_URL=url, DATABASE_PREPARED_STATEMENTS="false", DATABASE_CONNECT_TIMEOUT=""
    )
    assert options == {"connect_timeout": 5}
