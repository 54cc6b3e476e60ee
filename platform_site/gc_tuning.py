"""Python's cyclic garbage collector, set for a long-running server process.

Measured on instant tasks through the embedded platform (4,000 tasks, gc callbacks timing
every collection): with Python's defaults the collector took 0.85-0.91 s, about 0.2 ms
of the platform's 4.1-4.4 ms of CPU per task. Two costs made it up:

* **full collections walked the whole heap**: some 195,000 objects, nearly all of them
  the modules, classes and settings loaded at start, which live as long as the process.
  :func:`gc.freeze` moves what exists once the process is ready into a permanent
  generation the collector no longer walks (0.46 s);
* **the youngest generation was collected every 700 allocations**, some ten times per
  task, each pass also promoting a request's live objects to older generations that are
  walked again later. ``GC_THRESHOLD`` (default 7,000) collects it ten times less often:
  0.35 s in all, passes of about 6 ms. A far larger threshold (50,000) saved little more
  (0.33 s) for passes of 47 ms, a pause every request in flight would wait for.

Reference cycles are still collected, at most ``GC_THRESHOLD`` allocations late; only
what was loaded before the process served its first request is never walked again.
"""

from __future__ import annotations

import gc

from django.conf import settings


def settle() -> None:
    """Freeze what the ready process holds and set the youngest generation's threshold.

    Called once a process has loaded everything it serves with (the ASGI application,
    a Celery worker or beat); calling it again freezes what was loaded since.
    ``GC_THRESHOLD`` 0 leaves Python's thresholds alone.
    """
    gc.collect()
    gc.freeze()
    threshold = settings.GC_THRESHOLD
    if threshold > 0:
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(threshold, older, oldest)
