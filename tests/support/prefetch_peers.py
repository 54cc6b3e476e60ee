"""Build every peer's own environment at once, ahead of the tests that use them.

``make test`` (scripts/test.sh) starts this in the background. A clean clone (CI) has no
``.peers`` yet, and each environment was built by the first test to need it, in line:
installs (minutes with pip, seconds with uv) on the suite's longest path. Here they are
built side by side while the passes run their other tests. Each build holds its environment's file
lock (:func:`tests.support.venvs.cached_venv`, :func:`tests.support.js_sdk.js_peer_dir`),
so a test that needs one meanwhile waits for that build instead of starting its own; a
build that fails here is left to its test, which builds again and reports the error
where it belongs.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def builds() -> list[tuple[str, Callable[[], Any]]]:
    """Each peer's build, the longest first: they end soonest on two threads."""
    # The support modules read Django's settings (the checkout's folder) when imported.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")
    from tests.support import (
        adk_agent,
        js_sdk,
        langgraph_agent,
        legacy_sdk,
        maf_client,
        strands_agent,
    )
    from tests.support.venvs import cached_venv

    return [
        ("adk", adk_agent.adk_python),
        ("strands", strands_agent.strands_python),
        ("langgraph", lambda: cached_venv("langgraph", langgraph_agent.REQUIREMENTS)),
        ("a2a-sdk-0.3", legacy_sdk.legacy_python),
        ("maf", maf_client.maf_python),
        ("a2a-js-1.3", lambda: js_sdk.js_peer_dir("1.3")),
        ("a2a-js-0.3", lambda: js_sdk.js_peer_dir("0.3")),
    ]


def _build(name: str, build: Callable[[], Any]) -> None:
    began = time.monotonic()
    try:
        build()
    except BaseException:  # pytest.skip (no npm) is a BaseException too
        print(f"peer {name}: not built here (its test will say why)", file=sys.stderr)
        traceback.print_exc()
        return
    print(f"peer {name}: ready after {time.monotonic() - began:.0f} s", file=sys.stderr)


def main() -> None:
    with ThreadPoolExecutor(2) as pool:
        for name, build in builds():
            pool.submit(_build, name, build)


if __name__ == "__main__":
    main()
