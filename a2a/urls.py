"""HTTP routes of the a2a app."""

from django.urls import URLPattern, URLResolver, include, path

from a2a.adapter import adapter_js

urlpatterns: list[URLPattern | URLResolver] = [
    # The A2A server face: /.well-known/agent-card.json and /v1/a2a/...
    path("", include("a2a.face.urls")),
    path("api/a2a/adapter.js", adapter_js, name="a2a-adapter-js"),
]
