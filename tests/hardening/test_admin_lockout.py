"""The admin login is locked after repeated failures per user and address (django-axes);
operators see and lift the lockout in the admin."""

from __future__ import annotations

from typing import Any

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.test import Client

LOGIN = "/admin/login/?next=/admin/"


@pytest.fixture
def staff(db: None, settings: Any) -> Any:
    # A fast hasher: every attempt checks a password, and the real one takes ~0.5 s here.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return get_user_model().objects.create_user(
        "ops", password="right-password-1", is_staff=True, is_superuser=True
    )


def attempt(password: str, address: str = "203.0.113.7", **headers: str) -> Any:
    client = Client(REMOTE_ADDR=address, **headers)
    response = client.post(LOGIN, {"username": "ops", "password": password})
    response.logged_in = "_auth_user_id" in client.session  # type: ignore[attr-defined]
    return response


def test_the_login_locks_after_the_failure_limit_even_for_the_right_password(
    staff: Any, settings: Any
) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert attempt("wrong").status_code == 200  # the form again, with an error
    locked = attempt("wrong")
    assert locked.status_code == 429
    right = attempt("right-password-1")
    assert right.status_code == 429
    assert not right.logged_in


def test_spoofed_forwarding_headers_do_not_escape_the_lockout(staff: Any, settings: Any) -> None:
    for i in range(settings.AXES_FAILURE_LIMIT):
        attempt("wrong", HTTP_X_FORWARDED_FOR=f"198.51.100.{i}")
    assert attempt("right-password-1", HTTP_X_FORWARDED_FOR="198.51.100.99").status_code == 429


def test_another_address_is_not_locked_out(staff: Any, settings: Any) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT):
        attempt("wrong")
    elsewhere = attempt("right-password-1", address="192.0.2.1")
    assert elsewhere.status_code == 302
    assert elsewhere.logged_in


def test_one_address_trying_many_usernames_is_locked(staff: Any, settings: Any) -> None:
    client = Client(REMOTE_ADDR="203.0.113.9")
    for i in range(settings.AXES_FAILURE_LIMIT):
        client.post(LOGIN, {"username": f"guess{i}", "password": "x"})
    response = client.post(LOGIN, {"username": "ops", "password": "right-password-1"})
    assert response.status_code == 429


def test_operators_see_the_lockout_and_can_lift_it(staff: Any, settings: Any) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT):
        attempt("wrong")
    admin = Client()
    admin.force_login(staff)
    page = admin.get("/admin/axes/accessattempt/")
    assert page.status_code == 200
    assert b"203.0.113.7" in page.content
    AccessAttempt.objects.all().delete()  # what the admin's delete action does
    assert attempt("right-password-1").logged_in


def test_a_success_resets_the_count(staff: Any, settings: Any) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        attempt("wrong")
    assert attempt("right-password-1").logged_in
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        attempt("wrong")
    assert attempt("right-password-1").logged_in


def test_a_username_longer_than_any_user_is_refused_by_the_form(staff: Any) -> None:
    """It reached django-axes, whose 255-character column PostgreSQL refused (a 500)."""
    client = Client(REMOTE_ADDR="203.0.113.8")
    response = client.post(LOGIN, {"username": "x" * 256, "password": "wrong"})
    assert response.status_code == 200
    assert b"at most 150 characters" in response.content
    assert not AccessAttempt.objects.exists()
    right = client.post(LOGIN, {"username": "ops", "password": "right-password-1"})
    assert right.status_code == 302
