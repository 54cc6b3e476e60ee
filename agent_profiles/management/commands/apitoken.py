"""``manage.py apitoken USERNAME``: create the user if missing and print a new API token."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
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
        with transaction.atomic():
            user, created = get_user_model().objects.get_or_create(username=opts["username"])
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
