"""What dispatch asks of (and tells) the registry about an agent, in one place.

* :func:`target_for` — how to call the agent (``agent_profiles.interfaces.call_target``),
  with its card read first if it was not reachable at registration (``ensure_card``);
* :func:`mark_no_polling` — the agent does not answer ``GetTask``;
* :func:`mark_no_listing` — its tasks cannot be followed by ``ListTasks``;
* :func:`mark_no_early_return` — it holds its sends until the task ends, and
  :func:`mark_early_return_seen` — it was seen not to;
* :func:`record_call_outcome` — feeds the agent's health (an ``agent_auth_failed`` shows
  there as a credential problem). Outcomes that say nothing about the agent's health (its
  task is unknown, it cannot be polled, it has no HTTP endpoint, the platform cannot
  decrypt its stored credential) are not recorded; a
  request the agent read and refused for what it says (:func:`answered_anyway`) counts as
  an answer.
"""

from __future__ import annotations

import logging

from a2a.exceptions import A2ACallError
from a2a.transports.credentials import CREDENTIALS_UNREADABLE
from agent_profiles import cards, health
from agent_profiles.interfaces import CallTarget, call_target
from agent_profiles.models import AgentProfile

log = logging.getLogger(__name__)

# Failures that concern one task, not the agent's health. ``no_endpoint``: an agent with
# no A2A endpoint works over the gateway alone, so an HTTP send (a retry's or a
# reassignment's) meets none; nothing was called, and recording it would show the agent
# unhealthy for good (no HTTP answer ever clears it) and keep it out of matching.
# ``credentials_unreadable``: the platform's key cannot decrypt the stored credential;
# nothing was called either, and recorded, the agent showed unhealthy right after a
# passing check, out of matching, for the platform's own misconfiguration.
NOT_HEALTH = frozenset(
    {
        "remote_task_not_found",
        "task_not_cancelable",
        "unsupported_operation",
        "no_endpoint",
        CREDENTIALS_UNREADABLE,
    }
)


# Statuses of an ``agent_refused`` that refuse what the request says: the agent (or the
# proxy in front of it) is up and read it. What a request says is the sender's: a body too
# large (413, a caller's message) is refused by a limit in front of a healthy agent as
# often as by the agent, and counted as a failed call, one oversized message from any
# caller showed the agent unhealthy, out of matching until the next check. Not 415 nor
# 431: the platform's own content type and headers (its credential among them), which no
# caller sets; an agent refusing them refuses every call. Others do not either: 404, no
# such route (a wrong endpoint); 408, the request not read in time; 410, the endpoint
# withdrawn; 407, a proxy's credentials.
READ_STATUSES = frozenset({400, 409, 413, 422})


def answered_anyway(error: A2ACallError) -> bool:
    """Whether ``error`` is a refusal that proves the agent up and reading its requests:
    an ``agent_refused`` of :data:`READ_STATUSES` (HTTP 400, 409, 413, 422), or
    a JSON-RPC error. Why: a person's answer the agent refuses (HTTP 400 "market must be
    EU or UK"), or a caller's message too large for it (413), is the sender's doing;
    recorded as a failed call, the agent showed unhealthy, "known unreachable" to the
    matcher, which sent new work elsewhere (a polled agent's next ``GetTask`` cleared it,
    a streamed agent's stayed). Credentials refused (401/403) keep their own code,
    ``agent_auth_failed``, and 5xx/429 are transient failures: both still count against
    the agent."""
    # A JSON-RPC error has no HTTP status: the agent's own answer.
    return error.code == "agent_refused" and (error.status is None or error.status in READ_STATUSES)


def target_for(profile: AgentProfile, *, first_call: bool = False) -> CallTarget:
    """How to call ``profile``; before a first call its card is read if still missing."""
    if first_call:
        cards.ensure_card(profile)
    return call_target(profile)


def mark_no_polling(profile: AgentProfile, reason: str) -> None:
    """Record that the agent cannot be polled (its tasks are followed another way)."""
    health.mark_no_polling(profile, reason)


def mark_no_listing(profile: AgentProfile, reason: str) -> None:
    """Record that the agent's tasks cannot be followed by listing (polled one by one)."""
    health.mark_no_listing(profile, reason)


def mark_no_early_return(profile: AgentProfile, reason: str) -> None:
    """Record that the agent holds its sends until the task ends (its sends start by a
    stream from now on)."""
    health.mark_no_early_return(profile, reason)


def mark_early_return_seen(profile: AgentProfile) -> None:
    """Record that the agent answered a send with its task still in flight (once)."""
    health.mark_early_return_seen(profile)


def record_call_outcome(profile: AgentProfile, error: A2ACallError | None = None) -> None:
    """Tell the registry how a call to the agent went (``error`` None: it answered)."""
    if error is not None and error.code in NOT_HEALTH:
        return
    if error is not None and answered_anyway(error):
        error = None  # it answered: reachable, whatever it thought of the request
    try:
        if error is None:
            health.record_call_outcome(profile, ok=True)
        else:
            health.record_call_outcome(profile, ok=False, code=error.code, message=error.message)
    except Exception:  # health bookkeeping must never break dispatch
        log.warning("agent %s: could not record a call outcome", profile.pk, exc_info=True)
