"""Agents' health: periodic checks, what dispatch learns from calls, and the verdict matching
uses.

Two sources feed it:

* **checks** (:func:`check_agents`, a beat task): ``GET {a2aEndpoint}/health`` when the agent
  answers one, else its card; healthy on a 2xx, unhealthy on a connection error, a timeout
  or a 5xx; latency and the last error are stored;
* **calls** (:func:`record_call_outcome`, from dispatch): a failed call is recorded with its
  code and message (e.g. ``agent_auth_failed``), a successful one clears it.

The verdict (:func:`health_of`) is unhealthy when the last check failed or the last call
failed; a passing check clears a failed call, except ``agent_auth_failed`` (a health
endpoint cannot show that credentials work): that stays until a call succeeds or the
credential is changed. An OAuth2 token endpoint that was down is not that
(``token_endpoint_unavailable``, transient): a passing check clears it like any outage.

An agent reached only over HTTP (never connected to the gateway) found answering again,
by a passing check or by a call that succeeds after a failed one, is announced to the
handler dispatch registers (:func:`register_recovery`): its tasks waiting offline are
sent again over HTTP.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agent_profiles.deadlines import whole_answer_by, whole_answer_seconds
from agent_profiles.guarded_http import guarded_client
from agent_profiles.models import AgentProfile, AgentStatus, HealthStatus
from agent_profiles.relisting import announce_listing_again
from platform_site.errors import ValidationFailed

logger = logging.getLogger(__name__)
lifecycle = logging.getLogger("agent_profiles.lifecycle")  # docs/operations.md, "Logs"

AUTH_FAILED = "agent_auth_failed"
CHECK_CONCURRENCY = 8


def _mark_without(agent: AgentProfile, what: str, reason: str) -> None:
    """Record that dispatch found ``agent`` without ``what`` (``polling``, ``listing``,
    ``early_return``): the flag, why and since when, on the row and on ``agent``; logged
    once per reason."""
    reason = reason[:2000]
    if not getattr(agent, what) and getattr(agent, f"no_{what}_reason") == reason:
        return
    fields = {what: False, f"no_{what}_reason": reason, f"no_{what}_at": timezone.now()}
    for name, value in fields.items():
        setattr(agent, name, value)
    AgentProfile.objects.filter(pk=agent.pk).update(**fields)
    logger.info("Agent %s marked no-%s: %s", agent.pk, what, reason, extra={"agent_id": agent.pk})


def _mark_cleared(agent: AgentProfile, what: str) -> bool:
    """Clear what :func:`_mark_without` recorded, on the row and on ``agent``; whether
    there was a mark to clear."""
    if getattr(agent, what):
        return False
    fields = {what: True, f"no_{what}_reason": "", f"no_{what}_at": None}
    for name, value in fields.items():
        setattr(agent, name, value)
    AgentProfile.objects.filter(pk=agent.pk).update(**fields)
    logger.info("Agent %s: no-%s mark cleared", agent.pk, what, extra={"agent_id": agent.pk})
    return True


def listing_again(agent: AgentProfile) -> None:
    """The agent registered again, or its card was read again on request: a "no listing"
    mark (``a2a.agent_listing``) is cleared, and its next polled tasks are followed by
    listing. Nothing else clears it, and one bad answer sets it (a maintenance page in
    HTML where ``ListTasks`` was): an agent that still does not list is marked again at
    its next listing, its tasks polled meanwhile as the safety net."""
    if not _mark_cleared(agent, "listing"):
        return
    # Its tasks in flight still say they are followed by listing (their polls spaced for
    # it): dispatch lists them again, not at the agent's next send. Once the mark's clearing
    # is committed: a sweep that saw the cursor due with the mark still on would stop it.
    agent_id = agent.pk
    transaction.on_commit(lambda: announce_listing_again(agent_id))


def polling_again(agent: AgentProfile) -> None:
    """The agent registered again, or its card was read again on request: a "no polling"
    mark (``a2a.agent_polls``) is cleared, and its tasks are polled again. The mark may
    have come from a deployment since replaced, or from a guess: an agent that moved
    before its new card was served was polled in the shape its card's absence implied
    (HTTP+JSON 1.0), and its 404 marked a JSON-RPC agent for good. One that still does not
    answer ``GetTask`` is marked again at its next poll."""
    _mark_cleared(agent, "polling")


def mark_no_polling(agent: AgentProfile, reason: str) -> None:
    """Record that ``agent`` does not answer ``GetTask`` (dispatch follows its tasks another
    way from now on). Shown in the admin and the profile JSON."""
    _mark_without(agent, "polling", reason)


def mark_no_listing(agent: AgentProfile, reason: str) -> None:
    """Record that ``agent``'s tasks cannot be followed by listing them (``ListTasks``):
    dispatch polls them one by one from now on. Shown in the admin and the profile JSON."""
    _mark_without(agent, "listing", reason)


def mark_no_early_return(agent: AgentProfile, reason: str) -> None:
    """Record that ``agent`` holds a send asking it to return at once until the task ends
    (dispatch starts its sends by a stream from now on, or holds them when it does not
    stream). Shown in the admin and the profile JSON."""
    _mark_without(agent, "early_return", reason)


def mark_early_return_seen(agent: AgentProfile) -> None:
    """Record that ``agent`` answered a send asking it to return at once with its task
    still in flight: it honours ``returnImmediately``, so a send of it that times out
    later is load, not a hold (:func:`mark_no_early_return` is not taken). Written once."""
    if agent.early_return_seen:
        return
    agent.early_return_seen = True
    AgentProfile.objects.filter(pk=agent.pk, early_return_seen=False).update(early_return_seen=True)


def record_call_outcome(
    agent: AgentProfile, *, ok: bool, code: str = "", message: str = ""
) -> None:
    """Feed one call's outcome to ``agent``'s health (cheap when nothing changes).

    ``message`` must not hold a secret: it is stored and shown.
    """
    if ok and agent.last_call_ok is True and agent.health_status == HealthStatus.HEALTHY:
        return  # the common case writes nothing
    # A call that works after one that failed: the agent is back, maybe before any check
    # sees it. Announced after the caller's commit, outside its transaction and locks.
    back = ok and agent.last_call_ok is False
    now = timezone.now()
    changes: dict[str, Any] = {
        "last_call_ok": ok,
        "last_call_code": "" if ok else code[:64],
        "last_call_error": "" if ok else message[:2000],
        "last_call_at": now,
    }
    if ok:
        # A call that worked proves the agent reachable.
        changes.update(health_status=HealthStatus.HEALTHY, health_error="")
    became_unhealthy = not ok and agent.last_call_ok is not False
    for name, value in changes.items():
        setattr(agent, name, value)
    AgentProfile.objects.filter(pk=agent.pk).update(**changes)
    if back:
        transaction.on_commit(lambda: _announce_recovered([agent]))
    if became_unhealthy:
        lifecycle.info(
            "agent %s unhealthy: a call failed (%s: %s)",
            agent.pk,
            code,
            message[:200],
            extra={"agent_id": agent.pk},
        )


@dataclass(frozen=True)
class Health:
    """The verdict shown and used by matching."""

    status: str
    error: str


def health_of(agent: AgentProfile) -> Health:
    """``healthy`` / ``unhealthy`` / ``unknown`` and the error to show."""
    if agent.last_call_ok is False:
        return Health(HealthStatus.UNHEALTHY, f"{agent.last_call_code}: {agent.last_call_error}")
    return Health(agent.health_status, agent.health_error)


def is_known_unreachable(agent: AgentProfile) -> bool:
    return health_of(agent).status == HealthStatus.UNHEALTHY


# --- Checks ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    latency_ms: int | None
    error: str


def _probe_urls(agent: AgentProfile) -> tuple[str, list[str]]:
    """The health URL and the card URLs to try when there is no health endpoint."""
    from agent_profiles.cards import card_locations

    base = agent.a2a_endpoint.rstrip("/")
    return f"{base}/health", card_locations(agent.agent_card_url, agent.a2a_endpoint)


def check_one(health_url: str, card_urls: list[str]) -> CheckResult:
    """One check: the health endpoint, else the card (only HTTP; no database).

    Never raises: whatever goes wrong is a failed check, for this agent only (the checks
    of all agents run together, and one exception stopped them all).
    """
    try:
        return _check(health_url, card_urls)
    except Exception as exc:
        logger.exception("health check of %s failed", health_url)
        return CheckResult(False, None, f"{health_url}: check failed: {type(exc).__name__} {exc}")


def _check(health_url: str, card_urls: list[str]) -> CheckResult:
    seconds = settings.AGENT_HEALTH_TIMEOUT
    timeout = httpx.Timeout(seconds)
    whole = whole_answer_seconds(seconds, seconds)
    last = CheckResult(False, None, "nothing to check")
    with guarded_client(timeout=timeout) as client:
        for url in [health_url, *card_urls]:
            try:
                started = time.monotonic()
                # The status is all a check needs: the body is never read (an agent's
                # endless or compressed one cost gigabytes when it was).
                with (
                    whole_answer_by(whole),
                    client.stream("GET", url) as response,
                ):
                    latency = int((time.monotonic() - started) * 1000)
            except ValidationFailed as exc:
                return CheckResult(False, None, exc.message)
            except httpx.HTTPError as exc:
                return CheckResult(False, None, f"{url}: {type(exc).__name__} {exc}".strip())
            except (httpx.InvalidURL, ValueError) as exc:
                # A stored URL httpx cannot send (a host it cannot encode).
                return CheckResult(False, None, f"{url}: not a usable URL: {exc}")
            if response.status_code >= 500:
                return CheckResult(False, latency, f"{url}: HTTP {response.status_code}")
            if 200 <= response.status_code < 300:
                return CheckResult(True, latency, "")
            # 404 and friends: no health endpoint / no card here; try the next one. The
            # agent answered, which is worth something if nothing else does.
            last = CheckResult(True, latency, f"{url}: HTTP {response.status_code}")
    return last


def store_check(agent: AgentProfile, result: CheckResult) -> None:
    """Store a check's result; a passing check clears a failed call (not an auth one)."""
    changes: dict[str, Any] = {
        "health_status": HealthStatus.HEALTHY if result.ok else HealthStatus.UNHEALTHY,
        "health_latency_ms": result.latency_ms,
        "health_error": "" if result.ok else result.error[:2000],
        "health_checked_at": timezone.now(),
    }
    became_unhealthy = not result.ok and agent.health_status != HealthStatus.UNHEALTHY
    for name, value in changes.items():
        setattr(agent, name, value)
    AgentProfile.objects.filter(pk=agent.pk).update(**changes)
    if result.ok:
        # Conditional in the database: an auth failure recorded by a call since this
        # check started is never cleared by it.
        cleared = {"last_call_ok": None, "last_call_code": "", "last_call_error": ""}
        rows = (
            AgentProfile.objects.filter(pk=agent.pk, last_call_ok=False)
            .exclude(last_call_code=AUTH_FAILED)
            .update(**cleared)
        )
        if rows:
            for name, value in cleared.items():
                setattr(agent, name, value)
    if became_unhealthy:
        lifecycle.info(
            "agent %s unhealthy: its health check failed (%s)",
            agent.pk,
            result.error[:200],
            extra={"agent_id": agent.pk},
        )


def _has_scheme(url: str) -> bool:
    try:
        return bool(urlsplit(url).scheme)
    except ValueError:  # malformed: checked all the same, and found failing
        return True


def _check_agent(agent: AgentProfile) -> CheckResult:
    """:func:`check_one` for ``agent``; a URL that cannot even be split fails its check."""
    try:
        urls = _probe_urls(agent)
    except ValueError as exc:
        return CheckResult(False, None, f"{agent.a2a_endpoint}: not a usable URL: {exc}")
    return check_one(*urls)


def check_agents(agents: list[AgentProfile] | None = None) -> dict[str, str]:
    """Check every agent with an endpoint (active or pending); their new status by id."""
    if agents is None:
        agents = list(
            AgentProfile.objects.exclude(a2a_endpoint="").exclude(status=AgentStatus.DISABLED)
        )
    agents = [a for a in agents if a.a2a_endpoint and _has_scheme(a.a2a_endpoint)]
    if not agents:
        return {}
    with ThreadPoolExecutor(max_workers=min(CHECK_CONCURRENCY, len(agents))) as pool:
        results = list(pool.map(_check_agent, agents))
    statuses: dict[str, str] = {}
    for agent, result in zip(agents, results, strict=True):
        store_check(agent, result)
        statuses[agent.pk] = agent.health_status
    # Every passing check, not only a change to healthy: the outage may have fallen
    # between two checks, and a call may have marked the agent healthy again before its
    # offline task was handed over. Dispatch finds nothing to do in one read when no
    # task waits.
    _announce_recovered([a for a, r in zip(agents, results, strict=True) if r.ok])
    return statuses


# --- recovery ----------------------------------------------------------------------------

# Dispatch (``a2a``, above this app) registers what to do for agents found answering again
# (``a2a.http_again.send_again``, from ``a2a.apps``): the registry does not import it.
_on_recovered: Callable[[list[AgentProfile]], Any] | None = None


def register_recovery(handler: Callable[[list[AgentProfile]], Any]) -> None:
    """Called by the ``a2a`` app at start."""
    global _on_recovered
    _on_recovered = handler


def _announce_recovered(agents: list[AgentProfile]) -> None:
    """Tell the registered handler about those of ``agents`` (found answering over HTTP)
    that never connected to the gateway and are healthy (not an ``agent_auth_failed``
    the check could not clear). Never raises: a check or a call must not fail for it."""
    back = [
        a
        for a in agents
        if a.gateway_seen_at is None and health_of(a).status == HealthStatus.HEALTHY
    ]
    if not back or _on_recovered is None:
        return
    try:
        _on_recovered(back)
    except Exception:
        logger.exception("could not hand the tasks of agents back from an outage to dispatch")
