from django.apps import AppConfig


class AgentProfilesConfig(AppConfig):
    """The registry: skills, agent profiles, API keys and user tokens."""

    name = "agent_profiles"
    verbose_name = "Agent registry"

    def ready(self) -> None:
        # Registers the Bearer scheme with drf-spectacular (extensions register on import).
        from agent_profiles import schema  # noqa: F401
