"""Running ORM work from the face's async views.

``await db_call(fn)(...)`` runs ``fn`` on the face's pool of database threads
(``A2A_FACE_DB_THREADS``; ``0``: Django's one sync thread, what tests use). The mechanism
is shared with the tasks API: see :mod:`platform_site.dbthreads`.
"""

from __future__ import annotations

from platform_site.dbthreads import ConnectionPool

pool = ConnectionPool("a2a-face-db", "A2A_FACE_DB_THREADS", stage="a2a-face")
db_call = pool.call
close_pool = pool.close
