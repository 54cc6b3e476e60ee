"""``GET /api/a2a/adapter.js``: the Node.js agent adapter, with this platform's URL filled in.

The adapter is a template (``a2a/static_templates/adapter.js``); the only thing filled in
is the default ``PLATFORM_URL`` (settings.PUBLIC_URL), so a developer can run it as
downloaded. See docs/adapter-js.md.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

TEMPLATE = Path(__file__).resolve().parent / "static_templates" / "adapter.js"
PLACEHOLDER = '"__PLATFORM_URL__"'


@cache
def _template() -> str:
    return TEMPLATE.read_text(encoding="utf-8")


def render_adapter(platform_url: str) -> str:
    """The adapter's source with ``platform_url`` as its default PLATFORM_URL."""
    # json.dumps gives a valid JavaScript string literal, whatever the URL holds.
    return _template().replace(PLACEHOLDER, json.dumps(platform_url), 1)


@require_GET
def adapter_js(request: HttpRequest) -> HttpResponse:
    """Public: the adapter holds no secret, and an agent fetches it before it has a key."""
    response = HttpResponse(
        render_adapter(settings.PUBLIC_URL), content_type="application/javascript; charset=utf-8"
    )
    response["Content-Disposition"] = 'inline; filename="adapter.js"'
    return response
