from django.apps import AppConfig


class GatewayConfig(AppConfig):
    """The WebSocket agent gateway: presence, deliveries and offline tasks."""

    name = "gateway"
    verbose_name = "Agent gateway"

    def ready(self) -> None:
        from a2a.transports import register_gateway
        from gateway import receivers  # noqa: F401  (connects the signal receivers)
        from gateway.fallback import GATEWAY

        # The dispatcher reaches the gateway through this registration only: a2a does
        # not import gateway.
        register_gateway(GATEWAY)
