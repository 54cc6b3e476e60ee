"""The A2A face's request handler: one method per A2A operation, no wire knowledge.

Both bindings (``rest.py`` for HTTP+JSON, ``jsonrpc.py`` for JSON-RPC) parse a request
into the operation's JSON params and a :class:`CallContext`, call one method here and
render what it returns (a JSON dict, or an async iterator of ``StreamResponse`` dicts).
Methods raise :mod:`a2a.face.errors` exceptions only.
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
from django.utils import timezone
from google.protobuf.json_format import ParseDict, ParseError

from a2a.exceptions import UnknownSkill
from a2a.face import queries, sse
from a2a.face.context import CallContext
from a2a.face.db import db_call
from a2a.face.errors import (
    AgentNotFound,
    ExtendedAgentCardNotConfigured,
    FaceError,
    InvalidParams,
    TaskNotCancelable,
    TaskNotFound,
    Unauthenticated,
    UnsupportedOperation,
)
from a2a.face.serializers import task_json
from a2a.models import Direction, PushNotificationConfig, Task, TaskEvent, TaskMessage
from a2a.states import TaskState
from agent_profiles.models import AgentProfile, AgentStatus, Skill
from platform_site.errors import Conflict, NotFound, PlatformError

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100
STATES_BY_NAME = {s.value: s.value for s in TaskState}


# --- parameter helpers ----------------------------------------------------------------


def _proto_check(params: dict[str, Any], proto_cls: type, label: str) -> None:
    """Validate ``params`` against the A2A proto message shape (unknown fields ignored)."""
    try:
        ParseDict(params, proto_cls(), ignore_unknown_fields=True)
    except (ParseError, TypeError, ValueError) as exc:
        raise InvalidParams(f"Invalid {label}: {exc}") from None


def _opt_int(params: dict[str, Any], name: str, *, low: int, high: int | None = None) -> int | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise InvalidParams(
            f"{name} must be an integer, got {raw!r}", violations=[(name, "not an integer")]
        ) from None
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise InvalidParams(
            f"{name} must be {bound}, got {value}", violations=[(name, f"must be {bound}")]
        )
    return value


def _opt_bool(params: dict[str, Any], name: str) -> bool | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    if isinstance(raw, bool):
        return raw
    if str(raw).lower() in {"true", "1"}:
        return True
    if str(raw).lower() in {"false", "0"}:
        return False
    raise InvalidParams(f"{name} must be true or false, got {raw!r}", violations=[(name, "bool")])


def _opt_timestamp(params: dict[str, Any], name: str) -> datetime | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    text = str(raw).strip()
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidParams(
            f"{name} must be an ISO 8601 timestamp, got {raw!r}",
            violations=[(name, "not an ISO 8601 timestamp")],
        ) from None
    if timezone.is_naive(value):
        value = timezone.make_aware(value, timezone.UTC)
    return value


def _task_id(raw: Any) -> uuid.UUID:
    try:
        return uuid.UUID(str(raw))
    except (TypeError, ValueError):
        raise TaskNotFound(
            f"Task {str(raw)[:100]!r} not found.", metadata={"taskId": str(raw)[:100]}
        ) from None


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


def _service_error(exc: PlatformError) -> FaceError:
    """The A2A error for a domain error raised by the dispatcher's services."""
    if isinstance(exc, Conflict):
        return UnsupportedOperation(exc.message, metadata={"code": exc.code})
    details = exc.details if isinstance(exc.details, dict) else {}
    violations = [(str(k), str(v)) for k, v in details.items()] if details else None
    if isinstance(exc, NotFound):
        return InvalidParams(exc.message, metadata={"code": exc.code}, violations=violations)
    return InvalidParams(exc.message, metadata={"code": exc.code}, violations=violations)


# --- the handler ----------------------------------------------------------------------


class FaceHandler:
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

    # ---- messages ----

    def _choose_skill(self, ctx: CallContext, request: dict[str, Any]) -> tuple[str, str | None]:
        """The skill id (and the agent id on a tenant route) for a new task."""
        message = request["message"]
        skill_id = (request.get("metadata") or {}).get("skillId") or (
            message.get("metadata") or {}
        ).get("skillId")
        if ctx.tenant:
            ids = list(
                Skill.objects.filter(
                    agents__id=ctx.tenant, agents__status=AgentStatus.ACTIVE, is_active=True
                )
                .order_by("id")
                .values_list("id", flat=True)
            )
            if (
                not ids
                and not AgentProfile.objects.filter(
                    pk=ctx.tenant, status=AgentStatus.ACTIVE
                ).exists()
            ):
                raise AgentNotFound(
                    f"No active agent {ctx.tenant!r}.", metadata={"agentId": ctx.tenant}
                )
            if skill_id:
                if skill_id not in ids:
                    raise InvalidParams(
                        f"Agent {ctx.tenant!r} does not offer skill {skill_id!r}; it offers {ids}.",
                        metadata={"skillId": str(skill_id), "skills": ids},
                    )
                return str(skill_id), ctx.tenant
            if settings.A2A_DEFAULT_SKILL in ids:
                return settings.A2A_DEFAULT_SKILL, ctx.tenant
            if len(ids) == 1:
                return ids[0], ctx.tenant
            raise InvalidParams(
                f"Say which skill: set metadata.skillId to one of {ids}.",
                metadata={"skills": ids},
            )
        # The default routes: create_task checks the skill (see _unknown_skill).
        if skill_id or settings.A2A_DEFAULT_SKILL:
            return str(skill_id or settings.A2A_DEFAULT_SKILL), None
        ids = list(
            Skill.objects.filter(is_active=True).order_by("id").values_list("id", flat=True)[:51]
        )
        if len(ids) == 1:
            return ids[0], None
        raise InvalidParams(
            f"Say which skill: set metadata.skillId to one of {ids}." if ids else "No skills.",
            metadata={"skills": ids},
        )

    @staticmethod
    def _unknown_skill(skill_id: str) -> InvalidParams:
        ids = list(Skill.objects.filter(is_active=True).order_by("id").values_list("id", flat=True))
        return InvalidParams(
            f"Unknown skill {skill_id!r}; active skills: {ids}.",
            metadata={"skillId": skill_id, "skills": ids},
        )

    @staticmethod
    def _input_of(message: dict[str, Any]) -> dict[str, Any]:
        """What the platform records as the task's input: the first data part, else text."""
        texts = []
        for part in message.get("parts") or []:
            if isinstance(part, dict) and isinstance(part.get("data"), dict):
                return part["data"]
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        return {"text": "\n".join(texts)} if texts else {}

    def _validate_send(self, params: dict[str, Any]) -> dict[str, Any]:
        from a2a.types import a2a_pb2

        message = params.get("message")
        if not isinstance(message, dict):
            raise InvalidParams("message is required.", violations=[("message", "required")])
        _proto_check(params, a2a_pb2.SendMessageRequest, "SendMessageRequest")
        if not message.get("messageId"):
            raise InvalidParams(
                "message.messageId is required.", violations=[("message.messageId", "required")]
            )
        if not message.get("parts"):
            raise InvalidParams(
                "message.parts must hold at least one part.",
                violations=[("message.parts", "at least one part")],
            )
        if message.get("role") not in ("ROLE_USER", 1):
            raise InvalidParams(
                "message.role must be ROLE_USER.", violations=[("message.role", "ROLE_USER")]
            )
        return message

    def _send_sync(self, ctx: CallContext, params: dict[str, Any]) -> tuple[Task, int | None]:
        """Create the task (or answer an existing one); returns it and, for a follow-up,
        the event sequence number the answer must move past."""
        from a2a import services

        message = params["message"]
        if message.get("taskId"):
            task = self._get_visible(ctx, message["taskId"])
            if message.get("contextId") and message["contextId"] != task.context_id:
                raise InvalidParams(
                    f"contextId {message['contextId']!r} does not match task {task.id}'s "
                    f"context {task.context_id!r}.",
                    metadata={"taskId": str(task.id), "contextId": task.context_id},
                    violations=[("message.contextId", "does not match the task's context")],
                )
            if task.is_terminal:
                raise UnsupportedOperation(
                    f"Task {task.id} is {task.state}, a final state: it accepts no messages.",
                    metadata={"taskId": str(task.id), "state": task.state},
                )
            # Counted before the reply: an interruption the agent reports quickly (even
            # within reply_to_task) is then still newer than the reply's own transition.
            before = TaskEvent.objects.filter(task=task).count()
            try:
                task = services.reply_to_task(task, message=message, by=ctx.user)
            except PlatformError as exc:
                raise _service_error(exc) from None
            task.refresh_from_db()
            return task, before + 1
        skill_id, agent_id = self._choose_skill(ctx, params)
        try:
            task = services.create_task(
                skill_id=skill_id,
                input=self._input_of(message),
                agent_id=agent_id,
                user=ctx.user,
                agent_caller=ctx.agent_caller,
                message=message,
                context_id=message.get("contextId") or None,
                origin="a2a",
                validate_input=False,
            )
        except PlatformError as exc:
            if isinstance(exc, UnknownSkill):
                raise self._unknown_skill(skill_id) from None
            raise _service_error(exc) from None
        return task, None

    def _load_payload(self, task_id: uuid.UUID, history_length: int | None) -> dict[str, Any]:
        task = Task.objects.get(pk=task_id)
        return self._task_payload(task, history_length=history_length)

    def _send_and_attach(
        self, ctx: CallContext, params: dict[str, Any]
    ) -> tuple[Task, int | None, dict[str, Any]]:
        """One database hop: authenticate, validate everything, then create the task (or
        answer one) and attach the push config that came with it."""
        from a2a.face import push as push_service

        ctx.require_caller()
        self._validate_send(params)
        config = params.get("configuration") or {}
        if not isinstance(config, dict):
            raise InvalidParams("configuration must be an object.")
        _opt_int(config, "historyLength", low=0)
        _opt_bool(config, "returnImmediately")
        push = config.get("taskPushNotificationConfig") or config.get("pushNotificationConfig")
        if push is not None:
            if not isinstance(push, dict):
                raise InvalidParams("taskPushNotificationConfig must be an object.")
            push_service.clean_config(push)
        task, since_seq = self._send_sync(ctx, params)
        if push is not None:
            push_service.create_config(task, {**push, "taskId": str(task.id)})
        return task, since_seq, config

    async def send_message(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        def start() -> tuple[Task, int | None, int | None, dict[str, Any] | None]:
            task, since_seq, config = self._send_and_attach(ctx, params)
            history_length = _opt_int(config, "historyLength", low=0)
            if not _opt_bool(config, "returnImmediately"):
                return task, since_seq, history_length, None
            if since_seq is None and task.outbound_message:
                # A new task: its history is the message just relayed (no query needed).
                relayed = TaskMessage(direction=Direction.TO_AGENT, message=task.outbound_message)
                payload = task_json(task, history=[relayed], history_length=history_length)
            else:
                payload = self._task_payload(task, history_length=history_length)
            return task, since_seq, history_length, payload

        task, since_seq, history_length, payload = await db_call(start)()
        if payload is None:
            await sse.wait_until_settled(
                task.id, since_seq=since_seq, seconds=settings.A2A_BLOCKING_TIMEOUT
            )
            payload = await db_call(self._load_payload)(task.id, history_length)
        return {"task": payload}

    async def stream_message(
        self, params: dict[str, Any], ctx: CallContext
    ) -> AsyncIterator[dict[str, Any] | None]:
        """Send, then stream: the Task first, then status/artifact updates to the end."""
        task, _since, _config = await db_call(self._send_and_attach)(ctx, params)
        return sse.task_stream(task.id)

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
