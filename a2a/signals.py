"""Signals of the a2a app.

``task_changed(task_id=..., state=...)`` is sent after the commit of every task state
transition, with the state the task moved to (receivers need not read the row for it)
and ``watched``: False when nothing outside the task's row follows it (no push config, no
stream in another process, no gateway delivery; see ``Task.watched``), None when not
known.
Receivers (SSE streams, push notifications) must be quick and must not raise. Creating a
task is not a transition and sends nothing: nobody can be listening to a new task yet.
"""

from django.dispatch import Signal

task_changed = Signal()
