"""Running the gateway's ORM work off the event loop.

``await db(fn)(...)`` runs ``fn`` on the gateway's pool of database threads
(``GATEWAY_DB_THREADS``, :mod:`platform_site.dbthreads`): each keeps its connection, so an
ack, a claim or an update does not open a new one (Channels' ``database_sync_to_async``
closes it after every call when ``CONN_MAX_AGE`` is 0, as on SQLite), and one slow query
does not hold up every socket of the process. Frames of one connection stay in order: the
consumer awaits each call.
"""

from __future__ import annotations

from platform_site.dbthreads import ConnectionPool

pool = ConnectionPool("gateway-db", "GATEWAY_DB_THREADS", stage="gateway")
db = pool.call
close_pool = pool.close
