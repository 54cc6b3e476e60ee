"""The benchmark scripts' own bookkeeping (no servers): what they report and what their
``--write`` changes in docs/benchmarks.md."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

# Neither database nor Redis: once, in either pass.
pytestmark = pytest.mark.no_services

BENCH = Path(__file__).resolve().parent.parent / "bench"
DOCS = BENCH.parent / "docs" / "benchmarks.md"


def bench_module(monkeypatch: pytest.MonkeyPatch, name: str) -> ModuleType:
    """``bench/NAME.py``, imported as its scripts import each other (bench/ on the path)."""
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module(name)


def test_a2a_server_reports_the_requests_it_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """50 requests in 5 rounds of 16 clients: each round makes at least one request per
    client (80 in all), and the table says so, not the 50 asked for."""
    a2a_server = bench_module(monkeypatch, "a2a_server")
    made: dict[str, int] = {}

    async def measure(series: Any, client: Any, make_request: Any, total: int, _: int) -> None:
        if series is not None:
            made[series.name] = made.get(series.name, 0) + total
            series.count += total
            series.elapsed += 1.0
            series.latencies.append(0.01)
            series.results += [{"task": {"id": "t"}}] * total

    async def drain(*args: Any, **kwargs: Any) -> None:
        return None

    monkeypatch.setattr(a2a_server, "measure", measure)
    monkeypatch.setattr(a2a_server, "drain", drain)
    rows = asyncio.run(a2a_server.compare("http://sdk", "http://pf", "tok", 50, 16, 5))
    header = a2a_server.table(rows, 16, 5).splitlines()[0]
    assert made["platform message:send"] == 80
    assert "80 requests per operation" in header, header


def test_long_tasks_write_replaces_its_table_and_keeps_its_reading(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``long_tasks.py --load FILE --write`` without ``--analysis``: the reading written by
    hand (kept nowhere else) stays after the new table; the other sections too."""
    long_tasks = bench_module(monkeypatch, "long_tasks")
    report = bench_module(monkeypatch, "report")
    docs = tmp_path / "benchmarks.md"
    before = DOCS.read_text()
    docs.write_text(before)
    monkeypatch.setattr(report, "DOCS", docs)
    reading = report.kept_reading("long_tasks")
    assert len(reading) > 5000  # the doc's own reading, found after its mark
    result = {
        "mode": "embedded",
        "agent": "push",
        "agents": 1,
        "tasks": 20,
        "seconds": 3.0,
        "followedBy": {"push": 20},
        "cores": 0.03,
        "rss_mib": 150.0,
        "cpu_ms_per_task": 39.0,
        "cpu_ms_per_task_net": 31.0,
        "requests": 1.1,
        "sends": 1.0,
        "polls": 0.0,
        "lists": 0.0,
        "pushes": 4.0,
        "noticed": 20,
        "delay_p50": 50.0,
        "delay_p95": 160.0,
        "delay_max": 160.0,
        "completed": 20,
    }
    saved = tmp_path / "runs.jsonl"
    saved.write_text(json.dumps(result) + "\n")
    monkeypatch.setattr(sys, "argv", ["long_tasks.py", "--load", str(saved), "--write"])
    long_tasks.main()
    after = docs.read_text()
    assert "| embedded | push | 20 x 3 |" in after  # the new table...
    assert "| push x 4 | 10,000 x 60 |" not in after  # ...instead of the old one
    assert report.kept_reading("long_tasks") == reading
    for name in ("a2a_server", "dispatch", "gateway"):  # the other sections, unchanged
        start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
        assert after.split(start)[1].split(end)[0] == before.split(start)[1].split(end)[0]
    # Written again, the same reading once: the mark stays where it was.
    long_tasks.main()
    assert docs.read_text() == after
