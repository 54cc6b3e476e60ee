"""docs/grafana-dashboard.json is valid and built only on metrics the platform exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from django.conf import settings

from platform_site import metrics

DOCS = Path(settings.BASE_DIR) / "docs"
SCRAPE_TIME = {
    "a2a_database_up",
    "a2a_tasks",
    "a2a_sweep_lag_seconds",
    "a2a_gateway_offline_tasks",
    "a2a_gateway_offline_oldest_seconds",
}


def exported() -> set[str]:
    names = set(SCRAPE_TIME)
    for value in vars(metrics).values():
        name = getattr(value, "_name", None)
        kind = getattr(value, "_type", "")
        if isinstance(name, str) and name.startswith("a2a_"):
            names.add(name + "_total" if kind == "counter" else name)
            if kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_count", f"{name}_sum"}
    return names


def test_the_dashboard_queries_only_exported_metrics() -> None:
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\ba2a_[a-z_]+", e)}
    assert used
    assert used <= exported(), used - exported()


def test_every_metric_is_documented() -> None:
    doc = (DOCS / "operations.md").read_text()
    bases = {re.sub(r"_(bucket|count|sum)$", "", n) for n in exported()}
    missing = sorted(n for n in bases if f"`{n}`" not in doc)
    assert not missing, missing
