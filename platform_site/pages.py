"""The landing page at ``/`` and the favicon (browsers ask ``/favicon.ico`` on every page;
without it each admin page logged a 404)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe

FAVICON = Path(__file__).parent / "static" / "platform_site" / "favicon.svg"


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    """A small page linking the admin, the API docs, the platform's card and the probes."""
    links = [
        ("/admin/", "Admin", "agents, skills, tasks waiting for a person, the dashboard"),
        ("/api/docs/", "REST API", "interactive docs of the platform API (OpenAPI)"),
        ("/.well-known/agent-card.json", "Agent card", "the platform as an A2A 1.0 agent"),
        ("/api/a2a/skills", "Skills", "the skill catalogue agents implement"),
        ("/healthz", "Health", "the process is up (/readyz: ready to work)"),
        ("/metrics", "Metrics", "Prometheus text format (loopback or METRICS_TOKEN)"),
    ]
    context = {"name": settings.PLATFORM_NAME, "links": links, "public_url": settings.PUBLIC_URL}
    return render(request, "platform_site/home.html", context)


@require_safe
@cache_control(max_age=86400, public=True)
def favicon(request: HttpRequest) -> HttpResponse:
    return HttpResponse(FAVICON.read_bytes(), content_type="image/svg+xml")
