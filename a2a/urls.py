"""HTTP routes of the a2a app."""

from django.urls import URLPattern, URLResolver, include, path

from a2a.adapter import adapter_js
from a2a.api import registry, views

urlpatterns: list[URLPattern | URLResolver] = [
    path("api/a2a/adapter.js", adapter_js, name="a2a-adapter-js"),
    # Registry discovery (public): the skill catalogue and the AgentCards.
    path("api/a2a/skills", registry.SkillListView.as_view(), name="skill-list"),
    path("api/a2a/agent-card", registry.PlatformCardView.as_view(), name="platform-card"),
    path("api/a2a/agent-card/<str:agent_id>", registry.AgentCardView.as_view(), name="agent-card"),
    # Platform tasks (Django users): create, follow, answer, cancel, retry, reassign.
    path("api/tasks", views.TaskListView.as_view(), name="task-list"),
    path("api/tasks:batch", views.TaskBatchView.as_view(), name="task-batch"),
    path("api/tasks/<uuid:pk>", views.TaskDetailView.as_view(), name="task-detail"),
    path("api/tasks/<uuid:pk>/reply", views.TaskReplyView.as_view(), name="task-reply"),
    path("api/tasks/<uuid:pk>/cancel", views.TaskCancelView.as_view(), name="task-cancel"),
    path("api/tasks/<uuid:pk>/retry", views.TaskRetryView.as_view(), name="task-retry"),
    path("api/tasks/<uuid:pk>/reassign", views.TaskReassignView.as_view(), name="task-reassign"),
    # The A2A server face: /.well-known/agent-card.json and /v1/a2a/...
    path("", include("a2a.face.urls")),
]
