"""``CREDENTIALS_KEY`` is checked at the start: each comma-separated key a Fernet key, at
least one when it is set.

Why: a key with a typo, or only a comma, started the platform; then every registration
with a credential answered 500 and every task of an agent with one failed
``internal_error``. The refusal names the key by its place, never its value (a secret).
"""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from tests.platform_site.test_settings_env import MANAGE, _read, _start

WANTED = (
    "CREDENTIALS_KEY must be one or more comma-separated Fernet keys "
    "(32 url-safe base64-encoded bytes each)"
)
GOOD = Fernet.generate_key().decode()
OTHER = Fernet.generate_key().decode()


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("not-a-fernet-key", "key 1 of 1 is not one"),
        (",", "it holds none"),
        (" , ", "it holds none"),
        (f"{GOOD},{OTHER[:-3]}", "key 2 of 2 is not one"),  # cut short
        (GOOD[:-2], "key 1 of 1 is not one"),
    ],
)
def test_a_credentials_key_that_is_not_fernet_keys_stops_the_start(raw: str, problem: str) -> None:
    result = _start(MANAGE, {"CREDENTIALS_KEY": raw})
    assert result.returncode != 0
    assert result.stderr.startswith(f"Configuration error: {WANTED}; {problem}"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for part in raw.split(","):
        if part.strip():
            assert part.strip() not in result.stderr  # a secret: never quoted


@pytest.mark.parametrize(
    ("raw", "read"),
    [
        ("", ""),
        (GOOD, GOOD),
        (f" {GOOD} , {OTHER} ,", f"{GOOD},{OTHER}"),  # spaces and a trailing comma dropped
    ],
)
def test_fernet_keys_read_as_given(raw: str, read: str) -> None:
    result = _read("CREDENTIALS_KEY", {"CREDENTIALS_KEY": raw})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == read
