"""Server processes freeze what they loaded and collect the youngest generation less often."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery.signals import beat_init, worker_ready

from platform_site import gc_tuning

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def restore_gc() -> Iterator[None]:
    """Leave this process's collector as the test found it."""
    thresholds = gc.get_threshold()
    frozen = gc.get_freeze_count()
    yield
    gc.set_threshold(*thresholds)
    if not frozen:
        gc.unfreeze()


def test_settle_freezes_the_heap_and_sets_the_threshold(settings: Any, restore_gc: None) -> None:
    settings.GC_THRESHOLD = 5000
    before = gc.get_freeze_count()
    kept = [[] for _ in range(1000)]  # containers the collector tracks, alive at settling
    gc_tuning.settle()
    assert gc.get_threshold()[0] == 5000
    assert gc.get_freeze_count() >= before + len(kept)


def test_a_zero_threshold_leaves_pythons(settings: Any, restore_gc: None) -> None:
    gc.set_threshold(700, 10, 10)
    settings.GC_THRESHOLD = 0
    gc_tuning.settle()
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("signal", [worker_ready, beat_init], ids=["worker", "beat"])
def test_celery_workers_and_beat_settle_when_ready(
    signal: Any, settings: Any, restore_gc: None
) -> None:
    settings.GC_THRESHOLD = 6000
    gc.set_threshold(700, 10, 10)
    signal.send(sender=None)
    assert gc.get_threshold()[0] == 6000


def test_the_asgi_application_settles_the_process_that_loads_it(tmp_path: Path) -> None:
    """What daphne does: import the application, then serve (a process of its own, so
    this one's collector is left as it is)."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "platform_site.settings",
        "SQLITE_PATH": str(tmp_path / "db.sqlite3"),
        "GC_THRESHOLD": "8000",
    }
    code = (
        "import gc, json, platform_site.asgi; "
        "print(json.dumps([gc.get_threshold()[0], gc.get_freeze_count()]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    threshold, frozen = json.loads(result.stdout.strip().splitlines()[-1])
    assert threshold == 8000
    assert frozen > 10_000  # Django, DRF, Channels, the apps: the loaded heap
