"""WSGI entry point (admin and REST only; WebSockets and SSE need ASGI)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")
application = get_wsgi_application()
