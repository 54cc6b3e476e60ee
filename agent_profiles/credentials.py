"""Agents' credentials: the shapes the platform accepts, and encryption at rest.

A credential is what the platform presents when it calls an agent (DESIGN.md, Registry):

* ``{"type": "bearer", "token"}``
* ``{"type": "apiKey", "in": "header", "name", "value"}``
* ``{"type": "oauth2", "tokenUrl", "clientId", "clientSecret", "scopes": [...]}``
  (client credentials; dispatch fetches and caches the access token)

It is write-only: stored as a Fernet token (``AgentProfile.auth_encrypted``) under a key
from ``CREDENTIALS_KEY`` (or derived from ``SECRET_KEY``), decrypted only for a call
(:func:`read_credentials`), and never returned, shown or logged. Error messages name the
field at fault, never its value. A value the platform puts in a header (the bearer token,
the API key) must be sendable as one (:func:`header_value_problem`): refused here, it
would fail every call.
"""

from __future__ import annotations

import base64
import json
import logging
import re
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from agent_profiles.models import AgentProfile
from agent_profiles.urlguard import check_url
from platform_site.errors import ValidationFailed
from platform_site.text import find_bad_text

logger = logging.getLogger(__name__)

AUTH_TYPES = ("bearer", "apiKey", "oauth2")
MAX_SECRET_CHARS = 8192
# RFC 9110 token characters: a header name the platform can send.
HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")
# Headers the platform sets itself; an apiKey may not replace them.
RESERVED_HEADERS = frozenset(
    {"host", "content-length", "content-type", "transfer-encoding", "connection", "a2a-version"}
)
# What every HTTP stack on the way (urllib3, httpx, the agent's server) carries in a header
# value: visible ASCII (RFC 9110 field-vchar without obs-text, which httpx refuses). A bearer
# token is token68 (RFC 7235), so one word; a field value (an API key header) may hold
# spaces and tabs between its characters, never at its ends (a receiver trims them).
_ONE_WORD = re.compile(r"[\x21-\x7e]+")
_FIELD_VALUE = re.compile(r"[\x21-\x7e](?:[\x21-\x7e \t]*[\x21-\x7e])?")
FIELDS: dict[str, tuple[str, ...]] = {
    "bearer": ("type", "token"),
    "apiKey": ("type", "in", "name", "value"),
    "oauth2": ("type", "tokenUrl", "clientId", "clientSecret", "scopes"),
}


class InvalidCredentials(ValidationFailed):
    code = "invalid_auth"


def _fail(field: str, problem: str) -> InvalidCredentials:
    return InvalidCredentials(f"auth.{field}: {problem}", {f"auth.{field}": problem})


def _secret(auth: dict[str, Any], field: str) -> str:
    value = auth.get(field)
    if not isinstance(value, str) or not value.strip():
        raise _fail(field, "must be a non-empty string")
    if len(value) > MAX_SECRET_CHARS:
        raise _fail(field, f"must be at most {MAX_SECRET_CHARS} characters")
    if any(c in value for c in "\r\n") or find_bad_text(value) is not None:
        raise _fail(field, "must not contain line breaks, NUL or lone surrogates")
    return value


def header_value_problem(value: str, *, spaces: bool) -> str | None:
    """Why ``value`` cannot go out as an HTTP header value (never quoting it), or None.

    ``spaces``: whether spaces and tabs may stand between its characters (a field value,
    such as an API key header) or not (a bearer token: one token68 word).
    """
    if (_FIELD_VALUE if spaces else _ONE_WORD).fullmatch(value):
        return None
    if spaces:
        return (
            "must be visible ASCII characters (spaces or tabs only between them): "
            "an HTTP header cannot carry anything else"
        )
    return (
        "must be visible ASCII characters without spaces: an HTTP header cannot carry anything else"
    )


def _header_secret(auth: dict[str, Any], field: str, *, spaces: bool) -> str:
    """A secret the platform sends as (part of) a header value: :func:`_secret`, and
    sendable as one (refused here, where it was a UnicodeEncodeError at every call)."""
    value = _secret(auth, field)
    problem = header_value_problem(value, spaces=spaces)
    if problem is not None:
        raise _fail(field, problem)
    return value


def validate_credentials(auth: Any) -> dict[str, Any]:
    """The credential in its canonical shape, or :class:`InvalidCredentials` naming the
    field at fault (never echoing a value)."""
    if not isinstance(auth, dict):
        raise InvalidCredentials(
            "auth must be a JSON object with a 'type' of bearer, apiKey or oauth2.",
            {"auth": "must be an object"},
        )
    kind = auth.get("type")
    if kind not in AUTH_TYPES:
        raise _fail("type", "must be one of bearer, apiKey, oauth2")
    unknown = sorted(str(k) for k in auth if k not in FIELDS[kind])
    if unknown:
        raise _fail(unknown[0], f"is not a field of a {kind} credential")
    if kind == "bearer":
        return {"type": "bearer", "token": _header_secret(auth, "token", spaces=False)}
    if kind == "apiKey":
        if auth.get("in") != "header":
            raise _fail("in", "must be 'header' (the only place the platform sends a key)")
        name = auth.get("name")
        if not isinstance(name, str) or not HEADER_NAME_RE.fullmatch(name):
            raise _fail("name", "must be an HTTP header name")
        if name.lower() in RESERVED_HEADERS:
            raise _fail("name", "is a header the platform sets itself")
        value = _header_secret(auth, "value", spaces=True)
        return {"type": "apiKey", "in": "header", "name": name, "value": value}
    token_url = auth.get("tokenUrl")
    if not isinstance(token_url, str) or not token_url:
        raise _fail("tokenUrl", "must be the token endpoint's http(s) URL")
    try:
        check_url(token_url)  # resolved and pinned when dispatch fetches a token
    except ValidationFailed as exc:
        raise _fail("tokenUrl", exc.message) from None
    scopes = auth.get("scopes", [])
    if not isinstance(scopes, list) or not all(
        isinstance(s, str) and s and " " not in s and find_bad_text(s) is None for s in scopes
    ):
        raise _fail("scopes", "must be a list of scope names (strings without spaces)")
    return {
        "type": "oauth2",
        "tokenUrl": token_url,
        "clientId": _secret(auth, "clientId"),
        "clientSecret": _secret(auth, "clientSecret"),
        "scopes": scopes,
    }


# --- Encryption ------------------------------------------------------------------------


def _derived_key(secret: str) -> bytes:
    """A Fernet key derived from ``SECRET_KEY`` (HKDF-SHA256, its own context string)."""
    raw = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"agent-platform credentials v1"
    ).derive(secret.encode())
    return base64.urlsafe_b64encode(raw)


@lru_cache(maxsize=4)
def _fernet(configured: str, secret: str) -> MultiFernet:
    derived = Fernet(_derived_key(secret))
    if not configured:
        return MultiFernet([derived])
    # The settings check each key at the start (platform_site.env.envfernetkeys); this
    # holds for a value set another way (a test's override), and never quotes a key.
    try:
        keys = [Fernet(k.strip().encode()) for k in configured.split(",") if k.strip()]
        if not keys:
            raise ValueError("no key")
        # The key derived from SECRET_KEY still decrypts (last): credentials stored before
        # CREDENTIALS_KEY was first set stay readable, and rotatecredentials moves them
        # under it. Nothing new is written with it; whoever holds SECRET_KEY could read
        # those anyway.
        return MultiFernet([*keys, derived])
    except ValueError:
        raise ImproperlyConfigured(
            "CREDENTIALS_KEY must be one or more comma-separated Fernet keys "
            "(32 url-safe base64-encoded bytes each)"
        ) from None


def cipher() -> MultiFernet:
    """The current cipher: the first ``CREDENTIALS_KEY`` encrypts, all of them decrypt."""
    return _fernet(settings.CREDENTIALS_KEY, settings.SECRET_KEY)


def encrypt(auth: dict[str, Any]) -> str:
    return cipher().encrypt(json.dumps(auth, separators=(",", ":")).encode()).decode()


class CredentialsUnreadable(Exception):
    """The stored credential cannot be decrypted (the key changed)."""


def decrypt(token: str) -> dict[str, Any]:
    try:
        return json.loads(cipher().decrypt(token.encode()))
    except (InvalidToken, ValueError):
        raise CredentialsUnreadable from None


def reencrypt(token: str) -> str:
    """``token`` encrypted anew under the first ``CREDENTIALS_KEY`` (read with any of
    them), its original timestamp kept; :class:`CredentialsUnreadable` when none reads
    it. What ``manage.py rotatecredentials`` does to each stored credential."""
    try:
        return cipher().rotate(token.encode()).decode()
    except (InvalidToken, ValueError):
        raise CredentialsUnreadable from None


# --- The profile's credential -------------------------------------------------------------


def set_credentials(agent: AgentProfile, auth: dict[str, Any] | None) -> None:
    """Store (or with None clear) ``agent``'s credential on the instance; the caller saves.

    ``auth`` must come from :func:`validate_credentials`. A new credential forgets an
    ``agent_auth_failed`` outcome of the old one.
    """
    if auth is None:
        agent.auth_encrypted, agent.auth_type = "", ""
    else:
        agent.auth_encrypted, agent.auth_type = encrypt(auth), auth["type"]
    if agent.last_call_code == "agent_auth_failed":
        agent.last_call_ok, agent.last_call_code, agent.last_call_error = None, "", ""
        agent.last_call_at = timezone.now()


def read_credentials(agent: AgentProfile) -> dict[str, Any] | None:
    """The decrypted credential for a call to ``agent``, or None (none, or unreadable:
    logged without the secret; an agent with a stored credential read as None has an
    unreadable one: :attr:`~agent_profiles.interfaces.CallTarget.auth_unreadable`)."""
    if not agent.auth_encrypted:
        return None
    try:
        return decrypt(agent.auth_encrypted)
    except CredentialsUnreadable:
        logger.error(
            "The credential of agent %s cannot be decrypted: was CREDENTIALS_KEY (or "
            "SECRET_KEY) changed? Set it again in the admin or by re-registration.",
            agent.pk,
            extra={"agent_id": agent.pk},
        )
        return None


def has_credentials(agent: AgentProfile) -> bool:
    return bool(agent.auth_encrypted)


# What dispatch says of a credential it cannot read: the admin shows "configured: yes",
# so "no credential configured" (as a call without one was worded) sent the operator
# looking at the agent instead of at the key.
UNREADABLE = "its stored credential cannot be decrypted (CREDENTIALS_KEY changed?)"
