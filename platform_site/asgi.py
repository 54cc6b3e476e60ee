"""ASGI entry point: Django for HTTP (REST, admin, the A2A face with SSE) and the agent
gateway for WebSockets."""

import os
import sys

import django
from django.core.exceptions import ImproperlyConfigured

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")
try:
    django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does
except ImproperlyConfigured as exc:
    # daphne would print the start-up traceback: one line naming the setting instead.
    sys.exit(f"Configuration error: {exc}")

from platform_site.lean_asgi import PlatformASGIHandler

# Chunked bodies, and each request's database connections closed: see the class.
django_asgi_app = PlatformASGIHandler()

from channels.routing import ProtocolTypeRouter  # noqa: E402

from a2a.agent_push_asgi import with_agent_push  # noqa: E402
from a2a.api.asgi import with_tasks_api  # noqa: E402
from a2a.face.asgi import with_face  # noqa: E402
from gateway.routing import websocket_application  # noqa: E402
from platform_site import daphne_fix, gc_tuning, send_stall  # noqa: E402
from platform_site.face_metrics import with_face_metrics  # noqa: E402

daphne_fix.install()  # POST bodies skip Twisted's form parsing: see the module
send_stall.install()  # a client that reads nothing is closed in time: see the module

# The A2A face's paths, Bearer calls to /api/tasks and agents' pushes skip the middleware
# stack (see a2a/face/asgi.py, a2a/api/asgi.py and a2a/agent_push_asgi.py).
application = ProtocolTypeRouter(
    {
        "http": with_face_metrics(with_agent_push(with_tasks_api(with_face(django_asgi_app)))),
        "websocket": websocket_application,
    }
)

# Everything the process serves with is loaded: the collector stops walking it.
gc_tuning.settle()
