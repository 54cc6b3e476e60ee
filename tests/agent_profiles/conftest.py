"""Fixtures for registry tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.test.client import Client as DjangoClient


@pytest.fixture
def register(client: Client) -> Callable[..., Any]:
    """POST a registration body (a dict, or raw text) and return the response."""

    def post(body: Any, *, key: str | None = None, **headers: str) -> Any:
        extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
        if key:
            extra["HTTP_AUTHORIZATION"] = f"Bearer {key}"
        data = body if isinstance(body, str | bytes) else json.dumps(body)
        return client.post(
            "/api/agent-profiles/register", data=data, content_type="application/json", **extra
        )

    return post


@pytest.fixture
def staff_client(db: None) -> DjangoClient:
    """A client logged in as a superuser."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_superuser("admin", "admin@example.com", "pw-admin-1")
    c = DjangoClient()
    c.force_login(user)
    return c


@pytest.fixture
def open_registration(settings: Any) -> None:
    """The embedded defaults for registration, also in the distributed pass (where they
    differ): anyone may register, loopback agents are allowed, private addresses not."""
    settings.REGISTRATION_MODE = "open"
    settings.ALLOW_LOOPBACK_URLS = True
    settings.ALLOW_PRIVATE_URLS = False


@pytest.fixture
def skill(make_skill: Any) -> Any:
    return make_skill()
