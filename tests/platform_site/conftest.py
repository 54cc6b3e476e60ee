"""Fixtures of the platform_site tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from platform_site import tracing


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on for the test, its spans kept in memory."""
    exporter = InMemorySpanExporter()
    assert tracing.setup(exporter, batch=False)
    try:
        yield exporter
    finally:
        tracing.teardown()
