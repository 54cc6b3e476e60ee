"""GET /api/a2a/adapter.js: the Node.js adapter, as JavaScript, with the platform URL in."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from django.test import Client
from pytest_django.fixtures import Settings

from a2a.adapter import render_adapter


def test_it_serves_the_adapter_as_javascript_with_the_public_url_filled_in(
    client: Client, settings: Settings
) -> None:
    settings.PUBLIC_URL = "https://agents.example.com"
    response = client.get("/api/a2a/adapter.js")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/javascript; charset=utf-8"
    body = response.content.decode()
    assert 'const DEFAULT_PLATFORM_URL = "https://agents.example.com";' in body
    assert "__PLATFORM_URL__" not in body


def test_it_needs_no_authentication(client: Client) -> None:
    assert (
        client.get("/api/a2a/adapter.js", HTTP_AUTHORIZATION="Bearer nonsense").status_code == 200
    )


def test_it_refuses_other_methods(client: Client) -> None:
    assert client.post("/api/a2a/adapter.js").status_code == 405


def test_a_url_with_quotes_cannot_break_out_of_the_string() -> None:
    body = render_adapter('http://x/"; process.exit(1); "')
    assert 'const DEFAULT_PLATFORM_URL = "http://x/\\"; process.exit(1); \\"";' in body


@pytest.mark.slow
def test_the_served_adapter_is_valid_javascript_for_node(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (CI installs it): cannot check the adapter's syntax")
    path = tmp_path / "adapter.js"
    path.write_text(render_adapter("http://127.0.0.1:8000"))
    result = subprocess.run(
        [node, "--check", str(path)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
