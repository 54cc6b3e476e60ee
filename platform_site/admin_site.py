"""The admin site: Django's, with a changelist action's selection checked first.

An action posts the ids of the selected rows (``_selected_action``), and Django filters
``pk__in`` with them as posted: an id that is no UUID (tasks, gateway deliveries) or no
number (keys, tokens, users) raised ``ValidationError`` / ``ValueError`` from deep in the
queryset, a 500 with a traceback. A browser only posts ids from the page, but a stale tab
after a schema change, a script, or a hand-made request does not. Such a selection is now
refused with a message on the list, as Django answers an empty one; nothing is changed.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.apps import AdminConfig
from django.core.exceptions import ValidationError
from django.db import connection, models
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect


def _bad_selection(model_admin: admin.ModelAdmin, request: HttpRequest) -> str | None:
    """The first posted selected id that is no primary key of the model, if any: one the
    field cannot read, or a number beyond what its column holds (SQLite raised
    ``OverflowError``, PostgreSQL a ``DataError``)."""
    pk_field = model_admin.model._meta.pk
    low, high = (
        connection.ops.integer_field_range(pk_field.get_internal_type())
        if isinstance(pk_field, models.IntegerField)
        else (None, None)
    )
    for value in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME):
        try:
            prepared = pk_field.get_prep_value(pk_field.to_python(value))
        except (ValidationError, ValueError, TypeError):
            return value
        if isinstance(prepared, int) and not (
            (low is None or prepared >= low) and (high is None or prepared <= high)
        ):
            return value
    return None


class PlatformAdminSite(admin.AdminSite):
    """Django's admin site; a changelist refuses a selection of ids that cannot be ids."""

    def admin_view(self, view: Callable[..., Any], cacheable: bool = False) -> Callable[..., Any]:
        wrapped = super().admin_view(view, cacheable)
        model_admin = getattr(view, "__self__", None)
        if getattr(view, "__name__", "") != "changelist_view" or not isinstance(
            model_admin, admin.ModelAdmin
        ):
            return wrapped

        @wraps(wrapped)
        def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method == "POST" and request.user.is_active and request.user.is_staff:
                bad = _bad_selection(model_admin, request)
                if bad is not None:
                    model_admin.message_user(
                        request,
                        f"{bad[:40]!r} is not the id of a {model_admin.opts.verbose_name}: "
                        "nothing was changed.",
                        messages.WARNING,
                    )
                    return HttpResponseRedirect(request.get_full_path())
            return wrapped(request, *args, **kwargs)

        return checked


class PlatformAdminConfig(AdminConfig):
    """``django.contrib.admin`` with :class:`PlatformAdminSite` as ``admin.site``."""

    default_site = "platform_site.admin_site.PlatformAdminSite"
