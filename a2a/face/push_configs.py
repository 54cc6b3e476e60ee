"""Push notification configs of the face's tasks: validated, stored, served.

A config is what an A2A client sets for its task (``pushNotificationConfigs``, or with
its send): the webhook's URL, which passes the outbound URL guard (without DNS: storing
a config never touches the network), and the token and credentials the POSTs carry as
header values, refused here if they cannot be (never quoted: they are secrets).
Delivery is :mod:`a2a.face.push`'s.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from a2a.face import legacy
from a2a.face.errors import InvalidParams
from a2a.models import Task
from a2a.push_models import PushNotificationConfig, PushProtocol
from agent_profiles.credentials import header_value_problem
from agent_profiles.urlguard import check_url

_SCHEME_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")  # an RFC 9110 token


def _check_header_value(name: str, value: str) -> None:
    if "\r" in value or "\n" in value or "\x00" in value:
        raise InvalidParams(
            f"{name} must not contain CR, LF or NUL characters.",
            violations=[(name, "contains CR/LF")],
        )


def _check_secret_header(name: str, value: str) -> None:
    problem = header_value_problem(value, spaces=True) if value else None
    if problem is not None:
        raise InvalidParams(f"{name} {problem}.", violations=[(name, "not a header value")])


def _check_url(url: str) -> None:
    """Refuse a missing URL here, an unsafe one through the URL guard (without DNS; its
    UnsafeURL is a domain error the face's table turns into INVALID_PARAMS)."""
    if not url:
        raise InvalidParams("url is required.", violations=[("url", "required")])
    check_url(url)


# The longest value each field's column holds (a2a.push_models.PushNotificationConfig).
_MAX_LENGTHS = {
    "url": PushNotificationConfig._meta.get_field("url").max_length,
    "id": PushNotificationConfig._meta.get_field("config_id").max_length,
    "token": PushNotificationConfig._meta.get_field("token").max_length,
    "authentication.scheme": PushNotificationConfig._meta.get_field("auth_scheme").max_length,
}


def _check_length(name: str, value: str) -> None:
    limit = _MAX_LENGTHS[name]
    if limit is not None and len(value) > limit:
        raise InvalidParams(
            f"{name} is too long.", violations=[(name, f"at most {limit} characters")]
        )


def clean_config(params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Validate a ``TaskPushNotificationConfig``; its id ("" for a new one) and fields
    (the protocol version: 0.3 when the 0.3 binding marked the params, else 1.0)."""
    url = str(params.get("url") or "").strip()
    token = str(params.get("token") or "")
    auth = params.get("authentication")
    if auth is not None and not isinstance(auth, dict):
        raise InvalidParams("authentication must be an object.")
    scheme = str((auth or {}).get("scheme") or "").strip()
    credentials = str((auth or {}).get("credentials") or "")
    if credentials and not scheme:
        # AuthenticationInfo.scheme is REQUIRED: credentials without one were stored and
        # then left out of every POST (no scheme, no Authorization header), silently. An
        # empty ``authentication`` asks for nothing, as a 0.3 client's ``schemes: []``.
        raise InvalidParams(
            "authentication.scheme is required (e.g. Bearer).",
            violations=[("authentication.scheme", "required")],
        )
    _check_header_value("authentication.scheme", scheme)
    # Sent as header values: refused here, never quoted. What h11 refused at every POST
    # (a trailing space, a form feed) was recorded and logged with its whole value, and a
    # non-ASCII one left the delivery pending for good.
    _check_secret_header("token", token)
    _check_secret_header("authentication.credentials", credentials)
    if scheme and not _SCHEME_RE.fullmatch(scheme):
        raise InvalidParams(
            "authentication.scheme must be one word (e.g. Bearer).",
            violations=[("authentication.scheme", "not an HTTP auth scheme")],
        )
    config_id = str(params.get("id") or "").strip()
    _check_header_value("id", config_id)
    # The columns' lengths: PostgreSQL refuses a longer value (a 500), SQLite stores it.
    for name, value in (
        ("url", url),
        ("id", config_id),
        ("token", token),
        ("authentication.scheme", scheme),
    ):
        _check_length(name, value)
    _check_url(url)
    fields = {
        "url": url,
        "token": token,
        "auth_scheme": scheme,
        "auth_credentials": credentials,
        "enabled": True,
        "consecutive_failures": 0,
        "disabled_reason": "",
        # Replacing a config (same id) takes the version of the method that replaced it.
        "protocol_version": (
            PushProtocol.V0_3
            if params.get(legacy.PUSH_VERSION_KEY) == PushProtocol.V0_3
            else PushProtocol.V1_0
        ),
    }
    return config_id, fields


def create_config(task: Task, params: dict[str, Any]) -> PushNotificationConfig:
    """Store (or replace, for a known ``id``) a config for ``task`` after validating it."""
    config_id, fields = clean_config(params)
    with transaction.atomic():
        # Locks the task row (two concurrent creates cannot both pass the cap) and marks it
        # watched before the config exists: a transition that commits first returns
        # watched=False and its event predates the config; one after waits and sees it.
        Task.watch(task.pk)
        if config_id:
            existing = PushNotificationConfig.objects.filter(task=task, config_id=config_id).first()
            if existing is not None:
                for name, value in fields.items():
                    setattr(existing, name, value)
                existing.save()
                return existing
        cap = settings.A2A_MAX_PUSH_CONFIGS_PER_TASK
        if PushNotificationConfig.objects.filter(task=task).count() >= cap:
            raise InvalidParams(
                f"A task holds at most {cap} push notification configs.",
                metadata={"limit": cap},
            )
        try:
            kwargs = {"config_id": config_id} if config_id else {}
            return PushNotificationConfig.objects.create(task=task, **kwargs, **fields)
        except IntegrityError:
            raise InvalidParams(f"Push notification config {config_id!r} exists.") from None


def config_json(config: PushNotificationConfig) -> dict[str, Any]:
    """The A2A ``TaskPushNotificationConfig`` of a stored config."""
    out: dict[str, Any] = {"id": config.config_id, "taskId": str(config.task_id), "url": config.url}
    if config.token:
        out["token"] = config.token
    if config.auth_scheme or config.auth_credentials:
        out["authentication"] = {"scheme": config.auth_scheme}
        if config.auth_credentials:
            out["authentication"]["credentials"] = config.auth_credentials
    return out
