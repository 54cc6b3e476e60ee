from django.apps import AppConfig


class GatewayConfig(AppConfig):
    """The WebSocket agent gateway: presence, deliveries and offline tasks."""

    name = "gateway"
    verbose_name = "Agent gateway"
