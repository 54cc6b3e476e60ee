"""What the listing tests share: listing on (one second), and an agent at the test peer."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.agents import TestAgent


@pytest.fixture(autouse=True)
def listing_on(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_INTERVAL = 1.0
    settings.A2A_LIST_POLL_INTERVAL = 60.0


@pytest.fixture
def setup(make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent) -> Any:
    skill = make_skill(id="ce-review")
    make_agent(skills=[skill], a2a_endpoint=peer.url)
    return make_user()
