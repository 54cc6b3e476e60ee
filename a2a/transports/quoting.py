"""Agents' values in the platform's error messages: excerpts, never whole.

An agent's answer may hold megabytes where an id or a state should be; an error message
is stored in the task's error, shown in the API and the admin, and logged.
"""

from __future__ import annotations

import json
from typing import Any

from platform_site.text import scrub

EXCERPT = 200


def excerpt(text: str) -> str:
    """A short one-line excerpt of a body, for error messages (which are stored: a NUL
    or a lone surrogate from the agent becomes U+FFFD, or PostgreSQL would refuse it)."""
    text = scrub(" ".join(text.split()))
    return text[:EXCERPT] + ("…" if len(text) > EXCERPT else "")


def quoted(value: Any) -> str:
    """An agent's value (an id, a state) for an error message: an :func:`excerpt` in
    quotes, whose cut shows (``…``), so that the redaction of the call's secrets (an agent
    may echo one) also takes the start of a secret the cut leaves (it redacts a secret's
    start before ``…``; a bare cut left one unredacted). Not ``repr``: its escapes match no
    form of a secret the redaction knows; JSON's (a value that is no string) do. And never
    whole: it may be megabytes, and the message is stored in the task's error and logged."""
    text = value if isinstance(value, str) else json.dumps(value)  # as the redaction escapes
    return f"'{excerpt(text)}'"
