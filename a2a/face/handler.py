"""The A2A face's request handler: one coroutine per A2A operation, no wire knowledge.

Both bindings (``rest.py`` for HTTP+JSON, ``jsonrpc.py`` for JSON-RPC 1.0 and 0.3) read a
request into the operation's canonical params (:mod:`a2a.face.protojson`) and a
:class:`CallContext`, call one operation here and render what it returns (a JSON dict, or
an async iterator of ``StreamResponse`` dicts). Operations raise the face's protocol errors
or let the services' domain errors through; :mod:`a2a.face.errors` maps both. Sending lives
in :mod:`a2a.face.sending`.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db.models import Q

from a2a import services
from a2a.face import hybrid, legacy, push_configs, queries, sending, sse
from a2a.face.context import LEGACY_VERSION, CallContext, CallerWatch
from a2a.face.db import db_call
from a2a.face.errors import (
    ExtendedAgentCardNotConfigured,
    InvalidParams,
    TaskNotCancelable,
    TaskNotFound,
    Unauthenticated,
    UnsupportedOperation,
)
from a2a.face.ids import caller_tag, namespaced, toward_agent
from a2a.face.params import opt_bool, opt_int, opt_str, opt_timestamp, required_str
from a2a.face.serializers import task_json
from a2a.face.stream_slots import Slot, stream_slots
from a2a.face.visibility import (
    known_tenant,
    task_payload,
    tenant_agent,
    visible_task,
    visible_tasks,
)
from a2a.models import Task
from a2a.push_models import PushNotificationConfig
from a2a.states import TaskState

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100
STATES_BY_NAME = {s.value: s.value for s in TaskState}


# --- list cursors ---------------------------------------------------------------------


def _encode_cursor(task: Task) -> str:
    raw = json.dumps([task.state_changed_at.isoformat(), str(task.id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# The longest page token this server issues is about 110 characters.
MAX_TOKEN_LENGTH = 256


def _token_json(token: str) -> Any:
    """What a page token holds (ValueError for one this server cannot have issued): a
    long one is refused before it is decoded, as a few kilobytes of ``[`` made the JSON
    parser recurse out of the stack (a 500)."""
    if len(token) > MAX_TOKEN_LENGTH:
        raise ValueError("too long")
    padded = token + "=" * (-len(token) % 4)
    return json.loads(base64.urlsafe_b64decode(padded.encode()))


def _decode_cursor(token: str) -> tuple[datetime, uuid.UUID]:
    """The ``(time, id)`` a ListTasks token stands for; INVALID_PARAMS for any token this
    server did not issue. A forged pair of the wrong types, or a time whose UTC value is
    before year 1 or after 9999 (the database query overflowed on it), was a 500."""
    try:
        at, task_id = _token_json(token)
        if type(at) is not str or type(task_id) is not str:
            raise ValueError(token)
        moment = datetime.fromisoformat(at)
        if moment.tzinfo is None:  # we issue aware times only
            raise ValueError(token)
        return moment.astimezone(UTC), uuid.UUID(task_id)
    except (ValueError, TypeError, OverflowError):
        raise InvalidParams(
            "pageToken is not a token this server issued.", violations=[("pageToken", "invalid")]
        ) from None


def _encode_config_cursor(last_pk: int) -> str:
    return base64.urlsafe_b64encode(json.dumps(["config", last_pk]).encode()).decode().rstrip("=")


def _decode_config_cursor(token: str) -> int:
    try:
        kind, last_pk = _token_json(token)
        if kind != "config" or type(last_pk) is not int or not 0 <= last_pk < 2**63:
            raise ValueError(token)
        return last_pk
    except (ValueError, TypeError):
        raise InvalidParams(
            "pageToken is not a token this server issued.", violations=[("pageToken", "invalid")]
        ) from None


def _list_status(params: dict[str, Any]) -> str | None:
    status = opt_str(params, "status") or None
    if status is None or status == "TASK_STATE_UNSPECIFIED":
        return None
    if status not in STATES_BY_NAME:
        raise InvalidParams(
            f"status must be one of {sorted(STATES_BY_NAME)}.",
            violations=[("status", "unknown task state")],
        )
    return status


# --- streams --------------------------------------------------------------------------


async def while_a_caller(
    stream: AsyncIterator[dict[str, Any] | None], ctx: CallContext
) -> AsyncIterator[dict[str, Any] | None]:
    """``stream``'s events while its caller keeps access: before each one (a quiet stream
    yields a keep-alive every ``A2A_STREAM_RECHECK``, so a waiting one is checked too) the
    caller is re-checked (:class:`~a2a.face.context.CallerWatch`); once it lost access,
    :class:`Unauthenticated` ends the stream, which the binding sends as its last, in-band
    error event. The task stream is closed however this ends (its subscription goes, its
    stream slot is given back)."""
    watch = CallerWatch(ctx)
    try:
        async for item in stream:
            await watch.check()
            yield item
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


# --- the handler ----------------------------------------------------------------------


class FaceHandler:
    """The A2A operations of the platform, one coroutine each."""

    send_message = staticmethod(sending.send_message)

    async def stream_message(
        self, params: dict[str, Any], ctx: CallContext
    ) -> AsyncIterator[dict[str, Any] | None]:
        """SendStreamingMessage (:func:`a2a.face.sending.stream_message`), ended should
        its caller lose access while it runs."""
        return while_a_caller(await sending.stream_message(params, ctx), ctx)

    # ---- tasks: reading ----

    async def get_task(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            ctx.require_caller()
            history_length = opt_int(params, "historyLength", low=0)
            task = visible_task(ctx, required_str(params, "id"))
            return hybrid.mark(params, task, task_payload(task, history_length=history_length))

        return await db_call(run)()

    async def list_tasks(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            ctx.require_caller()
            page_size = opt_int(params, "pageSize", low=1, high=MAX_PAGE_SIZE) or DEFAULT_PAGE_SIZE
            history_length = opt_int(params, "historyLength", low=0)
            include_artifacts = bool(opt_bool(params, "includeArtifacts"))
            after = opt_timestamp(params, "statusTimestampAfter")
            status = _list_status(params)
            context_id = opt_str(params, "contextId")
            token = opt_str(params, "pageToken")
            cursor = _decode_cursor(token) if token else None
            if ctx.tenant:
                known_tenant(ctx.tenant)
            qs = visible_tasks(ctx)
            if ctx.is_anonymous and not context_id:
                # Anonymous callers share ownerless tasks: listing needs a context id.
                qs = qs.none()
            if context_id:
                # The caller's context id, as stored (in the caller's namespace) or as
                # given (tasks created on the REST API: a UUID). A value of the stored
                # shape names a task shown with another contextId (its tail).
                stored = toward_agent(caller_tag(ctx), context_id)
                given = [] if namespaced(context_id) else [context_id]
                qs = qs.filter(context_id__in=[stored, *given])
            if status:
                qs = qs.filter(state=status)
            if after is not None:
                qs = qs.filter(state_changed_at__gte=after)
            total = qs.count()
            ordered = qs.order_by("-state_changed_at", "-id")
            if cursor is not None:
                at, last_id = cursor
                ordered = ordered.filter(
                    Q(state_changed_at__lt=at) | Q(state_changed_at=at, id__lt=last_id)
                )
            # Unread what a listed task never shows (artifacts too, unless asked for): a
            # page of tasks with megabytes of artifacts each loaded them all.
            unshown = ("input", "output", "outbound_message")
            if not include_artifacts:
                unshown += ("artifacts",)
            rows = list(ordered.defer(*unshown)[: page_size + 1])
            more = len(rows) > page_size
            rows = rows[:page_size]
            histories = queries.histories([t.id for t in rows], history_length or 0)
            tasks = [
                task_json(
                    t,
                    history=histories.get(t.id, []) if history_length else None,
                    history_length=history_length,
                    include_artifacts=include_artifacts,
                )
                for t in rows
            ]
            if include_artifacts:
                for t in tasks:
                    t.setdefault("artifacts", [])
            return {
                "tasks": tasks,
                "nextPageToken": _encode_cursor(rows[-1]) if more else "",
                "pageSize": page_size,
                "totalSize": total,
            }

        return await db_call(run)()

    # ---- tasks: cancel ----

    async def cancel_task(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            ctx.require_caller()
            task = visible_task(ctx, required_str(params, "id"))
            if task.is_terminal:
                raise TaskNotCancelable(
                    f"Task {task.id} is {task.state}, a final state.",
                    metadata={"taskId": str(task.id), "state": task.state},
                )
            task = services.cancel_task(task, by=ctx.user, reason="canceled by the A2A client")
            task.refresh_from_db()
            return hybrid.mark(params, task, task_payload(task, history_length=None))

        return await db_call(run)()

    # ---- tasks: subscribe ----

    async def subscribe(
        self, params: dict[str, Any], ctx: CallContext
    ) -> AsyncIterator[dict[str, Any] | None]:
        def run() -> tuple[Task, Slot]:
            ctx.require_caller()
            task = visible_task(ctx, required_str(params, "id"))
            if task.is_terminal:
                raise UnsupportedOperation(
                    f"Task {task.id} is {task.state}, a final state: nothing to subscribe to.",
                    metadata={"taskId": str(task.id), "state": task.state},
                )
            return task, stream_slots.take(ctx)

        task, slot = await db_call(run)()
        return while_a_caller(sse.task_stream(task.id, watched=task.watched, slot=slot), ctx)

    # ---- push notification configs ----

    async def create_push_config(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            ctx.require_caller()
            task = visible_task(ctx, required_str(params, "taskId"))
            return push_configs.config_json(push_configs.create_config(task, params))

        return await db_call(run)()

    async def get_push_config(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            ctx.require_caller()
            task = visible_task(ctx, required_str(params, "taskId"))
            # 0.3 clients may omit the config id (0.3's is optional): then the task's
            # first config. 1.0's is REQUIRED.
            legacy_call = params.get(legacy.PUSH_VERSION_KEY) == LEGACY_VERSION
            config_id = opt_str(params, "id") if legacy_call else required_str(params, "id")
            configs = PushNotificationConfig.objects.filter(task=task)
            config = (
                configs.filter(config_id=config_id)
                if config_id
                else configs.order_by("created_at", "id")
            ).first()
            if config is None:
                raise TaskNotFound(
                    f"Push notification config {config_id!r} not found on task {task.id}.",
                    metadata={"taskId": str(task.id), "configId": config_id[:100]},
                )
            return push_configs.config_json(config)

        return await db_call(run)()

    async def list_push_configs(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            ctx.require_caller()
            task = visible_task(ctx, required_str(params, "taskId"))
            # A task holds few configs (A2A_MAX_PUSH_CONFIGS_PER_TASK): without a pageSize
            # they all come in one page; with one, pages follow the creation order.
            page_size = opt_int(params, "pageSize", low=1, high=MAX_PAGE_SIZE) or MAX_PAGE_SIZE
            token = opt_str(params, "pageToken")
            configs = PushNotificationConfig.objects.filter(task=task).order_by("id")
            if token:
                configs = configs.filter(id__gt=_decode_config_cursor(token))
            rows = list(configs[: page_size + 1])
            more = len(rows) > page_size
            rows = rows[:page_size]
            return {
                "configs": [push_configs.config_json(c) for c in rows],
                "nextPageToken": _encode_config_cursor(rows[-1].pk) if more else "",
            }

        return await db_call(run)()

    async def delete_push_config(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        def run() -> None:
            ctx.require_caller()
            task = visible_task(ctx, required_str(params, "taskId"))
            config_id = required_str(params, "id")
            # Idempotent: deleting twice has the same effect.
            PushNotificationConfig.objects.filter(task=task, config_id=config_id).delete()

        await db_call(run)()
        return {}

    # ---- cards ----

    async def get_extended_card(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        if not settings.A2A_EXTENDED_CARD_BEARER_TOKEN:
            raise UnsupportedOperation(
                "This server has no extended agent card (capabilities.extendedAgentCard is false)."
            )
        from a2a import cards

        def run() -> dict[str, Any]:
            # Any caller authenticated with the card's own scheme (a user's token, an
            # agent's key; A2A 1.0, 13.3), or a directory given the extended card's token:
            # SDK clients read the extended card as soon as the public one offers it.
            if not ctx.presents_extended_card_token():
                ctx.authenticate()
                if ctx.principal is None:
                    raise Unauthenticated(
                        "The extended agent card is for authenticated callers: a platform "
                        "API token, an agent's API key or the extended card's own token."
                    )
            if ctx.tenant:
                return cards.agent_card(tenant_agent(ctx.tenant))
            card = cards.platform_card(extended=True)
            if not card:
                raise ExtendedAgentCardNotConfigured()
            return card

        return await db_call(run)()


handler = FaceHandler()
