"""HTTP routes of the agent_profiles app."""

from django.urls import URLPattern, URLResolver, include, path

urlpatterns: list[URLPattern | URLResolver] = [
    path("", include("agent_profiles.api.urls")),
]
