"""WebSocket routing: the agent gateway at /ws/agent-gateway/."""

from channels.routing import URLRouter
from django.urls import re_path

from gateway.consumers import AgentGatewayConsumer
from gateway.middleware import AgentAuthMiddleware

websocket_urlpatterns: list = [
    re_path(r"^ws/agent-gateway/?$", AgentAuthMiddleware(AgentGatewayConsumer.as_asgi())),
]

websocket_application = URLRouter(websocket_urlpatterns)
