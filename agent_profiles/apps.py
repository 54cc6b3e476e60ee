from django.apps import AppConfig


class AgentProfilesConfig(AppConfig):
    """The registry: skills, agent profiles, API keys and user tokens."""

    name = "agent_profiles"
    verbose_name = "Agent registry"
