"""Django project package: settings, URLs, ASGI routing and the Celery app."""

from platform_site.celery import app as celery_app

__all__ = ["celery_app"]
