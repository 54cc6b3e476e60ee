"""Signals of the a2a app.

``task_changed(task_id=...)`` is sent after the commit of every task state transition.
Receivers (SSE streams, push notifications) must be quick and must not raise.
"""

from django.dispatch import Signal

task_changed = Signal()
