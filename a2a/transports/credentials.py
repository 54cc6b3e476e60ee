"""Credentials on calls to agents: bearer, API-key header, OAuth2 client credentials.

The credential is :attr:`CallTarget.auth` (decrypted by the registry, one of DESIGN.md's
shapes). It is put on every call and never logged: error messages name the agent and the
scheme, never a value. A value that cannot go out as a header (stored before the registry
refused such values, or an access token so answered) is an auth error naming the field.

OAuth2 tokens are fetched from ``tokenUrl`` (client credentials, client authentication with
HTTP Basic), kept in this process until shortly before they expire (:func:`kept_for`), and
fetched again once when the agent answers 401. A token endpoint that does not answer a token
for now (unreachable, 5xx, 429) is a transient :data:`TOKEN_ENDPOINT_UNAVAILABLE`; one that
refuses the client credentials or answers garbage is ``agent_auth_failed``. A stored
credential that cannot be decrypted sends nothing: :data:`CREDENTIALS_UNREADABLE`. The cache is
per process, in the embedded mode and in each distributed worker alike (a token is a
secret: it is not put in Redis):
within a process one fetch per credential serves every call that needs it meanwhile
(:class:`_Flight`), so tasks starting together do not each ask the token endpoint.

What an agent echoes of a credential is redacted by :mod:`a2a.transports.redaction`.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import os
import threading
import time
from typing import Any
from urllib.parse import quote

import httpx
from django.conf import settings

from a2a.exceptions import A2AAuthError, A2ACallError, A2ATransientError
from a2a.transports.answers import read_capped
from a2a.transports.quoting import excerpt
from agent_profiles.credentials import UNREADABLE as UNREADABLE_CREDENTIAL
from agent_profiles.credentials import header_value_problem
from agent_profiles.deadlines import whole_answer_by, whole_answer_seconds
from agent_profiles.guarded_pool import AnswerTooLarge
from agent_profiles.interfaces import CallTarget
from agent_profiles.urlguard import UnsafeURL
from platform_site.text import loads_bounded

# Seconds a token is taken as expired before its ``expires_in`` says (clock skew, call
# time), and at most this share of its lifetime: a token living 20 s is kept 18 s (a flat
# 30 s kept it not at all, and every call fetched one).
EARLY_EXPIRY = 30.0
EARLY_EXPIRY_SHARE = 0.1
# A token without ``expires_in`` is kept this long.
DEFAULT_TOKEN_LIFETIME = 300.0
# A token endpoint's answer is a few hundred bytes; more than this is refused unread.
TOKEN_MAX_BYTES = 64_000

# The tokens last fetched per credential, kept to recognise them in an echo: a call may
# have sent one that a concurrent refresh has replaced in the cache since.
TOKENS_REMEMBERED = 3

# The code of a token endpoint that did not answer a token for now (unreachable, 5xx, 429,
# a fetch that took too long): transient, as an agent's own outage is. Not
# ``agent_auth_failed``: that says the credential is refused, which a health check cannot
# clear and HTTP dispatch does not try again, so an outage of the identity provider
# stranded the tasks offline and left the agent unhealthy after it recovered.
TOKEN_ENDPOINT_UNAVAILABLE = "token_endpoint_unavailable"

# The tokens fetched per credential (agent, tokenUrl, clientId, secret digest, scopes) and
# until when each is used; the tokens last sent per credential. A token may be up to
# TOKEN_MAX_BYTES long, so neither table keeps what no call needs (:func:`_keep`): an
# expired token goes, a credential replaced (a rotated secret, other scopes) loses its
# token at once, and each table holds at most TOKENS_LIMIT entries (the oldest go first).
# 2,000 rotations of one agent's secret kept 2,000 tokens (120 MB of 60 kB tokens) for
# the life of the process.
_tokens: dict[tuple[str, ...], tuple[str, float]] = {}
_sent_tokens: dict[tuple[str, ...], tuple[str, ...]] = {}
_tokens_lock = threading.Lock()
# Entries per table: far more OAuth2 credentials than a registry has; past it the oldest
# go (their next call fetches a token again).
TOKENS_LIMIT = 1000
# The tokens sent are recognised in an echo (redaction reads them when a call ends) under
# the newest few credentials of one client (agent, tokenUrl, clientId), not for a time: a
# call started under a secret since rotated, a stream or a held send, may end days later
# (its task's timeout), and its answer must still be redacted.
SENT_CREDENTIALS_KEPT = 3


class _Flight:
    """One token fetch in progress: the calls that need the same token meanwhile wait for
    its outcome (the token, or its error) instead of each asking the token endpoint."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.token: str | None = None
        self.error: BaseException | None = None


# Fetches in progress, per cache key, in this process (``_flights_pid``: after a fork, a
# parent's fetch never ends in the child, and must not be waited for).
_flights: dict[tuple[str, ...], _Flight] = {}
_flights_pid = os.getpid()


# The scheme of a stored credential that cannot be decrypted (:func:`scheme`).
UNREADABLE = "unreadable"
# The code of a call that sent nothing because the stored credential cannot be decrypted
# (``CREDENTIALS_KEY`` changed). Not ``agent_auth_failed``: the agent refused nothing, so
# it is not held against the agent's health (out of matching after its check passed), and
# a task so stopped is sent again once the credential reads (the key put back: at the
# agent's next passing check, ``a2a.http_again``; a credential set again: at once).
CREDENTIALS_UNREADABLE = "credentials_unreadable"


def scheme(target: CallTarget) -> str:
    """The credential's scheme name for messages (``bearer``, ``apiKey``, ``oauth2``,
    ``none``, or :data:`UNREADABLE`)."""
    auth = target.auth
    if not isinstance(auth, dict) or not auth:
        return UNREADABLE if target.auth_unreadable else "none"
    return str(auth.get("type") or "unknown")


def apply(target: CallTarget, headers: dict[str, str], *, refused: str | None = None) -> str:
    """Put the target's credential on ``headers``; returns the scheme name. ``refused``:
    the OAuth2 token the agent just answered 401 to (another one is used).

    A stored credential that cannot be decrypted (``CREDENTIALS_KEY`` changed) is an auth
    error of its own code, :data:`CREDENTIALS_UNREADABLE`, before anything goes out:
    called without it, the agent answered 401 and the task said "no credential
    configured" while the admin said one was.
    """
    auth = target.auth
    name = scheme(target)
    if name == UNREADABLE:
        raise A2AAuthError(
            f"Agent '{target.agent_id}': {UNREADABLE_CREDENTIAL}; nothing was sent to it. "
            "Put the key it was written under back in CREDENTIALS_KEY (its tasks are sent "
            "again at the agent's next passing health check), or set the credential again.",
            code=CREDENTIALS_UNREADABLE,
        )
    if name == "none":
        return name
    assert isinstance(auth, dict)
    if name == "bearer":
        headers["Authorization"] = f"Bearer {_sendable(target, auth, 'token', spaces=False)}"
    elif name == "apiKey":
        where = auth.get("in", "header")
        if where != "header":
            raise A2AAuthError(
                f"Agent '{target.agent_id}': an apiKey credential in {where!r} is not "
                "supported; the platform sends API keys as a header.",
            )
        headers[_field(target, auth, "name")] = _sendable(target, auth, "value", spaces=True)
    elif name == "oauth2":
        headers["Authorization"] = f"Bearer {oauth2_token(target, refused=refused)}"
    else:
        raise A2AAuthError(
            f"Agent '{target.agent_id}' has a credential of unknown type {name!r}.",
        )
    return name


def _field(target: CallTarget, auth: dict[str, Any], key: str) -> str:
    value = auth.get(key)
    if not isinstance(value, str) or not value:
        raise A2AAuthError(
            f"Agent '{target.agent_id}': its {scheme(target)} credential has no {key!r}.",
        )
    return value


def _sendable(target: CallTarget, auth: dict[str, Any], key: str, *, spaces: bool) -> str:
    """The credential's ``key``, refused (named, never quoted) where no HTTP stack can send
    it: stored before the registry refused such values, it failed every call with a
    ``UnicodeEncodeError`` quoting it whole."""
    value = _field(target, auth, key)
    problem = header_value_problem(value, spaces=spaces)
    if problem is not None:
        raise A2AAuthError(
            f"Agent '{target.agent_id}': the {key!r} of its {scheme(target)} credential "
            f"cannot be sent ({problem}); set the credential again.",
        )
    return value


# --- OAuth2 client credentials -------------------------------------------------------


def _cache_key(target: CallTarget, auth: dict[str, Any]) -> tuple[str, ...]:
    # The secret only as a digest: a rotated secret gets its own token.
    secret = hashlib.sha256(str(auth.get("clientSecret", "")).encode()).hexdigest()
    scopes = " ".join(sorted(str(s) for s in auth.get("scopes") or []))
    return (target.agent_id, str(auth.get("tokenUrl")), str(auth.get("clientId")), secret, scopes)


def forget_tokens() -> None:
    """Drop every cached token (tests; an operator rotating credentials needs nothing)."""
    with _tokens_lock:
        _tokens.clear()
        _sent_tokens.clear()
        _flights.clear()  # their fetches end as they will, for their own callers


def tokens_sent(target: CallTarget) -> tuple[str, ...]:
    """The OAuth2 tokens last fetched for ``target``'s credential (and so maybe sent):
    what :func:`a2a.transports.redaction.redactor` must recognise in an echo."""
    auth = target.auth if isinstance(target.auth, dict) else {}
    with _tokens_lock:
        return _sent_tokens.get(_cache_key(target, auth), ())


def kept_for(lifetime: float) -> float:
    """Seconds a token that lives ``lifetime`` seconds is used: all of it but a margin of
    :data:`EARLY_EXPIRY` seconds, or of :data:`EARLY_EXPIRY_SHARE` of it if less."""
    lifetime = max(0.0, lifetime)
    return lifetime - min(EARLY_EXPIRY, lifetime * EARLY_EXPIRY_SHARE)


def oauth2_token(target: CallTarget, *, refused: str | None = None) -> str:
    """A bearer token for ``target``: the cached one while valid, else a fresh one.

    ``refused``: the token the agent just answered 401 to (revoked early): another one,
    which a concurrent call may have fetched already. Calls that need a token while one
    is being fetched for the same credential wait for that fetch and share its outcome.
    """
    global _flights_pid
    auth = target.auth or {}
    key = _cache_key(target, auth)
    with _tokens_lock:
        cached = _tokens.get(key)
        if cached and cached[1] > time.monotonic() and cached[0] != refused:
            return cached[0]
        if _flights_pid != os.getpid():
            _flights.clear()
            _flights_pid = os.getpid()
        flight = _flights.get(key)
        leading = flight is None
        if flight is None:
            flight = _flights[key] = _Flight()
    if not leading:
        return _wait_for(flight, target)
    try:
        token, lifetime = _fetch_token(target, auth)
        with _tokens_lock:
            _keep(key, token, time.monotonic() + kept_for(lifetime))
        flight.token = token
        return token
    except BaseException as exc:
        flight.error = exc
        raise
    finally:
        with _tokens_lock:
            if _flights.get(key) is flight:
                del _flights[key]
        flight.done.set()


def _keep(key: tuple[str, ...], token: str, until: float) -> None:
    """Cache ``token`` for ``key`` until ``until`` and remember it as sent; drop what no
    call needs any more (see ``_tokens``). Called holding the lock, once per fetch."""
    now = time.monotonic()
    client = key[:3]  # agent, tokenUrl, clientId: a new secret or scopes replace the old
    for old in [k for k, (_, u) in _tokens.items() if u <= now or (k[:3] == client and k != key)]:
        del _tokens[old]
    sent = _sent_tokens.pop(key, ())
    _tokens.pop(key, None)  # put again, it goes last: the oldest stay first
    _tokens[key] = (token, until)
    _sent_tokens[key] = (token, *sent)[:TOKENS_REMEMBERED]
    for old in [k for k in _sent_tokens if k[:3] == client][:-SENT_CREDENTIALS_KEPT]:
        del _sent_tokens[old]
    for table in (_tokens, _sent_tokens):
        for old in list(itertools.islice(table, max(0, len(table) - TOKENS_LIMIT))):
            del table[old]


def _wait_for(flight: _Flight, target: CallTarget) -> str:
    """The outcome of another call's fetch of the same token: its token, or its error
    (a copy: each call's error is redacted and stored on its own)."""
    who = f"an OAuth2 token for agent '{target.agent_id}'"
    # The fetch is bounded by its whole-answer deadline; a margin over it for the guard.
    bound = whole_answer_seconds(settings.A2A_CONNECT_TIMEOUT, settings.A2A_HTTP_TIMEOUT)
    if not flight.done.wait(bound + settings.A2A_CONNECT_TIMEOUT):
        raise A2ATransientError(
            f"Gave up waiting for {who}: the fetch in progress took too long.",
            code=TOKEN_ENDPOINT_UNAVAILABLE,
        )
    if flight.token is not None:
        return flight.token
    if isinstance(flight.error, A2ACallError):
        raise copy.copy(flight.error)
    # Not a call's error (a bug): named by its type only, its text may quote anything.
    raise A2ATransientError(
        f"Could not get {who}: {type(flight.error).__name__} in the fetch it waited for.",
        code=TOKEN_ENDPOINT_UNAVAILABLE,
    )


def _fetch_token(target: CallTarget, auth: dict[str, Any]) -> tuple[str, float]:
    from a2a.transports.http import agent_call, shared_http_client

    url = _field(target, auth, "tokenUrl")
    client_id = _field(target, auth, "clientId")
    secret = _field(target, auth, "clientSecret")
    who = f"the OAuth2 token endpoint {url} of agent '{target.agent_id}'"
    The = "T" + who[1:]
    form = {"grant_type": "client_credentials"}
    scopes = auth.get("scopes") or []
    if scopes:
        form["scope"] = " ".join(str(s) for s in scopes)
    timeout = httpx.Timeout(settings.A2A_HTTP_TIMEOUT, connect=settings.A2A_CONNECT_TIMEOUT)
    # RFC 6749 2.3.1: form-encode id and secret before HTTP Basic.
    basic = httpx.BasicAuth(quote(client_id, safe=""), quote(secret, safe=""))
    whole = whole_answer_seconds(settings.A2A_CONNECT_TIMEOUT, settings.A2A_HTTP_TIMEOUT)
    with agent_call(target, "oauth2_token"):
        try:
            with (
                whole_answer_by(whole),
                shared_http_client().stream(
                    "POST",
                    url,
                    data=form,
                    auth=basic,
                    timeout=timeout,
                    headers={"Accept": "application/json"},
                ) as response,
            ):
                content = read_capped(response, TOKEN_MAX_BYTES)
        except AnswerTooLarge:
            raise A2AAuthError(f"{The} answered more than {TOKEN_MAX_BYTES} bytes.") from None
        except httpx.DecodingError as exc:  # compressed, and not as its Content-Encoding says
            raise A2AAuthError(f"{The} answered a body that does not decode: {exc}.") from None
        except httpx.TransportError as exc:
            raise A2ATransientError(
                f"Could not reach {who}: {type(exc).__name__}.", code=TOKEN_ENDPOINT_UNAVAILABLE
            ) from None
        except UnsafeURL as exc:
            raise A2AAuthError(f"{The} is not allowed: {exc.message}") from None
        if response.status_code >= 500 or response.status_code == 429:
            raise A2ATransientError(
                f"{The} answered HTTP {response.status_code}.",
                code=TOKEN_ENDPOINT_UNAVAILABLE,
                status=response.status_code,
            )
        body = _json_or_none(content)
        if response.status_code >= 300:
            reason = ""
            if isinstance(body, dict) and isinstance(body.get("error"), str):
                # Excerpts: cut visibly (``…``, which redaction relies on) and storable.
                reason = f": {excerpt(body['error'])}"
                if isinstance(body.get("error_description"), str):
                    reason += f" ({excerpt(body['error_description'])})"
            raise A2AAuthError(
                f"{The} refused the client credentials with HTTP {response.status_code}{reason}.",
                status=response.status_code,
            )
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token.strip():
            raise A2AAuthError(
                f"{The} did not answer an OAuth2 token (no access_token in a JSON object)."
            )
        problem = header_value_problem(token.strip(), spaces=False)
        if problem is not None:  # it would fail every call, quoted in the encoding error
            raise A2AAuthError(f"{The} answered an access_token that {problem}.")
        token_type = body.get("token_type", "Bearer")
        if not isinstance(token_type, str) or token_type.lower() != "bearer":
            raise A2AAuthError(
                f"{The} answered a token of type {str(token_type)[:40]!r}, not Bearer."
            )
        lifetime = body.get("expires_in", DEFAULT_TOKEN_LIFETIME)
        try:
            lifetime = float(lifetime)
        except (TypeError, ValueError):
            lifetime = DEFAULT_TOKEN_LIFETIME
        return token.strip(), max(0.0, lifetime)


def _json_or_none(content: bytes) -> Any:
    try:
        return loads_bounded(content)
    except (ValueError, UnicodeDecodeError):
        return None
