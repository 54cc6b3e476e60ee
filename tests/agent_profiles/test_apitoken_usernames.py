"""``manage.py apitoken USERNAME`` creates the user if missing: a name the user model
would refuse (empty, blanks, longer than the column) is a CommandError, and neither a user
nor a token is created."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from agent_profiles.models import UserToken

pytestmark = pytest.mark.django_db

MAX = get_user_model()._meta.get_field("username").max_length


def apitoken(*args: str) -> str:
    out = StringIO()
    call_command("apitoken", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.mark.parametrize(
    ("username", "problem"),
    [
        ("", "it is empty"),  # `apitoken "$USERNAME"` with the variable unset
        ("  ", "it is empty"),
        ("a b", "Enter a valid username"),
        ("alice\n", "Enter a valid username"),
        ("u" * (MAX + 1), f"at most {MAX} characters"),
    ],
)
def test_an_invalid_username_is_refused_and_nothing_is_created(username: str, problem: str) -> None:
    """These used to create a user (and print a working token), or on PostgreSQL raise a
    DataError traceback for the long name."""
    with pytest.raises(CommandError, match=f"Invalid username .*{problem}"):
        apitoken(username)
    assert not get_user_model().objects.exists()
    assert not UserToken.objects.exists()


def test_the_longest_name_the_column_holds_is_accepted() -> None:
    """The limit is the field's max_length, not something stricter."""
    assert apitoken("u" * MAX).startswith("usr_")
    assert get_user_model().objects.get().username == "u" * MAX


def test_the_name_is_normalized_like_create_user_does(make_user: object) -> None:
    """A compatibility spelling (fullwidth letters) names the same user that create_user
    stored in NFKC, instead of creating a look-alike second user."""
    apitoken("\uff43arol")  # fullwidth "c"
    assert list(get_user_model().objects.values_list("username", flat=True)) == ["carol"]
