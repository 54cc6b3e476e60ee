"""HTTP plumbing every A2A binding shares: the pooled client, outgoing headers, the one
place where a call to an agent starts and ends, credentials, and status → error mapping.

* :func:`shared_http_client` — one pooled :class:`httpx.Client` per process (re-created
  after a fork) for streams and token fetches. The plain calls (:func:`call`: a send, a
  poll, a cancel) go over :func:`agent_profiles.guarded_pool.shared_pool`, at a third of
  httpx's CPU per call. Both are thread-safe and pass the URL guard.
* :func:`outgoing_headers` — the headers of every call to an agent (``A2A-Version``,
  ``Accept``, ``User-Agent``); trace context (``traceparent``) belongs here too.
* :func:`agent_call` — the context every agent call runs in: start, end, duration and
  outcome (the hook for metrics and tracing spans).
* :func:`call` / :func:`open_stream` — one request with the target's credential (an OAuth2
  token is fetched again once on 401), its status mapped to
  :class:`~a2a.exceptions.A2ACallError` kinds.

Reading the answers (bounded bodies, server-sent events, error bodies) is
:mod:`a2a.transports.answers`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, TypeVar

import httpx
from django.conf import settings

from a2a.exceptions import (
    A2AAnswerLate,
    A2AAuthError,
    A2ACallError,
    A2APermanentError,
    A2AProtocolError,
    A2ATransientError,
    A2AUnsupportedOperation,
)
from a2a.transports import credentials
from a2a.transports.answers import (
    Response,
    StreamOverdue,
    error_message,
    error_reason,
    is_json,
    read_whole,
    too_large,
)
from a2a.transports.base import parse_retry_after
from a2a.transports.quoting import excerpt
from agent_profiles.credentials import UNREADABLE as UNREADABLE_CREDENTIAL
from agent_profiles.deadlines import whole_answer_by, whole_answer_seconds
from agent_profiles.guarded_http import GuardedTransport
from agent_profiles.guarded_pool import (
    AnswerTimedOut,
    AnswerTooLarge,
    CallFailed,
    CallTimedOut,
    PlainResponse,
    shared_pool,
)
from agent_profiles.interfaces import CallTarget
from agent_profiles.urlguard import UnsafeURL
from platform_site import metrics, tracing
from platform_site.text import json_bytes

log = logging.getLogger("a2a.calls")

USER_AGENT = "a2a-platform/1.0"

_client_lock = threading.Lock()
_client: tuple[int, httpx.Client] | None = None


def shared_http_client() -> httpx.Client:
    """The process-wide pooled client (re-created after a fork); thread-safe."""
    global _client
    with _client_lock:
        if _client is None or _client[0] != os.getpid():
            timeout = httpx.Timeout(settings.A2A_HTTP_TIMEOUT, connect=settings.A2A_CONNECT_TIMEOUT)
            limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
            # The registry's guarded transport: every request's target passes the URL
            # guard at send time and connects to the address that was checked.
            client = httpx.Client(
                transport=GuardedTransport(limits=limits),
                timeout=timeout,
                follow_redirects=False,
                trust_env=False,
            )
            _client = (os.getpid(), client)
        return _client[1]


def outgoing_headers(target: CallTarget, *, accept: str = "application/json") -> dict[str, str]:
    """The headers of every call to an agent (credentials are added by :func:`call`)."""
    return {"A2A-Version": target.version, "Accept": accept, "User-Agent": USER_AGENT}


@contextlib.contextmanager
def agent_call(target: CallTarget, operation: str) -> Iterator[None]:
    """Where each call to an agent starts and ends (logging now; metrics and spans here)."""
    started = time.monotonic()
    outcome = "ok"
    try:
        yield
    except A2ACallError as exc:
        outcome = exc.code
        raise
    except BaseException as exc:
        outcome = type(exc).__name__
        raise
    finally:
        took = time.monotonic() - started
        log.debug(
            "agent call %s %s (%s %s): %s in %.3f s",
            target.agent_id,
            operation,
            target.binding,
            target.version,
            outcome,
            took,
            extra={"agent_id": target.agent_id},
        )
        binding = f"{target.binding}/{target.version}"
        metrics.AGENT_CALLS.labels(target.agent_id, binding, operation, outcome).inc()
        metrics.AGENT_CALL_SECONDS.labels(target.agent_id, binding, operation).observe(took)


def timeout_for(read: float | None = None) -> httpx.Timeout:
    """Per request, so a settings change applies to the shared client at once."""
    return httpx.Timeout(
        read if read is not None else settings.A2A_HTTP_TIMEOUT,
        connect=settings.A2A_CONNECT_TIMEOUT,
    )


R = TypeVar("R", PlainResponse, httpx.Response)


def _request(
    target: CallTarget,
    method: str,
    url: str,
    body: Any,
    *,
    accept: str,
    send: Callable[[str, str, dict[str, str], bytes | None], R],
) -> tuple[R, str]:
    # UTF-8, not \u escapes: an agent's body limit (1 MB in the JS adapter) refused
    # escaped inputs the platform had taken.
    content = None if body is None else json_bytes(body)
    refused: str | None = None
    for attempt in (1, 2):
        headers = outgoing_headers(target, accept=accept)
        if content is not None:
            headers["Content-Type"] = "application/json"
        scheme = credentials.apply(target, headers, refused=refused)
        try:
            response = send(method, url, headers, content)
        except (httpx.ReadTimeout, AnswerTimedOut) as exc:
            raise A2AAnswerLate(
                f"Agent '{target.agent_id}' did not answer {method} {url} in time "
                f"({exc or type(exc).__name__}).",
            ) from None
        except (httpx.TimeoutException, CallTimedOut) as exc:
            raise A2ATransientError(
                f"Agent '{target.agent_id}' did not answer {method} {url} in time "
                f"({exc or type(exc).__name__}).",
                code="agent_timeout",
            ) from None
        except (httpx.TransportError, CallFailed) as exc:
            if isinstance(exc, httpx.LocalProtocolError) and scheme != "none":
                raise _unsendable(target, scheme, exc) from None  # h11 quotes the header
            # The text may quote the agent's own bytes (http.client's bad status line
            # holds whatever it sent, NULs included): an excerpt, storable on PostgreSQL.
            said = excerpt(str(exc)) or type(exc).__name__
            raise A2ATransientError(
                f"Could not reach agent '{target.agent_id}' at {url}: {said}.",
                code="agent_unreachable",
            ) from None
        except UnsafeURL as exc:
            raise A2APermanentError(
                f"Agent '{target.agent_id}': its endpoint is not allowed: {exc.message}",
                code="endpoint_refused",
            ) from None
        except AnswerTooLarge as exc:
            raise too_large(target, method, url, exc.limit) from None
        except ValueError as exc:  # UnicodeEncodeError too
            if scheme == "none":
                raise
            raise _unsendable(target, scheme, exc) from None
        if response.status_code == 401 and scheme == "oauth2" and attempt == 1:
            response.close()  # the token may have been revoked early: fetch one more
            refused = headers["Authorization"].removeprefix("Bearer ")
            continue
        return response, scheme
    raise AssertionError("unreachable")


def _unsendable(target: CallTarget, scheme: str, exc: Exception) -> A2AAuthError:
    """The error for headers that could not be encoded: the credential's (the others are
    the platform's ASCII), which no check before caught. The original's text and repr
    quote the header value, the secret: it is named by its type only (and the caller does
    not chain it, or a logged traceback would show it)."""
    return A2AAuthError(
        f"Agent '{target.agent_id}': the request could not be built with its {scheme} "
        f"credential ({type(exc).__name__}: a value an HTTP header cannot carry); "
        "set the credential again.",
    )


def _plain(
    timeout: float | None, method: str, url: str, headers: dict[str, str], content: bytes | None
) -> PlainResponse:
    """A whole request and answer over the urllib3 pool (a third of httpx's CPU)."""
    read = timeout if timeout is not None else settings.A2A_HTTP_TIMEOUT
    with tracing.client_span(method, url, headers) as span:
        response = shared_pool().request(
            method,
            url,
            headers=headers,
            body=content,
            connect_timeout=settings.A2A_CONNECT_TIMEOUT,
            read_timeout=read,
            max_bytes=settings.AGENT_ANSWER_MAX_BYTES,
        )
        if span is not None:
            span.set_attribute("http.response.status_code", response.status_code)
        return response


def _open(
    timeout: float | None, method: str, url: str, headers: dict[str, str], content: bytes | None
) -> httpx.Response:
    """A streaming request over httpx (its response is read as it comes). Its status line
    and headers must come whole within :func:`~agent_profiles.deadlines.whole_answer_seconds`
    (trickled, they held the stream's thread); the events after them are the reader's to
    time (:func:`a2a.transports.answers.iter_sse`)."""
    client = shared_http_client()
    limits = timeout_for(timeout)
    request = client.build_request(method, url, headers=headers, content=content, timeout=limits)
    with whole_answer_by(whole_answer_seconds(limits.connect or 0.0, limits.read or 0.0)):
        return client.send(request, stream=True)


def call(
    target: CallTarget,
    method: str,
    url: str,
    body: Any = None,
    *,
    operation: str,
    timeout: float | None = None,
) -> Response:
    """One request to the agent; a 2xx response, or the matching error raised."""
    with agent_call(target, operation):
        response, scheme = _request(
            target, method, url, body, accept="application/json", send=partial(_plain, timeout)
        )
        check_status(target, response, method, url, scheme, operation)
        return response


@contextlib.contextmanager
def open_stream(
    target: CallTarget, method: str, url: str, body: Any, *, operation: str, timeout: float
) -> Iterator[httpx.Response]:
    """A streaming (SSE) request; yields the open 2xx response, closed on exit."""
    with agent_call(target, operation):
        response, scheme = _request(
            target, method, url, body, accept="text/event-stream", send=partial(_open, timeout)
        )
        try:
            if response.status_code >= 300:
                check_status(target, read_whole(response), method, url, scheme, operation)
            yield response
        except AnswerTooLarge as exc:
            raise too_large(target, method, url, exc.limit) from None
        except httpx.TimeoutException:
            raise A2ATransientError(
                f"Agent '{target.agent_id}' sent nothing on its stream for {timeout:g} s.",
                code="agent_timeout",
            ) from None
        except StreamOverdue:
            raise A2ATransientError(
                f"Agent '{target.agent_id}' kept its stream open past the time it may "
                "take without an event.",
                code="agent_timeout",
            ) from None
        except httpx.DecodingError as exc:  # compressed, and not as its Content-Encoding says
            raise A2AProtocolError(
                f"Agent '{target.agent_id}' answered {method} {url} with a body that does not "
                f"decode: {excerpt(str(exc))}."
            ) from None
        except httpx.TransportError as exc:
            said = excerpt(str(exc)) or type(exc).__name__  # may quote the agent's bytes
            raise A2ATransientError(
                f"Agent '{target.agent_id}' closed its stream: {said}.",
                code="agent_unreachable",
            ) from None
        finally:
            response.close()


def check_status(
    target: CallTarget,
    response: Response,
    method: str,
    url: str,
    scheme: str,
    operation: str,
) -> None:
    """Raise the error an HTTP status means; return for 2xx."""
    status = response.status_code
    if 200 <= status < 300:
        return
    retry_after = parse_retry_after(response.headers.get("Retry-After"))
    said = error_message(response)
    if status in (401, 403):
        configured = f"with its {scheme} credential"
        if scheme == "none":
            configured = "(no credential configured)"
        elif scheme == credentials.UNREADABLE:  # never sent (credentials.apply): a safeguard
            configured = f"without its credential: {UNREADABLE_CREDENTIAL}"
        raise A2AAuthError(
            f"Agent '{target.agent_id}' refused the platform {configured}: HTTP {status} "
            f"to {method} {url}: {said}",
            status=status,
        )
    following = operation in ("get_task", "subscribe", "list_tasks")
    reason = error_reason(response)
    task_gone = reason == "TASK_NOT_FOUND" or (
        not reason and is_json(response) and "task" in said.lower()
    )
    if status == 404 and operation in ("get_task", "subscribe", "cancel") and task_gone:
        raise A2APermanentError(
            f"Agent '{target.agent_id}' does not know the task: HTTP 404 to {method} {url}: {said}",
            code="remote_task_not_found",
            status=status,
        )
    if reason == "UNSUPPORTED_OPERATION" or status in (405, 501) or (following and status == 404):
        raise A2AUnsupportedOperation(
            f"Agent '{target.agent_id}' does not offer {method} {url}: HTTP {status}: {said}",
            status=status,
        )
    if status == 429 or status >= 500:
        raise A2ATransientError(
            f"Agent '{target.agent_id}' answered HTTP {status} to {method} {url}: {said}",
            code="agent_busy" if status == 429 else "agent_http_error",
            status=status,
            retry_after=retry_after,
        )
    if status >= 400:
        code = "version_not_supported" if reason == "VERSION_NOT_SUPPORTED" else "agent_refused"
        raise A2APermanentError(
            f"Agent '{target.agent_id}' refused {method} {url} with HTTP {status}: {said}",
            code=code,
            status=status,
        )
    raise A2AProtocolError(
        f"Agent '{target.agent_id}' answered HTTP {status} (a redirect) to {method} {url}.",
        status=status,
    )
