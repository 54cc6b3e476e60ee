"""Readers of the environment variables ``settings.py`` is driven by: each names the
variable in its refusal, and a bad value stops the start there, not at the first request
that uses it."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured


def envstr(name: str, default: str = "") -> str:
    """A string setting; ``NAME_FILE`` (a path) wins over ``NAME`` for secrets."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            value = Path(path).read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            # A bare FileNotFoundError named the path but not the variable that gave it.
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ImproperlyConfigured(f"{name}_FILE: cannot read {path!r}: {reason}") from None
        if not value:
            # A file created and never filled (a provisioning step that failed) read as
            # unset: SECRET_KEY then fell back to the public development value.
            raise ImproperlyConfigured(f"{name}_FILE: {path!r} is empty")
        return value
    return os.environ.get(name, default)


def envbool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {raw!r}")


# The most any number setting may be. Far above any sensible one (a float's bound is 31
# years in seconds), and low enough that a deadline counted from now stays a date: with
# A2A_TASK_TIMEOUT=1e12 the platform started, then every task creation was a 500
# (OverflowError past the year 9999), as was gc.set_threshold() with a 20-digit integer.
FLOAT_MAX = 1e9
INT_MAX = 2**31 - 1


def _in_range(
    name: str, raw: str, value: float, minimum: float | None, positive: bool, maximum: float
) -> None:
    """Sizes, timeouts and intervals: a negative one (or 0 where 0 means nothing) started
    the platform and failed far from the cause (every admin login a 500 with
    MAX_BODY_BYTES=-5; tasks leased for -3 s); so did a huge one."""
    if positive and value <= 0:
        raise ImproperlyConfigured(f"{name} must be more than 0, got {raw}")
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be {minimum:g} or more, got {raw}")
    if value > maximum:
        bound = f"{maximum:g}" if isinstance(maximum, float) else str(maximum)
        raise ImproperlyConfigured(f"{name} must be at most {bound}, got {raw}")


def envint(
    name: str,
    default: int,
    *,
    minimum: int | None = None,
    positive: bool = False,
    maximum: int = INT_MAX,
) -> int:
    """An integer setting; ``minimum`` (inclusive) or ``positive`` (above 0) bound it, and
    ``maximum`` (:data:`INT_MAX` unless told)."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    _in_range(name, raw, value, minimum, positive, maximum)
    return value


def envfloat(
    name: str,
    default: float,
    *,
    minimum: float | None = None,
    positive: bool = False,
    maximum: float = FLOAT_MAX,
) -> float:
    """A number setting; ``minimum`` (inclusive) or ``positive`` (above 0) bound it, and
    ``maximum`` (:data:`FLOAT_MAX` unless told: a setting in hours or days needs less)."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    # float() takes "nan" and "inf" (and "1e999"): an interval of either would pass the
    # start and fail at the first timer scheduled from it, far from the cause.
    if not math.isfinite(value):
        raise ImproperlyConfigured(f"{name} must be a finite number, got {raw!r}")
    _in_range(name, raw, value, minimum, positive, maximum)
    return value


def envchoice(name: str, default: str, choices: set[str], *, upper: bool = False) -> str:
    """One of ``choices``; with ``upper``, read case-insensitively (choices in capitals)."""
    raw = os.environ.get(name) or default
    value = raw.upper() if upper else raw
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {sorted(choices)}, got {raw!r}")
    return value


def envfernetkeys(name: str) -> str:
    """Comma-separated Fernet keys (``CREDENTIALS_KEY``), or empty when unset; read as
    :func:`envstr` (``NAME_FILE`` too), spaces around the keys dropped.

    Checked here, at the start: a key with a typo (or only a comma) passed it, then every
    registration with a credential answered 500 and every task of an agent with one failed
    ``internal_error``. A refusal names the key by its place, never its value (a secret).
    """
    raw = envstr(name)
    if not raw:
        return ""
    keys = [key.strip() for key in raw.split(",") if key.strip()]  # "new,old," too
    wanted = "one or more comma-separated Fernet keys (32 url-safe base64-encoded bytes each)"
    if not keys:
        raise ImproperlyConfigured(f"{name} must be {wanted}; it holds none")
    for place, key in enumerate(keys, start=1):
        if not _is_fernet_key(key):
            raise ImproperlyConfigured(
                f"{name} must be {wanted}; key {place} of {len(keys)} is not one"
            )
    return ",".join(keys)


def _is_fernet_key(key: str) -> bool:
    # Imported here: the other readers need nothing of cryptography.
    from cryptography.fernet import Fernet

    try:
        Fernet(key.encode())
    except ValueError:  # binascii.Error is one too
        return False
    return True


# DRF reads only the period's first letter ("30/mango" is 30 a minute): hold to the words.
THROTTLE_RATE = re.compile(r"\d+/(?:s|sec|second|m|min|minute|h|hour|d|day)s?")


def envrate(name: str, default: str) -> str:
    """A DRF throttle rate, ``N/sec``, ``N/min``, ``N/hour`` or ``N/day``.

    DRF parses the rate only when the first throttled request arrives: a bad one passed the
    start and made every such request a 500.
    """
    raw = os.environ.get(name) or default
    value = raw.strip().lower()
    if not THROTTLE_RATE.fullmatch(value):
        raise ImproperlyConfigured(
            f"{name} must be a rate N/sec, N/min, N/hour or N/day (e.g. 30/min), got {raw!r}"
        )
    return value


# The development default of SECRET_KEY, published with the source: the distributed mode
# warns when it runs on it (platform_site/deploy_checks.py).
INSECURE_SECRET_KEY = "embedded-insecure-change-me"


def envhosts(name: str, default: str) -> list[str]:
    """Comma-separated host names; unset reads ``default``, set but empty stops the start.

    ``ALLOWED_HOSTS=`` (a value left out of an env file) started cleanly, then Django
    refused every request with 400: the start is the place to say so.
    """
    raw = envstr(name, default)
    hosts = [host.strip() for host in raw.split(",") if host.strip()]
    if not hosts:
        raise ImproperlyConfigured(
            f"{name} is set but names no host, so every request would be refused (400): "
            "list the Host names clients use, comma-separated, or leave it unset (any host)"
        )
    return hosts


REDIS_SCHEMES = {"redis", "rediss"}


def envredisurl(name: str) -> str:
    """A Redis URL (``redis://host:port/db`` or ``rediss://...``), or empty when unset.

    Celery, Channels and the probes each parse it only when they connect: ``http://...``
    passed the start and the worker died with "No such transport: http", and ``redis//x``
    (no scheme) made Celery pick its AMQP default. ``unix://`` is refused too: Channels
    and redis-py take it, but Celery's broker (kombu) knows no such transport and the
    worker died the same way. A refusal names the scheme, never the URL (it may carry
    the password).
    """
    raw = envstr(name)
    if not raw:
        return ""
    wanted = "a Redis URL (redis://host:6379/0 or rediss://...)"
    parts = urlsplit(raw)
    scheme = parts.scheme.lower()
    if not scheme or "://" not in raw:
        raise ImproperlyConfigured(f"{name} must be {wanted}; it does not start with one")
    if scheme == "unix":
        raise ImproperlyConfigured(
            f"{name} must be {wanted}: Celery's broker cannot use a unix:// socket URL"
        )
    if scheme not in REDIS_SCHEMES:
        raise ImproperlyConfigured(f"{name} must be {wanted}, got a {scheme}:// URL")
    if not parts.hostname:
        raise ImproperlyConfigured(f"{name} must be {wanted}; it names no host")
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when it is read
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be {wanted}; its port is not one") from None
    database = parts.path.strip("/")
    if database and not database.isdigit():
        raise ImproperlyConfigured(
            f"{name} must be {wanted}; its path must be a database number, e.g. /0"
        )
    return raw


def postgres_database(name: str, url: str, **options: Any) -> dict[str, Any]:
    """Django's ``DATABASES["default"]`` for a PostgreSQL URL in variable ``name``.

    dj-database-url knows many schemes; the platform runs on PostgreSQL only (or SQLite
    through ``SQLITE_PATH``): ``mysql://`` passed the start and then failed with "Error
    loading MySQLdb module". The message names the scheme, never the URL (its password).
    """
    # Imported here: the other readers need nothing of it.
    import dj_database_url

    try:
        database = dj_database_url.parse(url, **options)
    except ValueError as exc:  # an unknown scheme, a port that is not a number, ...
        raise ImproperlyConfigured(f"{name} is not a database URL: {exc}") from None
    if database["ENGINE"] != "django.db.backends.postgresql":
        scheme = urlsplit(url).scheme
        raise ImproperlyConfigured(
            f"{name} must be a PostgreSQL URL (postgres://user:password@host:5432/name), "
            f"got a {scheme}:// URL"
        )
    return database


def check_mode(database_url: str, redis_url: str) -> None:
    """``REDIS_URL`` only with ``DATABASE_URL`` (the distributed mode).

    ``REDIS_URL`` alone silently chose the embedded mode over SQLite in the checkout,
    whose defaults are laxer (registration open, loopback agent URLs allowed), on a memory
    broker the separately started workers never see: an env file that lost its
    ``DATABASE_URL`` line. ``DATABASE_URL`` alone stays the embedded mode on PostgreSQL
    (documented: one process, its workers inside)."""
    if redis_url and not database_url:
        raise ImproperlyConfigured(
            "REDIS_URL is set but DATABASE_URL is not: set both for the distributed mode "
            "(REDIS_URL alone would run the embedded mode over SQLite in the checkout)"
        )
