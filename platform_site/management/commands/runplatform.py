"""``manage.py runplatform``: migrate, seed and serve the platform.

In the embedded mode (no ``DATABASE_URL``/``REDIS_URL``) this one process runs daphne,
a Celery worker and Celery beat. In the distributed mode it runs daphne only; start
``celery worker`` and ``celery beat`` separately.
"""

from __future__ import annotations

import errno
import json
import logging
import signal
import socket
import sys
import threading
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from platform_site.logs import JSONFormatter


def port_problem(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on right now, or None when it can.

    A trial bind with SO_REUSEADDR like daphne's own (so a port in TIME_WAIT is free), done
    before migrations and workers start: a taken port must not leave a worker running
    against the database for a moment and then exit 0.
    """
    if not 1 <= port <= 65535:
        # bind() raises OverflowError, not OSError, for these: a traceback for a typo.
        return f"port {port} is out of range (1-65535; set PORT=... to another)"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"port {port} on {host} is already in use (set PORT=... to use another)"
            return f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    return None


class Command(BaseCommand):
    help = "Migrate, load the example skills on first start, and serve the platform."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=settings.HOST)
        parser.add_argument("--port", type=int, default=settings.PORT)
        parser.add_argument("--no-migrate", action="store_true", help="Skip migrations.")
        parser.add_argument("--no-worker", action="store_true", help="No in-process worker.")
        parser.add_argument("--no-seed", action="store_true", help="Skip the example skills.")

    def handle(self, *args: Any, **opts: Any) -> None:
        problem = port_problem(opts["host"], opts["port"])
        if problem:
            # One line, non-zero, before anything starts (with JSON logs, a JSON line).
            self.stderr.write(self._line(f"Cannot start the platform: {problem}", opts["port"]))
            sys.exit(1)
        if not opts["no_migrate"]:
            call_command("migrate", interactive=False, verbosity=0)
        if not opts["no_seed"]:
            self._seed_skills()
        workers = None
        if settings.EMBEDDED and not opts["no_worker"]:
            from platform_site.embedded import EmbeddedWorkers

            workers = EmbeddedWorkers()
            workers.start()
        mode = "embedded" if settings.EMBEDDED else "distributed"
        started = (
            f"A2A platform ({mode}) on http://{opts['host']}:{opts['port']}/ "
            f"(public URL {settings.PUBLIC_URL}); admin at /admin/, API docs at /api/docs/"
        )
        # Said whatever LOG_LEVEL hides: where to find the platform is not a log's detail.
        self.stdout.write(self._line(started, opts["port"], logging.INFO))
        self.stdout.flush()  # a pipe (a supervisor, `make run | jq`) buffers it otherwise
        try:
            if workers is not None:
                _cut_on_second_signal()
            self._serve(opts["host"], opts["port"])
        finally:
            if workers is not None:
                _cut_on_signal()  # however serving ended
                workers.stop()

    @staticmethod
    def _line(message: str, port: int | None, level: int = logging.ERROR) -> str:
        """``message`` as is, or with ``LOG_FORMAT=json`` as a JSON line (naming the port):
        written past logging (before it has anything to say, or whatever LOG_LEVEL hides),
        it is still one object per line."""
        if settings.LOG_FORMAT != "json":
            return message
        name = logging.getLevelName(level)
        record = logging.makeLogRecord(
            {"name": __name__, "levelno": level, "levelname": name, "msg": message}
        )
        fields = json.loads(JSONFormatter().format(record))
        return json.dumps(fields if port is None else {**fields, "port": port})

    def _seed_skills(self) -> None:
        """Load the example skills once, so a newcomer sees something on first start."""
        from agent_profiles.models import Skill

        if not Skill.objects.exists() and settings.EXAMPLE_SKILLS_FILE.exists():
            call_command("loadskills", str(settings.EXAMPLE_SKILLS_FILE), verbosity=0)
            loaded = Skill.objects.count()
            self.stdout.write(self._line(f"Loaded {loaded} example skills.", None, logging.INFO))
            self.stdout.flush()

    def _serve(self, host: str, port: int) -> None:
        from daphne.endpoints import build_endpoint_description_strings
        from daphne.server import Server

        from platform_site.asgi import application

        Server(
            application=application,
            endpoints=build_endpoint_description_strings(host=host, port=port),
            signal_handlers=True,
            # No limit on a response (an SSE stream lasts as long as its task); receiving a
            # request is bounded by platform_site/request_limits.py (installed with asgi).
            http_timeout=None,
            websocket_handshake_timeout=10,
            application_close_timeout=10,
        ).run()


def _cut_on_second_signal() -> None:
    """From the first Ctrl-C or SIGTERM on (Twisted's handlers stop the reactor), have the
    next one cut the embedded workers' stop short (:func:`_cut_on_signal`): while daphne
    closes its connections as well as afterwards."""
    import daphne.server  # noqa: F401  (installs daphne's reactor, which serves)
    from twisted.internet import reactor

    reactor.addSystemEventTrigger("before", "shutdown", _cut_on_signal)


def _cut_on_signal() -> None:
    """Have the next SIGINT or SIGTERM cut the embedded workers' stop short.

    Ctrl-C stops the platform; the stop waits for the long calls to agents (streams, held
    sends) up to ``A2A_STOP_WAIT`` (a2a/long_calls.py). A second Ctrl-C used to do nothing:
    Twisted's handlers, still installed once the reactor stopped, stopped it again, and the
    process waited on for minutes. Now it leaves the running calls to their claims (their
    tasks are taken up again when the claims run out: delayed, not lost, as after a kill).
    """
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers are the main thread's (call_command from a test thread)
    from a2a import long_calls

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, long_calls.cut)
