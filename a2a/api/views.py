"""REST API of platform tasks: thin views over :mod:`a2a.services`.

Only platform users (session or ``Bearer usr_…`` token) may use it; agents' API keys are
refused. A user sees only the tasks they created; staff see all.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from a2a import services
from a2a.api.serializers import (
    CancelSerializer,
    CreateTaskSerializer,
    ReplySerializer,
    TaskSerializer,
)
from a2a.models import Task
from a2a.states import normalize_state
from agent_profiles.authentication import AgentPrincipal
from platform_site.errors import ValidationFailed


class IsPlatformUser(BasePermission):
    """An authenticated Django user; an agent's API key is not enough."""

    message = "The tasks API is for platform users; an agent's API key cannot use it."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and not isinstance(user, AgentPrincipal))


def visible_tasks(user: Any) -> QuerySet[Task]:
    """The tasks ``user`` may see: all for staff, else their own."""
    tasks = Task.objects.all()
    return tasks if user.is_staff else tasks.filter(created_by=user)


class TaskListView(generics.ListAPIView):
    """``GET /api/tasks`` (filters: state, skillId, agentId; paginated) and ``POST``."""

    serializer_class = TaskSerializer
    permission_classes = [IsPlatformUser]

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
        body = CreateTaskSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        task = services.create_task(
            skill_id=data["skillId"],
            input=data.get("input"),
            agent_id=data.get("agentId") or None,
            user=request.user,
            idempotency_key=data.get("idempotencyKey", ""),
        )
        created = getattr(task, "created", True)
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(TaskSerializer(task).data, status=code)


class TaskDetailView(generics.RetrieveAPIView):
    """``GET /api/tasks/{id}``."""

    serializer_class = TaskSerializer
    permission_classes = [IsPlatformUser]

    def get_queryset(self) -> QuerySet[Task]:
        return visible_tasks(self.request.user)


class _TaskAction(APIView):
    permission_classes = [IsPlatformUser]

    def task(self, pk: Any) -> Task:
        return generics.get_object_or_404(
            visible_tasks(self.request.user).select_related("skill", "agent"), pk=pk
        )


class TaskReplyView(_TaskAction):
    """``POST /api/tasks/{id}/reply``: answer an INPUT_REQUIRED / AUTH_REQUIRED task."""

    @extend_schema(request=ReplySerializer, responses={200: TaskSerializer})
    def post(self, request: Request, pk: Any) -> Response:
        task = self.task(pk)
        body = ReplySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        services.reply_to_task(
            task,
            text=body.validated_data.get("text"),
            data=body.validated_data.get("data"),
            by=request.user,
        )
        return Response(TaskSerializer(task).data)


class TaskCancelView(_TaskAction):
    """``POST /api/tasks/{id}/cancel``: cancel an unfinished task (the agent is told)."""

    @extend_schema(request=CancelSerializer, responses={200: TaskSerializer})
    def post(self, request: Request, pk: Any) -> Response:
        task = self.task(pk)
        body = CancelSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        services.cancel_task(task, by=request.user, reason=body.validated_data.get("reason", ""))
        return Response(TaskSerializer(task).data)


class TaskRetryView(_TaskAction):
    """``POST /api/tasks/{id}/retry``: send a FAILED or REJECTED task again."""

    @extend_schema(request=None, responses={200: TaskSerializer})
    def post(self, request: Request, pk: Any) -> Response:
        task = self.task(pk)
        services.retry_task(task, by=request.user)
        return Response(TaskSerializer(task).data)
