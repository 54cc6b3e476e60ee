"""The embedded mode's short cut for starting tasks: this process's threads, no Celery message.

In the embedded mode the API and the worker share one process, and Celery runs there on
its memory broker. Handing each new task to that worker as a Celery message cost about a
sixth of the process's CPU in a py-spy profile of instant tasks (publishing the message,
the consumer's polling loop, the task tracer), for nothing the database does not already
give: the row is the truth, and a hint that is lost only waits for the next sweep.

So while the embedded worker runs (it starts this module through
:func:`platform_site.embedded.register_service`), :func:`submit` puts the tasks to act on
at once (a new task, a reply, a cancel, a retry) straight onto a pool of threads here.
Everywhere else (the distributed mode, management commands, tests without a running
platform) it declines, and the caller sends the Celery message as before. Delayed hints
(a retry in N seconds) and the sweep stay with Celery.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings

from a2a.tasks import process_on_pool_thread
from platform_site.dbthreads import shutdown_closing_connections

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def start() -> None:
    """Accept work from now on (``A2A_EMBEDDED_THREADS`` threads)."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max(1, settings.A2A_EMBEDDED_THREADS), thread_name_prefix="a2a-local"
            )


def stop() -> None:
    """Accept no more work, let running calls end and close the threads' connections.

    Tasks still waiting for a thread are not started: their rows stay due, and the sweep
    of the next start (or of another process) acts on them.
    """
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        shutdown_closing_connections(pool)


def submit(task_ids: list[Any]) -> bool:
    """Act on these tasks on this process's threads; False when no pool runs here."""
    pool = _pool
    if pool is None:
        return False
    try:
        for task_id in task_ids:
            pool.submit(_run, str(task_id))
    except RuntimeError:  # shut down between the check and the submit: the sweep will act
        return True
    return True


def _run(task_id: str) -> None:
    if _pool is None:  # stopping: leave the task due rather than delay the shutdown
        return
    process_on_pool_thread(task_id)
