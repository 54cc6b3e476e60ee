"""Per-request context shared by both bindings: version, caller and tenant.

Authentication is the same on every operation: ``Authorization: Bearer <token>`` with a
platform user's token (``usr_…``) or an agent's API key (``a2a_…``). With
``A2A_ALLOW_ANONYMOUS`` a request without the header is served as the anonymous caller;
a header that is present but wrong is always refused.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.db.models.signals import post_delete
from django.http import HttpRequest

from a2a.face.db import db_call
from a2a.face.errors import Unauthenticated, VersionNotSupported
from agent_profiles.authentication import AgentPrincipal, authenticate_bearer, bearer_token
from agent_profiles.models import AgentStatus
from agent_profiles.signals import registry_changed

PROTOCOL_VERSION = "1.0"
LEGACY_VERSION = "0.3"


@dataclass
class CallContext:
    """Who calls, through which tenant (agent id on ``/v1/a2a/{agentId}``), and how."""

    principal: Any = None  # a User, an AgentPrincipal, or None (anonymous)
    raw_token: str | None = None
    token_invalid: bool = False
    tenant: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    authenticated: bool = False  # the token was looked up (lazily, on a database thread)
    refused: str = ""  # why a valid key is no caller (its agent is pending or disabled)

    @property
    def user(self) -> Any:
        p = self.principal
        return p if p is not None and not isinstance(p, AgentPrincipal) else None

    @property
    def agent_caller(self) -> Any:
        return self.principal.agent if isinstance(self.principal, AgentPrincipal) else None

    @property
    def is_anonymous(self) -> bool:
        return self.principal is None

    def authenticate(self) -> None:
        """Look the bearer token up (once). Touches the database: call from a DB thread."""
        if self.authenticated:
            return
        self.authenticated = True
        if self.raw_token is not None and not self.token_invalid:
            principal = principal_cache.lookup(self.raw_token)
            self.refused = refusal(principal)
            if self.refused:
                principal = None
            self.principal = principal
            self.token_invalid = principal is None

    def require_caller(self) -> None:
        """Raise :class:`Unauthenticated` unless the caller may use task operations.
        Touches the database: call from a DB thread."""
        self.authenticate()
        if self.token_invalid:
            raise Unauthenticated(self.refused or "Invalid or revoked token.")
        if self.principal is None and not settings.A2A_ALLOW_ANONYMOUS:
            raise Unauthenticated()

    def owner_q(self) -> Q:
        """The tasks this caller owns. Anonymous callers share the tasks anonymous callers
        asked for, which they reach by id only (see docs/a2a-face.md); a task whose user or
        agent was deleted is nobody's."""
        if self.agent_caller is not None:
            return Q(created_by_agent=self.agent_caller)
        if self.user is not None:
            return Q(created_by=self.user)
        return Q(anonymous=True)

    def presents_extended_card_token(self) -> bool:
        expected = settings.A2A_EXTENDED_CARD_BEARER_TOKEN
        return bool(expected and self.raw_token) and hmac.compare_digest(
            str(self.raw_token).encode(), expected.encode()
        )


def refusal(principal: Any) -> str:
    """Why a looked-up principal is no caller, or "" when it is one."""
    if isinstance(principal, AgentPrincipal) and principal.agent.status != AgentStatus.ACTIVE:
        # A pending agent has a key but no standing yet (in the approval mode anyone may
        # register one), a disabled one none any more: neither is a caller.
        return f"Agent '{principal.agent.pk}' is {principal.agent.status}."
    return ""


class CallerWatch:
    """An open stream's re-check of its caller: revoking a token or a key, deactivating a
    user or disabling an agent ends the caller's streams too, not only its next request.

    The caller is looked up again as a new request would be, through the
    :data:`principal_cache`: while the cache holds a fresh entry for the token the stream
    trusts it until that entry expires (no query, and one lookup refreshes every stream
    and request of that token in the process); after that one lookup on a database thread.
    With the cache off (``A2A_FACE_AUTH_CACHE_SECONDS`` 0) a stream looks its caller up at
    most every ``A2A_STREAM_RECHECK``, the pace at which a quiet stream re-reads its task.
    Anonymous callers have no standing to lose."""

    def __init__(self, ctx: CallContext) -> None:
        self.ctx = ctx
        # Cache off: the request that opened the stream looked the caller up just now.
        self.until = 0.0 if _cache_seconds() > 0 else time.monotonic() + _recheck_seconds()

    async def check(self) -> None:
        """Raise :class:`Unauthenticated` (as a new request would get it) once the caller
        has lost access; cheap while its last look-up is fresh."""
        raw = self.ctx.raw_token
        now = time.monotonic()
        if raw is None or self.ctx.principal is None or now < self.until:
            return
        hit = principal_cache.cached(raw)
        if hit is None:
            principal = await db_call(principal_cache.lookup)(raw)
            hit = principal_cache.cached(raw)
            until = hit[1] if hit is not None else now + _recheck_seconds()
        else:
            principal, until = hit
        refused = refusal(principal) if principal is not None else "Invalid or revoked token."
        if refused:
            raise Unauthenticated(f"{refused} The stream ends: its caller lost access.")
        self.until = until


def _cache_seconds() -> float:
    return float(settings.A2A_FACE_AUTH_CACHE_SECONDS)


def _recheck_seconds() -> float:
    # sse.recheck_seconds, read here: sse imports this module (through stream_slots).
    return float(getattr(settings, "A2A_STREAM_RECHECK", 5.0))


class PrincipalCache:
    """Recently authenticated tokens (keyed by a hash, never the token), for
    ``A2A_FACE_AUTH_CACHE_SECONDS``: a revoked token keeps working at most that long in a
    process. Failed lookups are not cached. Dropped at once when this process deletes a
    caller or its credential, or changes agents or keys in bulk (see ``_access_changed``)."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[bytes, tuple[float, Any]] = OrderedDict()

    def cached(self, raw: str) -> tuple[Any, float] | None:
        """The fresh entry for ``raw``, ``(principal, expiry on the monotonic clock)``, or
        None; never touches the database."""
        if _cache_seconds() <= 0:
            return None
        key = hashlib.sha256(raw.encode()).digest()
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit[0] > time.monotonic():
                self._entries.move_to_end(key)
                return hit[1], hit[0]
        return None

    def lookup(self, raw: str) -> Any:
        """The principal of ``raw`` (None if it is no valid token), from the cache while
        fresh. Touches the database otherwise: call from a DB thread."""
        ttl = _cache_seconds()
        if ttl <= 0:
            return authenticate_bearer(raw)
        hit = self.cached(raw)
        if hit is not None:
            return hit[0]
        key = hashlib.sha256(raw.encode()).digest()
        now = time.monotonic()
        principal = authenticate_bearer(raw)
        if principal is not None:
            with self._lock:
                self._entries[key] = (now + ttl, principal)
                self._entries.move_to_end(key)
                while len(self._entries) > self.size:
                    self._entries.popitem(last=False)
        return principal

    def forget(self, raw: str) -> None:
        """Drop ``raw``'s entry (its caller turned out to be gone)."""
        key = hashlib.sha256(raw.encode()).digest()
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


principal_cache = PrincipalCache()


def _access_changed(sender: Any, **kwargs: Any) -> None:
    # A cached principal is a row read earlier: once a user, a token, an agent or a key is
    # deleted in this process (the admin's "Delete selected", a cascade), or agents or
    # keys change in bulk (no post_save), none is trusted for the rest of its time. A new
    # task of a deleted caller broke its foreign key: a 500 where a 401 was due.
    principal_cache.clear()


for _model in (
    settings.AUTH_USER_MODEL,
    "agent_profiles.UserToken",
    "agent_profiles.AgentProfile",
    "agent_profiles.ApiKey",
):
    post_delete.connect(_access_changed, sender=_model, dispatch_uid=f"a2a.face.context.{_model}")
registry_changed.connect(_access_changed, dispatch_uid="a2a.face.context.registry_changed")


_VERSION_RE = re.compile(r"^(\d{1,4})(?:\.(\d{1,4}))?(?:\.\d{1,4})?$")


def requested_version(request: HttpRequest) -> str | None:
    """The ``Major.Minor`` the client asks for (header, else the ``A2A-Version`` query
    parameter), or None when absent or empty. Anything that is not a version is refused."""
    raw = request.headers.get("A2A-Version")
    if raw is None:
        raw = request.GET.get("A2A-Version")
    text = (raw or "").strip()
    if not text:
        return None
    match = _VERSION_RE.fullmatch(text)
    if match is None:
        raise _unsupported(text)
    return f"{int(match[1])}.{int(match[2] or 0)}"


def check_version(request: HttpRequest, speaks: str = PROTOCOL_VERSION) -> None:
    """Refuse a requested version this operation does not speak: 1.0 operations accept any
    1.x, 0.3 ones 0.3. A missing or empty version is accepted: the spec reads it as 0.3
    "where the method or path does not tell", and on the face they always tell."""
    version = requested_version(request)
    if version is None:
        return
    wanted_major = speaks.split(".", 1)[0]
    if speaks == "0.3" and version == "0.3":
        return
    if speaks != "0.3" and version.split(".", 1)[0] == wanted_major:
        return
    raise _unsupported(version, speaks)


def _unsupported(requested: str, speaks: str | None = None) -> VersionNotSupported:
    shown = requested if len(requested) <= 20 else requested[:20] + "…"
    supported = speaks or f"{PROTOCOL_VERSION}, {LEGACY_VERSION}"
    return VersionNotSupported(
        f"A2A version {shown!r} is not supported here; this operation speaks {supported}.",
        metadata={"requestedVersion": shown, "supportedVersions": supported},
    )


def build_context(request: HttpRequest, tenant: str | None) -> CallContext:
    """The call context of ``request``. The token is looked up later, on the database
    thread of the operation (one hop per request); the extended card accepts its own token."""
    header = request.headers.get("Authorization")
    raw = bearer_token(header)
    return CallContext(raw_token=raw, tenant=tenant, token_invalid=bool(header) and raw is None)
