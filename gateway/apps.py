from django.apps import AppConfig


class GatewayConfig(AppConfig):
    """The WebSocket agent gateway: presence, deliveries and offline tasks."""

    name = "gateway"
    verbose_name = "Agent gateway"

    def ready(self) -> None:
        from gateway import receivers  # noqa: F401  (connects the signal receivers)
