from django.apps import AppConfig


class GatewayConfig(AppConfig):
    """The WebSocket agent gateway: presence, deliveries and offline tasks."""

    name = "gateway"
    verbose_name = "Agent gateway"

    def ready(self) -> None:
        from a2a.transports import register_gateway
        from agent_profiles.matching import register_presence
        from gateway import presence, receivers  # noqa: F401  (connects the receivers)
        from gateway.fallback import GATEWAY

        # The dispatcher and the matcher reach the gateway through these registrations
        # only: a2a and agent_profiles do not import gateway.
        register_gateway(GATEWAY)
        register_presence(presence.online_agent_ids)
