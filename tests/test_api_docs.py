from __future__ import annotations

import json
import re
from typing import Any


def test_the_openapi_schema_documents_the_registry(client: Any, db: None) -> None:
    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert "/api/agent-profiles/register" in schema["paths"]
    assert "/api/a2a/skills" in schema["paths"]
    assert "/api/a2a/agent-card/{agent_id}" in schema["paths"]
    assert schema["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"


def test_the_schema_generates_without_warnings(db: None) -> None:
    from io import StringIO

    from django.core.management import call_command

    err = StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=StringIO(), stderr=err)


def test_the_docs_page_uses_locally_served_assets(client: Any, db: None) -> None:
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    scripts = re.findall(r'src="([^"]+\.js)"', html)
    assert scripts
    assert all(s.startswith("/static/") for s in scripts), scripts
    asset = client.get(scripts[0])
    assert asset.status_code == 200


def test_redoc_page_renders(client: Any, db: None) -> None:
    assert client.get("/api/redoc/").status_code == 200


def test_admin_static_files_are_served(client: Any) -> None:
    assert client.get("/static/admin/css/base.css").status_code == 200


def test_oversize_bodies_anywhere_under_api_get_the_json_413(client: Any, settings: Any) -> None:
    settings.MAX_BODY_BYTES = 10
    response = client.post("/api/whatever", data="x" * 100, content_type="text/plain")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"


def test_request_data_too_big_from_a_view_becomes_the_json_413(rf: Any) -> None:
    """Django's own RequestDataTooBig (e.g. from request.POST) would render an HTML 400."""
    from django.core.exceptions import RequestDataTooBig

    from platform_site.middleware import BodyLimitMiddleware

    middleware = BodyLimitMiddleware(lambda request: None)
    response = middleware.process_exception(rf.post("/api/x"), RequestDataTooBig("big"))
    assert response is not None
    assert response.status_code == 413
    assert json.loads(response.content)["error"]["code"] == "payload_too_large"
    assert middleware.process_exception(rf.post("/admin/"), RequestDataTooBig("big")) is None
