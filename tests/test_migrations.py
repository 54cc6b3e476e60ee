"""Every model change has its migration: a deployment's `migrate` builds the schema the
code expects (a field added without one fails at the first query, in production only)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_the_models_and_the_migrations_agree() -> None:
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit:
        pytest.fail(f"models changed without a migration:\n{out.getvalue()}")
