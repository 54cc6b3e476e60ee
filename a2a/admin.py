"""Admin for platform tasks: follow them, read the conversation, answer, cancel, retry."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince

from a2a import services
from a2a.models import Task, TaskEvent, TaskMessage
from a2a.states import INTERRUPTED_STATES
from a2a.wire import message_text
from platform_site.errors import PlatformError


def pretty(value: Any) -> str:
    """JSON in a <pre> block (escaped)."""
    if value in (None, "", [], {}):
        return "—"
    return format_html(
        '<pre style="white-space: pre-wrap; margin: 0">{}</pre>',
        json.dumps(value, indent=2, ensure_ascii=False, default=str),
    )


class TaskEventInline(admin.TabularInline):
    """The transition history: when, from, to, why."""

    model = TaskEvent
    extra = 0
    can_delete = False
    fields = ["at", "from_state", "to_state", "reason"]
    readonly_fields = fields
    verbose_name_plural = "Transition history"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TaskMessageInline(admin.TabularInline):
    """The conversation with the agent, both ways."""

    model = TaskMessage
    extra = 0
    can_delete = False
    fields = ["created_at", "direction", "text", "content"]
    readonly_fields = fields
    verbose_name_plural = "Conversation"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="text")
    def text(self, obj: TaskMessage) -> str:
        return message_text(obj.message) or "—"

    @admin.display(description="message")
    def content(self, obj: TaskMessage) -> str:
        return pretty(obj.message)


class ReplyForm(forms.Form):
    """The answer to an agent's question: text, JSON data, or both."""

    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 4, "cols": 80}), required=False)
    data = forms.JSONField(
        required=False,
        help_text='Optional JSON object sent as a data part, e.g. {"market": "EU"}.',
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80}),
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if not cleaned.get("text") and cleaned.get("data") in (None, ""):
            raise forms.ValidationError("Give text, data or both.")
        if cleaned.get("data") not in (None, "") and not isinstance(cleaned["data"], dict):
            raise forms.ValidationError("data must be a JSON object.")
        return cleaned


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    """Tasks: list by state/skill/agent; detail with conversation, history, errors."""

    list_display = [
        "short_id",
        "state_badge",
        "skill",
        "agent",
        "age",
        "attempts",
        "transport",
        "origin",
    ]
    list_filter = ["state", "transport", "origin", "skill", "agent"]
    search_fields = ["id", "remote_task_id", "context_id", "idempotency_key"]
    list_select_related = ["skill", "agent"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    actions = ["cancel_selected", "retry_selected"]
    inlines = [TaskMessageInline, TaskEventInline]
    fieldsets = [
        (None, {"fields": ["id", "state", "skill", "agent", "reply_link", "created_by"]}),
        ("Agent question", {"fields": ["question_text", "question_json"]}),
        ("Input and output", {"fields": ["input_json", "output_json", "artifacts_json"]}),
        ("Errors", {"fields": ["error_json", "validation_errors"]}),
        (
            "Dispatch",
            {
                "fields": [
                    "transport",
                    "attempts",
                    "remote_task_id",
                    "remote_context_id",
                    "context_id",
                    "next_action",
                    "next_poll_at",
                    "poll_interval",
                    "lease_until",
                    "deadline_at",
                    "idempotency_key",
                    "origin",
                ]
            },
        ),
        ("Matching and fallbacks", {"fields": ["match_json", "fallbacks_json", "metadata_json"]}),
        ("Times", {"fields": ["created_at", "state_changed_at", "updated_at"]}),
    ]
    readonly_fields = [
        "id",
        "state",
        "skill",
        "agent",
        "reply_link",
        "created_by",
        "question_text",
        "question_json",
        "input_json",
        "output_json",
        "artifacts_json",
        "error_json",
        "validation_errors",
        "transport",
        "attempts",
        "remote_task_id",
        "remote_context_id",
        "context_id",
        "next_action",
        "next_poll_at",
        "poll_interval",
        "lease_until",
        "deadline_at",
        "idempotency_key",
        "origin",
        "match_json",
        "fallbacks_json",
        "metadata_json",
        "created_at",
        "state_changed_at",
        "updated_at",
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # tasks are created through the API, with validation and matching

    # --- list columns -------------------------------------------------------------------

    @admin.display(description="task", ordering="id")
    def short_id(self, task: Task) -> str:
        return str(task.id)[:8]

    @admin.display(description="state", ordering="state")
    def state_badge(self, task: Task) -> str:
        return task.state.removeprefix("TASK_STATE_")

    @admin.display(description="age", ordering="created_at")
    def age(self, task: Task) -> str:
        return timesince(task.created_at, timezone.now())

    # --- detail fields --------------------------------------------------------------

    @admin.display(description="reply")
    def reply_link(self, task: Task) -> str:
        if task.state not in INTERRUPTED_STATES:
            return "—"
        url = reverse("admin:a2a_task_reply", args=[task.pk])
        return format_html('<a class="button" href="{}">Answer the agent</a>', url)

    @admin.display(description="question")
    def question_text(self, task: Task) -> str:
        return message_text(task.question) or "—"

    @admin.display(description="question (A2A message)")
    def question_json(self, task: Task) -> str:
        return pretty(task.question)

    @admin.display(description="input")
    def input_json(self, task: Task) -> str:
        return pretty(task.input)

    @admin.display(description="output (validated)")
    def output_json(self, task: Task) -> str:
        return pretty(task.output)

    @admin.display(description="artifacts")
    def artifacts_json(self, task: Task) -> str:
        return pretty(task.artifacts)

    @admin.display(description="error")
    def error_json(self, task: Task) -> str:
        return pretty(task.error)

    @admin.display(description="output validation errors")
    def validation_errors(self, task: Task) -> str:
        error = task.error or {}
        if error.get("code") != "output_invalid":
            return "—"
        return pretty((error.get("details") or {}).get("errors"))

    @admin.display(description="match")
    def match_json(self, task: Task) -> str:
        return pretty((task.metadata or {}).get("match"))

    @admin.display(description="fallbacks")
    def fallbacks_json(self, task: Task) -> str:
        return pretty((task.metadata or {}).get("fallbacks"))

    @admin.display(description="metadata (all)")
    def metadata_json(self, task: Task) -> str:
        return pretty(task.metadata)

    # --- actions --------------------------------------------------------------------

    def _each(self, request: HttpRequest, tasks: QuerySet[Task], verb: str, fn: Any) -> None:
        done = 0
        for task in tasks.select_related("skill", "agent"):
            try:
                fn(task)
                done += 1
            except PlatformError as exc:
                self.message_user(request, f"{task.id}: {exc.message}", messages.WARNING)
        if done:
            self.message_user(request, f"{verb} {done} task(s).", messages.SUCCESS)

    @admin.action(description="Cancel selected tasks (tells the agent)")
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        self._each(
            request, queryset, "Canceled", lambda t: services.cancel_task(t, by=request.user)
        )

    @admin.action(description="Retry selected failed/rejected tasks")
    def retry_selected(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        self._each(request, queryset, "Retried", lambda t: services.retry_task(t, by=request.user))

    # --- the reply form -----------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        reply = path(
            "<uuid:pk>/reply/",
            self.admin_site.admin_view(self.reply_view),
            name="a2a_task_reply",
        )
        return [reply, *super().get_urls()]

    def reply_view(self, request: HttpRequest, pk: Any) -> HttpResponse:
        """A form answering the agent's question (INPUT_REQUIRED / AUTH_REQUIRED)."""
        task = get_object_or_404(Task.objects.select_related("skill", "agent"), pk=pk)
        if not self.has_change_permission(request, task):
            return HttpResponse(status=403)
        change_url = reverse("admin:a2a_task_change", args=[task.pk])
        form = ReplyForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data.get("data")
            try:
                services.reply_to_task(
                    task,
                    text=form.cleaned_data.get("text") or None,
                    data=data if isinstance(data, dict) else None,
                    by=request.user,
                )
            except PlatformError as exc:
                self.message_user(request, exc.message, messages.ERROR)
            else:
                self.message_user(request, "Reply sent to the agent.", messages.SUCCESS)
            return HttpResponseRedirect(change_url)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Answer the agent on task {task.id}",
            "task": task,
            "question": message_text(task.question) or pretty(task.question),
            "waiting": task.state in INTERRUPTED_STATES,
            "form": form,
            "opts": self.model._meta,
            "change_url": change_url,
        }
        return TemplateResponse(request, "admin/a2a/task/reply.html", context)


# The A2A face's push notification configs and deliveries.
from a2a.face import admin as face_admin  # noqa: E402, F401
