"""WebSocket routing: the agent gateway at /ws/agent-gateway/."""

from channels.routing import URLRouter

websocket_urlpatterns: list = []

websocket_application = URLRouter(websocket_urlpatterns)
