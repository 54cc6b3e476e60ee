"""The embedded mode boots as one process and stops cleanly."""

from __future__ import annotations

import httpx
import pytest

from tests.support.processes import embedded_platform


@pytest.mark.slow
def test_it_serves_and_stops_cleanly_on_sigterm(transactional_db: None) -> None:
    with embedded_platform() as proc:
        assert httpx.get(f"{proc.url}/admin/login/").status_code == 200
        assert "embedded Celery worker" in proc.wait_log(r"embedded Celery worker.*started")[0]
        assert proc.stop() == 0
        assert "embedded Celery worker and beat stopped" in proc.log_text()
