from django.apps import AppConfig


class A2AConfig(AppConfig):
    """Tasks, their state machine, the dispatcher and the platform's A2A faces."""

    name = "a2a"
    verbose_name = "A2A tasks"

    def ready(self) -> None:
        # The A2A face's task_changed receiver (streams, push notifications) and its
        # Celery tasks.
        # Metrics, lifecycle log lines and traces at the task's seams.
        from a2a import local_dispatch, observe
        from a2a.face import push, signals  # noqa: F401
        from a2a.match_stats import TaskTableStats
        from agent_profiles.matching import register_task_stats
        from platform_site.embedded import register_service

        observe.connect()
        # The embedded worker starts new tasks on this process's threads (no Celery message).
        register_service(local_dispatch.start, local_dispatch.stop)
        # The matcher (in the registry, below this app) reads load and history here.
        register_task_stats(TaskTableStats())
