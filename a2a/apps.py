from django.apps import AppConfig


class A2AConfig(AppConfig):
    """Tasks, their state machine, the dispatcher and the platform's A2A faces."""

    name = "a2a"
    verbose_name = "A2A tasks"

    def ready(self) -> None:
        # The A2A face's task_changed receiver (streams, push notifications) and its
        # Celery tasks.
        # Metrics, lifecycle log lines and traces at the task's seams.
        from celery.signals import worker_ready, worker_shutdown, worker_shutting_down

        from a2a import (
            agent_listing,
            follow_policy,
            hint_queue,
            http_again,
            local_dispatch,
            long_calls,
            observe,
        )
        from a2a.face import push, signals  # noqa: F401
        from a2a.match_stats import TaskTableStats
        from agent_profiles.health import register_recovery
        from agent_profiles.matching import register_task_stats
        from agent_profiles.relisting import register_listing_again
        from platform_site.embedded import register_service

        observe.connect()
        # The embedded worker starts new tasks on this process's threads (no Celery message).
        register_service(local_dispatch.start, local_dispatch.stop)
        # A distributed worker process pops the hints of new tasks from Redis instead.
        worker_ready.connect(hint_queue.start_listening, weak=False)
        worker_shutdown.connect(hint_queue.stop_listening, weak=False)
        # A worker told to stop (SIGTERM) starts no long call from then on; its running
        # ones are waited for when the listener stops (a2a/long_calls.py, "stop").
        worker_shutting_down.connect(long_calls.stop_taking, weak=False)
        # The matcher (in the registry, below this app) reads load and history here.
        register_task_stats(TaskTableStats())
        # The registry announces agents reached only over HTTP that answer again: their
        # offline tasks are sent again over HTTP (docs/dispatch.md, "Never wait silently").
        register_recovery(http_again.send_again)
        # The registry clears an agent's "no listing" mark (it registered again, its card
        # was read again): its tasks in flight are listed again at once, not at its next
        # send (docs/dispatch.md, "Following by listing").
        register_listing_again(agent_listing.listing_again)
        # A new credential for an agent (the admin, a registration): its tasks whose reads
        # it refused with the old one are followed again at once (docs/dispatch.md,
        # "Credentials"). Watched here, on the agents' saves: the registry does not know
        # dispatch.
        follow_policy.watch_credentials()
        # The registry announces bulk changes of agents and keys (approve, disable, revoke:
        # agent_profiles.signals.registry_changed); these modules drop what they cache of
        # them (the registry cache, the face's tokens), connecting as they are imported.
        from a2a import lookups  # noqa: F401
        from a2a.face import context  # noqa: F401
