"""Secret keys with a readable prefix, stored only as a keyed hash.

A key looks like ``a2a_<prefix>_<secret>`` (agents) or ``usr_<prefix>_<secret>`` (users).
The prefix is stored in clear to find the row and to show operators which key is which;
the whole key is stored as HMAC-SHA256 keyed with ``settings.API_KEY_PEPPER`` and compared
in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from django.conf import settings

PREFIX_LEN = 8
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class NewKey:
    """A freshly generated key: ``raw`` is shown once, ``prefix`` and ``digest`` stored."""

    raw: str
    prefix: str
    digest: str


def digest(raw: str) -> str:
    """The keyed hash stored for a key."""
    return hmac.new(settings.API_KEY_PEPPER.encode(), raw.encode(), hashlib.sha256).hexdigest()


def generate(kind: str) -> NewKey:
    """A new random key of the given kind (``a2a`` or ``usr``)."""
    prefix = secrets.token_hex(PREFIX_LEN // 2)
    raw = f"{kind}_{prefix}_{secrets.token_urlsafe(32)}"
    return NewKey(raw=raw, prefix=prefix, digest=digest(raw))


def parse_prefix(raw: str, kind: str) -> str | None:
    """The prefix of a presented key, or None if it is not shaped like a key of ``kind``."""
    parts = raw.split("_", 2)
    if len(parts) != 3 or parts[0] != kind or len(parts[1]) != PREFIX_LEN:
        return None
    # Prefixes are lowercase hex: anything else (a NUL, which PostgreSQL would refuse in
    # the lookup with a DataError) cannot name a key.
    if not all(c in _HEX for c in parts[1]):
        return None
    return parts[1]


def matches(raw: str, stored_digest: str) -> bool:
    """Constant-time comparison of a presented key with a stored digest."""
    return hmac.compare_digest(digest(raw), stored_digest)
