from django.apps import AppConfig


class A2AConfig(AppConfig):
    """Tasks, their state machine, the dispatcher and the platform's A2A faces."""

    name = "a2a"
    verbose_name = "A2A tasks"
