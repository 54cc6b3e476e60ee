"""WebSocket routing: the agent gateway at /ws/agent-gateway/."""

from channels.routing import URLRouter
from django.urls import re_path

from gateway import daphne_close
from gateway.consumers import AgentGatewayConsumer
from gateway.middleware import AgentAuthMiddleware

# The gateway closes with 1013 "try again later" during an outage, which daphne refuses
# to send unless patched (see the module). Here, not in the app's ready(): only a
# process that builds the ASGI application (platform_site.asgi) serves sockets.
daphne_close.install()

websocket_urlpatterns: list = [
    re_path(r"^ws/agent-gateway/?$", AgentAuthMiddleware(AgentGatewayConsumer.as_asgi())),
]

websocket_application = URLRouter(websocket_urlpatterns)
