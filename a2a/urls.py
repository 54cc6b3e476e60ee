"""HTTP routes of the a2a app."""

import uuid

from django.urls import URLPattern, URLResolver, include, path, register_converter

from a2a.adapter import adapter_js
from a2a.api import registry, views
from platform_site.openapi import UUID_ANY_CASE


class AnyCaseUUIDConverter:
    """A UUID in any case: Django's ``<uuid:>`` takes lowercase only, so the uppercase
    form of an existing task's id (a valid ``format: uuid``, RFC 4122 says case does not
    matter) was a 404. Matches the same 36-character form and gives a :class:`uuid.UUID`."""

    regex = UUID_ANY_CASE  # the schema's path parameter: format uuid (platform_site.openapi)

    def to_python(self, value: str) -> uuid.UUID:
        return uuid.UUID(value)

    def to_url(self, value: uuid.UUID | str) -> str:
        return str(value).lower()


register_converter(AnyCaseUUIDConverter, "anyuuid")

urlpatterns: list[URLPattern | URLResolver] = [
    path("api/a2a/adapter.js", adapter_js, name="a2a-adapter-js"),
    # Registry discovery (public): the skill catalogue and the AgentCards.
    path("api/a2a/skills", registry.SkillListView.as_view(), name="skill-list"),
    path("api/a2a/agent-card", registry.PlatformCardView.as_view(), name="platform-card"),
    path("api/a2a/agent-card/<str:agent_id>", registry.AgentCardView.as_view(), name="agent-card"),
    # Platform tasks (Django users): create, follow, answer, cancel, retry, reassign.
    path("api/tasks", views.TaskListView.as_view(), name="task-list"),
    path("api/tasks:batch", views.TaskBatchView.as_view(), name="task-batch"),
    path("api/tasks/<anyuuid:pk>", views.TaskDetailView.as_view(), name="task-detail"),
    path("api/tasks/<anyuuid:pk>/reply", views.TaskReplyView.as_view(), name="task-reply"),
    path("api/tasks/<anyuuid:pk>/cancel", views.TaskCancelView.as_view(), name="task-cancel"),
    path("api/tasks/<anyuuid:pk>/retry", views.TaskRetryView.as_view(), name="task-retry"),
    path("api/tasks/<anyuuid:pk>/reassign", views.TaskReassignView.as_view(), name="task-reassign"),
    # The A2A server face: /.well-known/agent-card.json and /v1/a2a/...
    path("", include("a2a.face.urls")),
]
