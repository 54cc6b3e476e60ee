"""``manage.py apitoken USERNAME``: create the user if missing and print a new API token."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from agent_profiles.models import UserToken


class Command(BaseCommand):
    help = (
        "Create USERNAME if missing and print a new API token (only the token, on stdout). "
        "Use it as 'Authorization: Bearer <token>'."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--staff",
            action="store_true",
            help="Make the user staff and superuser (to log into /admin/; set a password "
            "with 'manage.py changepassword USERNAME').",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        username = clean_username(opts["username"])
        model = get_user_model()
        with transaction.atomic():
            user, created = model.objects.get_or_create(**{model.USERNAME_FIELD: username})
            if not user.is_active:
                # Its token would be refused (401): printed, it looked like a working one.
                raise CommandError(
                    f"User {user.get_username()} is inactive: a token would not authenticate "
                    "it. Reactivate it in /admin/ first."
                )
            if created:
                user.set_unusable_password()
            if opts["staff"]:
                user.is_staff = user.is_superuser = True
            if created or opts["staff"]:
                user.save()
            token = UserToken.issue(user)
        if created:
            self.stderr.write(f"Created user {user.get_username()}.")
        self.stdout.write(token)


def clean_username(raw: str) -> str:
    """``raw`` normalized and checked as the user model's username field checks it (its
    validators and max_length), or :class:`CommandError`.

    Checked before the lookup: ``apitoken "$USER"`` with the variable unset must not create
    a user named "" with a working token, and a name longer than the column is a DataError
    on PostgreSQL.
    """
    model = get_user_model()
    field = model._meta.get_field(model.USERNAME_FIELD)
    try:
        return field.clean(model.normalize_username(raw), None)
    except ValidationError as exc:
        problem = " ".join(exc.messages) if raw.strip() else "it is empty."
        raise CommandError(f"Invalid username {raw!r}: {problem}") from None
