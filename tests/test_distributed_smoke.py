"""The distributed mode's processes boot on PostgreSQL + Redis and stop cleanly."""

from __future__ import annotations

import httpx
import pytest

from tests.support.processes import distributed_platform


@pytest.mark.distributed
@pytest.mark.slow
def test_daphne_worker_and_beat_boot_on_postgres_and_redis(transactional_db: None) -> None:
    with distributed_platform() as platform:
        assert httpx.get(f"{platform.url}/admin/login/").status_code == 200
        for proc in platform.procs.values():
            assert proc.alive(), proc.log_text()
