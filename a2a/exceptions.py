"""Errors of the a2a app.

Calls to agents raise one of three :class:`A2ACallError` kinds; the dispatcher decides
what to do with each in one place (``a2a.send_failures.handle_send_failure``):

* :class:`A2ATransientError`: connection refused, timeout, HTTP 5xx or 429. Worth retrying.
* :class:`A2APermanentError`: HTTP 4xx other than 429. The agent refused this request.
* :class:`A2AProtocolError`: a 2xx answer that is not A2A (HTML, not JSON, wrong shape).

They are :class:`~platform_site.errors.PlatformError` subclasses so the gateway's consumer
can turn one into an error frame like any other domain error.
"""

from __future__ import annotations

from typing import Any

from platform_site.errors import Conflict, PlatformError, ValidationFailed


class A2ACallError(PlatformError):
    """A call to an agent did not produce a usable A2A answer."""

    code = "agent_error"
    transient = False

    def __init__(
        self,
        message: str,
        details: Any = None,
        *,
        code: str | None = None,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, details, code=code)
        self.status = status
        self.retry_after = retry_after

    def as_error(self) -> dict[str, Any]:
        """The ``{"code", "message", "details"}`` stored on the task."""
        details = self.details
        if self.status is not None:
            details = {"httpStatus": self.status, **(details if isinstance(details, dict) else {})}
        return {"code": self.code, "message": self.message, "details": details}


class A2ATransientError(A2ACallError):
    """Connection error, timeout, 5xx or 429: the same request may work later."""

    code = "agent_unavailable"
    transient = True


class A2AAnswerLate(A2ATransientError):
    """The agent took the request but its answer did not come within the call's read
    timeout: it may be acting on it (an agent that holds a send until the task ends)."""

    code = "agent_timeout"


class A2APermanentError(A2ACallError):
    """The agent answered 4xx (not 429): sending the same request again will not help."""

    code = "agent_refused"


class A2AAuthError(A2APermanentError):
    """The agent refused the platform's credentials (HTTP 401/403), they could not be
    obtained (an OAuth2 token endpoint that refuses the client or answers garbage; one
    that is down is ``token_endpoint_unavailable``, transient), or cannot be decrypted."""

    code = "agent_auth_failed"


class A2AUnsupportedOperation(A2APermanentError):
    """The agent does not offer this operation (HTTP 404/405/501 on a route it lacks,
    JSON-RPC -32601 or UnsupportedOperation -32004). On ``GetTask``: it cannot be polled."""

    code = "unsupported_operation"


class A2AProtocolError(A2ACallError):
    """The agent answered something that is not an A2A response."""

    code = "not_a2a"


class UnknownSkill(ValidationFailed):
    code = "unknown_skill"


class UnknownAgent(ValidationFailed):
    code = "unknown_agent"


class InputInvalid(ValidationFailed):
    code = "input_invalid"


class AgentInactive(Conflict):
    """A person's reply or retry for a task whose agent is disabled, awaiting approval or
    (a retry) no longer offers the task's skill: it gets no work (docs/registry.md), so
    nothing is sent and the task stays as it was, for a person to reassign (409)."""

    code = "agent_inactive"
