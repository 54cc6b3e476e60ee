"""HTTP routes of the a2a app."""

from django.urls import URLPattern, URLResolver, include, path

urlpatterns: list[URLPattern | URLResolver] = [
    # The A2A server face: /.well-known/agent-card.json and /v1/a2a/...
    path("", include("a2a.face.urls")),
]
