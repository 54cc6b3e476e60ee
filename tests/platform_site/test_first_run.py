"""A newcomer's first minutes: the landing page, the favicon, the admin's name, times with
seconds, `make run` on a taken port, and `manage.py` without the virtual environment."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from django.conf import settings
from django.utils import formats

from tests.support.processes import BASE_DIR, platform_env
from tests.support.serving import free_port


def test_the_landing_page_links_admin_api_docs_card_and_health(client: Any) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert page["Content-Type"].startswith("text/html")
    html = page.content.decode()
    assert settings.PLATFORM_NAME in html
    for href in ["/admin/", "/api/docs/", "/.well-known/agent-card.json", "/healthz"]:
        assert f'href="{href}"' in html


def test_the_favicon_is_served_so_browsers_log_no_404(client: Any) -> None:
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200
    assert icon["Content-Type"] == "image/svg+xml"
    assert icon.content.startswith(b"<svg")


def test_the_admin_names_the_platform_and_view_site_goes_home(admin_client: Any) -> None:
    html = admin_client.get("/admin/").content.decode()
    assert f"<title>Console | {settings.PLATFORM_NAME}</title>" in html
    assert "Django administration" not in html
    assert 'href="/"' in html  # "View site"
    assert "platform_site/favicon.svg" in html


def test_times_show_seconds() -> None:
    at = datetime(2026, 12, 1, 6, 0, 7, tzinfo=UTC)
    assert formats.date_format(at, "DATETIME_FORMAT") == "2026-12-01 06:00:07"
    assert formats.date_format(at, "SHORT_DATETIME_FORMAT") == "2026-12-01 06:00:07"


def test_manage_py_without_django_says_what_to_run() -> None:
    # -S: no site-packages, like a system Python without the project's dependencies.
    result = subprocess.run(
        [sys.executable, "-S", "manage.py", "check"],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert ".venv/bin/python" in result.stderr
    assert "make run" in result.stderr


@pytest.mark.slow
def test_run_on_a_taken_port_exits_non_zero_with_one_line_before_starting_anything(
    transactional_db: None,
) -> None:
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        started = time.monotonic()
        result = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "runplatform",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            cwd=BASE_DIR,
            env=platform_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode != 0
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert str(port) in lines[0]
    assert "already in use" in lines[0]
    assert time.monotonic() - started < 30


def test_readme_links_only_to_files_in_the_repository() -> None:
    readme = (BASE_DIR / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [t for t in targets if "://" not in t and not t.startswith("mailto:")]
    assert local  # the docs table
    missing = [t for t in local if not (BASE_DIR / t).exists()]
    assert not missing, missing
    assert "../" not in readme  # nothing outside the checkout
