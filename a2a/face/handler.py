"""The A2A face's request handler: one method per A2A operation, no wire knowledge.

Both bindings (``rest.py`` for HTTP+JSON, ``jsonrpc.py`` for JSON-RPC) parse a request
into the operation's JSON params and a :class:`CallContext`, call one method here and
render what it returns (a JSON dict, or an async iterator of ``StreamResponse`` dicts).
Methods raise :mod:`a2a.face.errors` exceptions only.

The message-sending operations live in :mod:`a2a.face.sending` (composed in as
:class:`~a2a.face.sending.SendingMixin`); param parsing lives in :mod:`a2a.face.params`.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Q

from a2a.face import queries, sse
from a2a.face.context import CallContext
from a2a.face.db import db_call
from a2a.face.errors import (
    AgentNotFound,
    ExtendedAgentCardNotConfigured,
    InvalidParams,
    TaskNotCancelable,
    TaskNotFound,
    Unauthenticated,
    UnsupportedOperation,
)
from a2a.face.params import _opt_bool, _opt_int, _opt_timestamp, _proto_check, _task_id
from a2a.face.sending import SendingMixin
from a2a.face.serializers import task_json
from a2a.models import PushNotificationConfig, Task, TaskMessage
from a2a.states import TaskState
from agent_profiles.models import AgentProfile
from platform_site.errors import Conflict

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100
STATES_BY_NAME = {s.value: s.value for s in TaskState}


# --- list cursors ---------------------------------------------------------------------


def _encode_cursor(task: Task) -> str:
    raw = json.dumps([task.state_changed_at.isoformat(), str(task.id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(token: str) -> tuple[datetime, uuid.UUID]:
    try:
        padded = token + "=" * (-len(token) % 4)
        at, task_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        return datetime.fromisoformat(at), uuid.UUID(task_id)
    except (ValueError, TypeError):
        raise InvalidParams(
            "pageToken is not a token this server issued.", violations=[("pageToken", "invalid")]
        ) from None


# --- the handler ----------------------------------------------------------------------


class FaceHandler(SendingMixin):
    """The A2A operations of the platform, one coroutine each."""

    # ---- tasks: reading ----

    def _visible(self, ctx: CallContext) -> Any:
        qs = Task.objects.filter(ctx.owner_q())
        if ctx.tenant:
            qs = qs.filter(agent_id=ctx.tenant)
        return qs

    def _get_visible(self, ctx: CallContext, raw_id: Any) -> Task:
        task_id = _task_id(raw_id)
        task = queries.visible_task(ctx, task_id)
        if task is None:
            raise TaskNotFound(f"Task {task_id} not found.", metadata={"taskId": str(task_id)})
        return task

    def _task_payload(
        self, task: Task, *, history_length: int | None, include_artifacts: bool = True
    ) -> dict[str, Any]:
        history = None
        if history_length != 0:
            history = queries.history(task)
        return task_json(
            task,
            history=history,
            history_length=history_length,
            include_artifacts=include_artifacts,
        )

    async def get_task(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            ctx.require_caller()
            history_length = _opt_int(params, "historyLength", low=0)
            task = self._get_visible(ctx, params.get("id"))
            return self._task_payload(task, history_length=history_length)

        return await db_call(run)()

    async def list_tasks(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            ctx.require_caller()
            page_size = _opt_int(params, "pageSize", low=1, high=MAX_PAGE_SIZE) or DEFAULT_PAGE_SIZE
            history_length = _opt_int(params, "historyLength", low=0)
            include_artifacts = bool(_opt_bool(params, "includeArtifacts"))
            after = _opt_timestamp(params, "statusTimestampAfter")
            status = params.get("status") or None
            if status is not None and status not in STATES_BY_NAME:
                if status != "TASK_STATE_UNSPECIFIED":
                    raise InvalidParams(
                        f"status must be one of {sorted(STATES_BY_NAME)}, got {status!r}",
                        violations=[("status", "unknown task state")],
                    )
                status = None
            context_id = params.get("contextId") or None
            token = params.get("pageToken") or None
            cursor = _decode_cursor(str(token)) if token else None
            qs = self._visible(ctx)
            if ctx.is_anonymous and not context_id:
                # Anonymous callers share ownerless tasks: listing needs a context id.
                qs = qs.none()
            if context_id:
                qs = qs.filter(context_id=context_id)
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
            rows = list(ordered[: page_size + 1])
            more = len(rows) > page_size
            rows = rows[:page_size]
            histories: dict[Any, list[TaskMessage]] = {}
            if history_length and rows:
                for message in TaskMessage.objects.filter(task__in=rows).order_by(
                    "created_at", "id"
                ):
                    histories.setdefault(message.task_id, []).append(message)
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
            task = self._get_visible(ctx, params.get("id"))
            if task.is_terminal:
                raise TaskNotCancelable(
                    f"Task {task.id} is {task.state}, a final state.",
                    metadata={"taskId": str(task.id), "state": task.state},
                )
            from a2a import services

            try:
                task = services.cancel_task(task, by=ctx.user, reason="canceled by the A2A client")
            except Conflict as exc:
                raise TaskNotCancelable(exc.message, metadata={"taskId": str(task.id)}) from None
            task.refresh_from_db()
            return self._task_payload(task, history_length=None)

        return await db_call(run)()

    # ---- tasks: subscribe ----

    async def subscribe(
        self, params: dict[str, Any], ctx: CallContext
    ) -> AsyncIterator[dict[str, Any]]:
        def run() -> Task:
            ctx.require_caller()
            task = self._get_visible(ctx, params.get("id"))
            if task.is_terminal:
                raise UnsupportedOperation(
                    f"Task {task.id} is {task.state}, a final state: nothing to subscribe to.",
                    metadata={"taskId": str(task.id), "state": task.state},
                )
            return task

        task = await db_call(run)()
        return sse.task_stream(task.id)

    # ---- push notification configs ----

    def _push_task(self, ctx: CallContext, raw_id: Any) -> Task:
        return self._get_visible(ctx, raw_id)

    async def create_push_config(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        from a2a.face import push as push_service
        from a2a.types import a2a_pb2

        def run() -> dict[str, Any]:
            ctx.require_caller()
            _proto_check(params, a2a_pb2.TaskPushNotificationConfig, "TaskPushNotificationConfig")
            task = self._push_task(ctx, params.get("taskId"))
            config = push_service.create_config(task, params)
            return push_service.config_json(config)

        return await db_call(run)()

    async def get_push_config(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        from a2a.face import push as push_service

        def run() -> dict[str, Any]:
            ctx.require_caller()
            task = self._push_task(ctx, params.get("taskId"))
            config = PushNotificationConfig.objects.filter(
                task=task, config_id=str(params.get("id") or "")
            ).first()
            if config is None:
                raise TaskNotFound(
                    f"Push notification config {params.get('id')!r} not found on task {task.id}.",
                    metadata={"taskId": str(task.id), "configId": str(params.get("id"))},
                )
            return push_service.config_json(config)

        return await db_call(run)()

    async def list_push_configs(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        from a2a.face import push as push_service

        def run() -> dict[str, Any]:
            ctx.require_caller()
            task = self._push_task(ctx, params.get("taskId"))
            configs = PushNotificationConfig.objects.filter(task=task).order_by("created_at", "id")
            return {"configs": [push_service.config_json(c) for c in configs], "nextPageToken": ""}

        return await db_call(run)()

    async def delete_push_config(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        def run() -> None:
            ctx.require_caller()
            task = self._push_task(ctx, params.get("taskId"))
            # Idempotent: deleting twice has the same effect.
            PushNotificationConfig.objects.filter(
                task=task, config_id=str(params.get("id") or "")
            ).delete()

        await db_call(run)()
        return {}

    # ---- cards ----

    async def get_extended_card(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        if not settings.A2A_EXTENDED_CARD_BEARER_TOKEN:
            raise UnsupportedOperation(
                "This server has no extended agent card (capabilities.extendedAgentCard is false)."
            )
        if not ctx.presents_extended_card_token():
            raise Unauthenticated("The extended agent card needs its bearer token.")
        from a2a import cards

        def run() -> dict[str, Any]:
            if ctx.tenant:
                agent = AgentProfile.objects.filter(pk=ctx.tenant).first()
                if agent is None:
                    raise AgentNotFound(
                        f"No agent {ctx.tenant!r}.", metadata={"agentId": ctx.tenant}
                    )
                return cards.agent_card(agent)
            card = cards.platform_card(extended=True)
            if not card:
                raise ExtendedAgentCardNotConfigured()
            return card

        return await db_call(run)()


handler = FaceHandler()
