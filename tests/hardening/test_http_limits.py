"""Oversize and odd headers against a real daphne: refused (4xx, or the connection closed
by the HTTP layer before any application code), never a 5xx, and the process keeps
serving."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.support.processes import LivePlatform, embedded_platform

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def live(django_db_blocker: object) -> Iterator[LivePlatform]:
    with django_db_blocker.unblock(), embedded_platform(LOG_LEVEL="WARNING") as proc:  # type: ignore[attr-defined]
        yield LivePlatform(proc.url, {"platform": proc})  # type: ignore[attr-defined]


def get(live: LivePlatform, path: str, headers: dict[str, str | bytes]) -> httpx.Response | None:
    """The answer, or None when the server closed the connection without one."""
    try:
        return httpx.get(f"{live.url}{path}", headers=headers, timeout=10)
    except httpx.RemoteProtocolError:
        return None


@pytest.mark.parametrize("size", [20_000, 200_000, 2_000_000])
def test_a_huge_header_is_refused_without_a_server_error(
    live: LivePlatform, transactional_db: None, size: int
) -> None:
    response = get(live, "/api/tasks", {"X-Big": "a" * size})
    assert response is None or 400 <= response.status_code < 500
    assert httpx.get(f"{live.url}/healthz", timeout=10).status_code == 200


def test_a_thousand_headers_are_refused_without_a_server_error(
    live: LivePlatform, transactional_db: None
) -> None:
    response = get(live, "/api/a2a/skills", {f"X-H{i}": "v" for i in range(1000)})
    assert response is None or 400 <= response.status_code < 500


def test_a_non_ascii_bearer_token_is_a_json_401(live: LivePlatform, transactional_db: None) -> None:
    token = "Bearer usr_\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9_x".encode()
    response = get(live, "/api/tasks", {"Authorization": token})
    assert response is not None
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"


def test_a_large_but_sane_header_reaches_the_application(
    live: LivePlatform, transactional_db: None
) -> None:
    response = get(live, "/api/tasks", {"X-Big": "a" * 8_000})
    assert response is not None
    assert response.status_code in (401, 403)
    assert response.headers["Content-Type"].startswith("application/json")
