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
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

PREFIX_LEN = 8
# Draws of a prefix before giving up. Prefixes are 32 random bits, unique, and revoked rows
# keep theirs, so a collision is rare but certain to happen one day; several in a row
# mean something else is wrong.
PREFIX_TRIES = 5
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


def create_row(model: Any, kind: str, **fields: Any) -> str:
    """Create a ``model`` row (``ApiKey`` or ``UserToken``) holding a new key of ``kind``
    and return the key (shown once).

    A prefix already taken is drawn again: each insert runs in a savepoint, so the caller's
    transaction survives the IntegrityError (PostgreSQL aborts it otherwise).
    """
    for attempt in range(1, PREFIX_TRIES + 1):
        new = generate(kind)
        try:
            with transaction.atomic():
                model.objects.create(prefix=new.prefix, digest=new.digest, **fields)
        except IntegrityError:
            taken = model.objects.filter(prefix=new.prefix).exists()
            if not taken or attempt == PREFIX_TRIES:
                raise  # another constraint, or a run of collisions no chance explains
            continue
        return new.raw
    raise AssertionError("unreachable")  # the last attempt returns or raises


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
