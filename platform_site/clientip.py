"""The client's address, as the DRF throttles compute it.

Behind ``NUM_PROXIES`` trusted reverse proxies the address is that many hops from the
right of ``X-Forwarded-For`` (the proxies append; a client can only prepend made-up
entries); with no proxies configured, the socket's peer (``REMOTE_ADDR``) and nothing a
client can set.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_ip(request: HttpRequest) -> str:
    """The address failed logins and throttles are counted against."""
    remote = str(request.META.get("REMOTE_ADDR") or "")
    proxies = settings.REST_FRAMEWORK.get("NUM_PROXIES")
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    if not proxies or not forwarded:
        return remote
    hops = [part.strip() for part in str(forwarded).split(",") if part.strip()]
    return hops[-min(int(proxies), len(hops))] if hops else remote
