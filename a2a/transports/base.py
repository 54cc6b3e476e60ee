"""The transport interface: one way to reach an agent.

A transport is chosen per call from the agent's :class:`~agent_profiles.interfaces.CallTarget`
(HTTP+JSON or JSON-RPC, A2A 1.0 or 0.3) by :func:`a2a.transports.transport_for`. The
worker and the services drive it without knowing which binding is behind it: every
answer comes back as an :class:`AgentReply` in A2A 1.0 shapes (camelCase, ``parts``,
``TASK_STATE_*``), whatever the agent spoke.

Transports hold no per-task state and share the process's pooled HTTP client, so one
transport object may serve many calls from many threads at once.

Every error that leaves a transport's operation has the secrets the call sent redacted
(:func:`_redacting`): an agent or token endpoint may echo the request in its answer, and
the platform quotes answers in the task's ``error`` and in logs.
"""

from __future__ import annotations

import abc
import email.utils
import functools
import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from a2a.exceptions import A2ACallError, A2AUnsupportedOperation
from a2a.states import normalize_state
from a2a.transports import shapes
from a2a.transports.redaction import redactor
from agent_profiles.interfaces import CallTarget

# A Retry-After longer than this is treated as this (an agent must not park a task forever).
MAX_RETRY_AFTER = 300.0
# Cap on what we keep of a non-A2A body in an error message.


@dataclass
class AgentReply:
    """What an agent answered: a Task (``task``) or a bare Message (``message``).

    Both in A2A 1.0 shapes. ``final`` is set on stream events that close the stream.
    """

    task: dict[str, Any] | None = None
    message: dict[str, Any] | None = None
    retry_after: float | None = None
    # The agent's clock when it answered (its HTTP ``Date``, whole seconds), if it said.
    agent_time: datetime | None = None

    @property
    def state(self) -> str | None:
        if self.task is None:
            return None
        return normalize_state((self.task.get("status") or {}).get("state"))


@dataclass
class TaskPage:
    """One page of an agent's ``ListTasks`` answer (A2A 1.0 Tasks, newest status first)."""

    tasks: list[dict[str, Any]]
    next_page_token: str = ""


def list_params(since: str, page_size: int, page_token: str) -> dict[str, Any]:
    """``ListTasks`` parameters of a listing: the tasks whose status changed at or after
    ``since``, with their artifacts (a COMPLETED needs its output) and no conversation."""
    params: dict[str, Any] = {
        "statusTimestampAfter": since,
        "pageSize": page_size,
        "includeArtifacts": True,
        "historyLength": 0,
    }
    if page_token:
        params["pageToken"] = page_token
    return params


class AgentTransport(abc.ABC):
    """Send, poll, follow up and cancel on one agent interface (binding + version).

    ``send`` with a message naming the agent's ``taskId`` is the follow-up (the answer to
    INPUT_REQUIRED). ``blocking=True`` asks the agent to answer only when the task ends or
    is interrupted (for agents that cannot be polled), waiting up to ``timeout`` seconds.
    """

    binding: str = ""
    version: str = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Each binding's operations are wrapped here, not in each binding, so none can
        # forget it: whatever layer quoted the answer (the status check, the token
        # fetch, a JSON-RPC error, a body that is not JSON), it passes this way out.
        super().__init_subclass__(**kwargs)
        for name in OPERATIONS:
            if name in cls.__dict__:
                setattr(cls, name, _redacting(cls.__dict__[name], stream=name in STREAMS))

    def __init__(self, target: CallTarget, *, output_modes: list[str] | None = None) -> None:
        self.target = target
        # The media types the task's caller accepts (an A2A client's acceptedOutputModes),
        # passed on with each send so that the agent can tailor its answer; None: any.
        self.output_modes = output_modes

    @abc.abstractmethod
    def send(
        self,
        message: dict[str, Any],
        *,
        blocking: bool = False,
        timeout: float | None = None,
        push: dict[str, Any] | None = None,
    ) -> AgentReply:
        """Send a message (new task or follow-up); the agent's Task or bare Message.

        ``push`` (an A2A 1.0 ``TaskPushNotificationConfig``: url, token, authentication)
        asks the agent to push the task's updates to the platform's webhook.
        """

    @abc.abstractmethod
    def get_task(self, task_id: str, *, history: int = 0) -> AgentReply:
        """The agent's current view of its task, with its ``history`` latest messages (a
        poll asks for none: the agent need not send, nor the platform parse, the whole
        conversation every time)."""

    def list_tasks(self, *, since: str, page_size: int, page_token: str = "") -> TaskPage:
        """One page of the agent's tasks whose status changed at or after ``since`` (ISO
        8601, the agent's clock), newest first. A2A 1.0 only: 0.3 has no ``ListTasks``."""
        raise A2AUnsupportedOperation(
            f"Agent '{self.target.agent_id}' speaks A2A {self.target.version}, which has no "
            "ListTasks."
        )

    @abc.abstractmethod
    def cancel(self, task_id: str, *, timeout: float | None = None) -> AgentReply:
        """Ask the agent to cancel its task."""

    def stream(
        self,
        message: dict[str, Any],
        *,
        timeout: float,
        until: float | None = None,
        total: float | None = None,
    ) -> Generator[AgentReply, None, None]:
        """Send over a stream; yields the task as it changes (needs ``streaming``).
        ``timeout`` is the read timeout, and the stream's whole time unless ``total``
        says otherwise: then it ends, or raises a transient error if it gave no event (an
        agent's keep-alives hold no worker past it); ``until`` (a ``time.monotonic()``
        moment): the stream ends at it once it gave an event
        (:func:`a2a.transports.answers.iter_sse`)."""
        raise NotImplementedError

    def subscribe(self, task_id: str, *, timeout: float) -> Generator[AgentReply, None, None]:
        """Follow an existing task over a stream (needs ``streaming``), for at most
        ``timeout`` seconds (also the read timeout), as :meth:`stream`."""
        raise NotImplementedError


# The operations of :class:`AgentTransport` (those returning a generator: ``STREAMS``).
STREAMS = ("stream", "subscribe")
OPERATIONS = ("send", "get_task", "list_tasks", "cancel", *STREAMS)


def _push_secrets(kwargs: dict[str, Any]) -> Iterable[str]:
    """The secrets a send's push config put in the request's body (the webhook's token
    and the credentials the agent is to push with), for an agent that echoes the body."""
    push = kwargs.get("push") or {}
    auth = push.get("authentication") or {}
    return [value for value in (push.get("token"), auth.get("credentials")) if value]


def _redact(exc: A2ACallError, transport: AgentTransport, kwargs: dict[str, Any]) -> None:
    redactor(transport.target, _push_secrets(kwargs)).error(exc)


def _redacting(method: Callable[..., Any], *, stream: bool) -> Callable[..., Any]:
    """``method`` whose :class:`A2ACallError` has the call's secrets redacted (in place,
    so the same error goes on): the work happens only on the failure path, so calls
    that succeed pay one frame."""
    if stream:

        @functools.wraps(method)
        def streaming(
            self: AgentTransport, *args: Any, **kwargs: Any
        ) -> Generator[Any, None, None]:
            try:
                yield from method(self, *args, **kwargs)
            except A2ACallError as exc:
                _redact(exc, self, kwargs)
                raise

        return streaming

    @functools.wraps(method)
    def calling(self: AgentTransport, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except A2ACallError as exc:
            _redact(exc, self, kwargs)
            raise

    return calling


def push_config_03(push: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 ``TaskPushNotificationConfig`` in A2A 0.3's ``PushNotificationConfig`` shape."""
    auth = push.get("authentication") or {}
    config: dict[str, Any] = {"url": push["url"], "token": push.get("token", "")}
    if push.get("id"):
        config["id"] = push["id"]
    if auth.get("scheme"):
        config["authentication"] = {
            "schemes": [auth["scheme"]],
            "credentials": auth.get("credentials", ""),
        }
    return config


def send_configuration(
    *,
    blocking: bool,
    v03: bool,
    push: dict[str, Any] | None,
    rest: bool = False,
    output_modes: list[str] | None = None,
) -> dict[str, Any]:
    """The ``configuration`` of a send: blocking or not, the output modes the caller
    accepts (both versions' ``acceptedOutputModes``) and the push config, if any."""
    modes = {"acceptedOutputModes": list(output_modes)} if output_modes else {}
    if v03:
        config: dict[str, Any] = {"blocking": blocking, **modes}
        if push:
            # A2A 0.3 names the field differently per binding: the JSON-RPC schema's
            # ``pushNotificationConfig``, the proto's ``push_notification`` (JSON
            # ``pushNotification``) on HTTP+JSON, whose parsers drop the other name.
            config["pushNotification" if rest else "pushNotificationConfig"] = push_config_03(push)
        return config
    config = {"returnImmediately": not blocking, **modes}
    if push:
        config["taskPushNotificationConfig"] = push
    return config


def send_params(
    message: dict[str, Any],
    *,
    blocking: bool,
    v03: bool,
    rest: bool,
    push: dict[str, Any] | None = None,
    output_modes: list[str] | None = None,
) -> dict[str, Any]:
    """A send's JSON-RPC params or HTTP+JSON body: the message in the version's shape
    (0.3 spells parts differently on each binding) and the configuration."""
    if v03:
        message = shapes.message_to_03(message, rest=rest)
    configuration = send_configuration(
        blocking=blocking, v03=v03, push=push, rest=rest, output_modes=output_modes
    )
    return {"message": message, "configuration": configuration}


def agent_time(date: str | None) -> datetime | None:
    """An answer's ``Date`` header as an aware datetime (None when missing or invalid)."""
    if not date:
        return None
    try:
        when = email.utils.parsedate_to_datetime(date)
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo is not None else None


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, min(seconds, MAX_RETRY_AFTER))
