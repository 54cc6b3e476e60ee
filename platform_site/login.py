"""The admin's login form, its username held to the user model's length.

Django's ``AuthenticationForm`` sets the username field's ``max_length`` after the field
is built, so no length validator comes with it: a username of any length reached
``authenticate()``, and django-axes then recorded the failure in its 255-character
column, which PostgreSQL refused (a 500; SQLite stored it). A name longer than any user's
is refused by the form now, before anything is looked up or recorded.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin.forms import AdminAuthenticationForm
from django.core.validators import MaxLengthValidator


class AdminLoginForm(AdminAuthenticationForm):
    """:class:`AdminAuthenticationForm` with the username's length validated."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["username"]
        if field.max_length is not None:
            field.validators.append(MaxLengthValidator(field.max_length))
