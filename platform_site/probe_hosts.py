"""``/healthz``, ``/readyz`` and ``/metrics`` answer whatever the ``Host`` header says.

A process manager, load balancer or scraper on the host probes daphne by its address
(``http://127.0.0.1:8001/healthz``), not by a name in ``ALLOWED_HOSTS``: with
``ALLOWED_HOSTS=agents.example.com`` (deploy/systemd/platform.env.example) each probe was a
400 HTML page, and Django logged an ERROR with a traceback per probe. The probes return
no URL built from the request, so a forged ``Host`` gains nothing there; every other path
stays under ``ALLOWED_HOSTS``.

:class:`ProbeMiddleware`, first in ``MIDDLEWARE``, serves these exact paths itself (the
views of ``platform_site/urls.py``, resolved there), before CommonMiddleware checks the
host and before SecurityMiddleware would redirect plain http (probes on the host use plain
http). Their answers still get the security headers the stack would add, and HSTS on an
https answer when ``SECURE_HSTS_SECONDS`` asks for it.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.middleware.security import SecurityMiddleware
from django.urls import resolve
from django.utils.deprecation import MiddlewareMixin

from platform_site.lean_asgi import SECURITY_HEADERS

PROBE_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


class ProbeMiddleware(MiddlewareMixin):
    """Answer the probe paths with their views, skipping the rest of the stack.

    A ``MiddlewareMixin`` so it runs natively in both the sync and async request paths
    (the views are synchronous: they run on the request's sync thread).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        super().__init__(get_response)
        # Its response hook only (HSTS, nosniff, Referrer-Policy), never its redirect.
        self._security = SecurityMiddleware(get_response)

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        if request.path_info not in PROBE_PATHS:
            return None
        match = resolve(request.path_info)
        response = match.func(request, *match.args, **match.kwargs)
        self._security.process_response(request, response)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response
