"""REST API of platform tasks: thin views over the app's business rules (:mod:`a2a.services`).

Only platform users (session or ``Bearer usr_…`` token) may use it; agents' API keys are
refused. A user sees and acts on the tasks they created. Other users' tasks take Django's
permissions, as in the admin: a staff user holding *view task* (or *change task*) sees them,
and acting on one (reply, cancel, retry, reassign) takes *change task*. Superusers hold every
permission.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, generics, status
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from a2a import batch, creation, reassign, rows, services
from a2a.api.serializers import (
    BatchCreateSerializer,
    BatchResponseSerializer,
    CancelSerializer,
    CreateTaskSerializer,
    ReassignSerializer,
    ReplySerializer,
    TaskSerializer,
    read_create_body,
    task_json,
)
from a2a.models import Task
from a2a.states import normalize_state
from agent_profiles.authentication import AgentPrincipal
from platform_site.errors import Forbidden, PlatformError, ValidationFailed, exception_handler
from platform_site.pagination import NewestFirstPagination
from platform_site.parsers import BatchJSONParser, refuse_bad_text


class IsPlatformUser(BasePermission):
    """An authenticated Django user; an agent's API key is not enough."""

    message = "The tasks API is for platform users; an agent's API key cannot use it."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and not isinstance(user, AgentPrincipal))


# The admin's rule (ModelAdmin.has_view_or_change_permission): a helpdesk account that
# is staff to manage users must not read or steer everyone's tasks through the API.
VIEW_TASKS = ("a2a.view_task", "a2a.change_task")
CHANGE_TASKS = "a2a.change_task"


def object_body(request: Request) -> dict[str, Any]:
    """The body of a task action: a JSON object, or ``{}`` for an empty body.

    ``request.data or {}`` read ``[]``, ``0``, ``false``, ``""`` and ``null`` as no body, so
    cancel and reassign acted on a body the schema calls invalid. DRF gives ``{}`` (or an
    empty QueryDict, a dict too) only for an empty body.
    """
    body = request.data
    if isinstance(body, dict):
        return body
    kind = "null" if body is None else type(body).__name__
    raise ValidationFailed(
        f"The body must be a JSON object (or empty); got {kind}. Nothing was done.",
        {"body": "a JSON object is required"},
    )


def sees_all_tasks(user: Any) -> bool:
    """Whether ``user`` may see other users' tasks: staff who may view or change tasks."""
    return bool(user.is_staff) and any(user.has_perm(perm) for perm in VIEW_TASKS)


def visible_tasks(user: Any) -> QuerySet[Task]:
    """The tasks ``user`` may see: all for :func:`sees_all_tasks`, else their own."""
    tasks = Task.objects.all()
    return tasks if sees_all_tasks(user) else tasks.filter(created_by=user)


def can_see(user: Any, task: Task) -> bool:
    """:func:`visible_tasks`'s rule for one task already read."""
    # Own task first: the common poll needs no permission query.
    return task.created_by_id == user.pk or sees_all_tasks(user)


class TaskListView(generics.ListAPIView):
    """``GET /api/tasks`` (filters: state, skillId, agentId; paginated) and ``POST``."""

    serializer_class = TaskSerializer
    permission_classes = [IsPlatformUser]
    # Keyset cursors in next/previous: offsets repeat and skip tasks created while a
    # client pages (newest first); limit and offset are still taken.
    pagination_class = NewestFirstPagination

    def get_queryset(self) -> QuerySet[Task]:
        tasks = visible_tasks(self.request.user).order_by("-created_at", "-id")
        params = self.request.query_params
        if params.get("state"):
            state = normalize_state(params["state"])
            if state is None:
                raise ValidationFailed(
                    f"Unknown state '{params['state']}'.", {"state": params["state"]}
                )
            tasks = tasks.filter(state=state)
        if params.get("skillId"):
            tasks = tasks.filter(skill_id=params["skillId"])
        if params.get("agentId"):
            tasks = tasks.filter(agent_id=params["agentId"])
        return tasks

    @extend_schema(
        parameters=[
            OpenApiParameter("state", str, description="A task state, e.g. TASK_STATE_WORKING"),
            OpenApiParameter("skillId", str),
            OpenApiParameter("agentId", str),
        ]
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request=CreateTaskSerializer,
        responses={201: TaskSerializer, 200: TaskSerializer},
        description="201 for a new task; 200 with the earlier task when idempotencyKey "
        "repeats a request of the same user.",
    )
    def post(self, request: Request) -> Response:
        data = read_create_body(request.data)
        task = creation.create_task(
            skill_id=data["skillId"],
            input=data.get("input"),
            agent_id=data.get("agentId") or None,
            user=request.user,
            idempotency_key=data.get("idempotencyKey", ""),
        )
        created = getattr(task, "created", True)
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(task_json(task), status=code)


def _task_request(body: Any, index: int) -> batch.TaskRequest:
    """One batch item, checked like the body of ``POST /api/tasks``."""
    if not isinstance(body, dict):
        raise exceptions.ValidationError(
            {"non_field_errors": ["An item must be a JSON object: the body of POST /api/tasks."]}
        )
    refuse_bad_text(body, f"tasks[{index}]")  # BatchJSONParser left the items to us
    data = read_create_body(body)
    return batch.TaskRequest(
        skill_id=data["skillId"],
        input=data.get("input") or {},
        agent_id=data.get("agentId") or None,
        idempotency_key=data.get("idempotencyKey", ""),
    )


def _refusal(exc: Exception) -> dict[str, Any]:
    """The result for a refused item: the status and error ``POST /api/tasks`` would give."""
    response = exception_handler(exc, {})
    if response is None:  # not an API error (a bug): let it surface
        raise exc
    return {"status": response.status_code, "error": response.data["error"]}


class TaskBatchView(APIView):
    """``POST /api/tasks:batch``: create many tasks in one request."""

    permission_classes = [IsPlatformUser]
    parser_classes = [BatchJSONParser]

    @extend_schema(
        operation_id="tasks_batch_create",
        tags=["tasks"],
        request=BatchCreateSerializer,
        responses={
            200: BatchResponseSerializer,
            400: OpenApiResponse(
                description='Not `{"tasks": [...]}`, or more than `TASKS_BATCH_MAX` items: '
                '`{"error": {"code", "message", "details"}}`, nothing created.'
            ),
        },
        description="Each item is the body of `POST /api/tasks` and gets the answer that "
        "request would get, in the order given: `201` with the new task, `200` with the "
        "earlier task when its `idempotencyKey` repeats one of the caller's (or an earlier "
        "item's of the same batch), or a 4xx with the error. A refused item writes nothing; "
        "the others are created. At most `TASKS_BATCH_MAX` items (default 100).",
        examples=[
            OpenApiExample(
                "Two tasks, one refused",
                request_only=True,
                value={
                    "tasks": [
                        {"skillId": "ce-review", "input": {"product": "lamp"}},
                        {"skillId": "no-such-skill", "input": {}},
                    ]
                },
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        body = request.data
        items = body.get("tasks") if isinstance(body, dict) else None
        if not isinstance(items, list):
            raise ValidationFailed(
                'The body must be {"tasks": [...]}: a list of POST /api/tasks bodies.',
                {"tasks": "a list is required"},
            )
        limit = settings.TASKS_BATCH_MAX
        if len(items) > limit:
            raise ValidationFailed(
                f"A batch holds at most {limit} tasks (TASKS_BATCH_MAX); this one has "
                f"{len(items)}. Split it.",
                {"tasks": f"at most {limit} items", "count": len(items)},
            )
        results: list[dict[str, Any] | None] = [None] * len(items)
        requests, positions = [], []
        for index, item in enumerate(items):
            try:
                requests.append(_task_request(item, index))
                positions.append(index)
            except (PlatformError, exceptions.APIException) as exc:
                results[index] = _refusal(exc)
        outcomes = batch.create_tasks(requests, user=request.user)
        for index, outcome in zip(positions, outcomes, strict=True):
            if outcome.error is not None:
                results[index] = _refusal(outcome.error)
            else:
                code = status.HTTP_201_CREATED if outcome.created else status.HTTP_200_OK
                results[index] = {"status": code, "task": TaskSerializer(outcome.task).data}
        return Response({"results": results})


class TaskDetailView(generics.RetrieveAPIView):
    """``GET /api/tasks/{id}``."""

    serializer_class = TaskSerializer
    permission_classes = [IsPlatformUser]

    def get_queryset(self) -> QuerySet[Task]:
        return visible_tasks(self.request.user)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # The read clients poll: the task by id with the compiled read, then the check
        # visible_tasks makes (the ORM compiled that filtered get anew every time).
        task = rows.task(kwargs["pk"])
        if task is None or not can_see(request.user, task):
            raise Http404("No Task matches the given query.")
        return Response(task_json(task))


class _TaskAction(APIView):
    permission_classes = [IsPlatformUser]

    def task(self, pk: Any) -> Task:
        """The task to act on: 404 if the caller cannot see it, 403 if they may only read it
        (the admin offers such a user no action and refuses one posted by hand)."""
        user = self.request.user
        task = generics.get_object_or_404(
            visible_tasks(user).select_related("skill", "agent"), pk=pk
        )
        if task.created_by_id != user.pk and not user.has_perm(CHANGE_TASKS):
            raise Forbidden(
                f"You may read task {task.pk} but not change it: acting on another user's "
                "task takes the permission to change tasks (a2a.change_task).",
                {"taskId": str(task.pk)},
            )
        return task


class TaskReplyView(_TaskAction):
    """``POST /api/tasks/{id}/reply``: answer an INPUT_REQUIRED / AUTH_REQUIRED task."""

    @extend_schema(request=ReplySerializer, responses={200: TaskSerializer})
    def post(self, request: Request, pk: Any) -> Response:
        task = self.task(pk)
        body = ReplySerializer(data=object_body(request))
        body.is_valid(raise_exception=True)
        services.reply_to_task(
            task,
            text=body.validated_data.get("text"),
            data=body.validated_data.get("data"),
            by=request.user,
            question_id=body.validated_data.get("questionId"),
        )
        return Response(TaskSerializer(task).data)


class TaskCancelView(_TaskAction):
    """``POST /api/tasks/{id}/cancel``: cancel an unfinished task (the agent is told)."""

    @extend_schema(request=CancelSerializer, responses={200: TaskSerializer})
    def post(self, request: Request, pk: Any) -> Response:
        task = self.task(pk)
        body = CancelSerializer(data=object_body(request))
        body.is_valid(raise_exception=True)
        services.cancel_task(task, by=request.user, reason=body.validated_data.get("reason", ""))
        return Response(TaskSerializer(task).data)


class TaskRetryView(_TaskAction):
    """``POST /api/tasks/{id}/retry``: send a FAILED or REJECTED task again."""

    @extend_schema(request=None, responses={200: TaskSerializer})
    def post(self, request: Request, pk: Any) -> Response:
        task = self.task(pk)
        object_body(request)  # none is needed, but a body that is not an object is an error
        services.retry_task(task, by=request.user)
        return Response(TaskSerializer(task).data)


class TaskReassignView(_TaskAction):
    """``POST /api/tasks/{id}/reassign`` ``{"agentId"?}``: give a waiting, offline or failed
    task to another active agent of its skill (without ``agentId`` the matcher picks)."""

    @extend_schema(request=ReassignSerializer, responses={200: TaskSerializer})
    def post(self, request: Request, pk: Any) -> Response:
        task = self.task(pk)
        body = ReassignSerializer(data=object_body(request))
        body.is_valid(raise_exception=True)
        agent_id = body.validated_data.get("agentId") or None
        reassign.reassign_task(task, agent_id=agent_id, by=request.user)
        return Response(TaskSerializer(task).data)
