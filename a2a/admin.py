"""Admin for platform tasks: a list to find them, a page that reads top-down (see
:mod:`a2a.task_page`), and a person's actions: answer, cancel, retry."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.main import ORDER_VAR
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html

import a2a.admin_agents  # noqa: F401  (registers the agents' listing cursors and pauses)
from a2a import console as task_console
from a2a import reassign, services
from a2a.admin_actions import act_on_each, refusal_message
from a2a.admin_filters import CreatedFilter, OriginFilter, WaitingFilter
from a2a.models import Task
from a2a.question_excerpts import NOTHING_SAID, excerpt_of, said_of, with_excerpts
from a2a.reply_form import ReplyForm, asked_token, reply_form
from a2a.services import QuestionChanged
from a2a.states import INTERRUPTED_STATES, RETRYABLE_STATES, TERMINAL_STATES
from a2a.task_page import page_context
from agent_profiles.models import AgentProfile, AgentStatus
from platform_site import console
from platform_site.errors import PlatformError
from platform_site.templatetags.console import badge, human_duration

# The task page's buttons, all off: for users who may view tasks but not change them.
NO_BUTTONS = {"can_cancel": False, "can_retry": False, "can_reassign": False, "reply_form": None}


def is_uuid(text: str) -> bool:
    """Whether ``text`` is a UUID as the task id field reads one (hyphens optional)."""
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


# The task list's columns (list_display) use none of these; the search and filters neither.
# The question column reads an excerpt of the question (a2a.question_excerpts).
LIST_DEFERRED = (
    "input",
    "question",
    "output",
    "artifacts",
    "status_message",
    "outbound_message",
    "metadata",
    "error",
)


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    """Tasks: list by state/skill/agent; a read-only page per task with its actions."""

    list_display = [
        "short_id",
        "state_badge",
        "skill_id",
        "agent_id",
        "created_at",
        "duration",
        "attempts",
        "transport",
        "question_col",
    ]
    list_filter = [
        WaitingFilter,
        CreatedFilter,
        "state",
        "transport",
        OriginFilter,
        "skill",
        "agent",
    ]
    search_fields = ["id", "remote_task_id", "context_id", "idempotency_key"]  # see below
    # A filtered page counted the whole table too ("N of M"): a second COUNT(*) per load.
    show_full_result_count = False
    # None: the columns show the skill's and agent's ids, on the row itself; joining them
    # read each row's agent (its card, up to AGENT_CARD_MAX_BYTES) for nothing.
    list_select_related = False
    ordering = ["-created_at"]
    actions = ["cancel_selected", "retry_selected"]
    list_per_page = 50

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # tasks are created through the API, with validation and matching

    def get_queryset(self, request: HttpRequest) -> QuerySet[Task]:
        """The list leaves out the JSON it never shows: 25 tasks with 4 MB of artifacts
        each made one page of it hold 200 MB. The task page and the actions load it all."""
        tasks = super().get_queryset(request)
        match = request.resolver_match
        if match is not None and match.url_name == "a2a_task_changelist":
            return with_excerpts(tasks.defer(*LIST_DEFERRED))
        return tasks

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Task], search_term: str
    ) -> tuple[QuerySet[Task], bool]:
        """A task id or its leading hex digits (the list shows 8), or an exact agent task
        id, context id or idempotency key: index seeks on PostgreSQL (the key by its
        partial unique indexes; SQLite reads the table for it). Django's search matched
        each column with ``LIKE '%...%'``, which no index serves: 4 to 6 s a search at
        200,000 tasks on PostgreSQL, in the count and in the page."""
        term = search_term.strip()
        if not term:
            return queryset, False
        match = Q(remote_task_id=term) | Q(context_id=term) | Q(idempotency_key=term)
        digits = term.replace("-", "").lower()
        if 0 < len(digits) <= 32 and all(c in "0123456789abcdef" for c in digits):
            low = uuid.UUID(digits.ljust(32, "0"))
            high = uuid.UUID(digits.ljust(32, "f"))
            match |= Q(pk__gte=low, pk__lte=high)
        return queryset.filter(match), False

    def get_ordering(self, request: HttpRequest) -> list[str]:
        """The inbox (``?waiting=yes``) lists the longest waiting first, unless a column
        is clicked; the changelist orders by this, over any order a filter gave."""
        if request.GET.get(WaitingFilter.parameter_name) == "yes" and ORDER_VAR not in request.GET:
            return ["state_changed_at"]
        return list(super().get_ordering(request))

    # --- list columns -------------------------------------------------------------------

    @admin.display(description="task", ordering="id")
    def short_id(self, task: Task) -> str:
        return str(task.id)[:8]

    @admin.display(description="state", ordering="state")
    def state_badge(self, task: Task) -> str:
        return badge(task.state)

    @admin.display(description="skill", ordering="skill")
    def skill_id(self, task: Task) -> str:
        return task.skill_id

    @admin.display(description="agent", ordering="agent")
    def agent_id(self, task: Task) -> str:
        return task.agent_id

    @admin.display(description="took / running")
    def duration(self, task: Task) -> str:
        end = task.state_changed_at if task.state in TERMINAL_STATES else timezone.now()
        return human_duration(end - task.created_at)

    @admin.display(description="question")
    def question_col(self, task: Task) -> str:
        if task.state not in INTERRUPTED_STATES:
            return ""
        text = excerpt_of(task) or NOTHING_SAID
        return format_html('<span title="{}">{}</span>', text, text[:60])

    # --- the task page ---------------------------------------------------------------

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """A read-only page that reads top-down; nothing to save (actions post elsewhere).

        The list shows ids cut to 8 characters, and operators paste those: an id that is
        not a whole UUID leads to the list searched for it, not to a 500.
        """
        object_id = unquote(object_id)
        if not is_uuid(object_id):
            self.message_user(
                request,
                f"“{object_id}” is not a whole task id; the tasks whose id holds it are listed.",
                messages.WARNING,
            )
            changelist = reverse("admin:a2a_task_changelist")
            return HttpResponseRedirect(f"{changelist}?{urlencode({'q': object_id})}")
        task = get_object_or_404(
            Task.objects.select_related("skill", "agent", "created_by"), pk=object_id
        )
        if not self.has_view_or_change_permission(request, task):
            return HttpResponse(status=403)
        # Who may only view tasks gets no Cancel / Retry / Reassign buttons and no reply
        # form: their views answer 403, and the list offers them no actions either.
        view_only = {} if self.has_change_permission(request, task) else NO_BUTTONS
        context = {
            **self.admin_site.each_context(request),
            **page_context(task),
            **self.reassign_context(task),
            "title": f"Task {task.pk}",
            "subtitle": None,
            "opts": self.model._meta,
            "reply_form": reply_form(task),
            **view_only,
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/a2a/task/detail.html", context)

    def reassign_context(self, task: Task) -> dict[str, Any]:
        """The reassign form: where it posts and the other active agents of the skill."""
        others = (
            AgentProfile.objects.filter(status=AgentStatus.ACTIVE, skills=task.skill_id)
            .exclude(pk=task.agent_id)
            .order_by("pk")
            .values_list("pk", flat=True)[:100]
        )
        return {
            "reassign_url": reverse("admin:a2a_task_reassign", args=[task.pk]),
            "reassign_agents": list(others),
        }

    # --- actions --------------------------------------------------------------------

    def _each(
        self, request: HttpRequest, tasks: QuerySet[Task], verb: str, fn: Any, able: Q
    ) -> None:
        """Run ``fn`` on each selected task ``able`` lets it act on (the others are
        refused unread: :func:`a2a.admin_actions.act_on_each`); the refusals in one
        message."""
        outcome = act_on_each(tasks, fn, able)
        if outcome.done:
            self.message_user(request, f"{verb} {outcome.done} task(s).", messages.SUCCESS)
        if outcome.refused_count:
            message = refusal_message(verb, outcome.refused_count, outcome.refused)
            self.message_user(request, message, messages.WARNING)

    # Both change tasks: offered only to users who may change them, as the task page's
    # buttons (``_task_for``) require; a view-only staff user sees no action.
    @admin.action(description="Cancel selected tasks (tells the agent)", permissions=["change"])
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        self._each(
            request,
            queryset,
            "Canceled",
            lambda t: services.cancel_task(t, by=request.user),
            ~Q(state__in=TERMINAL_STATES),
        )

    @admin.action(description="Retry selected failed/rejected tasks", permissions=["change"])
    def retry_selected(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        self._each(
            request,
            queryset,
            "Retried",
            # Each old agent task owed a cancel is told by a worker, not in this request.
            lambda t: services.retry_task(t, by=request.user, tell_at_once=False),
            Q(state__in=RETRYABLE_STATES),
        )

    # --- the task page's forms ------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        def route(suffix: str, view: Any, name: str) -> URLPattern:
            return path(f"<uuid:pk>/{suffix}/", self.admin_site.admin_view(view), name=name)

        return [
            route("reply", self.reply_view, "a2a_task_reply"),
            route("cancel", self.cancel_view, "a2a_task_cancel"),
            route("retry", self.retry_view, "a2a_task_retry"),
            route("reassign", self.reassign_view, "a2a_task_reassign"),
            *super().get_urls(),
        ]

    def _task_for(self, request: HttpRequest, pk: Any) -> Task | HttpResponse:
        task = get_object_or_404(Task.objects.select_related("skill", "agent"), pk=pk)
        if not self.has_change_permission(request, task):
            return HttpResponse(status=403)
        return task

    def _act(self, request: HttpRequest, pk: Any, verb: str, fn: Any) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        task = self._task_for(request, pk)
        if isinstance(task, HttpResponse):
            return task
        try:
            fn(task)
        except PlatformError as exc:
            self.message_user(request, exc.message, messages.ERROR)
        else:
            self.message_user(request, f"Task {verb}.", messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:a2a_task_change", args=[task.pk]))

    def cancel_view(self, request: HttpRequest, pk: Any) -> HttpResponse:
        return self._act(
            request, pk, "canceled", lambda t: services.cancel_task(t, by=request.user)
        )

    def retry_view(self, request: HttpRequest, pk: Any) -> HttpResponse:
        return self._act(request, pk, "retried", lambda t: services.retry_task(t, by=request.user))

    def reassign_view(self, request: HttpRequest, pk: Any) -> HttpResponse:
        """To the agent chosen in the form, or (none chosen) the matcher's best other one."""
        agent_id = (request.POST.get("agent_id") or "").strip() or None
        return self._act(
            request,
            pk,
            "reassigned",
            lambda t: reassign.reassign_task(t, agent_id=agent_id, by=request.user),
        )

    def reply_view(self, request: HttpRequest, pk: Any) -> HttpResponse:
        """Answer the agent's question (INPUT_REQUIRED / AUTH_REQUIRED). The form is on the
        task page; a GET here shows it alone."""
        task = self._task_for(request, pk)
        if isinstance(task, HttpResponse):
            return task
        change_url = reverse("admin:a2a_task_change", args=[task.pk])
        form = reply_form(task, request.POST or None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data.get("data")
            try:
                services.reply_to_task(
                    task,
                    text=form.cleaned_data.get("text") or None,
                    data=data if isinstance(data, dict) else None,
                    by=request.user,
                    asked_at=form.cleaned_data.get("asked"),
                )
            except QuestionChanged as exc:
                return self.asked_again(request, task, exc)
            except PlatformError as exc:
                self.message_user(request, exc.message, messages.ERROR)
            else:
                self.message_user(request, "Reply sent to the agent.", messages.SUCCESS)
            return HttpResponseRedirect(change_url)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Answer the agent on task {task.id}",
            "task": task,
            "question": said_of(task.question) or NOTHING_SAID,
            "waiting": task.state in INTERRUPTED_STATES,
            "form": form,
            "opts": self.model._meta,
            "change_url": change_url,
        }
        return TemplateResponse(request, "admin/a2a/task/reply.html", context)

    def asked_again(self, request: HttpRequest, task: Task, exc: QuestionChanged) -> HttpResponse:
        """A reply to a question the agent no longer asks: nothing was sent. The task page
        again, with the new question to read and the answer as typed (nothing lost), its
        form now answering the new question."""
        task.refresh_from_db()
        self.message_user(request, exc.message, messages.WARNING)
        data = request.POST.copy()
        data["asked"] = asked_token(task)
        again = {"reply_form": ReplyForm(data)}
        return self.change_view(request, str(task.pk), extra_context=again)


# Task figures, only for users who may view tasks (the list answers others 403).
console.add_dashboard_panel(
    "tasks", task_console.dashboard_panel, order=10, permissions=task_console.PANEL_PERMISSIONS
)
console.add_agent_panel(
    "tasks", task_console.agent_panel, order=20, permissions=task_console.PANEL_PERMISSIONS
)

# The A2A face's push notification configs and deliveries.
from a2a.face import admin as face_admin  # noqa: E402, F401
