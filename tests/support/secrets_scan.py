"""Finds secrets in log text: platform API keys and user tokens, bearer credentials,
encrypted credential blobs, and secret-named JSON fields with a value.

``tests/conftest.py`` runs it over every log record of every test (and the logs of the
processes tests start), so a secret that reaches a log line fails the suite.
"""

from __future__ import annotations

import re

PATTERNS = {
    # agents' API keys and users' tokens (agent_profiles.keys): kind_prefix_secret
    "platform key": re.compile(r"\b(?:a2a|usr)_[0-9a-f]{8,}_[A-Za-z0-9_-]{20,}"),
    "bearer credential": re.compile(r"Bearer\s+(?!<)[A-Za-z0-9._~+/-]{12,}=*"),
    # Fernet tokens: agents' stored credentials (agent_profiles.credentials)
    "encrypted credential": re.compile(r"\bgAAAAA[A-Za-z0-9_-]{40,}"),
    "secret field": re.compile(
        r"""["']?(?:token|clientSecret|client_secret|password|apiKey|api_key|secret|value)"""
        r"""["']?\s*[:=]\s*["'](?!\*)[^"'\s]{6,}["']"""
    ),
}


def find_secrets(text: str) -> list[str]:
    """``kind: excerpt`` for each secret-looking string in ``text``."""
    found = []
    for kind, pattern in PATTERNS.items():
        for match in pattern.finditer(text):
            found.append(f"{kind}: {match.group(0)[:60]}")
    return found
