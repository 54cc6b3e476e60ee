"""Routes of the registry REST API."""

from django.urls import path

from agent_profiles.api import views

urlpatterns = [
    path("api/agent-profiles/register", views.RegisterAgentView.as_view(), name="register-agent"),
    path(
        "api/agent-profiles/<str:agent_id>/refresh",
        views.RefreshCardView.as_view(),
        name="refresh-agent-card",
    ),
]
